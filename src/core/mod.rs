//! The domain and the engine: cron expressions, schedule declarations, time and retry rules.
//!
//! Architecture invariant: nothing under `core` imports `sqlx`, `axum` or `reqwest`. Storage,
//! HTTP serving and HTTP calls reach the engine through traits defined here.

pub mod breaker;
pub mod buffered;
pub mod calendar;
pub mod clock;
pub mod cron;
pub mod decl;
pub mod dispatch;
pub mod engine;
pub mod enroll;
pub mod events;
pub mod labels;
pub mod metrics;
pub mod model;
pub mod ops;
pub mod policies;
pub mod relay;
pub mod retention;
pub mod retry;
pub mod rezone;
pub mod snapshot;
pub mod statistics;
pub mod storable;
pub mod store;
pub mod target;
pub mod timing;
pub mod trace;
