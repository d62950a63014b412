//! `sentin8-cron tick --once`: one tick of the same engine `serve` loops, for cron-driven
//! deployments, debugging and tests.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use super::output::{self, OutputFormat};
use super::{AuthArgs, CallbackArgs, DatabaseArgs, EngineArgs, StoreUse, open_store, proxy_back};
use crate::callback::HttpDispatcher;
use crate::core::clock::SystemClock;
use crate::core::dispatch::Dispatcher;
use crate::core::engine::Engine;
use crate::core::metrics::Metrics;
use crate::server::auth::AuthConfig;

/// Run one tick: fire due schedules, drain due retries, print what happened.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run exactly one tick and exit (the continuous ticker runs inside `serve`).
    #[arg(long, required = true)]
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
    #[arg(long, value_enum, default_value_t)]
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
    // Settings are checked first: a refused command opens and writes nothing.
    let store = open_store(
        &args.database,
        StoreUse::Command {
            migrate_embedded: true,
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
            OutputFormat::Json => {
                output::write_json(out, &serde_json::json!({ "would_fire": plan }))?
            }
            OutputFormat::Table => {
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
                            fire.due_at.to_rfc3339(),
                            if fire.would_skip {
                                "skip (job open)"
                            } else {
                                "fire"
                            }
                            .to_owned(),
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
        OutputFormat::Json => output::write_json(out, &summary)?,
        OutputFormat::Table => {
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
    Ok(if summary.errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
