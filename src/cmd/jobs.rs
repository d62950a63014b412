//! `sentin8-cron jobs list`: execution records of one environment.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use super::output::{self, OutputFormat};
use super::{DatabaseArgs, StoreUse, open_store};
use crate::core::model::{EnvId, JobStatus, ScheduleId};
use crate::core::store::JobQuery;

/// Inspect jobs (execution records).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: JobsCommand,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List an environment's jobs, newest first.
    List {
        /// The environment (required: environments are always explicit).
        #[arg(long)]
        env: EnvId,
        /// Only this schedule's jobs.
        #[arg(long)]
        schedule: Option<ScheduleId>,
        /// Only jobs in this status (pending, running, succeeded, failed, skipped).
        #[arg(long)]
        status: Option<JobStatus>,
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let JobsCommand::List {
        env,
        schedule,
        status,
        limit,
        database,
        output: format,
    } = args.command;
    let store = open_store(
        &database,
        StoreUse::Command {
            migrate_embedded: false,
        },
    )
    .await?;
    let mut tx = store.tenant_begin(env).await?;
    let jobs = tx
        .job_list(&JobQuery {
            schedule_id: schedule,
            status,
            limit,
            ..JobQuery::default()
        })
        .await?;
    match format {
        OutputFormat::Json => output::write_json(out, &serde_json::json!({ "jobs": jobs }))?,
        OutputFormat::Table => {
            if jobs.is_empty() {
                writeln!(out, "no jobs")?;
            } else {
                let mut table = output::table([
                    "id",
                    "schedule",
                    "status",
                    "attempt",
                    "scheduled for",
                    "error",
                ]);
                for j in &jobs {
                    table.add_row(vec![
                        j.id.to_string(),
                        j.schedule_id.to_string(),
                        j.status.to_string(),
                        j.attempt.to_string(),
                        j.scheduled_for.to_rfc3339(),
                        j.error.clone().unwrap_or_default(),
                    ]);
                }
                writeln!(out, "{table}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
