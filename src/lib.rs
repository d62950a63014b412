//! sentin8-cron: a standalone, multi-tenant scheduler.
//!
//! Services declare cron or one-shot schedules; when one is due, sentin8-cron calls the owning
//! service back, records the job, retries with backoff, parks exhausted jobs in a dead-letter
//! queue and writes every domain event to a transactional outbox.
//!
//! The crate is one library with one binary on top of it:
//!
//! - [`core`] holds the domain and the engine (cron expressions, clock, retry policy, tick
//!   logic). It never touches SQL, HTTP frameworks or HTTP clients.
//! - [`callback`] calls owning services back over HTTP (the proxy-back client and its M2M
//!   tokens), implementing the dispatch port `core` defines.
//! - [`server`] is the HTTP API: it authenticates callers (bearer JWTs), decides what they may
//!   do and serves the admin pages.
//! - [`bus`] delivers outbox events to a bus (NATS JetStream, a webhook or the log),
//!   implementing the sink port of [`core::relay`].
//! - [`daemon`] wires one `serve` process together: HTTP server, ticker and relay, with one
//!   shutdown and a bounded drain.
//! - [`store`] holds all SQL: the PostgreSQL and SQLite backends of the storage seam.
//! - [`telemetry`] exports the engine's spans over OTLP/HTTP when an endpoint is set.
//! - [`registration`] is sentin8-cron's own self-description (routes, events, configuration,
//!   schedules), printed by `sentin8-cron --print-registration`.
//! - [`client`] is a small client of the HTTP API, for the operator commands that talk to a
//!   running service.
//! - [`cmd`] is the command line: one module per subcommand, output through a writer.
//! - [`tzdir`] chooses the time-zone database at start-up: bundled, the system's or a
//!   directory of TZif files.
//! - [`util`] holds the small helpers several of these share (durations, capped body reads,
//!   URL redaction, the shutdown signal, logging setup).
//!
#![forbid(unsafe_code)]

pub mod bus;
pub mod callback;
pub mod client;
pub mod cmd;
pub mod core;
pub mod daemon;
pub mod registration;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod tzdir;
pub mod util;
