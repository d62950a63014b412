//! Schedule declarations: the YAML or JSON file a service keeps in its repository to declare
//! its schedules, and the validated form the engine works with.
//!
//! ```yaml
//! schedules:
//!   - schedule_type: invoice.monthly-run     # 1-128 of A-Z a-z 0-9 _ - . :
//!     cron: "0 6 1 * *"                      # or every, or run_at: exactly one
//!     timezone: Europe/Berlin                # IANA name, default UTC, cron only
//!     on_dst_gap: shift                      # shift | skip, cron only
//!     on_dst_repeat: once                    # once | twice, cron only
//!     payload: { ledger: eu }                # JSON object, at most 64 KiB serialized
//!     max_retries: 5                         # 0-100, default 3
//!     overlap: skip                          # skip | buffer_one | allow_all, cron only
//!     catchup_window: 1h                     # 1s-366d, default 1h
//!     max_jitter: 30s                        # at most the shortest interval, default 0s
//!     start_at: 2031-01-01T00:00:00Z         # no occurrence before, cron only
//!     end_at: 2032-01-01T00:00:00Z           # none after; then completed, cron only
//!     pause_on_failure: false                # a dead-lettered job pauses it, cron only
//!     remaining_runs: 12                     # fires left, then completed, cron only
//!     after_completion: keep                 # keep | delete, once completed and done
//!     labels: { team: billing, tier: gold }  # key=value pairs to select it by
//!     exclude: [2031-12-25, holidays]        # dates, a..b ranges, cron-like specs, calendars
//!   - schedule_type: cache.refresh
//!     every: 90s                             # >= 1s, whole seconds, from the Unix epoch
//!     phase: 15s                             # shorter than every, default 0s
//!   - schedule_type: migration.cutover
//!     run_at: 2031-01-01T00:00:00Z           # RFC 3339, must be in the future
//! ```
//!
//! Beside `schedules`, a file may declare `calendars` (named lists of exclusions its schedules
//! name), read by [`declared_calendars`] (`decl/calendars.rs`).
//!
//! Reading a file has two steps. [`parse_declarations`] checks syntax and structure (unknown
//! keys, wrong value types); [`validate_declarations`] checks meaning (expressions, zones,
//! limits, times in the future, duplicate types) and yields [`ScheduleSpec`]s. Both report
//! every problem of every entry, named by field, rather than stopping at the first.
//! [`load_declarations`] runs both and merges the reports.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::calendar::Exclude;
use super::cron::{OnDstGap, OnDstRepeat};
use super::labels::Labels;
use super::model::ScheduleId;
use super::policies::{AfterCompletion, IntervalMemo, Occurrences, Overlap, Policies};

/// Largest accepted payload, serialized as compact JSON.
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// Largest accepted `max_retries`.
pub const MAX_RETRIES_LIMIT: u32 = 100;
/// `max_retries` when a declaration leaves it out.
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Longest accepted `schedule_type`.
pub const MAX_SCHEDULE_TYPE_LEN: usize = 128;

/// A declaration file: a list of schedules.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclarationFile {
    pub schedules: Vec<ScheduleDecl>,
}

/// One declared schedule as written, before validation. The field names are the ones the
/// HTTP API uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleDecl {
    pub schedule_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// An interval (`90s`), instead of `cron` or `run_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// How far past each multiple of `every` since the epoch (`15s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dst_gap: Option<OnDstGap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dst_repeat: Option<OnDstRepeat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catchup_window: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_jitter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_on_failure: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_runs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_completion: Option<AfterCompletion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Vec<String>>,
}

/// A declaration's fields (and its target's), in the order changes to them are reported (by
/// `enroll`'s plan, and in a `schedule.updated` event's `changes`).
pub const DECLARED_FIELDS: &[&str] = &[
    "cron",
    "run_at",
    "timezone",
    "on_dst_gap",
    "on_dst_repeat",
    "payload",
    "max_retries",
    "target_config",
    "overlap",
    "catchup_window",
    "max_jitter",
    "start_at",
    "end_at",
    "pause_on_failure",
    "after_completion",
    "labels",
    "exclude",
];

pub use crate::core::timing::{CronTiming, Timing};
pub use calendars::{DeclaredCalendar, declared_calendars};
pub use errors::{DeclError, EntryError, FieldError, Position};
pub use policy::PolicyDecl;

/// A validated schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSpec {
    pub schedule_type: String,
    pub timing: Timing,
    pub payload: Map<String, Value>,
    pub max_retries: u32,
    pub policies: Policies,
    /// Fires left before the schedule completes; `None` for no limit.
    pub remaining_runs: Option<u32>,
    pub labels: Labels,
    /// The days and times it does not run (a one-shot has none).
    pub exclude: Exclude,
}

impl ScheduleSpec {
    /// The first call strictly after `now` of the schedule `id` (its jitter depends on it),
    /// if any.
    pub fn first_fire_after(&self, now: DateTime<Utc>, id: ScheduleId) -> Option<DateTime<Utc>> {
        Occurrences {
            timing: &self.timing,
            policies: &self.policies,
            seed: id,
        }
        .first_after(now)
        .ok()
        .flatten()
    }

    /// The first occurrence strictly after `now`, before any jitter (what a plan shows of a
    /// schedule not created yet, whose id seeds its jitter).
    pub fn first_occurrence_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        Occurrences {
            timing: &self.timing,
            policies: &self.policies,
            seed: ScheduleId(uuid::Uuid::nil()),
        }
        .occurrence_after(now)
        .ok()
        .flatten()
    }

    /// The cron expression, for cron schedules.
    pub fn cron_expression(&self) -> Option<&str> {
        self.timing.cron_expression()
    }

    /// The zone name, for cron schedules.
    pub fn timezone(&self) -> Option<&str> {
        self.timing.timezone()
    }

    /// The gap policy, for cron schedules.
    pub fn on_dst_gap(&self) -> Option<OnDstGap> {
        self.timing.on_dst_gap()
    }

    /// The repeat policy, for cron schedules.
    pub fn on_dst_repeat(&self) -> Option<OnDstRepeat> {
        self.timing.on_dst_repeat()
    }

    /// The run time, for one-shot schedules.
    pub fn run_at(&self) -> Option<DateTime<Utc>> {
        self.timing.run_at()
    }
}

/// The syntax of a declaration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclFormat {
    Yaml,
    Json,
}

impl DeclFormat {
    /// By extension (`.yaml`, `.yml`, `.json`); otherwise JSON when the text starts with `{`,
    /// YAML else.
    pub fn detect(path: Option<&Path>, text: &str) -> DeclFormat {
        let extension = path
            .and_then(Path::extension)
            .and_then(|extension| extension.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("json") => DeclFormat::Json,
            Some("yaml" | "yml") => DeclFormat::Yaml,
            _ if text.trim_start().starts_with('{') => DeclFormat::Json,
            _ => DeclFormat::Yaml,
        }
    }
}

/// Parses a declaration file, reporting syntax errors and every structural problem of every
/// entry (unknown keys, wrong value types, missing `schedule_type`).
pub fn parse_declarations(text: &str, format: DeclFormat) -> Result<DeclarationFile, DeclError> {
    let entries = parse_entries(text, format)?;
    let mut schedules = Vec::with_capacity(entries.len());
    let mut errors = Vec::new();
    for (index, entry) in entries.into_iter().enumerate() {
        if entry.errors.is_empty() {
            schedules.push(entry.decl);
        } else {
            errors.push(EntryError {
                errors: entry.errors,
                ..EntryError::new(index, entry.location, entry.schedule_type)
            });
        }
    }
    if errors.is_empty() {
        Ok(DeclarationFile { schedules })
    } else {
        Err(DeclError::Entries(errors))
    }
}

/// Validates every entry of a parsed file; duplicate `schedule_type`s are errors.
pub fn validate_declarations(
    file: &DeclarationFile,
    now: DateTime<Utc>,
) -> Result<Vec<ScheduleSpec>, Vec<EntryError>> {
    let entries = file
        .schedules
        .iter()
        .map(|decl| ParsedEntry {
            decl: decl.clone(),
            schedule_type: Some(decl.schedule_type.clone()),
            errors: Vec::new(),
            location: None,
        })
        .collect();
    let (specs, errors) = validate_entries(entries, now);
    if errors.is_empty() {
        Ok(specs)
    } else {
        Err(errors)
    }
}

/// Parses and validates in one go, reporting structural and semantic problems of all entries
/// together.
pub fn load_declarations(
    text: &str,
    format: DeclFormat,
    now: DateTime<Utc>,
) -> Result<Vec<ScheduleSpec>, DeclError> {
    let (specs, errors) = check_declarations(text, format, now)?;
    if errors.is_empty() {
        Ok(specs)
    } else {
        Err(DeclError::Entries(errors))
    }
}

/// Like [`load_declarations`], but returns the valid entries next to the problems of the
/// others. `Err` only for problems of the file as a whole (syntax, top-level shape).
pub fn check_declarations(
    text: &str,
    format: DeclFormat,
    now: DateTime<Utc>,
) -> Result<(Vec<ScheduleSpec>, Vec<EntryError>), DeclError> {
    Ok(validate_entries(parse_entries(text, format)?, now))
}

impl ScheduleDecl {
    /// Checks every field and collects all problems.
    pub fn validate(&self, now: DateTime<Utc>) -> Result<ScheduleSpec, Vec<FieldError>> {
        self.validate_with(now, &IntervalMemo::default())
    }

    /// [`ScheduleDecl::validate`], remembering interval scans in `intervals` for the next
    /// declaration checked beside it.
    pub fn validate_with(
        &self,
        now: DateTime<Utc>,
        intervals: &IntervalMemo,
    ) -> Result<ScheduleSpec, Vec<FieldError>> {
        let mut errors = Vec::new();

        if !is_valid_schedule_type(&self.schedule_type) {
            errors.push(FieldError::new(
                "schedule_type",
                format!(
                    "must be 1-{MAX_SCHEDULE_TYPE_LEN} characters of ASCII letters, digits, \
                     '_', '-', '.' and ':'"
                ),
            ));
        }
        let payload = match &self.payload {
            None => Some(Map::new()),
            Some(value) => validate_payload(value).map_err(|e| errors.push(e)).ok(),
        };
        let labels = match &self.labels {
            None => Some(Labels::default()),
            Some(map) => Labels::validate("labels", map.clone())
                .map_err(|mut problems| errors.append(&mut problems))
                .ok(),
        };
        let exclude = self.exclude_for(self.run_at.is_some(), &mut errors);
        let max_retries = self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
        if let Err(e) = validate_max_retries(max_retries) {
            errors.push(e);
        }
        let timing = self
            .timing_decl()
            .validate(now)
            .map_err(|mut problems| errors.append(&mut problems))
            .ok();
        let policies = timing.as_ref().and_then(|timing| {
            self.policy_decl()
                .validate(&Policies::default(), None, timing, now, intervals)
                .map_err(|mut problems| errors.append(&mut problems))
                .ok()
        });

        match (timing, payload, policies, labels, exclude) {
            (
                Some(timing),
                Some(payload),
                Some((policies, remaining_runs)),
                Some(labels),
                Some(exclude),
            ) if errors.is_empty() => Ok(ScheduleSpec {
                schedule_type: self.schedule_type.clone(),
                timing,
                payload,
                max_retries,
                policies,
                remaining_runs,
                labels,
                exclude,
            }),
            _ => Err(errors),
        }
    }

    /// The exclusions, checked (a one-shot takes none: it has one instant, not days).
    fn exclude_for(&self, once: bool, errors: &mut Vec<FieldError>) -> Option<Exclude> {
        match &self.exclude {
            None => Some(Exclude::default()),
            Some(list) if once && !list.is_empty() => {
                errors.push(FieldError::new(
                    "exclude",
                    "only a repeating schedule (cron or every) has exclusions",
                ));
                None
            }
            Some(list) => Exclude::validate("exclude", list)
                .map_err(|mut problems| errors.append(&mut problems))
                .ok(),
        }
    }

    /// The policy fields of this declaration.
    pub fn policy_decl(&self) -> PolicyDecl {
        PolicyDecl {
            overlap: self.overlap,
            catchup_window: self.catchup_window.clone(),
            max_jitter: self.max_jitter.clone(),
            start_at: self.start_at.clone().map(Some),
            end_at: self.end_at.clone().map(Some),
            pause_on_failure: self.pause_on_failure,
            remaining_runs: self.remaining_runs.map(Some),
            after_completion: self.after_completion,
        }
    }

    /// The timing fields of this declaration.
    pub fn timing_decl(&self) -> TimingDecl {
        TimingDecl {
            cron: self.cron.clone(),
            every: self.every.clone(),
            phase: self.phase.clone(),
            run_at: self.run_at.clone(),
            timezone: self.timezone.clone(),
            on_dst_gap: self.on_dst_gap,
            on_dst_repeat: self.on_dst_repeat,
        }
    }
}

/// Checks a payload: a JSON object of at most [`MAX_PAYLOAD_BYTES`] serialized.
pub fn validate_payload(value: &Value) -> Result<Map<String, Value>, FieldError> {
    match value {
        Value::Object(map) => {
            let size = serde_json::to_vec(map).map_or(usize::MAX, |bytes| bytes.len());
            crate::core::storable::check_json("payload", value)?;
            if size > MAX_PAYLOAD_BYTES {
                Err(FieldError::new(
                    "payload",
                    format!(
                        "serialized size {size} bytes exceeds the limit of \
                         {MAX_PAYLOAD_BYTES} bytes"
                    ),
                ))
            } else {
                Ok(map.clone())
            }
        }
        other => Err(FieldError::new(
            "payload",
            format!("must be a JSON object, got {}", json_kind(other)),
        )),
    }
}

/// Checks `max_retries` against [`MAX_RETRIES_LIMIT`].
pub fn validate_max_retries(max_retries: u32) -> Result<u32, FieldError> {
    if max_retries > MAX_RETRIES_LIMIT {
        Err(FieldError::new(
            "max_retries",
            format!("{max_retries} is out of range 0-{MAX_RETRIES_LIMIT}"),
        ))
    } else {
        Ok(max_retries)
    }
}

/// An RFC 3339 instant of a declaration field (`run_at`, `start_at`, `end_at`), in UTC.
fn parse_instant(field: &str, text: &str) -> Result<DateTime<Utc>, FieldError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| FieldError::new(field, format!("{text:?} is not an RFC 3339 timestamp")))
}

fn is_valid_schedule_type(text: &str) -> bool {
    (1..=MAX_SCHEDULE_TYPE_LEN).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The valid specs and the problems of the other entries.
fn validate_entries(
    entries: Vec<ParsedEntry>,
    now: DateTime<Utc>,
) -> (Vec<ScheduleSpec>, Vec<EntryError>) {
    let mut specs = Vec::with_capacity(entries.len());
    let mut failures = Vec::new();
    let mut first_index_of_type: HashMap<String, usize> = HashMap::new();
    let intervals = IntervalMemo::default();
    for (index, entry) in entries.into_iter().enumerate() {
        let mut errors = entry.errors;
        let structural_fields: Vec<String> =
            errors.iter().map(|error| error.field.clone()).collect();
        let validated = entry.decl.validate_with(now, &intervals);
        if let Some(schedule_type) = &entry.schedule_type {
            match first_index_of_type.get(schedule_type) {
                Some(first) => errors.push(FieldError::new(
                    "schedule_type",
                    format!(
                        "duplicate schedule_type {schedule_type:?} (first declared as schedule #{})",
                        first + 1
                    ),
                )),
                None => {
                    first_index_of_type.insert(schedule_type.clone(), index);
                }
            }
        }
        match validated {
            Ok(spec) if errors.is_empty() => specs.push(spec),
            Ok(_) => {}
            Err(semantic) => errors.extend(
                semantic
                    .into_iter()
                    // A field that was already unreadable needs no second complaint.
                    .filter(|error| !structural_fields.contains(&error.field)),
            ),
        }
        if !errors.is_empty() {
            failures.push(EntryError {
                errors,
                ..EntryError::new(index, entry.location, entry.schedule_type)
            });
        }
    }
    (specs, failures)
}

mod calendars;
mod errors;
mod parse;
mod policy;
mod timing;

use parse::{ParsedEntry, parse_entries};
pub use timing::TimingDecl;

#[cfg(test)]
mod tests;
