//! Small helpers several adapters and commands share, each written once:
//!
//! - [`conninfo`]: libpq's `keyword=value` connection strings.
//! - [`duration`]: humane durations (`30s`, `2m`, `1m30s`, `7d`) for settings.
//! - [`http`]: reading a response body with a size cap, and describing a reqwest error by its
//!   causes.
//! - [`io`]: reading a pipe with a size cap.
//! - [`url`]: hiding credentials of URLs in messages, and telling loopback hosts apart.
//! - [`process`]: the shutdown signal and the log subscriber of long-running commands.
//! - [`setting`]: text settings trimmed, empty meaning unset.

pub mod conninfo;
pub mod duration;
pub mod http;
pub mod io;
pub mod process;
pub mod setting;
pub mod url;
