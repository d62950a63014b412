//! The admin pages for on-call engineers: server-rendered HTML shells under
//! `/v1/admin/ui/{page}` with a small script and style sheet served from the binary, and the
//! JSON endpoints under `/v1/admin/{resource}` that feed them.
//!
//! The shells are public and carry no data. Everything a page shows comes from authenticated
//! JSON calls (`Authorization: Bearer`, the token the operator pasted, kept in the tab's
//! `sessionStorage`), and every change a page makes goes through the existing `/v1` endpoints
//! (create, pause, resume, delete, trigger, retry, republish): the same handlers, operations and
//! policy as any other API client. The admin JSON endpoints add only what a page needs beyond
//! the API: the environments a token grants, an overview of one environment, schedules with
//! their next fires on their own wall clock, and a live preview of an expression. Each of them
//! except `envs` requires `target_env_id` and any of the read, write or admin scopes on it.

mod bodies;
pub mod data;
mod detail;
pub mod pages;
pub mod preview;
pub mod runs;

pub use pages::pages;

/// Where the pages live.
pub const UI_PREFIX: &str = "/v1/admin/ui";
