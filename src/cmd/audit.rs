//! `sentin8-cron audit list`: who changed what, from the audit journal, through a running
//! service's API.

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::Subcommand;

use super::output::OutputArgs;
use super::remote::{self, Kind, ServerArgs, env_query};
use crate::core::model::{EnvId, ScheduleId};

/// Read the audit journal.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron audit list --env $ENV --server http://127.0.0.1:8080 --token $TOKEN
  sentin8-cron audit list --env $ENV --schedule $ID --since 2030-01-01T00:00:00Z -o json")]
pub struct Args {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List an environment's audit entries, newest first.
    List {
        /// The environment.
        #[arg(long, value_name = "ENV_ID")]
        env: EnvId,
        /// Only this schedule's entries.
        #[arg(long, value_name = "ID")]
        schedule: Option<ScheduleId>,
        /// Only this actor's entries.
        #[arg(long, value_name = "NAME")]
        actor: Option<String>,
        /// Only entries at or after this RFC 3339 time.
        #[arg(long, value_name = "RFC3339", value_parser = rfc3339)]
        since: Option<DateTime<Utc>>,
        /// Only entries before this RFC 3339 time.
        #[arg(long, value_name = "RFC3339", value_parser = rfc3339)]
        before: Option<DateTime<Utc>>,
        /// At most this many entries (pages are followed).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
}

fn rfc3339(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|err| format!("not an RFC 3339 time such as 2030-01-01T00:00:00Z ({err})"))
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let AuditCommand::List {
        env,
        schedule,
        actor,
        since,
        before,
        limit,
        server,
        output,
    } = args.command;
    let client = server.require()?;
    let mut query = env_query(env);
    query.extend(schedule.map(|id| ("schedule_id", id.to_string())));
    query.extend(actor.map(|a| ("actor", a)));
    query.extend(since.map(|at| ("since", at.to_rfc3339_opts(SecondsFormat::AutoSi, true))));
    query.extend(before.map(|at| ("before", at.to_rfc3339_opts(SecondsFormat::AutoSi, true))));
    let items = client.list("/v1/audit", &query, limit as usize).await?;
    remote::print_list(out, &output, Kind::Audit, &items)?;
    Ok(ExitCode::SUCCESS)
}
