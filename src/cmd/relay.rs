//! `sentin8-cron relay`: delivers outbox events to the bus named by `SENTIN8_CRON_BUS_URL`.
//! `--once` drains what is deliverable now and prints the counts; without it the relay runs
//! until interrupted.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use super::DatabaseArgs;
use super::output::{self, OutputFormat};
use crate::bus::{ENV_BUS_URL, RelayConfig, sink_for};
use crate::core::clock::SystemClock;
use crate::core::metrics::Metrics;
use crate::core::relay::{Relay, RelaySummary};
use crate::store::{self, ConnectOptions, redact};

/// The exit code of `--once` when some events could not be relayed.
pub const EXIT_UNRELAYED: u8 = 1;

/// Deliver outbox events to the bus (NATS JetStream, a webhook or the log).
///
/// With --once, exits 0 when every claimed event was relayed and 1 when some failed (they stay
/// in the outbox and are retried).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Drain the outbox once and exit, instead of relaying until interrupted.
    #[arg(long)]
    pub once: bool,
    /// nats://host:port, https://... (a webhook) or log.
    #[arg(long, env = ENV_BUS_URL, hide_env_values = true)]
    pub bus_url: Option<String>,
    #[arg(long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    database: String,
    bus: &'static str,
    #[serde(flatten)]
    summary: &'a RelaySummary,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    init_logging();
    let bus_url = args.bus_url.clone();
    let config = RelayConfig::from_lookup(|key| {
        if key == ENV_BUS_URL {
            bus_url.clone()
        } else {
            std::env::var(key).ok()
        }
    })?;
    let url = &args.database.database_url;
    let store = store::connect(
        url,
        &ConnectOptions {
            max_connections: 4,
            ..ConnectOptions::default()
        },
    )
    .await?;
    store.schema_status().await?.ensure_current()?;
    let clock = Arc::new(SystemClock);
    let sink = sink_for(&config.bus, clock.clone())?;
    let relay = Relay::new(
        store.clone(),
        sink,
        clock,
        config.options,
        Arc::new(Metrics::default()),
    );

    if !args.once {
        store.signals_listen().await?;
        tracing::info!(
            bus = config.bus.kind(),
            "relaying outbox events until interrupted"
        );
        relay.run(shutdown_signal()).await;
        return Ok(ExitCode::SUCCESS);
    }

    let summary = relay.drain_once().await?;
    let report = Report {
        database: redact(url),
        bus: config.bus.kind(),
        summary: &summary,
    };
    match args.output {
        OutputFormat::Json => output::write_json(out, &report)?,
        OutputFormat::Table => {
            writeln!(
                out,
                "outbox of {} relayed to {}",
                report.database, report.bus
            )?;
            let mut table = output::table(["relayed", "duplicates", "failed", "parked", "purged"]);
            table.add_row(vec![
                summary.relayed.to_string(),
                summary.duplicates.to_string(),
                summary.failed.to_string(),
                summary.parked.to_string(),
                summary.purged.to_string(),
            ]);
            writeln!(out, "{table}")?;
            if summary.bus_unavailable {
                writeln!(
                    out,
                    "note: the bus was unavailable; events stay in the outbox"
                )?;
            }
            if summary.round_limit_reached {
                writeln!(
                    out,
                    "note: stopped at the round limit; run again to continue"
                )?;
            }
        }
    }
    Ok(if summary.failed > 0 {
        ExitCode::from(EXIT_UNRELAYED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Structured (JSON) logs on stderr, filtered by `RUST_LOG` (default `info`), unless the
/// process already has a subscriber. The log bus writes its events there.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Resolves on Ctrl-C, or SIGTERM where there is one.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
