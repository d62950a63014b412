//! `sentin8-cron relay`: delivers outbox events to the bus named by `--bus-url`
//! (`SENTIN8_CRON_BUS_URL`).
//! `--once` drains what is deliverable now and prints the counts; without it the relay runs
//! until interrupted.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use serde::Serialize;

use super::output::{self, OutputFormat};
use super::{BusArgs, DatabaseArgs, StoreUse, open_store};
use crate::bus::{RelayConfig, sink_for};
use crate::core::clock::SystemClock;
use crate::core::metrics::Metrics;
use crate::core::relay::{Relay, RelaySummary};
use crate::store::redact;
use crate::util::process::shutdown_signal;

/// The exit code of `--once` when some events could not be relayed.
pub const EXIT_UNRELAYED: u8 = 1;

/// Deliver outbox events to the bus (NATS JetStream, a webhook or the log).
///
/// With --once, exits 0 when every claimed event was relayed and 1 when some failed (they stay
/// in the outbox and are retried).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron relay --once --bus-url log
  sentin8-cron relay --bus-url nats://127.0.0.1:4222")]
pub struct Args {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Drain the outbox once and exit, instead of relaying until interrupted.
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub bus: BusArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
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
    // JSON on stderr: the log bus writes its event records there.
    let config = RelayConfig::try_from(&args.bus)?;
    let url = args.database.url();
    let store = open_store(
        &args.database,
        StoreUse::Command {
            migrate_embedded: false,
        },
    )
    .await?;
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
        OutputFormat::Json | OutputFormat::Yaml => {
            output::write_structured(out, args.output, &report)?
        }
        OutputFormat::Table | OutputFormat::Wide => {
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
