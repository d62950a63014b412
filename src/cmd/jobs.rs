//! `sentin8-cron jobs list|get`: execution records of one environment, read through a running
//! service's API (`--server`) or straight from the database (`--database-url`).

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use super::output::OutputArgs;
use super::remote::{self, Kind, Paging, ServerArgs, env_query, follow_ids};
use super::{DatabaseArgs, StoreUse, open_store};
use crate::core::labels::LabelSelector;
use crate::core::model::{EnvId, JobId, JobStatus, ScheduleId};
use crate::core::ops::Ops;
use crate::core::store::JobQuery;
use crate::server::api::views::JobView;

/// Inspect jobs (execution records).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron jobs list --env $ENV --server http://127.0.0.1:8080 --token $TOKEN
  sentin8-cron jobs list --env $ENV --status failed -o wide
  sentin8-cron jobs get $JOB --env $ENV -o json --database-url sqlite://sentin8-cron.db")]
pub struct Args {
    #[command(subcommand)]
    pub command: JobsCommand,
}

/// Where the records are read: the API when --server is given, else the database.
#[derive(Debug, clap::Args)]
pub struct Source {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List an environment's jobs, newest first.
    List {
        /// The environment (required: on the command line or in SENTIN8_CRON_ENV).
        #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
        env: EnvId,
        /// Only this schedule's jobs.
        #[arg(long, value_name = "ID")]
        schedule: Option<ScheduleId>,
        /// Only jobs in this status.
        #[arg(long, value_parser = job_status())]
        status: Option<JobStatus>,
        /// Only jobs of schedules whose labels match (`team=billing`, `tier in (a,b)`, ...).
        #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = super::remote::label_selector)]
        selector: Option<LabelSelector>,
        /// At most this many jobs.
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        #[command(flatten)]
        paging: Paging,
        #[command(flatten)]
        source: Source,
    },
    /// Show one job.
    Get {
        /// The job's id.
        #[arg(value_name = "ID")]
        id: JobId,
        /// Its environment.
        #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
        env: EnvId,
        #[command(flatten)]
        source: Source,
    },
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match args.command {
        JobsCommand::List {
            env,
            schedule,
            status,
            selector,
            limit,
            paging,
            source,
        } => {
            let wanted = paging.limit(limit);
            let page = match source.server.client()? {
                Some(client) => {
                    let mut query = env_query(env);
                    query.extend(schedule.map(|id| ("schedule_id", id.to_string())));
                    query.extend(status.map(|s| ("status", s.to_string())));
                    query.extend(selector.map(|s| ("label_selector", s.to_string())));
                    client
                        .list("/v1/jobs", &query, wanted, paging.cursor)
                        .await?
                }
                None => {
                    let store = open_store(&source.database, StoreUse::read_only()).await?;
                    let ops = Ops::new(store);
                    let ops = &ops;
                    let selector = &selector;
                    follow_ids(
                        wanted,
                        paging.cursor,
                        |before: Option<JobId>, limit| async move {
                            let query = JobQuery {
                                schedule_id: schedule,
                                status,
                                schedule_labels: selector.clone(),
                                before,
                                limit,
                            };
                            let jobs = ops.job_list(env, &query).await?;
                            let held = ops.jobs_held_by_pause(env, &jobs).await?;
                            let items = jobs
                                .into_iter()
                                .map(|job| {
                                    let held_by_pause = held.contains(&job.id);
                                    serde_json::to_value(JobView {
                                        held_by_pause,
                                        ..JobView::from(job)
                                    })
                                })
                                .collect::<Result<_, _>>()?;
                            Ok(items)
                        },
                    )
                    .await?
                }
            };
            remote::print_list(out, &source.output, Kind::Job, &page)?;
        }
        JobsCommand::Get { id, env, source } => {
            let record = match source.server.client()? {
                Some(client) => {
                    client
                        .get(&format!("/v1/jobs/{id}"), &env_query(env))
                        .await?
                }
                None => {
                    let store = open_store(&source.database, StoreUse::read_only()).await?;
                    let ops = Ops::new(store);
                    let (job, attempts) = ops.job_get_with_attempts(env, id).await?;
                    let held = ops
                        .jobs_held_by_pause(env, std::slice::from_ref(&job))
                        .await?;
                    let mut view = JobView::with_attempts(job, attempts);
                    view.held_by_pause = held.contains(&JobId(view.id));
                    serde_json::to_value(view)?
                }
            };
            remote::print_one(out, &source.output, Kind::Job, &record)?;
            remote::print_attempts(out, &source.output, &record)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A job status, its possible values listed in `--help` from [`JobStatus::ALL`], so the help
/// names every status there is.
fn job_status() -> impl clap::builder::TypedValueParser<Value = JobStatus> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(JobStatus::ALL.iter().map(|s| s.as_str()))
        .try_map(|name| name.parse::<JobStatus>())
}
