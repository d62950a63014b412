//! `sentin8-cron schedules ...`: manage one environment's schedules through a running
//! service's API (`--server`, `--token`), as `kubectl get|apply` manage their resources.

pub mod apply;
pub mod bulk;
pub mod describe;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Map, Value, json};

use super::enroll::source::read_input;
use super::output::OutputArgs;
use super::remote::{self, Kind, Paging, ServerArgs, env_query, text};
use super::{InvalidInput, UsageError};
use crate::client::ApiClient;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::DeclFormat;
use crate::core::model::{EnvId, ScheduleId};

/// Manage schedules through a running service's API.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  export SENTIN8_CRON_SERVER=http://127.0.0.1:8080 SENTIN8_CRON_API_TOKEN=...
  sentin8-cron schedules list --env $ENV
  sentin8-cron schedules get $ID --env $ENV -o yaml
  sentin8-cron schedules create --env $ENV --domain billing --type billing.nightly \\
      --cron '0 2 * * *' --tz Europe/London --base-url https://billing.internal
  sentin8-cron schedules apply -f schedules.yaml --env $ENV --domain billing \\
      --base-url https://billing.internal --dry-run
  sentin8-cron schedules pause $ID --env $ENV")]
pub struct Args {
    #[command(subcommand)]
    pub command: SchedulesCommand,
}

/// The environment and server every schedules command needs.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// The environment the schedules belong to.
    #[arg(long, env = crate::cmd::remote::ENV_VAR, value_name = "ENV_ID")]
    pub env: EnvId,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One schedule of an environment.
#[derive(Debug, Clone, clap::Args)]
pub struct One {
    /// The schedule's id.
    #[arg(value_name = "ID")]
    pub id: ScheduleId,
    #[command(flatten)]
    pub target: Target,
}

/// Timing, payload and target fields given as flags (create and patch).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Schedule")]
pub struct Fields {
    /// A cron expression of 5 fields (or 6, a second first), e.g. "0 2 * * *" (quote it), or
    /// an interval "@every 90s".
    #[arg(long, value_name = "EXPR", conflicts_with_all = ["run_at", "every"])]
    pub cron: Option<String>,
    /// Repeat on an interval of whole seconds, at least 1s (90s, 15m, 1h), anchored to the
    /// Unix epoch: sent as the expression "@every 90s".
    #[arg(long, value_name = "DURATION", conflicts_with = "run_at")]
    pub every: Option<String>,
    /// With --every: how far past each multiple of the interval it fires (15s).
    #[arg(long, value_name = "DURATION", requires = "every")]
    pub phase: Option<String>,
    /// The RFC 3339 instant of a one-shot schedule.
    #[arg(long, value_name = "RFC3339")]
    pub run_at: Option<String>,
    /// IANA time zone of a cron schedule [server default: UTC].
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// The payload sent with every call: a JSON object.
    #[arg(long, value_name = "JSON", value_parser = json_object)]
    pub payload: Option<Value>,
    /// Retries of a failed call before the job lands in the dead-letter queue.
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// What a fixed-time schedule does in a spring-forward gap.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub on_dst_gap: Option<OnDstGap>,
    /// What a fixed-time schedule does when its wall time occurs twice.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub on_dst_repeat: Option<OnDstRepeat>,
    /// The owning service's base URL (target_config.baseUrl).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// What an occurrence due while a job is open does: skip, buffer_one, buffer_all,
    /// allow_all or cancel_other.
    #[arg(long, value_name = "POLICY", help_heading = "Policies")]
    pub overlap: Option<String>,
    /// How late the latest missed occurrence may still run, with its unit, e.g. 15m [server
    /// default: 1h].
    #[arg(long, value_name = "DURATION", help_heading = "Policies", value_parser = with_unit)]
    pub catchup_window: Option<String>,
    /// Spread each call over this much past its instant, with its unit, e.g. 30s.
    #[arg(long, value_name = "DURATION", help_heading = "Policies", value_parser = with_unit)]
    pub max_jitter: Option<String>,
    /// No occurrence before this RFC 3339 instant; `none` removes the bound.
    #[arg(long, value_name = "RFC3339|none", help_heading = "Policies", value_parser = text_or_none)]
    pub start_at: Option<Value>,
    /// No occurrence after this RFC 3339 instant, then the schedule completes; `none` removes
    /// the bound.
    #[arg(long, value_name = "RFC3339|none", help_heading = "Policies", value_parser = text_or_none)]
    pub end_at: Option<Value>,
    /// Pause the schedule when one of its jobs lands in the dead-letter queue
    /// (`--pause-on-failure` alone means true).
    #[arg(long, value_name = "BOOL", help_heading = "Policies", num_args = 0..=1, default_missing_value = "true")]
    pub pause_on_failure: Option<bool>,
    /// Fires left before the schedule completes; `none` for no limit.
    #[arg(long, value_name = "N|none", help_heading = "Policies", value_parser = count_or_none)]
    pub remaining_runs: Option<Value>,
    /// Once the schedule has completed and its last job has ended: keep it (default) or
    /// delete it (a one-shot, or a schedule with an end or a run limit).
    #[arg(long, value_name = "keep|delete", help_heading = "Policies", value_parser = ["keep", "delete"])]
    pub after_completion: Option<String>,
    /// A label, KEY=VALUE (repeat for more); on patch, KEY- removes one and labels not named
    /// are kept.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label_change)]
    pub labels: Vec<(String, Value)>,
    /// What it does not run on: a date, FIRST..LAST, a cron-like spec or a calendar's name
    /// (repeat for more; a patch replaces the list, `--exclude none` empties it).
    #[arg(
        long = "exclude",
        value_name = "SPEC|CALENDAR",
        help_heading = "Policies"
    )]
    pub exclude: Vec<String>,
}

/// `KEY=VALUE` sets a label, `KEY-` removes it (kubectl's spelling); the server checks the
/// label rules.
fn label_change(text: &str) -> Result<(String, Value), String> {
    if let Some((key, value)) = text.split_once('=') {
        return Ok((key.trim().to_owned(), Value::from(value.trim())));
    }
    match text.strip_suffix('-') {
        Some(key) if !key.is_empty() => Ok((key.to_owned(), Value::Null)),
        _ => Err("must be KEY=VALUE (or KEY- to remove a label on patch)".to_owned()),
    }
}

/// `none` (or `null`): the JSON null that removes a bound.
fn is_none_word(text: &str) -> bool {
    text.eq_ignore_ascii_case("none") || text.eq_ignore_ascii_case("null")
}

fn text_or_none(text: &str) -> Result<Value, String> {
    Ok(if is_none_word(text) {
        Value::Null
    } else {
        Value::from(text)
    })
}

fn count_or_none(text: &str) -> Result<Value, String> {
    if is_none_word(text) {
        return Ok(Value::Null);
    }
    text.parse::<u32>()
        .map(Value::from)
        .map_err(|_| "must be a whole number of runs, or none".to_owned())
}

/// A duration must name its unit: a bare `90` could mean seconds or minutes.
fn with_unit(text: &str) -> Result<String, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "give a unit: {trimmed}s, {trimmed}m, {trimmed}h or {trimmed}d (a bare number could mean either)"
        ));
    }
    Ok(text.to_owned())
}

fn json_object(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("must be a JSON object, e.g. '{\"report\": \"nightly\"}'".to_owned()),
        Err(err) => Err(format!("not JSON: {err}")),
    }
}

impl Fields {
    /// The fields given, as API request fields.
    fn body(&self) -> Map<String, Value> {
        let mut body = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(value) = value {
                body.insert(name.to_owned(), value);
            }
        };
        put("cron", self.cron.clone().map(Value::from));
        if let Some(every) = &self.every {
            let expression = match &self.phase {
                Some(phase) => format!("@every {every} phase {phase}"),
                None => format!("@every {every}"),
            };
            put("cron", Some(Value::from(expression)));
        }
        put("run_at", self.run_at.clone().map(Value::from));
        put("timezone", self.tz.clone().map(Value::from));
        put("payload", self.payload.clone());
        put("max_retries", self.max_retries.map(Value::from));
        put("on_dst_gap", self.on_dst_gap.map(|p| json!(p)));
        put("on_dst_repeat", self.on_dst_repeat.map(|p| json!(p)));
        put(
            "target_config",
            self.base_url.clone().map(|url| json!({ "baseUrl": url })),
        );
        put("overlap", self.overlap.clone().map(Value::from));
        put(
            "catchup_window",
            self.catchup_window.clone().map(Value::from),
        );
        put("max_jitter", self.max_jitter.clone().map(Value::from));
        put("start_at", self.start_at.clone());
        put("end_at", self.end_at.clone());
        put("pause_on_failure", self.pause_on_failure.map(Value::from));
        put("remaining_runs", self.remaining_runs.clone());
        put(
            "after_completion",
            self.after_completion.clone().map(Value::from),
        );
        if !self.labels.is_empty() {
            body.insert(
                "labels".to_owned(),
                Value::Object(self.labels.iter().cloned().collect()),
            );
        }
        if !self.exclude.is_empty() {
            let none = matches!(self.exclude.as_slice(), [one] if is_none_word(one));
            let list = if none {
                Vec::new()
            } else {
                self.exclude.clone()
            };
            body.insert("exclude".to_owned(), Value::from(list));
        }
        body
    }
}

#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// List an environment's schedules (deleted ones left out), oldest first.
    #[command(after_help = "Examples:
  sentin8-cron schedules list --env $ENV --domain billing
  sentin8-cron schedules list --env $ENV --status paused -o json
  sentin8-cron schedules list --env $ENV -l 'team=billing,tier in (gold,silver)'
  sentin8-cron schedules list --env $ENV --no-headers | awk '{print $1}'")]
    List {
        /// Only this domain's schedules.
        #[arg(long)]
        domain: Option<String>,
        /// Only schedules whose labels match (`team=billing`, `tier in (a,b)`, `!canary`, ...).
        #[arg(short = 'l', long, value_name = "SELECTOR")]
        selector: Option<String>,
        /// Only schedules in this status (active, paused, completed).
        #[arg(long)]
        status: Option<String>,
        /// At most this many schedules (pages are followed).
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
        #[command(flatten)]
        paging: Paging,
        #[command(flatten)]
        target: Target,
    },
    /// Show one schedule.
    #[command(after_help = "Example:\n  sentin8-cron schedules get $ID --env $ENV -o wide")]
    Get(One),
    /// One schedule at a glance: its pause, the open job, the recent jobs with their outcomes,
    /// the next calls (with their jitter), and its jobs of the last 7 days counted (succeeded,
    /// failed, skipped, missed, buffered).
    #[command(after_help = "Example:\n  sentin8-cron schedules describe $ID --env $ENV")]
    Describe(One),
    /// Create a schedule from flags, or from an API request document (-f FILE, - for stdin).
    #[command(after_help = "Examples:
  sentin8-cron schedules create --env $ENV --domain billing --type billing.nightly \\
      --cron '0 2 * * *' --tz Europe/London --payload '{\"report\":\"nightly\"}' \\
      --base-url https://billing.internal
  echo '{\"domain\":\"billing\",\"schedule_type\":\"billing.once\",\"run_at\":\"2030-01-01T00:00:00Z\",
        \"target_config\":{\"baseUrl\":\"https://billing.internal\"}}' |
    sentin8-cron schedules create --env $ENV -f -")]
    Create {
        /// A JSON or YAML document with the API's create request; - reads standard input.
        /// Flags given too override its fields.
        #[arg(short = 'f', long, value_name = "PATH")]
        file: Option<PathBuf>,
        /// The owning service's domain.
        #[arg(long, required_unless_present = "file")]
        domain: Option<String>,
        /// The schedule's type, unique in its domain.
        #[arg(
            long = "type",
            value_name = "SCHEDULE_TYPE",
            required_unless_present = "file"
        )]
        schedule_type: Option<String>,
        #[command(flatten)]
        fields: Fields,
        #[command(flatten)]
        target: Target,
    },
    /// Make a domain's schedules match a declaration document (the format `enroll` reads),
    /// through the API: shows the same plan as `enroll`, then creates, updates and (with
    /// --prune) deletes.
    Apply(apply::Args),
    /// Pause, resume, trigger or delete every schedule a label selector matches, in one
    /// transaction (at most 1,000); asks before acting on more than 10.
    Bulk(bulk::Args),
    /// Change some fields of a schedule, from flags or a JSON/YAML patch document (-f).
    #[command(after_help = "Examples:
  sentin8-cron schedules patch $ID --env $ENV --cron '30 2 * * *'
  echo 'max_retries: 5' | sentin8-cron schedules patch $ID --env $ENV -f -")]
    Patch {
        /// The schedule's id.
        #[arg(value_name = "ID")]
        id: ScheduleId,
        /// A JSON or YAML document with the fields to change; - reads standard input.
        #[arg(short = 'f', long, value_name = "PATH")]
        file: Option<PathBuf>,
        #[command(flatten)]
        fields: Fields,
        #[command(flatten)]
        target: Target,
    },
    /// Pause a schedule: it is kept but does not fire until resumed.
    #[command(
        after_help = "Example:\n  sentin8-cron schedules pause $ID --env $ENV --note 'billing freeze until the 3rd'"
    )]
    Pause {
        #[command(flatten)]
        one: One,
        /// Why it is paused: shown with the schedule while it is paused, and kept in the audit
        /// journal.
        #[arg(long, value_name = "TEXT")]
        note: Option<String>,
    },
    /// Resume a paused schedule; its next fire is computed from now.
    #[command(after_help = "Example:\n  sentin8-cron schedules resume $ID --env $ENV")]
    Resume(One),
    /// Run a schedule now (a fresh job, due now), without moving its next fire.
    #[command(after_help = "Example:\n  sentin8-cron schedules trigger $ID --env $ENV -o json")]
    Trigger(One),
    /// Delete a schedule (kept, soft-deleted, so its jobs and audit entries still resolve).
    #[command(after_help = "Example:\n  sentin8-cron schedules delete $ID --env $ENV")]
    Delete(One),
    /// Run a past range of a cron schedule's occurrences (at most 1,000), each as a job of its
    /// own recorded as a backfill: one at a time, or up to 5 at once beside its other jobs for
    /// an allow_all schedule, unless --overlap names another policy.
    #[command(after_help = "Example:
  sentin8-cron schedules backfill $ID --env $ENV \\
    --from 2030-01-01T00:00:00Z --to 2030-01-01T06:00:00Z --overlap buffer_all")]
    Backfill {
        /// The schedule's id.
        #[arg(value_name = "ID")]
        id: ScheduleId,
        /// The first instant of the range (RFC 3339, inclusive).
        #[arg(long, value_name = "RFC3339")]
        from: String,
        /// The last instant of the range (RFC 3339, inclusive), not after now.
        #[arg(long, value_name = "RFC3339")]
        to: String,
        /// What the backfilled occurrences run under: buffer_all (one after another), allow_all
        /// (up to 5 at once), skip (the first runs, the rest are skipped) or buffer_one (the
        /// first runs, one more waits) [default: allow_all for an allow_all schedule, else
        /// buffer_all].
        #[arg(long, value_name = "POLICY")]
        overlap: Option<String>,
        #[command(flatten)]
        target: Target,
    },
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    match args.command {
        SchedulesCommand::List {
            domain,
            selector,
            status,
            limit,
            paging,
            target,
        } => {
            let client = target.server.require()?;
            let mut query = env_query(target.env);
            query.extend(domain.map(|d| ("domain", d)));
            query.extend(selector.map(|s| ("label_selector", s)));
            query.extend(status.map(|s| ("status", s)));
            let wanted = paging.limit(limit);
            let page = client
                .list("/v1/schedules", &query, wanted, paging.cursor)
                .await?;
            remote::print_list(out, &target.output, Kind::Schedule, &page)?;
        }
        SchedulesCommand::Get(one) => {
            let client = one.target.server.require()?;
            let record = client
                .get(&path(one.id, ""), &env_query(one.target.env))
                .await?;
            remote::print_one(out, &one.target.output, Kind::Schedule, &record)?;
        }
        SchedulesCommand::Describe(one) => {
            let client = one.target.server.require()?;
            let described = client
                .get(&path(one.id, "/describe"), &env_query(one.target.env))
                .await?;
            describe::print(out, &one.target.output, &described)?;
        }
        SchedulesCommand::Create {
            file,
            domain,
            schedule_type,
            fields,
            target,
        } => {
            let client = target.server.require()?;
            let mut body = match &file {
                Some(path) => document_object(path)?,
                None => Map::new(),
            };
            body.extend(fields.body());
            if let Some(domain) = domain {
                body.insert("domain".into(), domain.into());
            }
            if let Some(schedule_type) = schedule_type {
                body.insert("schedule_type".into(), schedule_type.into());
            }
            body.insert("target_env_id".into(), target.env.to_string().into());
            let record = client
                .call(
                    Method::POST,
                    "/v1/schedules",
                    &[],
                    Some(&Value::Object(body)),
                )
                .await?;
            let message = format!(
                "created schedule {} ({}), next run {}",
                text(&record, "id"),
                text(&record, "schedule_type"),
                remote::time(&record, "next_run_at")
            );
            remote::print_action(out, &target.output, &record, &message)?;
        }
        SchedulesCommand::Apply(args) => return apply::run(args, out).await,
        SchedulesCommand::Bulk(args) => return bulk::run(args, out).await,
        SchedulesCommand::Patch {
            id,
            file,
            fields,
            target,
        } => {
            let client = target.server.require()?;
            let mut body = match &file {
                Some(path) => document_object(path)?,
                None => Map::new(),
            };
            body.extend(fields.body());
            if body.is_empty() {
                return Err(UsageError(
                    "nothing to change: give a field flag (see --help) or -f FILE".into(),
                )
                .into());
            }
            let record = client
                .call(
                    Method::PATCH,
                    &path(id, ""),
                    &env_query(target.env),
                    Some(&Value::Object(body)),
                )
                .await?;
            let message = format!(
                "updated schedule {id} ({}), next run {}",
                text(&record, "schedule_type"),
                remote::time(&record, "next_run_at")
            );
            remote::print_action(out, &target.output, &record, &message)?;
        }
        SchedulesCommand::Pause { one, note } => {
            let body = note.map(|note| json!({ "note": note }));
            action(out, one, Method::POST, "/pause", "paused", body).await?
        }
        SchedulesCommand::Resume(one) => {
            action(out, one, Method::POST, "/resume", "resumed", None).await?
        }
        SchedulesCommand::Trigger(one) => {
            let client = one.target.server.require()?;
            let job = client
                .call(
                    Method::POST,
                    &path(one.id, "/trigger"),
                    &env_query(one.target.env),
                    None,
                )
                .await?;
            let message = format!(
                "triggered schedule {}: job {} is due now",
                one.id,
                text(&job, "id")
            );
            remote::print_action(out, &one.target.output, &job, &message)?;
        }
        SchedulesCommand::Delete(one) => {
            action(out, one, Method::DELETE, "", "deleted", None).await?
        }
        SchedulesCommand::Backfill {
            id,
            from,
            to,
            overlap,
            target,
        } => {
            let client = target.server.require()?;
            let mut body = json!({ "from": from, "to": to });
            if let Some(overlap) = overlap {
                body["overlap"] = json!(overlap);
            }
            let answer = client
                .call(
                    Method::POST,
                    &path(id, "/backfill"),
                    &env_query(target.env),
                    Some(&body),
                )
                .await?;
            let count = answer["occurrences"].as_u64().unwrap_or(0);
            let started = answer["started"].as_u64().unwrap_or(0);
            let skipped = answer["skipped"].as_u64().unwrap_or(0);
            let overlap = answer["overlap"].as_str().unwrap_or("");
            let message = format!(
                "backfilled schedule {id}: {count} occurrence(s) from {from} to {to} under \
                 {overlap}; {started} started, {skipped} skipped, the rest wait their turn"
            );
            remote::print_action(out, &target.output, &answer, &message)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn path(id: ScheduleId, suffix: &str) -> String {
    format!("/v1/schedules/{id}{suffix}")
}

async fn action(
    out: &mut (dyn Write + Send),
    one: One,
    method: Method,
    suffix: &str,
    done: &str,
    body: Option<Value>,
) -> anyhow::Result<()> {
    let client: ApiClient = one.target.server.require()?;
    let record = client
        .call(
            method,
            &path(one.id, suffix),
            &env_query(one.target.env),
            body.as_ref(),
        )
        .await?;
    let message = format!(
        "{done} schedule {} ({}); status {}",
        one.id,
        text(&record, "schedule_type"),
        text(&record, "status")
    );
    remote::print_action(out, &one.target.output, &record, &message)
}

/// A JSON or YAML document that must be an object (a request body).
fn document_object(path: &std::path::Path) -> anyhow::Result<Map<String, Value>> {
    let document = read_input(path)?;
    let parsed = match document.format {
        DeclFormat::Json => serde_json::from_str(&document.text)
            .map_err(|err| format!("{} is not valid JSON: {err}", document.origin)),
        DeclFormat::Yaml => serde_saphyr::from_str(&document.text)
            .map_err(|err| format!("{} is not valid YAML: {err}", document.origin)),
    };
    match parsed.map_err(InvalidInput)? {
        Value::Object(map) => Ok(map),
        _ => Err(InvalidInput(format!("{} must hold an object of fields", document.origin)).into()),
    }
}
