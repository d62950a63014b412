//! `sentin8-cron tick --once`: one tick of the same engine `serve` loops, for cron-driven
//! deployments, debugging and tests.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use super::output::{self, OutputFormat};
use super::schedule_args::EXIT_INVALID;
use super::{AuthArgs, CallbackArgs, DatabaseArgs, EngineArgs, StoreUse, open_store, proxy_back};
use crate::callback::HttpDispatcher;
use crate::core::clock::SystemClock;
use crate::core::dispatch::Dispatcher;
use crate::core::engine::Engine;
use crate::core::metrics::Metrics;
use crate::server::auth::AuthConfig;

/// Run one tick: fire due schedules, drain due retries, print what happened.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 when every call succeeded, 3 when some call failed (it is \
retried or dead-lettered), 1 when the tick itself failed.

Examples:
  sentin8-cron tick --dry-run
  sentin8-cron tick -o json --database-url postgres://sentin8_cron_service@db/cron"
)]
pub struct Args {
    /// Run exactly one tick and exit: what `tick` always does (the continuous ticker runs
    /// inside `serve`); accepted so scripts that say it keep working.
    #[arg(long)]
    pub once: bool,
    /// List what would fire now, without firing anything.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub callback: CallbackArgs,
    /// Read as `serve` reads them: with authentication configured, the embedded store is not
    /// development mode, so `tick` applies the same egress policy and credentials as `serve`.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t, value_name = "FORMAT")]
    pub output: OutputFormat,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    // With authentication configured (as `serve` reads it) this is not development mode.
    let auth_configured = AuthConfig::from_args(&args.auth)?.is_some();
    let dev_mode = proxy_back::dev_mode(args.database.url(), auth_configured)?;
    let dispatch = proxy_back::config(&args.callback, dev_mode)?;
    let job_timeout = dispatch.job_timeout;
    // A dry run calls nothing, so it needs no signing key.
    let dispatcher: Arc<dyn Dispatcher> = if args.dry_run {
        Arc::new(HttpDispatcher::new(&dispatch)?)
    } else {
        Arc::new(
            proxy_back::build(dispatch, args.database.url(), Arc::new(SystemClock))?.dispatcher,
        )
    };
    // Settings are checked first: a refused command opens and writes nothing. A dry run
    // changes nothing, so it never creates or migrates the embedded database either.
    let store = open_store(
        &args.database,
        StoreUse::Command {
            migrate_embedded: !args.dry_run,
        },
    )
    .await?;
    if !args.dry_run {
        super::recompute_under_zone_rules(store.as_ref(), &SystemClock).await;
    }
    let engine = Engine::new(
        store,
        dispatcher,
        Arc::new(SystemClock),
        args.engine.engine_config(job_timeout),
        Arc::new(Metrics::default()),
    );

    if args.dry_run {
        let plan = engine.plan().await?;
        match args.output {
            OutputFormat::Json | OutputFormat::Yaml => output::write_structured(
                out,
                args.output,
                &serde_json::json!({ "would_fire": plan }),
            )?,
            OutputFormat::Table | OutputFormat::Wide => {
                if plan.is_empty() {
                    writeln!(out, "nothing is due")?;
                } else {
                    let mut table = output::table([
                        "schedule",
                        "env",
                        "domain",
                        "schedule_type",
                        "due at",
                        "action",
                    ]);
                    for fire in &plan {
                        table.add_row(vec![
                            fire.schedule_id.to_string(),
                            fire.env_id.to_string(),
                            fire.domain.clone(),
                            fire.schedule_type.clone(),
                            output::time_text(fire.due_at),
                            match &fire.excluded_by {
                                Some(by) => format!("skip (excluded: {by})"),
                                None => fire.action.shown().to_owned(),
                            },
                        ]);
                    }
                    writeln!(out, "{table}")?;
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }

    let summary = engine.tick().await?;
    match args.output {
        OutputFormat::Json | OutputFormat::Yaml => {
            output::write_structured(out, args.output, &summary)?
        }
        OutputFormat::Table | OutputFormat::Wide => {
            let mut table = output::table([
                "due",
                "fired",
                "succeeded",
                "failed",
                "retried",
                "landed in DLQ",
                "skipped",
            ]);
            table.add_row(vec![
                summary.due,
                summary.fired + summary.retried_attempts,
                summary.succeeded,
                summary.failed,
                summary.retried,
                summary.dead_lettered,
                summary.skipped,
            ]);
            writeln!(out, "{table}")?;
            if summary.retried_attempts > 0 {
                writeln!(
                    out,
                    "{} of the fired jobs were due retries or triggered runs",
                    summary.retried_attempts
                )?;
            }
            if summary.buffered > 0 {
                writeln!(
                    out,
                    "{} fire(s) wait for their schedule's open job (overlap buffer_one)",
                    summary.buffered
                )?;
            }
            if summary.lost > 0 {
                writeln!(
                    out,
                    "{} due item(s) were taken by another ticker",
                    summary.lost
                )?;
            }
            if summary.errors > 0 {
                writeln!(
                    out,
                    "{} item(s) failed with an error (see the log)",
                    summary.errors
                )?;
            }
        }
    }
    // A tick that could not do its work is a runtime failure (1); one whose calls failed did
    // its work, and says so with its own code (3), which a cron wrapper can alert on.
    Ok(if summary.errors > 0 {
        ExitCode::FAILURE
    } else if summary.failed > 0 {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    })
}
