//! `sentin8-cron calendars`: an environment's named lists of exclusions (holidays, freezes),
//! which schedules name in their `exclude`: list, show, write (from entries or an iCalendar
//! file of holidays) and remove, through a running service's API (`--server`) or straight
//! from the database (`--database-url`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use super::jobs::Source;
use super::remote::{self, Kind, env_query};
use super::{StoreUse, cli_actor, open_store};
use crate::core::calendar::{CalendarDraft, CalendarEntryText, ical};
use crate::core::model::EnvId;
use crate::core::ops::Ops;
use crate::server::api::calendars::{CalendarList, CalendarView};

/// Named lists of exclusions that schedules name in their `exclude`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sentin8-cron calendars put holidays --env $ENV --ical us-holidays.ics --description 'US public holidays'
  sentin8-cron calendars put freeze --env $ENV --entry '2031-12-20..2032-01-02=year-end freeze'
  sentin8-cron calendars get holidays --env $ENV
  sentin8-cron calendars list --env $ENV -o json
  sentin8-cron calendars delete freeze --env $ENV")]
pub struct Args {
    #[command(subcommand)]
    pub command: CalendarsCommand,
}

#[derive(Debug, Subcommand)]
pub enum CalendarsCommand {
    /// List the environment's calendars.
    List(Target),
    /// Show one calendar and its entries.
    Get(Named),
    /// Create a calendar or replace one whole, from entries or an iCalendar file.
    Put {
        #[command(flatten)]
        named: Named,
        /// What the calendar is for.
        #[arg(long, default_value = "")]
        description: String,
        /// An entry, `SPEC` or `SPEC=NOTE`: a date (2031-12-25), a range
        /// (2031-12-24..2031-12-26) or a cron-like spec ('* * 25 12 *'). Repeatable.
        #[arg(long = "entry", value_name = "SPEC[=NOTE]", conflicts_with = "ical")]
        entries: Vec<String>,
        /// An iCalendar (RFC 5545) file of all-day events, such as public holidays; each event
        /// becomes an entry with its summary as the note.
        #[arg(long, value_name = "FILE")]
        ical: Option<PathBuf>,
    },
    /// Remove a calendar (refused while a schedule names it).
    Delete(Named),
}

#[derive(Debug, clap::Args)]
pub struct Target {
    /// The environment.
    #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
    pub env: EnvId,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Debug, clap::Args)]
pub struct Named {
    /// The calendar's name.
    pub name: String,
    #[command(flatten)]
    pub target: Target,
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match args.command {
        CalendarsCommand::List(target) => {
            let list = match target.source.server.client()? {
                Some(client) => client.get("/v1/calendars", &env_query(target.env)).await?,
                None => {
                    let ops = ops(&target, false).await?;
                    let items = ops.calendar_list(target.env).await?;
                    serde_json::to_value(CalendarList {
                        items: items.into_iter().map(Into::into).collect(),
                    })?
                }
            };
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let page = crate::client::ListPage {
                items,
                next_cursor: None,
            };
            remote::print_list(out, &target.source.output, Kind::Calendar, &page)?;
        }
        CalendarsCommand::Get(named) => {
            let record = match named.target.source.server.client()? {
                Some(client) => {
                    client
                        .get(&path(&named.name), &env_query(named.target.env))
                        .await?
                }
                None => {
                    let ops = ops(&named.target, false).await?;
                    let found = ops.calendar_get(named.target.env, &named.name).await?;
                    serde_json::to_value(CalendarView::from(found))?
                }
            };
            print_calendar(out, &named.target, &record)?;
        }
        CalendarsCommand::Put {
            named,
            description,
            entries,
            ical: file,
        } => {
            let ical_text = file
                .map(|f| {
                    std::fs::read_to_string(&f)
                        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))
                })
                .transpose()?;
            let entries: Vec<CalendarEntryText> = entries.iter().map(|e| entry(e)).collect();
            let record = match named.target.source.server.client()? {
                Some(client) => {
                    let mut body = json!({ "description": description });
                    match ical_text {
                        Some(text) => body["ical"] = text.into(),
                        None => body["entries"] = serde_json::to_value(&entries)?,
                    }
                    client
                        .call(
                            Method::PUT,
                            &path(&named.name),
                            &env_query(named.target.env),
                            Some(&body),
                        )
                        .await?
                }
                None => {
                    let entries = match ical_text {
                        Some(text) => ical::parse_ical(&text)?
                            .into_iter()
                            .map(Into::into)
                            .collect(),
                        None => entries,
                    };
                    let draft = CalendarDraft {
                        description,
                        entries,
                    };
                    let ops = ops(&named.target, true).await?;
                    let (calendar, _) = ops
                        .calendar_put(named.target.env, &named.name, &draft, &cli_actor())
                        .await?;
                    serde_json::to_value(CalendarView::from(calendar))?
                }
            };
            let count = record["entries"].as_array().map_or(0, Vec::len);
            let message = format!("calendar {} written with {count} entries", named.name);
            remote::print_action(out, &named.target.source.output, &record, &message)?;
        }
        CalendarsCommand::Delete(named) => {
            match named.target.source.server.client()? {
                Some(client) => {
                    client
                        .call(
                            Method::DELETE,
                            &path(&named.name),
                            &env_query(named.target.env),
                            None,
                        )
                        .await?;
                }
                None => {
                    let ops = ops(&named.target, true).await?;
                    ops.calendar_delete(named.target.env, &named.name, &cli_actor())
                        .await?;
                }
            }
            let message = format!("calendar {} removed", named.name);
            let answer = json!({ "name": named.name, "removed": true });
            remote::print_action(out, &named.target.source.output, &answer, &message)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `SPEC` or `SPEC=NOTE` (a spec holds no `=`).
fn entry(text: &str) -> CalendarEntryText {
    match text.split_once('=') {
        Some((spec, note)) => CalendarEntryText {
            spec: spec.trim().to_owned(),
            note: Some(note.trim().to_owned()).filter(|n| !n.is_empty()),
        },
        None => CalendarEntryText {
            spec: text.trim().to_owned(),
            note: None,
        },
    }
}

fn path(name: &str) -> String {
    format!("/v1/calendars/{}", urlencoding_name(name))
}

/// A name as a path segment: a valid name is letters, digits, `_` and `-`; anything else is
/// percent-encoded so the server answers with the name's own error.
fn urlencoding_name(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

async fn ops(target: &Target, writes: bool) -> anyhow::Result<Ops> {
    let usage = if writes {
        StoreUse::Command {
            migrate_embedded: false,
        }
    } else {
        StoreUse::read_only()
    };
    Ok(Ops::new(open_store(&target.source.database, usage).await?))
}

/// One calendar: as JSON or YAML, else its entries as a table under a line naming it.
fn print_calendar(
    out: &mut (dyn Write + Send),
    target: &Target,
    record: &Value,
) -> anyhow::Result<()> {
    let output = &target.source.output;
    if output.format.is_structured() {
        return super::output::write_structured(out, output.format, record);
    }
    if !output.no_headers {
        writeln!(
            out,
            "{}: {}",
            remote::text(record, "name"),
            match remote::text(record, "description") {
                d if d.is_empty() => "(no description)".to_owned(),
                d => d,
            }
        )?;
    }
    let entries = record["entries"].as_array().cloned().unwrap_or_default();
    remote::print_table(out, output, Kind::CalendarEntry, &entries)
}
