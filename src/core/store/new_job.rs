//! The job a store inserts ([`NewJob`]) and the shapes a claim, its overlap records, a
//! backfill and the operations give it: running, claimed ahead, waiting its turn, recorded as
//! skipped, or pending by hand.

use chrono::{DateTime, Utc};

use crate::core::model::*;

/// A job to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    pub id: JobId,
    pub schedule_id: ScheduleId,
    pub status: JobStatus,
    pub attempt: i32,
    pub scheduled_for: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    /// Until when the running attempt is leased to its instance (running jobs only).
    pub lease_until: Option<DateTime<Utc>>,
    /// A skipped record of missed occurrences.
    pub missed: Option<MissedOccurrences>,
    /// Runs beside the schedule's other open jobs (overlap `allow_all`).
    pub concurrent: bool,
    /// Runs an occurrence an operator asked for after the fact.
    pub backfill: bool,
    pub now: DateTime<Utc>,
}

impl NewJob {
    /// A fire claimed ahead for `scheduled_for`: no start until its hand-off, its claim lease
    /// until `claim_lease_until`.
    pub fn scheduled(
        schedule_id: ScheduleId,
        scheduled_for: DateTime<Utc>,
        claim_lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            status: JobStatus::Scheduled,
            started_at: None,
            lease_until: Some(claim_lease_until),
            ..Self::running(schedule_id, scheduled_for, now)
        }
    }

    /// The same occurrence waiting its turn: `buffered`, no attempt made, no start, no lease.
    pub fn buffered(self) -> Self {
        Self {
            status: JobStatus::Buffered,
            attempt: 0,
            started_at: None,
            lease_until: None,
            ..self
        }
    }

    /// The same occurrence recorded as not run, with the reason: `skipped`, finished now.
    pub fn skipped(self, reason: String, now: DateTime<Utc>) -> Self {
        Self {
            status: JobStatus::Skipped,
            attempt: 0,
            started_at: None,
            finished_at: Some(now),
            error: Some(reason),
            lease_until: None,
            missed: None,
            ..self
        }
    }

    /// An attempt made by hand (a trigger, a republished dead letter) for `scheduled_for`:
    /// `pending` and due now, not started, no attempt made yet.
    pub fn pending(
        schedule_id: ScheduleId,
        scheduled_for: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            status: JobStatus::Pending,
            attempt: 0,
            next_attempt_at: Some(now),
            started_at: None,
            ..Self::running(schedule_id, scheduled_for, now)
        }
    }

    /// A running first attempt of a fire due at `scheduled_for`, started now (no lease).
    pub fn running(
        schedule_id: ScheduleId,
        scheduled_for: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id: JobId::new(),
            schedule_id,
            status: JobStatus::Running,
            attempt: 1,
            scheduled_for,
            next_attempt_at: None,
            started_at: Some(now),
            finished_at: None,
            error: None,
            lease_until: None,
            missed: None,
            concurrent: false,
            backfill: false,
            now,
        }
    }
}
