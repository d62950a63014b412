//! What the API-backed commands share: where the server is, which environment is addressed,
//! and how the records the API returns are printed (tables whose column names are the JSON
//! field names, or the JSON and YAML documents themselves).

use std::io::Write;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use url::Url;

use super::output::{self, OutputArgs, OutputFormat, cell, opt_time_text};
use crate::callback::Secret;
use crate::client::{ApiClient, ClientError, ListPage, follow, parse_server_url};
use crate::core::labels::LabelSelector;
use crate::core::model::EnvId;

/// The running service the command talks to.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// URL of a running sentin8-cron service, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "SENTIN8_CRON_SERVER", value_name = "URL", hide_env_values = true, value_parser = parse_server_url)]
    pub server: Option<Url>,
    /// Bearer token for the service's API (a JWT with the read or write scope, or the token a
    /// development-mode `serve` prints).
    #[arg(
        long,
        env = "SENTIN8_CRON_API_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true,
        value_parser = Secret::parse
    )]
    pub token: Option<Secret>,
}

impl ServerArgs {
    /// The client of the server given, if one was.
    pub fn client(&self) -> Result<Option<ApiClient>, ClientError> {
        self.server
            .clone()
            .map(|url| ApiClient::new(url, self.token.clone()))
            .transpose()
    }

    /// The client of the server given; an error naming the flag when none was.
    pub fn require(&self) -> Result<ApiClient, ClientError> {
        self.client()?.ok_or(ClientError::NoServer)
    }
}

/// Which part of a list to read, beside the command's own `--limit`.
#[derive(Debug, Clone, clap::Args)]
pub struct Paging {
    /// Start where an earlier list stopped: its `next_cursor` (printed with `-o json`, and
    /// after a table that was cut short).
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Read every page to the end of the list instead of --limit (a rate limit's wait is
    /// honoured between pages).
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
}

impl Paging {
    /// How many items to read: all of them, or `limit`.
    pub fn limit(&self, limit: u32) -> usize {
        if self.all { usize::MAX } else { limit as usize }
    }
}

/// Records per page when a list is read from the database directly.
const DATABASE_PAGE: u32 = 1000;

/// Pages of a list read from the database directly, from `cursor` (the id of the last record
/// an earlier list printed) until `wanted` records or the list's end: `fetch(before, n)` reads
/// at most `n` records, newest first, older than `before`. A full page's last id is where the
/// list goes on, as the API's cursor is.
pub async fn follow_ids<T, F, Fut>(
    wanted: usize,
    cursor: Option<String>,
    mut fetch: F,
) -> anyhow::Result<ListPage>
where
    T: std::str::FromStr,
    F: FnMut(Option<T>, u32) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Vec<Value>>>,
{
    follow(wanted, DATABASE_PAGE as usize, cursor, |cursor, n| {
        let page = u32::try_from(n).unwrap_or(DATABASE_PAGE);
        let read = cursor
            .as_deref()
            .map(cursor_id::<T>)
            .transpose()
            .map(|before| fetch(before, page));
        async move {
            let items = read?.await?;
            let next = cursor_after(&items, n);
            Ok((items, next))
        }
    })
    .await
}

/// The record id a cursor names, for lists read from the database directly (the API's cursor
/// is the id of the last item it returned).
fn cursor_id<T: std::str::FromStr>(cursor: &str) -> Result<T, super::UsageError> {
    cursor.parse().map_err(|_| {
        super::UsageError(format!(
            "--cursor {cursor:?} is not a cursor a list of this kind printed"
        ))
    })
}

/// The cursor after `items` when a page came back full: the last one's id.
fn cursor_after(items: &[Value], page: usize) -> Option<String> {
    (items.len() >= page)
        .then(|| items.last()?.get("id")?.as_str().map(str::to_owned))
        .flatten()
}

/// The variable an `--env` left off the command line is read from, so a shell that works in
/// one environment sets it once (`--env` still wins). The CLI's other defaults are variables
/// too (`SENTIN8_CRON_SERVER`, `SENTIN8_CRON_API_TOKEN`); it reads no configuration file.
pub const ENV_VAR: &str = "SENTIN8_CRON_ENV";

/// The `target_env_id` query parameter of `env`.
pub fn env_query(env: EnvId) -> Vec<(&'static str, String)> {
    vec![("target_env_id", env.to_string())]
}

/// The kinds of records the API returns, each with its table columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Schedule,
    Job,
    Dlq,
    Audit,
    Calendar,
    /// One entry of a calendar (its table under `calendars get`).
    CalendarEntry,
}

impl Kind {
    fn columns(self, wide: bool) -> Vec<&'static str> {
        let (narrow, extra): (&[&str], &[&str]) = match self {
            Kind::Schedule => (
                &[
                    "id",
                    "domain",
                    "schedule_type",
                    "status",
                    "timing",
                    "next_run_at",
                ],
                &[
                    "env_id",
                    "max_retries",
                    "last_run_at",
                    "target",
                    "labels",
                    "updated_by",
                ],
            ),
            Kind::Job => (
                &[
                    "id",
                    "schedule_id",
                    "status",
                    "attempt",
                    "scheduled_for",
                    "error",
                ],
                &[
                    "env_id",
                    "next_attempt_at",
                    "started_at",
                    "finished_at",
                    "held_by_pause",
                    "backfill",
                ],
            ),
            Kind::Dlq => (
                &[
                    "id",
                    "domain",
                    "schedule_type",
                    "attempts",
                    "landed_at",
                    "last_error",
                ],
                &[
                    "env_id",
                    "schedule_id",
                    "job_id",
                    "scheduled_for",
                    "backfill",
                ],
            ),
            Kind::Audit => (
                &["at", "actor", "action", "schedule_id"],
                &["id", "resource_type", "resource_id", "correlation_id"],
            ),
            Kind::Calendar => (
                &["name", "entries", "description", "updated_at"],
                &["created_at", "created_by", "updated_by"],
            ),
            Kind::CalendarEntry => (&["spec", "note"], &[]),
        };
        let mut columns = narrow.to_vec();
        if wide {
            columns.extend_from_slice(extra);
        }
        columns
    }

    fn cell(self, record: &Value, column: &str, wide: bool) -> String {
        match (self, column) {
            (Kind::Schedule, "timing") => match text(record, "cron") {
                cron if !cron.is_empty() => format!("{cron} ({})", text(record, "timezone")),
                _ => format!("once at {}", time(record, "run_at")),
            },
            (Kind::Schedule, "labels") => match record.get("labels").and_then(Value::as_object) {
                Some(labels) if !labels.is_empty() => labels
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(","),
                _ => "-".to_owned(),
            },
            (Kind::Calendar, "entries") => {
                record["entries"].as_array().map_or(0, Vec::len).to_string()
            }
            (Kind::Schedule, "target") => record
                .get("target_config")
                .and_then(|t| t.get("baseUrl"))
                .and_then(Value::as_str)
                .unwrap_or("-")
                .to_owned(),
            (_, "error" | "last_error") => {
                let error = text(record, column);
                if error.is_empty() {
                    "-".to_owned()
                } else {
                    cell(&error, wide)
                }
            }
            (_, column)
                if column.ends_with("_at") || column == "at" || column == "scheduled_for" =>
            {
                time(record, column)
            }
            (_, column) => match text(record, column) {
                t if t.is_empty() => "-".to_owned(),
                t => t,
            },
        }
    }
}

/// A field as text: strings as they are, numbers and booleans printed, absent as empty.
pub fn text(record: &Value, field: &str) -> String {
    match record.get(field) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A time field in the one time format (`-` when absent; an unreadable one as it came).
pub fn time(record: &Value, field: &str) -> String {
    match record.get(field).and_then(Value::as_str) {
        None => "-".to_owned(),
        Some(raw) => DateTime::parse_from_rfc3339(raw)
            .map(|at| opt_time_text(Some(at.with_timezone(&Utc))))
            .unwrap_or_else(|_| raw.to_owned()),
    }
}

/// Prints a list of records: `{"items": [...]}` as JSON or YAML, else a table (nothing but a
/// note on standard error when the list is empty, so a pipe reads no rows).
pub fn print_list(
    out: &mut (dyn Write + Send),
    output: &OutputArgs,
    kind: Kind,
    page: &ListPage,
) -> anyhow::Result<()> {
    if output.format.is_structured() {
        // The API's page, as it is: a script tells a list cut short by its cursor.
        let document = json!({ "items": page.items, "next_cursor": page.next_cursor });
        return output::write_structured(out, output.format, &document);
    }
    if page.items.is_empty() {
        if !output.no_headers {
            eprintln!("no {} found", kind.plural());
        }
        return Ok(());
    }
    print_table(out, output, kind, &page.items)?;
    if let Some(cursor) = &page.next_cursor
        && !output.no_headers
    {
        eprintln!("more {}: --cursor {cursor} (or --all)", kind.plural());
    }
    Ok(())
}

/// Prints one record: the record as JSON or YAML, else a one-row table.
pub fn print_one(
    out: &mut (dyn Write + Send),
    output: &OutputArgs,
    kind: Kind,
    record: &Value,
) -> anyhow::Result<()> {
    if output.format.is_structured() {
        return output::write_structured(out, output.format, record);
    }
    print_table(out, output, kind, std::slice::from_ref(record))
}

pub fn print_table(
    out: &mut (dyn Write + Send),
    output: &OutputArgs,
    kind: Kind,
    items: &[Value],
) -> anyhow::Result<()> {
    let wide = output.format == OutputFormat::Wide;
    let columns = kind.columns(wide);
    let mut table = output::table(&columns);
    if output.no_headers {
        table.without_headers();
    }
    for record in items {
        table.add_row(columns.iter().map(|column| kind.cell(record, column, wide)));
    }
    output::write_table(out, &table)
}

/// Prints a job's attempts (the ledger) under its table; structured output already holds them.
pub fn print_attempts(
    out: &mut (dyn Write + Send),
    output: &OutputArgs,
    job: &Value,
) -> anyhow::Result<()> {
    let Some(attempts) = job.get("attempts").and_then(Value::as_array) else {
        return Ok(());
    };
    if output.format.is_structured() || attempts.is_empty() {
        return Ok(());
    }
    let wide = output.format == OutputFormat::Wide;
    let mut columns = vec![
        "attempt",
        "started_at",
        "duration_ms",
        "outcome",
        "http_status",
        "error_class",
    ];
    if wide {
        columns.push("response_excerpt");
    }
    let mut table = output::table(&columns);
    if output.no_headers {
        table.without_headers();
    }
    for attempt in attempts {
        table.add_row(columns.iter().map(|column| match *column {
            "started_at" => time(attempt, column),
            "response_excerpt" => text(attempt, column).replace(['\n', '\r', '\t'], " "),
            _ => match text(attempt, column) {
                t if t.is_empty() => "-".to_owned(),
                t => t,
            },
        }));
    }
    writeln!(out)?;
    output::write_table(out, &table)
}

/// Prints the outcome of an action: the record as JSON or YAML, else `message`.
pub fn print_action(
    out: &mut (dyn Write + Send),
    output: &OutputArgs,
    record: &Value,
    message: &str,
) -> anyhow::Result<()> {
    if output.format.is_structured() {
        return output::write_structured(out, output.format, record);
    }
    writeln!(out, "{message}")?;
    Ok(())
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Schedule => "schedules",
            Kind::Job => "jobs",
            Kind::Dlq => "dead-letter entries",
            Kind::Audit => "audit entries",
            Kind::Calendar => "calendars",
            Kind::CalendarEntry => "calendar entries",
        }
    }
}

/// A label selector given on the command line, checked before anything is sent.
pub fn label_selector(text: &str) -> Result<LabelSelector, String> {
    text.parse()
        .map_err(|e: crate::core::labels::SelectorError| e.to_string())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Probe {
        #[command(flatten)]
        server: ServerArgs,
    }

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let args = Probe::try_parse_from(["probe", "--token", "tok-not-for-logs"]).unwrap();
        let shown = format!("{args:?}");
        assert!(!shown.contains("tok-not-for-logs"), "{shown}");
        assert_eq!(
            args.server.token.as_ref().map(Secret::expose),
            Some("tok-not-for-logs")
        );
    }
}
