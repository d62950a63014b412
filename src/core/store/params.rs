//! The records the storage seam's methods take and return: what to insert, what a named
//! transition writes, the filters of listings and the cross-tenant reads' results.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::core::calendar::Exclude;
use crate::core::labels::{LabelSelector, Labels};
use crate::core::model::{
    AttemptOutcome, DlqId, EnvId, EventId, JobId, JobStatus, Schedule, ScheduleId, ScheduleStatus,
};
use crate::core::policies::Policies;
use crate::core::target::Target;
use crate::core::timing::Timing;

/// A schedule that is due, as returned by the cross-tenant due selection (see
/// [`super::Store::schedules_due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueSchedule {
    pub id: ScheduleId,
    pub env_id: EnvId,
    pub next_run_at: DateTime<Utc>,
}

/// This instance's share of the schedules claimed ahead of their instant, when several
/// instances run: with `of` instances alive (ordered by id), the schedules whose id hashes to
/// `index`. An occurrence already due by `ahead_after` (the present) is everyone's, so the
/// share of an instance that stopped is still claimed, at its instant, by the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub index: u32,
    pub of: u32,
    pub ahead_after: DateTime<Utc>,
}

/// A job whose next attempt is due (pending and `next_attempt_at <= now`), or a running job
/// whose attempt went stale (its process died mid-call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueJob {
    pub id: JobId,
    pub schedule_id: ScheduleId,
    pub env_id: EnvId,
    pub status: JobStatus,
}

/// What a service answered to one attempt's call, written as soon as it came, ahead of the
/// outcome's record: an instance that stops between the two leaves the answer for whichever
/// instance recovers the attempt. `answer` is the engine's own encoding of the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct JobAnswer {
    pub job_id: JobId,
    pub attempt: i32,
    pub answered_at: DateTime<Utc>,
    pub answer: Value,
}

/// A fire claimed ahead that was handed off for its call, with its schedule's `updated_at` (a
/// change since the claim means the schedule is read again before the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandedOff {
    pub job_id: JobId,
    pub schedule_updated_at: DateTime<Utc>,
}

/// A schedule to insert. The caller has validated it and computed `next_run_at`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSchedule {
    pub id: ScheduleId,
    pub domain: String,
    pub schedule_type: String,
    pub timing: Timing,
    pub target: Target,
    pub payload: Value,
    pub status: ScheduleStatus,
    pub next_run_at: Option<DateTime<Utc>>,
    pub max_retries: i32,
    pub policies: Policies,
    pub remaining_runs: Option<i32>,
    pub labels: Labels,
    pub exclude: Exclude,
    pub actor: String,
    pub now: DateTime<Utc>,
}

/// Filters for listing schedules, with keyset pagination on the (time-ordered) id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleQuery {
    pub domain: Option<String>,
    pub status: Option<ScheduleStatus>,
    /// Deleted schedules are left out unless asked for.
    pub include_deleted: bool,
    /// Only schedules whose type contains this text (ASCII case-insensitively).
    pub type_contains: Option<String>,
    /// Only schedules whose labels the selector matches.
    pub labels: Option<LabelSelector>,
    /// Only ids greater than this one (the previous page's last id).
    pub after: Option<ScheduleId>,
    pub limit: u32,
}

/// A claim-conditional advance of a due schedule: it succeeds only if the schedule is still
/// active and still due at the instant the caller saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleClaim {
    pub id: ScheduleId,
    pub expected_next_run_at: DateTime<Utc>,
    /// The next fire after this one; `None` completes nothing by itself (one-shot schedules
    /// stay active until their job finishes) but leaves no next fire.
    pub next_run_at: Option<DateTime<Utc>>,
    /// Fires left after this one (`None`: no limit).
    pub remaining_runs: Option<i32>,
    pub now: DateTime<Utc>,
}

/// The patchable definition of a schedule: what [`TenantTx::schedule_set_definition`]
/// writes besides status and next fire.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleDefinition {
    pub schedule_type: String,
    pub timing: Timing,
    pub target: Target,
    pub payload: Value,
    pub max_retries: i32,
    pub policies: Policies,
    pub remaining_runs: Option<i32>,
    pub labels: Labels,
    pub exclude: Exclude,
}

impl ScheduleDefinition {
    /// The definition a schedule record carries.
    pub fn of(schedule: &Schedule) -> Self {
        Self {
            schedule_type: schedule.schedule_type.clone(),
            timing: schedule.timing.clone(),
            target: schedule.target.clone(),
            payload: schedule.payload.clone(),
            max_retries: schedule.max_retries,
            policies: schedule.policies,
            remaining_runs: schedule.remaining_runs,
            labels: schedule.labels.clone(),
            exclude: schedule.exclude.clone(),
        }
    }
}

/// A new definition, status and next fire for a schedule (a patch or an enrolled update).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSetDefinition {
    pub id: ScheduleId,
    pub definition: ScheduleDefinition,
    pub status: ScheduleStatus,
    pub next_run_at: Option<DateTime<Utc>>,
    pub actor: String,
    pub now: DateTime<Utc>,
}

impl ScheduleSetDefinition {
    /// The change that makes the stored row match `updated` in every patchable field.
    pub fn to_match(updated: &Schedule, actor: &str, now: DateTime<Utc>) -> Self {
        Self {
            id: updated.id,
            definition: ScheduleDefinition::of(updated),
            status: updated.status,
            next_run_at: updated.next_run_at,
            actor: actor.to_owned(),
            now,
        }
    }
}

/// A new status for a schedule, stamped with `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleSetStatus {
    pub id: ScheduleId,
    pub status: ScheduleStatus,
    pub now: DateTime<Utc>,
}

/// A new next fire for an active schedule (recomputed under new time-zone rules), stamped
/// with `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleSetNextRun {
    pub id: ScheduleId,
    pub next_run_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// A time zone that active cron schedules of one environment use.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZoneInUse {
    pub env_id: EnvId,
    pub timezone: String,
}

/// A soft delete of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleSetDeleted {
    pub id: ScheduleId,
    pub actor: String,
    pub now: DateTime<Utc>,
}

/// What an attempt's outcome does to its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleSetOutcome {
    pub id: ScheduleId,
    pub retry_count: i32,
    /// A new status, when the outcome changes it: `completed` (no next fire left) or `paused`
    /// (a dead letter of a schedule that pauses on failure).
    pub status: Option<ScheduleStatus>,
    pub now: DateTime<Utc>,
}

/// How an attempt ended, as recorded on its job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobOutcome {
    /// The owning service answered: status `succeeded`, finished now, its answer as `result`,
    /// no error.
    Succeeded { result: Value },
    /// Failed and tried again later: status `pending`, due at `next_attempt_at`, the error
    /// kept; `finished_at` and `result` untouched.
    RetryPending {
        next_attempt_at: DateTime<Utc>,
        error: String,
    },
    /// Failed for good: status `failed`, finished now, the error kept.
    Failed { error: String },
}

impl JobOutcome {
    /// The status this outcome leaves the job in.
    pub fn status(&self) -> JobStatus {
        match self {
            JobOutcome::Succeeded { .. } => JobStatus::Succeeded,
            JobOutcome::RetryPending { .. } => JobStatus::Pending,
            JobOutcome::Failed { .. } => JobStatus::Failed,
        }
    }

    /// How the attempt ledger names this outcome.
    pub fn attempt_outcome(&self) -> AttemptOutcome {
        match self {
            JobOutcome::Succeeded { .. } => AttemptOutcome::Succeeded,
            JobOutcome::RetryPending { .. } => AttemptOutcome::Retry,
            JobOutcome::Failed { .. } => AttemptOutcome::Failed,
        }
    }

    /// The error this outcome records, if it is a failure.
    pub fn error(&self) -> Option<&str> {
        match self {
            JobOutcome::Succeeded { .. } => None,
            JobOutcome::RetryPending { error, .. } | JobOutcome::Failed { error } => Some(error),
        }
    }
}

/// The outcome of one attempt, written only if the job is still running that attempt. The
/// attempt ledger gets a row for it in the same statement batch: the attempt finished at
/// `now`, with `detail`.
#[derive(Debug, Clone, PartialEq)]
pub struct JobFinish {
    pub id: JobId,
    /// The attempt the outcome belongs to.
    pub attempt: i32,
    /// The lease's fence the attempt was given under ([`Job::lease_epoch`]): an outcome is
    /// written only while the job is still held under it.
    pub epoch: i32,
    pub outcome: JobOutcome,
    pub now: DateTime<Utc>,
    /// What the attempt ledger records beyond the outcome.
    pub detail: AttemptDetail,
    /// For an attempt recovered from another instance: written only if its lease ran out
    /// before this instant (an attempt whose lease was renewed meanwhile is alive, and its
    /// own instance records it). `None` for an instance recording its own attempt.
    pub lease_expired_by: Option<DateTime<Utc>>,
}

/// What the attempt ledger records of an attempt beyond its outcome and end (`now`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptDetail {
    /// When the attempt started (the job's `started_at` as claimed).
    pub started_at: Option<DateTime<Utc>>,
    /// When the call ended, taken as it returned; `None` when unknown (an attempt recovered
    /// from a stopped instance), and then the record's own instant stands for it. The wait for
    /// the record is not part of the attempt.
    pub ended_at: Option<DateTime<Utc>>,
    /// The owning service's answer status, when it answered.
    pub http_status: Option<u16>,
    /// The kind of failure (see `DispatchError::kind`), `None` on success.
    pub error_class: Option<String>,
    /// At most [`RESPONSE_EXCERPT_BYTES`] of the answer (see [`AttemptDetail::excerpt`]).
    pub response_excerpt: Option<String>,
}

/// The most of an answer the attempt ledger keeps.
pub const RESPONSE_EXCERPT_BYTES: usize = 512;

impl AttemptDetail {
    /// `text` cut to at most [`RESPONSE_EXCERPT_BYTES`] bytes at a character boundary; `None`
    /// when empty.
    pub fn excerpt(text: &str) -> Option<String> {
        if text.is_empty() {
            return None;
        }
        let mut end = text.len().min(RESPONSE_EXCERPT_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        Some(text[..end].to_owned())
    }

    /// When the attempt ended: the call's end, or `recorded_at` when that is unknown.
    pub fn ended(&self, recorded_at: DateTime<Utc>) -> DateTime<Utc> {
        self.ended_at.unwrap_or(recorded_at)
    }

    /// The attempt's duration in milliseconds (the call alone when its end is known), if it
    /// is known when it started.
    pub fn duration_ms(&self, recorded_at: DateTime<Utc>) -> Option<i64> {
        let ended = self.ended(recorded_at);
        self.started_at
            .map(|started| (ended - started).num_milliseconds().max(0))
    }
}

/// Marks a failed job superseded, for good: by the job that replaces it (a republished dead
/// letter), or by none (a discarded dead letter: the occurrence is given up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSetSuperseded {
    pub id: JobId,
    pub superseded_by: Option<JobId>,
    pub now: DateTime<Utc>,
}

/// Filters for reading the audit journal, newest first, with keyset pagination.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuditQuery {
    pub schedule_id: Option<ScheduleId>,
    pub actor: Option<String>,
    /// Only entries written at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only ids smaller than this one (the previous page's last id).
    pub before: Option<uuid::Uuid>,
    pub limit: u32,
}

/// One bounded retention batch: rows older than `before`, at most `limit` of them, oldest
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPurge {
    pub before: DateTime<Utc>,
    pub limit: u32,
}

/// A manual retry of a failed job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSetPending {
    pub id: JobId,
    pub next_attempt_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// The cancellation of a pending job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCancel {
    pub id: JobId,
    pub error: String,
    pub now: DateTime<Utc>,
}

/// The cancellation of a schedule's open job for a newer occurrence (overlap `cancel_other`).
/// A job whose service's answer is already durable (written ahead of its record) is not
/// cancelled: it has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobReplace {
    pub id: JobId,
    pub reason: String,
    pub now: DateTime<Utc>,
}

/// The withdrawal of a fire claimed ahead of its instant and never called: the schedule was
/// paused, deleted or re-timed before the instant came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobWithdraw {
    pub id: JobId,
    pub reason: String,
    pub now: DateTime<Utc>,
    /// The engine withdraws a fire it handed off itself (and has not called); anyone else only
    /// one not handed off yet.
    pub handed_off: bool,
}

/// The release of a fire claimed ahead whose instance stopped before handing it off: it was
/// never called, so it becomes a pending run due now (its first attempt still to come), not
/// a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRelease {
    pub id: JobId,
    pub now: DateTime<Utc>,
}
/// Filters for listing jobs, newest first, with keyset pagination.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobQuery {
    pub schedule_id: Option<ScheduleId>,
    pub status: Option<JobStatus>,
    /// Only jobs of schedules whose labels the selector matches.
    pub schedule_labels: Option<LabelSelector>,
    /// Only ids smaller than this one (the previous page's last id).
    pub before: Option<JobId>,
    pub limit: u32,
}

/// A claim-conditional start of a retry: it succeeds only if the job is still pending and due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobClaim {
    pub id: JobId,
    pub now: DateTime<Utc>,
    /// The new attempt's lease.
    pub lease_until: DateTime<Utc>,
}

/// A dead-letter entry to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewDlqEntry {
    pub id: DlqId,
    pub schedule_id: ScheduleId,
    pub job_id: JobId,
    pub domain: String,
    pub schedule_type: String,
    pub payload: Value,
    pub attempts: i32,
    pub last_error: String,
    pub scheduled_for: DateTime<Utc>,
    /// Its job ran a backfilled occurrence.
    pub backfill: bool,
    pub now: DateTime<Utc>,
}

/// Filters for listing dead-letter entries, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DlqQuery {
    pub domain: Option<String>,
    pub schedule_id: Option<ScheduleId>,
    /// Only the entry of this job (a job lands in the DLQ at most once between retries).
    pub job_id: Option<JobId>,
    /// Only entries of schedules whose labels the selector matches.
    pub schedule_labels: Option<LabelSelector>,
    pub before: Option<DlqId>,
    pub limit: u32,
}

/// An event to append to the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: EventId,
    pub schedule_id: Option<ScheduleId>,
    pub event_type: String,
    pub payload: Value,
    pub now: DateTime<Utc>,
}

/// An audit entry to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewAudit {
    pub actor: String,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub correlation_id: Option<String>,
    pub now: DateTime<Utc>,
    /// The schedule the entry concerns, if any (the journal can be filtered by it).
    pub schedule_id: Option<ScheduleId>,
}

impl NewAudit {
    /// The entry, recorded as concerning `schedule`.
    pub fn on_schedule(mut self, schedule: ScheduleId) -> Self {
        self.schedule_id = Some(schedule);
        self
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn an_excerpt_is_at_most_512_bytes_and_cut_at_a_character_boundary() {
        assert_eq!(AttemptDetail::excerpt(""), None);
        assert_eq!(AttemptDetail::excerpt("short").as_deref(), Some("short"));
        // 511 ASCII bytes then a two-byte character: the character would end at byte 513.
        let text = format!("{}é and more", "a".repeat(511));
        let cut = AttemptDetail::excerpt(&text).unwrap();
        assert_eq!(cut.len(), 511);
        assert!(text.starts_with(&cut));
        assert_eq!(
            AttemptDetail::excerpt(&"b".repeat(2000)).unwrap().len(),
            RESPONSE_EXCERPT_BYTES
        );
    }

    #[test]
    fn an_attempt_s_duration_is_known_only_from_its_start() {
        let start = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let detail = AttemptDetail {
            started_at: Some(start),
            ..AttemptDetail::default()
        };
        assert_eq!(
            detail.duration_ms(start + chrono::Duration::milliseconds(1250)),
            Some(1250)
        );
        assert_eq!(AttemptDetail::default().duration_ms(start), None);
        // The call's own end, not the later record, bounds it.
        let ended = AttemptDetail {
            ended_at: Some(start + chrono::Duration::milliseconds(300)),
            ..detail
        };
        assert_eq!(
            ended.duration_ms(start + chrono::Duration::seconds(8)),
            Some(300)
        );
    }
}
