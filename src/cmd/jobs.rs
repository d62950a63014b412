//! `sentin8-cron jobs list`: execution records of one environment.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use super::output::{self, OutputFormat};
use super::{DatabaseArgs, StoreUse, open_store};
use crate::core::model::{EnvId, JobAttempt, JobStatus, ScheduleId};
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
        /// Only jobs in this status (pending, running, succeeded, failed, skipped,
        /// superseded).
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
    // Each job with its attempts (the ledger), read in the same transaction.
    let mut listed = Vec::with_capacity(jobs.len());
    for job in jobs {
        let attempts = tx.job_attempts_list(job.id).await?;
        listed.push((job, attempts));
    }
    match format {
        OutputFormat::Json => {
            let jobs: Vec<serde_json::Value> = listed
                .iter()
                .map(|(job, attempts)| {
                    let mut value = serde_json::to_value(job).unwrap_or_default();
                    value["attempts"] = serde_json::to_value(attempts).unwrap_or_default();
                    value
                })
                .collect();
            output::write_json(out, &serde_json::json!({ "jobs": jobs }))?
        }
        OutputFormat::Table => {
            if listed.is_empty() {
                writeln!(out, "no jobs")?;
            } else {
                let mut table = output::table([
                    "id",
                    "schedule",
                    "status",
                    "attempt",
                    "scheduled for",
                    "error",
                    "attempts",
                ]);
                for (j, attempts) in &listed {
                    table.add_row(vec![
                        j.id.to_string(),
                        j.schedule_id.to_string(),
                        j.status.to_string(),
                        j.attempt.to_string(),
                        j.scheduled_for.to_rfc3339(),
                        j.error.clone().unwrap_or_default(),
                        attempts_summary(attempts),
                    ]);
                }
                writeln!(out, "{table}")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per attempt: `#n outcome [status] [class] [duration]`.
fn attempts_summary(attempts: &[JobAttempt]) -> String {
    attempts
        .iter()
        .map(|a| {
            let mut line = format!("#{} {}", a.attempt, a.outcome);
            if let Some(status) = a.http_status {
                line.push_str(&format!(" {status}"));
            }
            if let Some(class) = &a.error_class {
                line.push_str(&format!(" {class}"));
            }
            if let Some(ms) = a.duration_ms {
                line.push_str(&format!(" {ms}ms"));
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}
