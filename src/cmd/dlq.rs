//! `sentin8-cron dlq list|republish|discard`: the operator's view of the dead-letter queue.

use std::io::Write;
use std::process::ExitCode;

use clap::Subcommand;

use super::output::{self, OutputFormat};
use super::{DatabaseArgs, StoreUse, cli_actor, open_store};
use crate::core::model::{DlqEntry, DlqId, EnvId};
use crate::core::ops::Ops;
use crate::core::store::DlqQuery;

/// Inspect, republish and discard dead-letter entries.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: DlqCommand,
}

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// List dead-letter entries, newest first: of one environment, or of every environment
    /// that has any.
    List {
        /// Only this environment.
        #[arg(long)]
        env: Option<EnvId>,
        /// Only this domain.
        #[arg(long)]
        domain: Option<String>,
        /// At most this many entries per environment.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Run a dead-letter entry again: a fresh pending job, due now, and the entry removed, in
    /// one transaction.
    Republish {
        /// The dead-letter entry.
        id: DlqId,
        /// Its environment (required: environments are always explicit).
        #[arg(long)]
        env: EnvId,
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
    /// Discard a dead-letter entry: its occurrence will not run (also for entries of deleted
    /// schedules). The event and an audit entry are written in the same transaction.
    Discard {
        /// The dead-letter entry.
        id: DlqId,
        /// Its environment (required: environments are always explicit).
        #[arg(long)]
        env: EnvId,
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match args.command {
        DlqCommand::List {
            env,
            domain,
            limit,
            database,
            output: format,
        } => {
            let store = open_store(
                &database,
                StoreUse::Command {
                    migrate_embedded: false,
                },
            )
            .await?;
            let envs = match env {
                Some(env) => vec![env],
                None => store.dlq_envs().await?,
            };
            let mut entries: Vec<DlqEntry> = Vec::new();
            for env in envs {
                let mut tx = store.tenant_begin(env).await?;
                entries.extend(
                    tx.dlq_list(&DlqQuery {
                        domain: domain.clone(),
                        limit,
                        ..DlqQuery::default()
                    })
                    .await?,
                );
            }
            match format {
                OutputFormat::Json => {
                    output::write_json(out, &serde_json::json!({ "entries": entries }))?
                }
                OutputFormat::Table => {
                    if entries.is_empty() {
                        writeln!(out, "the dead-letter queue is empty")?;
                    } else {
                        let mut table = output::table([
                            "id",
                            "env",
                            "domain",
                            "schedule_type",
                            "attempts",
                            "last error",
                            "landed at",
                        ]);
                        for e in &entries {
                            table.add_row(vec![
                                e.id.to_string(),
                                e.env_id.to_string(),
                                e.domain.clone(),
                                e.schedule_type.clone(),
                                e.attempts.to_string(),
                                e.last_error.clone(),
                                e.landed_at.to_rfc3339(),
                            ]);
                        }
                        writeln!(out, "{table}")?;
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        DlqCommand::Republish {
            id,
            env,
            database,
            output: format,
        } => {
            let store = open_store(
                &database,
                StoreUse::Command {
                    migrate_embedded: false,
                },
            )
            .await?;
            let job = Ops::new(store).dlq_republish(env, id, &cli_actor()).await?;
            match format {
                OutputFormat::Json => output::write_json(out, &job)?,
                OutputFormat::Table => writeln!(
                    out,
                    "republished {id} as job {} (pending, due now); the next tick runs it",
                    job.id
                )?,
            }
            Ok(ExitCode::SUCCESS)
        }
        DlqCommand::Discard {
            id,
            env,
            database,
            output: format,
        } => {
            let store = open_store(
                &database,
                StoreUse::Command {
                    migrate_embedded: false,
                },
            )
            .await?;
            let entry = Ops::new(store).dlq_discard(env, id, &cli_actor()).await?;
            match format {
                OutputFormat::Json => output::write_json(out, &entry)?,
                OutputFormat::Table => writeln!(
                    out,
                    "discarded {id} (job {} of schedule {}); it will not run",
                    entry.job_id, entry.schedule_id
                )?,
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
