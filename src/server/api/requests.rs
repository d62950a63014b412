//! The `/v1` requests' bodies and queries as they arrive: what each field accepts (the API
//! document is generated from them), before the handlers turn them into declarations.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::FieldError;
use crate::core::policies::{AfterCompletion, Overlap};
use crate::server::error::ApiError;
use crate::server::extract::ApiJson;

/// Why a schedule is paused (the body of a pause, optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// Accepted here too, for clients that cannot set the query; the query parameter is
    /// the documented place.
    #[schema(ignore)]
    pub target_env_id: Option<Uuid>,
    /// Why it is paused, shown with the schedule while it is paused (at most 500
    /// characters).
    #[schema(max_length = 500)]
    pub note: Option<String>,
}

/// `target_env_id` for requests without a body.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EnvQuery {
    /// The environment addressed (required).
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
}

/// An optional JSON body carrying `target_env_id` (for POST actions).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvBody {
    /// Accepted here too, for clients that cannot set the query; the query parameter is
    /// the documented place.
    #[schema(ignore)]
    pub target_env_id: Option<Uuid>,
}

/// The environment of a bodyless action: the query, or else a JSON body.
pub(super) fn action_env(query: EnvQuery, body: Option<ApiJson<EnvBody>>) -> Option<Uuid> {
    query
        .target_env_id
        .or_else(|| body.and_then(|ApiJson(b)| b.target_env_id))
}

/// A new schedule. The fields are those of a schedule declaration, plus where it belongs and
/// whom to call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateScheduleRequest {
    /// Accepted here too, for clients that cannot set the query; the query parameter is
    /// the documented place.
    #[schema(ignore)]
    pub target_env_id: Option<Uuid>,
    /// The owning service's name: ASCII letters, digits, `_`, `-` and `.`.
    #[schema(pattern = r"^[A-Za-z0-9_.-]{1,128}$", min_length = 1, max_length = 128)]
    pub domain: String,
    /// The schedule's name within its domain: ASCII letters, digits, `_`, `-`, `.` and `:`.
    #[schema(
        pattern = r"^[A-Za-z0-9_.:-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub schedule_type: String,
    /// A cron expression of 5 fields (or 6, a second first), an `@alias`, or an interval
    /// `@every 90s [phase 15s]`;
    /// exactly one of `cron`, `every` and `run_at`.
    pub cron: Option<String>,
    /// An interval of whole seconds, at least `1s` (`90s`, `15m`, `1h`): fires at the Unix
    /// epoch plus `phase` plus every multiple of it, whatever the time zone's clock does.
    /// Stored, and shown in `cron`, as `@every 1m30s`.
    pub every: Option<String>,
    /// With `every`: how far past each multiple it fires (`15s`, shorter than `every`;
    /// default `0s`).
    pub phase: Option<String>,
    /// RFC 3339 instant of a one-shot schedule.
    pub run_at: Option<String>,
    /// IANA time zone of a cron schedule (default UTC).
    pub timezone: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    #[schema(value_type = Option<u32>, maximum = 100)]
    pub max_retries: Option<Lenient<u32>>,
    #[schema(value_type = Option<DstGapValue>)]
    pub on_dst_gap: Option<Lenient<OnDstGap>>,
    #[schema(value_type = Option<DstRepeatValue>)]
    pub on_dst_repeat: Option<Lenient<OnDstRepeat>>,
    /// `skip` (default), `buffer_one`, `buffer_all`, `allow_all` or `cancel_other`: what an
    /// occurrence due while a job of the schedule is open does (cron only).
    #[schema(value_type = Option<OverlapValue>)]
    pub overlap: Option<Lenient<Overlap>>,
    /// How late the latest missed occurrence may still run (`1h` by default, `1s`-`366d`);
    /// older ones are recorded as skipped.
    pub catchup_window: Option<String>,
    /// Spread each call over this much past its instant (`30s`; at most the shortest interval,
    /// `1d` for a one-shot), by an offset fixed for the schedule and the occurrence.
    pub max_jitter: Option<String>,
    /// RFC 3339: no occurrence before (cron only).
    pub start_at: Option<String>,
    /// RFC 3339: no occurrence after; the schedule then completes (cron only).
    pub end_at: Option<String>,
    /// Pause the schedule when one of its jobs lands in the dead-letter queue (cron only).
    #[schema(value_type = Option<bool>)]
    pub pause_on_failure: Option<Lenient<bool>>,
    /// Fires left before the schedule completes (cron only, 1-1000000); a skipped occurrence
    /// does not count.
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub remaining_runs: Option<u32>,
    /// `keep` (default) or `delete`: once the schedule has completed and its last job has
    /// ended, delete it (a one-shot, or a cron schedule with `end_at` or `remaining_runs`).
    #[schema(value_type = Option<AfterCompletionValue>)]
    pub after_completion: Option<Lenient<AfterCompletion>>,
    /// Labels to select it by: at most 64 `key: value` pairs. A key is a name of at most 63
    /// ASCII letters, digits, `-`, `_` and `.` (beginning and ending with a letter or a
    /// digit), optionally after a DNS subdomain and `/`; a value is empty or such a name.
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub labels: Option<Lenient<BTreeMap<String, String>>>,
    /// What it does not run on, on its zone's wall clock: dates (`2026-12-25`), inclusive
    /// ranges (`2026-12-24..2026-12-26`), cron-like specs (`* * * * SAT,SUN`: every minute
    /// they name) and names of the environment's calendars; at most 100. Repeating schedules
    /// only. An excluded occurrence is recorded as skipped, naming what excluded it.
    #[schema(value_type = Option<Vec<String>>)]
    pub exclude: Option<Lenient<Vec<String>>>,
    /// Whom to call: `{"baseUrl": "https://..."}`; credentials are not allowed.
    #[schema(value_type = TargetConfigValue)]
    pub target_config: Value,
}

/// Labels to set (a string) or remove (null), by key.
pub type LabelChanges = BTreeMap<String, Option<String>>;

/// Whom a schedule calls.
// Documentation only: the server reads `target_config` as JSON and checks it itself.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TargetConfigValue {
    /// An absolute `http` or `https` URL without user info; calls go to
    /// `{baseUrl}/v1/internal/schedules/run`. Private addresses only where the egress policy
    /// allows them.
    #[schema(rename = "baseUrl", format = "uri")]
    base_url: String,
}

/// A partial update. Any declaration field, `target_config`, and `status` (`active` or
/// `paused`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchScheduleRequest {
    /// Accepted here too, for clients that cannot set the query; the query parameter is
    /// the documented place.
    #[schema(ignore)]
    pub target_env_id: Option<Uuid>,
    pub status: Option<String>,
    /// A new timing: a cron expression, an `@alias` or an interval `@every 90s [phase 15s]`.
    pub cron: Option<String>,
    pub run_at: Option<String>,
    pub timezone: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    #[schema(value_type = Option<u32>, maximum = 100)]
    pub max_retries: Option<Lenient<u32>>,
    #[schema(value_type = Option<DstGapValue>)]
    pub on_dst_gap: Option<Lenient<OnDstGap>>,
    #[schema(value_type = Option<DstRepeatValue>)]
    pub on_dst_repeat: Option<Lenient<OnDstRepeat>>,
    /// `skip`, `buffer_one`, `buffer_all`, `allow_all` or `cancel_other`: what an occurrence
    /// due while a job of the schedule is open does (cron only).
    #[schema(value_type = Option<OverlapValue>)]
    pub overlap: Option<Lenient<Overlap>>,
    /// How late the latest missed occurrence may still run (`1s`-`366d`); older ones are
    /// recorded as skipped.
    pub catchup_window: Option<String>,
    /// Spread each call over this much past its instant (`30s`, `0s` for none; at most the
    /// shortest interval). Moves the next call.
    pub max_jitter: Option<String>,
    /// RFC 3339: no occurrence before (cron only), or null to remove the bound.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub start_at: Option<Option<String>>,
    /// RFC 3339: no occurrence after (cron only), or null to remove the bound. A later end
    /// makes a completed schedule active again.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub end_at: Option<Option<String>>,
    /// Pause the schedule when one of its jobs lands in the dead-letter queue (cron only).
    #[schema(value_type = Option<bool>)]
    pub pause_on_failure: Option<Lenient<bool>>,
    /// Fires left before the schedule completes (cron only), or null for no limit. More runs
    /// make a completed schedule active again.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u32>)]
    pub remaining_runs: Option<Option<u32>>,
    /// `keep` or `delete`: once the schedule has completed and its last job has ended, delete
    /// it (a one-shot, or a cron schedule with `end_at` or `remaining_runs`).
    #[schema(value_type = Option<AfterCompletionValue>)]
    pub after_completion: Option<Lenient<AfterCompletion>>,
    #[schema(value_type = Option<TargetConfigValue>)]
    pub target_config: Option<Value>,
    /// Labels merged into the schedule's: a string sets a label, null removes it, and a label
    /// not named is kept (a JSON merge patch of the map); `"labels": null` removes them all.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<BTreeMap<String, Option<String>>>)]
    pub labels: Option<Option<Lenient<LabelChanges>>>,
    /// A new list of exclusions, replacing the schedule's (`[]` for none); the syntax of
    /// `POST /v1/schedules`.
    #[schema(value_type = Option<Vec<String>>)]
    pub exclude: Option<Lenient<Vec<String>>>,
}

/// A field that may be given as null (to clear it), told apart from one left out.
/// A field read leniently: a value of the wrong type or an unknown word becomes a field error
/// reported beside every other, instead of refusing the whole body at the first (serde stops
/// there, and its message carries a position in the text).
#[derive(Debug)]
pub struct Lenient<T>(Result<T, String>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(Lenient(
            serde_json::from_value(value).map_err(|err| err.to_string()),
        ))
    }
}

/// The value of a lenient field, or its error noted under `field`.
pub(super) fn lenient<T>(
    value: Option<Lenient<T>>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<T> {
    match value?.0 {
        Ok(value) => Some(value),
        Err(message) => {
            errors.push(FieldError::new(field, message));
            None
        }
    }
}

fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Filters for listing schedules.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ScheduleListQuery {
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    pub domain: Option<String>,
    /// `active`, `paused`, `completed` or `deleted` (deleted schedules are listed only when
    /// asked for by this filter).
    #[param(value_type = Option<ScheduleStatusValue>)]
    pub status: Option<String>,
    /// Only schedules whose type contains this text (ASCII case-insensitively).
    pub type_contains: Option<String>,
    /// Also list deleted schedules (default false), as `GET /v1/schedules/{id}` reads one.
    pub include_deleted: Option<bool>,
    /// Only schedules whose labels match, in Kubernetes' syntax: `team=billing`,
    /// `tier in (gold,silver)`, `tier notin (bronze)`, `team!=ops`, `canary`, `!canary`,
    /// joined by commas.
    pub label_selector: Option<String>,
    /// A page's `next_cursor`.
    #[param(format = Uuid)]
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// `target_env_id`, and whether a deleted schedule may be read.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ScheduleGetQuery {
    /// The environment addressed (required).
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    /// Also answer for a deleted schedule (default false: 404).
    pub include_deleted: Option<bool>,
}

/// Filters for listing jobs.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct JobListQuery {
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    pub schedule_id: Option<Uuid>,
    #[param(value_type = Option<JobStatusValue>)]
    pub status: Option<String>,
    /// Only jobs of schedules whose labels match (`team=billing`; the syntax of
    /// `GET /v1/schedules`).
    pub label_selector: Option<String>,
    /// A page's `next_cursor`.
    #[param(format = Uuid)]
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// Filters for listing dead-letter entries.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DlqListQuery {
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    pub domain: Option<String>,
    /// Only this schedule's entries.
    pub schedule_id: Option<Uuid>,
    /// Only the entry of this job (a job lands at most once).
    pub job_id: Option<Uuid>,
    /// Only entries of schedules whose labels match (`team=billing`; the syntax of
    /// `GET /v1/schedules`).
    pub label_selector: Option<String>,
    /// A page's `next_cursor`.
    #[param(format = Uuid)]
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

pub(super) fn parse_status<T: std::str::FromStr>(
    field: &str,
    value: Option<&str>,
) -> Result<Option<T>, ApiError>
where
    T::Err: std::fmt::Display,
{
    value
        .map(|v| {
            v.parse::<T>()
                .map_err(|e| ApiError::field(field, e.to_string()))
        })
        .transpose()
}

// The values of the enumerated fields, for the API document alone: the requests read the
// core's types, and a test holds these equal to them.

/// `on_dst_gap`: what a fixed-time schedule does when its wall time falls in a spring-forward
/// gap.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum DstGapValue {
    Shift,
    Skip,
}

/// `on_dst_repeat`: what a fixed-time schedule does when its wall time occurs twice.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum DstRepeatValue {
    Once,
    Twice,
}

/// A schedule's status, as a filter.
// Documentation only: the server reads the text.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum ScheduleStatusValue {
    Active,
    Paused,
    Completed,
    Deleted,
}

/// A job's status, as a filter.
// Documentation only: the server reads the text.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum JobStatusValue {
    Scheduled,
    Pending,
    Running,
    Succeeded,
    Failed,
    Skipped,
    Superseded,
    Buffered,
    Cancelled,
}

/// `overlap`: what an occurrence due while a job of the schedule is open does.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum OverlapValue {
    Skip,
    BufferOne,
    AllowAll,
    BufferAll,
    CancelOther,
}

/// `after_completion`: what becomes of a schedule once it has completed and its last job has
/// ended.
#[derive(serde::Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum AfterCompletionValue {
    Keep,
    Delete,
}
