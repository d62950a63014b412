//! What the API answers with: the records as shown, and pages of them with their cursors.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::requests::AfterCompletionValue;
use crate::core::cron::{CronExpr, OnDstGap, OnDstRepeat, describe_zoned};
use crate::core::labels::Labels;
use crate::core::model::*;
use crate::core::policies::{describe_policies, format_duration};
use crate::core::timing::Timing;
use crate::server::error::ApiError;

/// Largest page a list returns.
pub const MAX_PAGE: u32 = 100;
const DEFAULT_PAGE: u32 = 50;

/// A schedule as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleView {
    pub id: Uuid,
    pub env_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    /// `cron` (a repeating schedule: a cron expression or an interval) or `once`.
    pub kind: String,
    /// The cron expression, or the interval as `@every 1m30s phase 15s` (repeating
    /// schedules).
    pub cron: Option<String>,
    /// The interval's period (`1m30s`), for a schedule that repeats on one.
    pub every: Option<String>,
    /// The interval's phase past each multiple of the period since the epoch (`15s`).
    pub phase: Option<String>,
    /// When it runs, in words: `At 02:30, Monday through Friday (America/New_York); ...`
    /// with what the DST policies do (absent for a stored expression that no longer parses).
    pub description: Option<String>,
    /// The instant of a one-shot schedule.
    pub run_at: Option<DateTime<Utc>>,
    pub timezone: String,
    #[schema(value_type = String)]
    pub on_dst_gap: OnDstGap,
    #[schema(value_type = String)]
    pub on_dst_repeat: OnDstRepeat,
    #[schema(value_type = Object)]
    pub target_config: Value,
    #[schema(value_type = Object)]
    pub payload: Value,
    /// `active`, `paused`, `completed` or `deleted`.
    pub status: String,
    /// The next call: its occurrence plus the schedule's jitter (absent when nothing is left
    /// to fire).
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub retry_count: i32,
    pub max_retries: i32,
    /// `skip`, `buffer_one`, `buffer_all`, `allow_all` or `cancel_other`: what an occurrence
    /// does while a job is open.
    pub overlap: String,
    /// How late the latest missed occurrence may still run (`1h`).
    pub catchup_window: String,
    /// Calls are spread over this much past their instants (`0s`: none).
    pub max_jitter: String,
    /// No occurrence before this instant.
    pub start_at: Option<DateTime<Utc>>,
    /// No occurrence after this instant; then the schedule completes.
    pub end_at: Option<DateTime<Utc>>,
    /// A dead-lettered job pauses the schedule.
    pub pause_on_failure: bool,
    /// `keep` or `delete`: whether the schedule is deleted once it has completed and its last
    /// job has ended.
    #[schema(value_type = AfterCompletionValue)]
    pub after_completion: String,
    /// Fires left before the schedule completes (absent: no limit).
    pub remaining_runs: Option<i32>,
    /// Labels to select it by (`{}` for none).
    #[schema(value_type = BTreeMap<String, String>)]
    pub labels: Labels,
    /// The days and times it does not run: dates (`2026-12-25`), ranges
    /// (`2026-12-24..2026-12-26`), cron-like specs (`* * * * SAT,SUN`) and calendar names, on
    /// its zone's wall clock (`[]` for none). An excluded occurrence is recorded as skipped.
    pub exclude: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_by: String,
    /// Who paused it, when and why (read one at a time, and after a pause; null in lists and
    /// while it is not paused).
    pub paused: Option<PausedView>,
}

/// A schedule's latest pause.
#[derive(Debug, Serialize, ToSchema)]
pub struct PausedView {
    /// Who paused it: a token's subject, or `sentin8-cron:engine` for a pause on failure.
    pub by: String,
    pub at: DateTime<Utc>,
    /// Why: the note given with the pause, or the engine's reason; null when none was said.
    pub reason: Option<String>,
}

impl From<crate::core::ops::PauseRecord> for PausedView {
    fn from(record: crate::core::ops::PauseRecord) -> Self {
        Self {
            by: record.by,
            at: record.at,
            reason: record.reason,
        }
    }
}

impl From<Schedule> for ScheduleView {
    fn from(s: Schedule) -> Self {
        let timing = s.timing.columns();
        let interval = s.timing.interval();
        let description = match &s.timing {
            Timing::Cron(cron) => CronExpr::parse(&cron.expression).ok().map(|expr| {
                describe_zoned(&expr, &cron.timezone, cron.on_dst_gap, cron.on_dst_repeat)
            }),
            Timing::Once { run_at } => Some(format!(
                "Once, at {}",
                run_at.format("%Y-%m-%d %H:%M:%S UTC")
            )),
        }
        .map(
            |words| match describe_policies(&s.policies, s.remaining_runs) {
                Some(policies) => format!("{words}; {policies}"),
                None => words,
            },
        )
        .map(|words| match s.exclude.is_empty() {
            true => words,
            false => format!("{words}; except {}", s.exclude.texts().join(", ")),
        });
        Self {
            id: s.id.0,
            env_id: s.env_id.0,
            domain: s.domain,
            schedule_type: s.schedule_type,
            kind: timing.kind.to_string(),
            cron: timing.cron_expr,
            every: interval.map(|i| format_duration(i.period())),
            phase: interval.map(|i| format_duration(i.phase())),
            description,
            run_at: timing.run_at,
            timezone: timing.timezone,
            on_dst_gap: timing.on_dst_gap,
            on_dst_repeat: timing.on_dst_repeat,
            target_config: s.target.config().clone(),
            payload: s.payload,
            status: s.status.to_string(),
            next_run_at: s.next_run_at,
            last_run_at: s.last_run_at,
            retry_count: s.retry_count,
            max_retries: s.max_retries,
            overlap: s.policies.overlap.to_string(),
            catchup_window: format_duration(s.policies.catchup_window),
            max_jitter: format_duration(s.policies.max_jitter),
            start_at: s.policies.start_at,
            end_at: s.policies.end_at,
            pause_on_failure: s.policies.pause_on_failure,
            after_completion: s.policies.after_completion.to_string(),
            remaining_runs: s.remaining_runs,
            labels: s.labels,
            exclude: s.exclude.texts(),
            created_at: s.created_at,
            updated_at: s.updated_at,
            created_by: s.created_by,
            updated_by: s.updated_by,
            paused: None,
        }
    }
}

/// A job (one execution of a schedule, with its retries).
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    pub id: Uuid,
    pub schedule_id: Uuid,
    pub env_id: Uuid,
    /// `scheduled`, `pending`, `running`, `succeeded`, `failed`, `skipped`, `superseded`,
    /// `buffered` (waiting for the schedule's open job to end, or its turn in a backfill) or
    /// `cancelled` (replaced by a newer occurrence under overlap `cancel_other`).
    pub status: String,
    pub attempt: i32,
    pub scheduled_for: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<String>,
    pub idempotency_key: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// On a skipped job that records occurrences nobody fired (an outage, an overload): the
    /// first and last of them and how many.
    pub missed: Option<MissedView>,
    /// The job that runs this one's occurrence instead (a republished dead letter).
    pub superseded_by: Option<Uuid>,
    /// A pending job whose schedule is paused: nothing runs it until the schedule is resumed
    /// (a retry waiting out the pause). False for every other job.
    pub held_by_pause: bool,
    /// It runs an occurrence an operator backfilled.
    pub backfill: bool,
    /// It runs beside the schedule's other jobs (overlap `allow_all`).
    pub concurrent: bool,
    /// Every recorded attempt, first attempt first (on a single job only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Vec<AttemptView>>,
}

/// What a backfill created.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackfillView {
    /// How many occurrences the range holds (one job each).
    pub occurrences: usize,
    /// How many started at once; the others wait their turn (`buffered`) or were skipped.
    pub started: usize,
    /// How many the backfill's overlap policy skipped (`skip`, `buffer_one`), on the record.
    pub skipped: usize,
    /// The overlap policy the backfill ran under: the one it named, or the schedule's
    /// (`allow_all`, else `buffer_all`).
    pub overlap: String,
    /// The jobs, oldest occurrence first.
    pub jobs: Vec<JobView>,
}

/// A run of missed occurrences, recorded as one skipped job.
#[derive(Debug, Serialize, ToSchema)]
pub struct MissedView {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub count: u32,
}

impl JobView {
    /// A job with its attempts.
    pub fn with_attempts(job: Job, attempts: Vec<JobAttempt>) -> Self {
        let mut view = Self::from(job);
        view.attempts = Some(attempts.into_iter().map(AttemptView::from).collect());
        view
    }
}

/// One attempt of a job, as the attempt ledger keeps it.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    /// 1 for the first attempt.
    pub attempt: i32,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: DateTime<Utc>,
    pub duration_ms: Option<i64>,
    /// `succeeded`, `retry` (another attempt followed) or `failed`.
    pub outcome: String,
    /// The owning service's answer status, when it answered with an error status.
    pub http_status: Option<i32>,
    /// `status`, `timeout`, `transport`, `token`, `decode`, `egress`, `configuration`,
    /// `abandoned`, `circuit_open` or `internal`.
    pub error_class: Option<String>,
    pub error: Option<String>,
    /// At most 512 bytes of the answer.
    pub response_excerpt: Option<String>,
}

impl From<JobAttempt> for AttemptView {
    fn from(a: JobAttempt) -> Self {
        Self {
            attempt: a.attempt,
            started_at: a.started_at,
            finished_at: a.finished_at,
            duration_ms: a.duration_ms,
            outcome: a.outcome.to_string(),
            http_status: a.http_status,
            error_class: a.error_class,
            error: a.error,
            response_excerpt: a.response_excerpt,
        }
    }
}

/// One entry of the audit journal: who changed what, from what, to what.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditView {
    pub id: Uuid,
    pub env_id: Uuid,
    pub actor: String,
    /// `schedule.create`, `schedule.update`, `dlq.discard`, ...
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    /// The schedule the entry concerns, if any.
    pub schedule_id: Option<Uuid>,
    #[schema(value_type = Option<Object>)]
    pub before: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub after: Option<Value>,
    pub correlation_id: Option<String>,
    pub at: DateTime<Utc>,
}

impl From<AuditEntry> for AuditView {
    fn from(a: AuditEntry) -> Self {
        Self {
            id: a.id,
            env_id: a.env_id.0,
            actor: a.actor,
            action: a.action,
            resource_type: a.resource_type,
            resource_id: a.resource_id,
            schedule_id: a.schedule_id.map(|id| id.0),
            before: a.before,
            after: a.after,
            correlation_id: a.correlation_id,
            at: a.at,
        }
    }
}

impl From<Job> for JobView {
    fn from(j: Job) -> Self {
        Self {
            id: j.id.0,
            schedule_id: j.schedule_id.0,
            env_id: j.env_id.0,
            status: j.status.to_string(),
            attempt: j.attempt,
            scheduled_for: j.scheduled_for,
            next_attempt_at: j.next_attempt_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
            result: j.result,
            error: j.error,
            idempotency_key: j.idempotency_key,
            created_at: j.created_at,
            updated_at: j.updated_at,
            missed: j.missed.map(|m| MissedView {
                first: m.first,
                last: m.last,
                count: m.count,
            }),
            superseded_by: j.superseded_by.map(|id| id.0),
            held_by_pause: false,
            backfill: j.backfill,
            concurrent: j.concurrent,
            attempts: None,
        }
    }
}

/// A dead-letter entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct DlqView {
    pub id: Uuid,
    pub env_id: Uuid,
    pub schedule_id: Uuid,
    pub job_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    #[schema(value_type = Object)]
    pub payload: Value,
    pub attempts: i32,
    pub last_error: String,
    pub scheduled_for: DateTime<Utc>,
    pub landed_at: DateTime<Utc>,
    /// Its job ran an occurrence an operator backfilled.
    pub backfill: bool,
}

impl From<DlqEntry> for DlqView {
    fn from(e: DlqEntry) -> Self {
        Self {
            id: e.id.0,
            env_id: e.env_id.0,
            schedule_id: e.schedule_id.0,
            job_id: e.job_id.0,
            domain: e.domain,
            schedule_type: e.schedule_type,
            payload: e.payload,
            attempts: e.attempts,
            last_error: e.last_error,
            scheduled_for: e.scheduled_for,
            landed_at: e.landed_at,
            backfill: e.backfill,
        }
    }
}

/// One page of a list. Pass `next_cursor` back as `cursor` for the next page.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

pub(super) fn page<T, U: From<T>>(
    items: Vec<T>,
    limit: u32,
    cursor_of: impl Fn(&T) -> Uuid,
) -> Page<U> {
    let next_cursor = (items.len() as u32 >= limit)
        .then(|| items.last().map(|last| cursor_of(last).to_string()))
        .flatten();
    Page {
        items: items.into_iter().map(U::from).collect(),
        next_cursor,
    }
}

pub(super) fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::field(
            "limit",
            format!("must be between 1 and {MAX_PAGE}"),
        )),
    }
}

pub(super) fn cursor(cursor: Option<&str>) -> Result<Option<Uuid>, ApiError> {
    cursor
        .map(|c| {
            Uuid::parse_str(c)
                .map_err(|_| ApiError::field("cursor", "is not a cursor this API returned"))
        })
        .transpose()
}
