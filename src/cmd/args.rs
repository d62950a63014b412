//! The shared argument groups: every setting is a flag with a `SENTIN8_CRON_*` variable, defined
//! once here (or next to the typed configuration it converts to) and flattened into each
//! subcommand that needs it. `--print-registration` lists them from the same definitions.

use std::path::PathBuf;
use std::time::Duration;

use crate::core::breaker::BreakerConfig;
use crate::core::engine::EngineConfig;
use crate::core::retry::RetryPolicy;
use crate::server::listener::ListenerLimits;
use crate::server::rate::{Rate, RateSettings};
use crate::util::duration::{duration, positive_duration};
use crate::util::process::LogFormat;

pub use crate::bus::BusArgs;
pub use crate::callback::CallbackArgs;
pub use crate::server::auth::AuthArgs;

/// The database's URL alone: `migrate`, which opens no pool.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Database")]
pub struct DatabaseUrlArg {
    /// Database: postgres://user@host/db (production; a failover pair:
    /// postgres://user@a,b/db?target_session_attrs=read-write) or sqlite://path (embedded).
    #[arg(
        long,
        env = "SENTIN8_CRON_DATABASE_URL",
        value_name = "URL",
        default_value = crate::store::DEFAULT_DATABASE_URL,
        hide_env_values = true
    )]
    pub database_url: String,
}

/// Where the data lives; shared by every subcommand that opens the store.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Database")]
pub struct DatabaseArgs {
    #[command(flatten)]
    pub url: DatabaseUrlArg,
    /// Most pooled PostgreSQL connections for the engine and writes (the API's reads have four
    /// more of their own; the embedded store uses one writer).
    #[arg(long, env = "SENTIN8_CRON_DB_POOL_SIZE", value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=500))]
    pub db_pool_size: u32,
}

impl DatabaseArgs {
    /// The database URL.
    pub fn url(&self) -> &str {
        &self.url.database_url
    }
}

/// Engine tuning shared by `serve` and `tick`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Engine")]
pub struct EngineArgs {
    /// Safety poll: the ticker wakes at least this often (it also wakes at the earliest due
    /// instant and on changes).
    #[arg(long, env = "SENTIN8_CRON_TICK_INTERVAL", value_name = "DURATION", default_value = "60s", value_parser = positive_duration)]
    pub tick_interval: Duration,
    /// Due schedules fetched per batch (batches repeat while full).
    #[arg(long, env = "SENTIN8_CRON_BATCH_SIZE", value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub batch_size: u32,
    /// How far ahead of their instant `serve` claims due schedules at least (the claim's
    /// database work is done before the instant; the call leaves at it). Before a burst too
    /// large to claim within it, the lead grows (up to 60 s) with what falls due. A schedule
    /// paused, deleted or re-timed before its fire's hand-off (1-1.25 s before the instant, up
    /// to 10 s in a large burst) is not called. At most 60 s; 0s claims at the instant.
    #[arg(long, env = "SENTIN8_CRON_CLAIM_AHEAD", value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub claim_ahead: Duration,
    /// Proxy-back calls in flight at once (claiming goes on while they run).
    #[arg(long, env = "SENTIN8_CRON_CONCURRENCY", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// Proxy-back calls in flight at once for one environment.
    #[arg(long, env = "SENTIN8_CRON_ENV_CONCURRENCY", value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub env_concurrency: u32,
    /// Proxy-back calls in flight at once from one environment to one target origin (scheme,
    /// host and port).
    #[arg(long, env = "SENTIN8_CRON_ORIGIN_CONCURRENCY", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub origin_concurrency: u32,
    /// Consecutive timeouts or refused connections after which an environment's calls to an
    /// origin fail fast
    /// (recorded as `circuit open`, retried after backoff) for the cool-down; 0 turns the
    /// breaker off.
    #[arg(
        long,
        env = "SENTIN8_CRON_BREAKER_THRESHOLD",
        value_name = "N",
        default_value_t = 5
    )]
    pub breaker_threshold: u32,
    /// How long an open circuit fails calls fast before one probe call may close it.
    #[arg(long, env = "SENTIN8_CRON_BREAKER_COOLDOWN", value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    pub breaker_cooldown: Duration,
    /// Backoff before the first retry, doubling with every retry.
    #[arg(long, env = "SENTIN8_CRON_RETRY_BASE", value_name = "DURATION", default_value = "60s", value_parser = positive_duration)]
    pub retry_base: Duration,
    /// Longest backoff between retries.
    #[arg(long, env = "SENTIN8_CRON_RETRY_CAP", value_name = "DURATION", default_value = "3600s", value_parser = positive_duration)]
    pub retry_cap: Duration,
    /// Occurrences of one `buffer_all` schedule that may wait behind its open job; a further
    /// one is skipped, on the record.
    #[arg(long, env = "SENTIN8_CRON_MAX_BUFFERED", value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_buffered: u32,
}

impl EngineArgs {
    /// The engine configuration, with the job timeout of the proxy-back client.
    pub fn engine_config(&self, job_timeout: Duration) -> EngineConfig {
        EngineConfig {
            batch_size: self.batch_size,
            drain_size: self.batch_size,
            concurrency: usize::try_from(self.concurrency).unwrap_or(256),
            env_concurrency: usize::try_from(self.env_concurrency).unwrap_or(64),
            origin_concurrency: usize::try_from(self.origin_concurrency).unwrap_or(32),
            breaker: BreakerConfig {
                threshold: self.breaker_threshold,
                cooldown: self.breaker_cooldown,
            },
            job_timeout,
            retry: RetryPolicy {
                base: self.retry_base,
                cap: self.retry_cap.max(self.retry_base),
            },
            tick_interval: self.tick_interval,
            claim_ahead: self.claim_ahead,
            max_buffered: self.max_buffered,
            ..EngineConfig::default()
        }
    }
}

/// Where and how `serve` listens.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Listener")]
pub struct ListenerArgs {
    /// Address the HTTP API listens on.
    #[arg(
        long,
        env = "SENTIN8_CRON_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub listen: String,
    /// PEM certificate chain file: serve HTTPS (HTTP/2; X25519MLKEM768 preferred), with
    /// --tls-key.
    #[arg(
        long,
        env = "SENTIN8_CRON_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key file of --tls-cert.
    #[arg(
        long,
        env = "SENTIN8_CRON_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Time in-flight requests and the in-flight tick (or relay round) get to finish after
    /// SIGTERM or SIGINT; calls in flight get at least the claim-ahead lead plus the job
    /// timeout plus 5 s.
    #[arg(long, env = "SENTIN8_CRON_DRAIN_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    pub drain_timeout: Duration,
    /// Time a connection gets to send a complete request head (and an idle keep-alive
    /// connection is kept).
    #[arg(long, env = "SENTIN8_CRON_HEADER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub header_timeout: Duration,
    /// Time a request gets to be answered, its body included (503 after it).
    #[arg(long, env = "SENTIN8_CRON_REQUEST_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    pub request_timeout: Duration,
    /// Connections open at once; at the cap, the one that has waited longest for a request gives
    /// way to a new one, which is closed only when every connection is busy answering.
    #[arg(long, env = "SENTIN8_CRON_MAX_CONNECTIONS", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Connections one client (an IPv4 address, an IPv6 /64) may hold open; further ones are
    /// closed as soon as they are accepted.
    #[arg(long, env = "SENTIN8_CRON_MAX_CONNECTIONS_PER_CLIENT", value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections_per_client: u32,
    /// Of --max-connections, the ones kept for /v1/health when every other one is busy (at most
    /// half).
    #[arg(long, env = "SENTIN8_CRON_RESERVED_FOR_HEALTH", value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub reserved_for_health: u32,
    /// API requests per second one client (a token's subject) may make, with bursts of twice
    /// as many; over it, 429 with Retry-After (0: no limit).
    #[arg(long, env = "SENTIN8_CRON_RATE_LIMIT_PER_CLIENT", value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub rate_limit_per_client: u32,
    /// API requests per second addressed to one environment, whoever makes them, with bursts
    /// of twice as many; over it, 429 with Retry-After (0: no limit).
    #[arg(long, env = "SENTIN8_CRON_RATE_LIMIT_PER_ENV", value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub rate_limit_per_env: u32,
    /// Serve /metrics on this address only (plain HTTP), and not on --listen; /v1/health is
    /// served there too, with its detail.
    #[arg(long, env = "SENTIN8_CRON_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Break the engine's counters (fires, successes, failures, DLQ landings) down by
    /// environment for at most N environments, the rest summed as `other` (0: off).
    #[arg(long, env = "SENTIN8_CRON_METRICS_ENV_BREAKDOWN", value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub metrics_env_breakdown: u32,
}

impl ListenerArgs {
    /// The listener's limits.
    pub fn limits(&self) -> ListenerLimits {
        ListenerLimits {
            header_timeout: self.header_timeout,
            request_timeout: self.request_timeout,
            max_connections: usize::try_from(self.max_connections).unwrap_or(1024),
            max_connections_per_client: usize::try_from(self.max_connections_per_client)
                .unwrap_or(128),
            reserved_for_health: usize::try_from(self.reserved_for_health).unwrap_or(32),
            rate: RateSettings {
                per_client: Rate::per_second(self.rate_limit_per_client),
                per_env: Rate::per_second(self.rate_limit_per_env),
            },
        }
    }
}

/// Logging, shared by every command: one format switch and one verbosity switch. `RUST_LOG`
/// (e.g. `sentin8_cron=debug,sqlx=warn`) overrides the verbosity when set. Lines go to
/// standard error, coloured only on a terminal and never with `NO_COLOR`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Logging")]
pub struct LoggingArgs {
    /// Log line format on standard error.
    #[arg(
        long,
        global = true,
        env = "SENTIN8_CRON_LOG_FORMAT",
        value_enum,
        default_value = "pretty"
    )]
    pub log_format: LogFormat,
    /// More log detail: -v info, -vv debug, -vvv trace (one-shot commands log warnings
    /// otherwise, `serve` and `relay` info).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl LoggingArgs {
    /// The log filter for a command whose quiet level is `base` (1 warn, 2 info), raised by
    /// each -v.
    pub fn filter(&self, base: u8) -> &'static str {
        match base.saturating_add(self.verbose) {
            0 => "error",
            1 => "warn",
            2 => "info",
            3 => "debug",
            _ => "trace",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Engine {
        #[command(flatten)]
        engine: EngineArgs,
    }

    #[test]
    fn the_engine_flags_default_to_the_engine_s_own_defaults() {
        let parsed = Engine::try_parse_from(["sentin8-cron"]).expect("no flag is required");
        let defaults = EngineConfig::default();
        let from_flags = EngineConfig {
            claim_seed: defaults.claim_seed,
            ..parsed.engine.engine_config(defaults.job_timeout)
        };
        assert_eq!(format!("{from_flags:?}"), format!("{defaults:?}"));
    }
}
