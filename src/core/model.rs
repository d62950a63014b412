//! Domain records: schedules, jobs, dead-letter entries, events and audit entries, with the
//! identifier newtypes that keep one kind of id from being passed where another is expected.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::core::calendar::{Calendars, Exclude, Exclusion};
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::labels::Labels;
use crate::core::policies::{Occurrences, Policies, format_duration};
use crate::core::target::Target;
use crate::core::timing::Timing;

macro_rules! id_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh, time-ordered (UUIDv7) identifier.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }
    };
}

id_newtype!(
    /// A tenant environment. Every tenant row carries one; RLS keys on it.
    EnvId
);
id_newtype!(
    /// A schedule.
    ScheduleId
);
id_newtype!(
    /// One execution record of a schedule.
    JobId
);
id_newtype!(
    /// A dead-letter entry.
    DlqId
);
id_newtype!(
    /// An outbox event; also the bus message id, so a re-send is dropped as a duplicate.
    EventId
);

/// Declares a string-backed enum stored as text in both backends.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored and serialized name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownValue {
                        value: other.to_owned(),
                        expected: concat!($($text, " "),+),
                    }),
                }
            }
        }
    };
}

/// A stored or requested name that is not one of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {value:?} (expected one of: {})", expected.trim_end())]
pub struct UnknownValue {
    value: String,
    expected: &'static str,
}

impl UnknownValue {
    /// `value` is not one of `expected` (the names, separated by spaces).
    pub fn new(value: &str, expected: &'static str) -> Self {
        UnknownValue {
            value: value.to_owned(),
            expected,
        }
    }
}

text_enum!(
    /// Whether a schedule repeats on a cron expression or runs once at a fixed instant.
    ScheduleKind {
        /// Repeats on a cron expression.
        Cron => "cron",
        /// Runs once at `run_at`.
        Once => "once",
    }
);

text_enum!(
    /// The life cycle of a schedule.
    ScheduleStatus {
        /// Fires when due.
        Active => "active",
        /// Kept, but does not fire until resumed.
        Paused => "paused",
        /// A one-shot schedule that has run (successfully or into the DLQ).
        Completed => "completed",
        /// Soft-deleted: retained so job, DLQ and audit references resolve.
        Deleted => "deleted",
    }
);

text_enum!(
    /// The life cycle of a job (one execution of a schedule, with its retries).
    JobStatus {
        /// Claimed ahead for a future instant (`scheduled_for`), no call made yet. Just before
        /// the instant the engine hands it off (`running`); a pause, delete or new timing that
        /// comes first withdraws it (`skipped`); when its short claim lease runs out (its
        /// instance stopped) any instance releases it to run (`pending`, its first attempt
        /// still to come).
        Scheduled => "scheduled",
        /// Waiting for its (next) attempt at `next_attempt_at`.
        Pending => "pending",
        /// An attempt is in flight.
        Running => "running",
        /// The owning service accepted the call.
        Succeeded => "succeeded",
        /// Retries are exhausted (the job landed in the DLQ) or it failed for good.
        Failed => "failed",
        /// A regular fire that was not run because another job of the schedule was open.
        Skipped => "skipped",
        /// A failed job whose dead letter was republished (`superseded_by` names the job that
        /// runs the occurrence instead) or discarded (no successor: the occurrence is given
        /// up). Terminal either way: this job can never run the occurrence again.
        Superseded => "superseded",
        /// An occurrence waiting for its schedule's open job to end (overlap `buffer_one`), or
        /// a backfilled occurrence waiting its turn: not open; released to `pending` in the
        /// transaction that records the open job's end.
        Buffered => "buffered",
        /// An open job cancelled for a newer occurrence of its schedule (overlap
        /// `cancel_other`): its call, if one was in flight, was aborted; it is not retried.
        Cancelled => "cancelled",
    }
);

impl JobStatus {
    /// Scheduled, pending and running jobs are open: at most one per schedule exists at any
    /// time.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            JobStatus::Scheduled | JobStatus::Pending | JobStatus::Running
        )
    }
}

/// A schedule as stored: its definition plus its execution and retry state.
///
/// Serialized (for audit snapshots) in its flat stored shape: `kind`, `cron_expr`, `timezone`,
/// `run_at`, `on_dst_gap`, `on_dst_repeat` and `target_config` as columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub id: ScheduleId,
    pub env_id: EnvId,
    pub domain: String,
    pub schedule_type: String,
    /// When it runs, compiled once.
    pub timing: Timing,
    /// Whom it calls, with the base URL parsed once.
    pub target: Target,
    pub payload: Value,
    pub status: ScheduleStatus,
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub retry_count: i32,
    pub max_retries: i32,
    /// Overlap, catch-up window, jitter, bounds and pause on failure.
    pub policies: Policies,
    /// Fires left before the schedule completes; `None` for no limit.
    pub remaining_runs: Option<i32>,
    /// What people and tools select it by; never changes when or how it runs.
    pub labels: Labels,
    /// The days and times it does not run: its own specs and the calendars it names.
    pub exclude: Exclude,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_by: String,
}

impl Schedule {
    /// What excludes its occurrence `occurrence` (before its jitter), read on the wall clock
    /// of its zone; `None` when it runs. Only repeating schedules have exclusions.
    pub fn exclusion_of(
        &self,
        occurrence: DateTime<Utc>,
        calendars: &Calendars,
    ) -> Option<Exclusion> {
        if self.exclude.is_empty() {
            return None;
        }
        let wall = self.timing.wall_time(occurrence)?;
        self.exclude.excluding(wall, calendars)
    }

    /// Its call instants: the timing's occurrences inside the bounds, each with its jitter.
    pub fn occurrences(&self) -> Occurrences<'_> {
        Occurrences {
            timing: &self.timing,
            policies: &self.policies,
            seed: self.id,
        }
    }

    /// Whether it repeats on a cron expression or runs once.
    pub fn kind(&self) -> ScheduleKind {
        self.timing.kind()
    }

    /// Why a fire claimed ahead from `claimed` (the row as the claim left it) must not be
    /// called now that the schedule is `self`: its status, its timing or its next fire changed
    /// (paused, deleted, resumed or re-timed; the change decides). `None` when it may be
    /// called.
    pub fn withdraws_fire_of(&self, claimed: &Schedule) -> Option<String> {
        // Completing (status and next fire) is what the last run held does to its schedule at
        // its instant, never a user's change: it does not withdraw that run.
        if claimed.status == ScheduleStatus::Active && self.status == ScheduleStatus::Completed {
            return None;
        }
        if self.status != claimed.status {
            Some(format!(
                "skipped: the schedule became {} before this fire's instant",
                self.status
            ))
        } else if self.timing != claimed.timing
            || self.exclude != claimed.exclude
            || self.next_run_at != claimed.next_run_at
            || self.policies.moves_calls_from(&claimed.policies)
        {
            Some(
                "skipped: the schedule's timing changed before this fire's instant; its new \
                 timing decides"
                    .to_owned(),
            )
        } else {
            None
        }
    }
}

impl Serialize for Schedule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Flat<'a> {
            id: ScheduleId,
            env_id: EnvId,
            domain: &'a str,
            schedule_type: &'a str,
            kind: ScheduleKind,
            cron_expr: Option<String>,
            timezone: String,
            run_at: Option<DateTime<Utc>>,
            on_dst_gap: OnDstGap,
            on_dst_repeat: OnDstRepeat,
            target_config: &'a Value,
            payload: &'a Value,
            status: ScheduleStatus,
            next_run_at: Option<DateTime<Utc>>,
            last_run_at: Option<DateTime<Utc>>,
            retry_count: i32,
            max_retries: i32,
            overlap: &'static str,
            catchup_window: String,
            max_jitter: String,
            start_at: Option<DateTime<Utc>>,
            end_at: Option<DateTime<Utc>>,
            pause_on_failure: bool,
            after_completion: &'static str,
            remaining_runs: Option<i32>,
            labels: &'a Labels,
            exclude: &'a Exclude,
            created_at: DateTime<Utc>,
            updated_at: DateTime<Utc>,
            created_by: &'a str,
            updated_by: &'a str,
        }
        let timing = self.timing.columns();
        Flat {
            id: self.id,
            env_id: self.env_id,
            domain: &self.domain,
            schedule_type: &self.schedule_type,
            kind: timing.kind,
            cron_expr: timing.cron_expr,
            timezone: timing.timezone,
            run_at: timing.run_at,
            on_dst_gap: timing.on_dst_gap,
            on_dst_repeat: timing.on_dst_repeat,
            target_config: self.target.config(),
            payload: &self.payload,
            status: self.status,
            next_run_at: self.next_run_at,
            last_run_at: self.last_run_at,
            retry_count: self.retry_count,
            max_retries: self.max_retries,
            overlap: self.policies.overlap.as_str(),
            catchup_window: format_duration(self.policies.catchup_window),
            max_jitter: format_duration(self.policies.max_jitter),
            start_at: self.policies.start_at,
            end_at: self.policies.end_at,
            pause_on_failure: self.policies.pause_on_failure,
            after_completion: self.policies.after_completion.as_str(),
            remaining_runs: self.remaining_runs,
            labels: &self.labels,
            exclude: &self.exclude,
            created_at: self.created_at,
            updated_at: self.updated_at,
            created_by: &self.created_by,
            updated_by: &self.updated_by,
        }
        .serialize(serializer)
    }
}

/// One execution of a schedule. A failed attempt that will be retried stays the same job
/// (status back to pending, `attempt` counts the attempts made).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: JobId,
    pub schedule_id: ScheduleId,
    pub env_id: EnvId,
    pub status: JobStatus,
    pub attempt: i32,
    pub scheduled_for: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub idempotency_key: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The job that replaced this one (a republished dead letter), when it is `superseded`;
    /// none when its dead letter was discarded instead.
    #[serde(default)]
    pub superseded_by: Option<JobId>,
    /// On a skipped record of missed occurrences: which ones, and how many.
    pub missed: Option<MissedOccurrences>,
    /// Runs beside the schedule's other open jobs (overlap `allow_all`).
    #[serde(default)]
    pub concurrent: bool,
    /// Runs an occurrence an operator asked for after the fact.
    #[serde(default)]
    pub backfill: bool,
    /// The fence of the attempt's lease: it changes every time the job is given to an instance
    /// to run, and every write of the holder names it (see `engine`'s leases).
    #[serde(skip)]
    pub lease_epoch: i32,
    /// When the holder told the store that the attempt's call had started; an attempt whose
    /// lease lapsed before that is released to run, not recorded as failed.
    #[serde(skip)]
    pub called_at: Option<DateTime<Utc>>,
}

/// A run of occurrences nobody fired (an outage, an overload), recorded as one skipped job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissedOccurrences {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    /// How many (counting stops at a cap; the job's error then says "at least").
    pub count: u32,
}

impl Job {
    /// The key the owning service dedupes on: `schedule:{schedule_id}:{job_id}`.
    pub fn idempotency_key_for(schedule_id: ScheduleId, job_id: JobId) -> String {
        format!("schedule:{schedule_id}:{job_id}")
    }
}

/// A job whose retries were exhausted, kept with enough context to republish and audit it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DlqEntry {
    pub id: DlqId,
    pub env_id: EnvId,
    pub schedule_id: ScheduleId,
    pub job_id: JobId,
    pub domain: String,
    pub schedule_type: String,
    pub payload: Value,
    pub attempts: i32,
    pub last_error: String,
    pub scheduled_for: DateTime<Utc>,
    pub landed_at: DateTime<Utc>,
    /// Its job ran an occurrence an operator backfilled.
    pub backfill: bool,
}

/// A domain event in the transactional outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxEvent {
    /// Insertion sequence: the relay's order. Writers of one schedule's events hold that
    /// schedule's row lock, so per schedule this is also commit order.
    pub seq: i64,
    pub id: EventId,
    pub env_id: EnvId,
    /// Events of one schedule are relayed in commit order; this is the ordering key.
    pub schedule_id: Option<ScheduleId>,
    pub event_type: String,
    pub payload: Value,
    pub created_at: DateTime<Utc>,
    pub relayed_at: Option<DateTime<Utc>>,
    /// Failed publishes so far.
    pub attempts: i32,
    pub last_error: Option<String>,
    /// Set when the relay gave up on the event after too many refused publishes; a parked
    /// event is never relayed by itself and is surfaced for an operator.
    #[serde(default)]
    pub parked_at: Option<DateTime<Utc>>,
}

/// One row of the audit journal: who changed what, from what, to what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: Uuid,
    pub env_id: EnvId,
    pub actor: String,
    pub action: String,
    pub resource_type: String,
    pub resource_id: String,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub correlation_id: Option<String>,
    pub at: DateTime<Utc>,
    /// The schedule the entry concerns, when it concerns one (filterable).
    #[serde(default)]
    pub schedule_id: Option<ScheduleId>,
}

text_enum!(
    /// How one attempt of a job ended, as the attempt ledger records it.
    AttemptOutcome {
        /// The owning service accepted the call.
        Succeeded => "succeeded",
        /// The attempt failed and the job was given another one.
        Retry => "retry",
        /// The attempt failed and the job failed with it (or landed in the DLQ).
        Failed => "failed",
    }
);

/// One attempt of a job, as the attempt ledger keeps it: every attempt, not only the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobAttempt {
    pub job_id: JobId,
    /// 1 for the first attempt, counting up.
    pub attempt: i32,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: DateTime<Utc>,
    pub duration_ms: Option<i64>,
    pub outcome: AttemptOutcome,
    /// The status the owning service answered with, when it answered.
    pub http_status: Option<i32>,
    /// What kind of failure it was (`status`, `timeout`, `transport`, `configuration`, ...).
    pub error_class: Option<String>,
    pub error: Option<String>,
    /// At most 512 bytes of the answer's body (of the stored result on success).
    pub response_excerpt: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_round_trip() {
        for status in JobStatus::ALL {
            assert_eq!(status.as_str().parse::<JobStatus>().unwrap(), *status);
        }
        for status in ScheduleStatus::ALL {
            assert_eq!(status.as_str().parse::<ScheduleStatus>().unwrap(), *status);
        }
        let err = "sleeping".parse::<ScheduleStatus>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown value \"sleeping\" (expected one of: active paused completed deleted)"
        );
    }

    #[test]
    fn only_scheduled_pending_and_running_are_open() {
        let open: Vec<_> = JobStatus::ALL.iter().filter(|s| s.is_open()).collect();
        assert_eq!(
            open,
            [
                &JobStatus::Scheduled,
                &JobStatus::Pending,
                &JobStatus::Running
            ]
        );
    }

    #[test]
    fn idempotency_key_has_the_documented_shape() {
        let schedule = ScheduleId(Uuid::nil());
        let job = JobId(Uuid::from_u128(1));
        assert_eq!(
            Job::idempotency_key_for(schedule, job),
            "schedule:00000000-0000-0000-0000-000000000000:00000000-0000-0000-0000-000000000001"
        );
    }
}
