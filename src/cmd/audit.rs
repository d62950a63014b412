//! `sentin8-cron audit list`: one environment's audit journal, newest first.

use std::io::Write;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::Subcommand;

use super::output::{self, OutputFormat};
use super::{DatabaseArgs, StoreUse, open_store};
use crate::core::model::{AuditEntry, EnvId, ScheduleId};
use crate::core::ops::Ops;
use crate::core::store::AuditQuery;

/// Read the audit journal.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List an environment's audit entries, newest first.
    List {
        /// The environment (required: environments are always explicit).
        #[arg(long)]
        env: EnvId,
        /// Only entries about this schedule.
        #[arg(long)]
        schedule: Option<ScheduleId>,
        /// Only entries by this actor.
        #[arg(long)]
        actor: Option<String>,
        /// Only entries written at or after this RFC 3339 instant.
        #[arg(long)]
        since: Option<DateTime<Utc>>,
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        #[command(flatten)]
        database: DatabaseArgs,
        #[arg(long, value_enum, default_value_t)]
        output: OutputFormat,
    },
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let AuditCommand::List {
        env,
        schedule,
        actor,
        since,
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
    let query = AuditQuery {
        schedule_id: schedule,
        actor,
        since,
        before: None,
        limit,
    };
    let entries = Ops::new(store).audit_list(env, &query).await?;
    write_entries(out, format, &entries)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints audit entries as a table (actor, action, resource, when) or as `{"entries": [...]}`;
/// shared by every way of listing them.
pub fn write_entries(
    out: &mut (dyn Write + Send),
    format: OutputFormat,
    entries: &[AuditEntry],
) -> anyhow::Result<()> {
    match format {
        OutputFormat::Json => output::write_json(out, &serde_json::json!({ "entries": entries })),
        OutputFormat::Table if entries.is_empty() => {
            writeln!(out, "no audit entries")?;
            Ok(())
        }
        OutputFormat::Table => {
            let mut table = output::table(["at", "actor", "action", "resource", "schedule"]);
            for e in entries {
                table.add_row(vec![
                    e.at.to_rfc3339(),
                    e.actor.clone(),
                    e.action.clone(),
                    format!("{} {}", e.resource_type, e.resource_id),
                    e.schedule_id.map(|id| id.to_string()).unwrap_or_default(),
                ]);
            }
            writeln!(out, "{table}")?;
            Ok(())
        }
    }
}
