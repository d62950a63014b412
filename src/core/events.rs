//! Domain events: their type names and payloads. Every event is written to the outbox in the
//! same transaction as the change it describes, and carries everything a consumer needs
//! (payload-complete), so nobody has to call back to find out what happened.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::core::model::{DlqEntry, Job, Schedule};
use crate::core::store::NewEvent;

/// A schedule was created (API or enroll).
pub const SCHEDULE_CREATED: &str = "sentin8:cron:schedule:created";
/// A schedule's definition changed (API patch or enroll).
pub const SCHEDULE_UPDATED: &str = "sentin8:cron:schedule:updated";
/// A schedule was soft-deleted.
pub const SCHEDULE_DELETED: &str = "sentin8:cron:schedule:deleted";
/// A schedule was paused.
pub const SCHEDULE_PAUSED: &str = "sentin8:cron:schedule:paused";
/// A schedule was resumed.
pub const SCHEDULE_RESUMED: &str = "sentin8:cron:schedule:resumed";
/// A job attempt succeeded.
pub const SCHEDULE_COMPLETED: &str = "sentin8:cron:schedule:completed";
/// A job failed for good: its retries are exhausted and it landed in the DLQ.
pub const SCHEDULE_FAILED: &str = "sentin8:cron:schedule:failed";
/// A job attempt failed and a retry was scheduled (or an operator retried a failed job).
pub const JOB_RETRIED: &str = "sentin8:cron:job:retried";
/// A regular fire was skipped because the schedule's previous job was still open.
pub const JOB_SKIPPED: &str = "sentin8:cron:job:skipped";
/// A dead-letter entry was republished as a fresh job (the original job is superseded).
pub const DLQ_REPUBLISHED: &str = "sentin8:cron:dlq:republished";
/// A dead-letter entry was discarded by an operator: its occurrence will not run.
pub const DLQ_DISCARDED: &str = "sentin8:cron:dlq:discarded";
/// A schedule was run on demand, outside its timing (a pending job due now).
pub const SCHEDULE_TRIGGERED: &str = "sentin8:cron:schedule:triggered";
/// A regular fire waits for the schedule's open job to end (overlap `buffer_one`).
pub const JOB_BUFFERED: &str = "sentin8:cron:job:buffered";
/// An operator asked for a past range of a schedule's occurrences (backfill).
pub const SCHEDULE_BACKFILLED: &str = "sentin8:cron:schedule:backfilled";

/// Every event type sentin8-cron produces.
pub const ALL: &[&str] = &[
    SCHEDULE_CREATED,
    SCHEDULE_UPDATED,
    SCHEDULE_DELETED,
    SCHEDULE_PAUSED,
    SCHEDULE_RESUMED,
    SCHEDULE_COMPLETED,
    SCHEDULE_FAILED,
    JOB_RETRIED,
    JOB_SKIPPED,
    DLQ_REPUBLISHED,
    DLQ_DISCARDED,
    SCHEDULE_TRIGGERED,
    JOB_BUFFERED,
    SCHEDULE_BACKFILLED,
];

/// The payload every event carries. Fields that do not apply are null.
#[derive(Debug, Clone, Serialize)]
pub struct EventPayload {
    pub event_type: &'static str,
    pub schedule_id: String,
    pub job_id: Option<String>,
    pub domain: String,
    pub schedule_type: String,
    pub env_id: String,
    pub status: String,
    pub retry_count: i32,
    pub attempt: Option<i32>,
    pub scheduled_for: Option<DateTime<Utc>>,
    pub next_run_at: Option<DateTime<Utc>>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub dlq_id: Option<String>,
    /// Always the schedule id.
    pub correlation_id: String,
    /// `schedule:{schedule_id}:{job_id}` when the event concerns a job.
    pub idempotency_key: Option<String>,
    pub actor: Option<String>,
    /// Why the engine changed the schedule by itself (a pause on failure); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

impl EventPayload {
    /// An event about a schedule, with nothing job-specific yet.
    pub fn for_schedule(event_type: &'static str, schedule: &Schedule, at: DateTime<Utc>) -> Self {
        Self {
            event_type,
            schedule_id: schedule.id.to_string(),
            job_id: None,
            domain: schedule.domain.clone(),
            schedule_type: schedule.schedule_type.clone(),
            env_id: schedule.env_id.to_string(),
            status: schedule.status.to_string(),
            retry_count: schedule.retry_count,
            attempt: None,
            scheduled_for: None,
            next_run_at: schedule.next_run_at,
            next_attempt_at: None,
            result: None,
            error: None,
            dlq_id: None,
            correlation_id: schedule.id.to_string(),
            idempotency_key: None,
            actor: None,
            reason: None,
            at,
        }
    }

    /// Adds what is known about a job.
    pub fn with_job(mut self, job: &Job) -> Self {
        self.job_id = Some(job.id.to_string());
        self.attempt = Some(job.attempt);
        self.scheduled_for = Some(job.scheduled_for);
        self.next_attempt_at = job.next_attempt_at;
        self.result = job.result.clone();
        self.error = job.error.clone();
        self.idempotency_key = Some(job.idempotency_key.clone());
        self
    }

    /// Adds the dead-letter entry a job landed in (or was republished from).
    pub fn with_dlq(mut self, entry: &DlqEntry) -> Self {
        self.dlq_id = Some(entry.id.to_string());
        self
    }

    /// Says why the engine made the change.
    pub fn with_reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
    }

    /// Records who caused the event.
    pub fn by(mut self, actor: &str) -> Self {
        self.actor = Some(actor.to_owned());
        self
    }

    /// The outbox row for this event.
    pub fn into_event(self, schedule: &Schedule) -> NewEvent {
        let at = self.at;
        let event_type = self.event_type.to_owned();
        NewEvent {
            id: crate::core::model::EventId::new(),
            schedule_id: Some(schedule.id),
            event_type,
            payload: serde_json::to_value(&self).unwrap_or(Value::Null),
            now: at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_type_is_namespaced_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for name in ALL {
            assert!(name.starts_with("sentin8:cron:"), "{name}");
            assert!(seen.insert(name), "{name} listed twice");
        }
    }
}
