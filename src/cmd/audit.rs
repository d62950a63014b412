//! `sentin8-cron audit list`: who changed what, from the audit journal, through a running
//! service's API (`--server`) or straight from the database (`--database-url`).

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::Subcommand;

use super::jobs::Source;

use super::remote::{self, Kind, Paging, env_query, follow_ids};
use super::{StoreUse, open_store};
use crate::core::model::{EnvId, ScheduleId};
use crate::core::ops::Ops;
use crate::core::store::AuditQuery;
use crate::server::api::views::AuditView;

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
        #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
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
        /// At most this many entries (pages are followed).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        limit: u32,
        #[command(flatten)]
        paging: Paging,
        #[command(flatten)]
        source: Source,
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
        limit,
        paging,
        source,
    } = args.command;
    let wanted = paging.limit(limit);
    let page = match source.server.client()? {
        Some(client) => {
            let mut query = env_query(env);
            query.extend(schedule.map(|id| ("schedule_id", id.to_string())));
            query.extend(actor.map(|a| ("actor", a)));
            query
                .extend(since.map(|at| ("since", at.to_rfc3339_opts(SecondsFormat::AutoSi, true))));
            client
                .list("/v1/audit", &query, wanted, paging.cursor)
                .await?
        }
        None => {
            let store = open_store(&source.database, StoreUse::read_only()).await?;
            let ops = Ops::new(store);
            let (ops, actor) = (&ops, &actor);
            follow_ids(wanted, paging.cursor, |before, limit| async move {
                let query = AuditQuery {
                    schedule_id: schedule,
                    actor: actor.clone(),
                    since,
                    before,
                    limit,
                };
                let items = ops
                    .audit_list(env, &query)
                    .await?
                    .into_iter()
                    .map(|entry| serde_json::to_value(AuditView::from(entry)))
                    .collect::<Result<_, _>>()?;
                Ok(items)
            })
            .await?
        }
    };
    remote::print_list(out, &source.output, Kind::Audit, &page)?;
    Ok(ExitCode::SUCCESS)
}
