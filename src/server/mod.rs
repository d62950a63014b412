//! The trust boundary of the HTTP API: who is calling ([`auth`]) and what they may do
//! ([`policy`]).

pub mod auth;
pub mod policy;
