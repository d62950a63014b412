//! `sentin8-cron dlq list|get|republish|discard`: the operator's view of the dead-letter
//! queue, through a running service's API (`--server`) or straight from the database
//! (`--database-url`).

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;
use reqwest::Method;

use super::jobs::Source;
use super::remote::{self, Kind, Paging, env_query, follow_ids, text};
use super::{StoreUse, UsageError, cli_actor, open_store};
use crate::client::ListPage;
use crate::core::labels::LabelSelector;
use crate::core::model::{DlqId, EnvId};
use crate::core::ops::Ops;
use crate::core::store::DlqQuery;
use crate::server::api::views::{DlqView, JobView};

/// Inspect, republish and discard dead-letter entries.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron dlq list --env $ENV --server http://127.0.0.1:8080 --token $TOKEN
  sentin8-cron dlq list --database-url postgres://sentin8_cron_service@db/cron
  sentin8-cron dlq republish $ENTRY --env $ENV
  sentin8-cron dlq discard $ENTRY --env $ENV")]
pub struct Args {
    #[command(subcommand)]
    pub command: DlqCommand,
}

/// One entry of an environment.
#[derive(Debug, clap::Args)]
pub struct Entry {
    /// The dead-letter entry's id.
    #[arg(value_name = "ID")]
    pub id: DlqId,
    /// Its environment (required: on the command line or in SENTIN8_CRON_ENV).
    #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
    pub env: EnvId,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead-letter entries, newest first: of one environment, or (from the database) of
    /// every environment that has any.
    List {
        /// Only this environment (required with --server).
        #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
        env: Option<EnvId>,
        /// Only this domain.
        #[arg(long)]
        domain: Option<String>,
        /// Only entries of schedules whose labels match (`team=billing`, `tier in (a,b)`, ...).
        #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = super::remote::label_selector)]
        selector: Option<LabelSelector>,
        /// At most this many entries per environment.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        #[command(flatten)]
        paging: Paging,
        #[command(flatten)]
        source: Source,
    },
    /// Show one dead-letter entry.
    Get(Entry),
    /// Run a dead-letter entry again: a fresh pending job, due now, and the entry removed, in
    /// one transaction.
    Republish(Entry),
    /// Drop a dead-letter entry without running it again (also one of a deleted schedule); the
    /// event and an audit entry are written in the same transaction.
    Discard(Entry),
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match args.command {
        DlqCommand::List {
            env,
            domain,
            selector,
            limit,
            paging,
            source,
        } => {
            let wanted = paging.limit(limit);
            let page = match source.server.client()? {
                Some(client) => {
                    let Some(env) = env else {
                        return Err(UsageError(
                            "give --env: the API lists one environment at a time".into(),
                        )
                        .into());
                    };
                    let mut query = env_query(env);
                    query.extend(domain.map(|d| ("domain", d)));
                    query.extend(selector.map(|s| ("label_selector", s.to_string())));
                    client
                        .list("/v1/dlq", &query, wanted, paging.cursor)
                        .await?
                }
                None => {
                    let store = open_store(&source.database, StoreUse::read_only()).await?;
                    let envs = match env {
                        Some(env) => vec![env],
                        None if paging.cursor.is_some() || paging.all => {
                            return Err(UsageError(
                                "give --env with --cursor or --all: pages are of one environment"
                                    .into(),
                            )
                            .into());
                        }
                        None => store.dlq_envs().await?,
                    };
                    let ops = Ops::new(store);
                    let ops = &ops;
                    let mut items = Vec::new();
                    let mut next_cursor = None;
                    for env in envs {
                        let domain = &domain;
                        let selector = &selector;
                        let page = follow_ids(
                            wanted,
                            paging.cursor.clone(),
                            |before: Option<DlqId>, limit| async move {
                                let query = DlqQuery {
                                    domain: domain.clone(),
                                    schedule_labels: selector.clone(),
                                    before,
                                    limit,
                                    ..DlqQuery::default()
                                };
                                let entries = ops
                                    .dlq_list(env, &query)
                                    .await?
                                    .into_iter()
                                    .map(|entry| serde_json::to_value(DlqView::from(entry)))
                                    .collect::<Result<_, _>>()?;
                                Ok(entries)
                            },
                        )
                        .await?;
                        items.extend(page.items);
                        // One environment's cursor; across several there is none to give.
                        next_cursor = page.next_cursor;
                    }
                    ListPage {
                        items,
                        next_cursor: if env.is_some() { next_cursor } else { None },
                    }
                }
            };
            remote::print_list(out, &source.output, Kind::Dlq, &page)?;
        }
        DlqCommand::Get(entry) => {
            let record = match entry.source.server.client()? {
                Some(client) => {
                    client
                        .get(&format!("/v1/dlq/{}", entry.id), &env_query(entry.env))
                        .await?
                }
                None => {
                    let store = open_store(&entry.source.database, StoreUse::read_only()).await?;
                    let found = Ops::new(store).dlq_get(entry.env, entry.id).await?;
                    serde_json::to_value(DlqView::from(found))?
                }
            };
            remote::print_one(out, &entry.source.output, Kind::Dlq, &record)?;
        }
        DlqCommand::Republish(entry) => {
            let job = match entry.source.server.client()? {
                Some(client) => {
                    client
                        .call(
                            Method::POST,
                            &format!("/v1/dlq/{}/republish", entry.id),
                            &env_query(entry.env),
                            None,
                        )
                        .await?
                }
                None => {
                    let store = open_store(
                        &entry.source.database,
                        StoreUse::Command {
                            migrate_embedded: false,
                        },
                    )
                    .await?;
                    let job = Ops::new(store)
                        .dlq_republish(entry.env, entry.id, &cli_actor())
                        .await?;
                    serde_json::to_value(JobView::from(job))?
                }
            };
            let message = format!(
                "republished {} as job {} (pending, due now); the next tick runs it",
                entry.id,
                text(&job, "id")
            );
            remote::print_action(out, &entry.source.output, &job, &message)?;
        }
        DlqCommand::Discard(entry) => {
            let answer = match entry.source.server.client()? {
                Some(client) => {
                    client
                        .call(
                            Method::DELETE,
                            &format!("/v1/dlq/{}", entry.id),
                            &env_query(entry.env),
                            None,
                        )
                        .await?
                }
                None => {
                    let store = open_store(
                        &entry.source.database,
                        StoreUse::Command {
                            migrate_embedded: false,
                        },
                    )
                    .await?;
                    let discarded = Ops::new(store)
                        .dlq_discard(entry.env, entry.id, &cli_actor())
                        .await?;
                    serde_json::to_value(DlqView::from(discarded))?
                }
            };
            let message = format!("discarded dead-letter entry {}", entry.id);
            remote::print_action(out, &entry.source.output, &answer, &message)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
