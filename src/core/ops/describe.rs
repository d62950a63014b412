//! `describe`: one schedule the way an operator wants it at a glance, in one read-only
//! transaction: its definition, why it is paused, the job open now, the recent jobs with their
//! outcomes, the next calls (with their jitter), and what its occurrences of the last days came
//! to (succeeded, failed, skipped, missed, buffered).

use chrono::{DateTime, Utc};

use super::schedule::{PauseRecord, pause_record};
use super::{Ops, OpsError, OpsResult};
use crate::core::model::*;
use crate::core::store::*;

/// How many recent jobs, and how many next calls, a description lists.
pub const DESCRIBE_RECENT: u32 = 10;
pub const DESCRIBE_UPCOMING: usize = 5;
/// How far back the counts look.
pub const DESCRIBE_WINDOW: chrono::Duration = chrono::Duration::days(7);

/// One upcoming call: the occurrence and, with a jitter, its call instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpcomingCall {
    pub occurrence: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

/// A schedule described.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleDescription {
    pub schedule: Schedule,
    pub paused: Option<PauseRecord>,
    /// The job open now (scheduled, pending or running), if any; under `allow_all`, the
    /// latest of them.
    pub open_job: Option<Job>,
    /// The latest jobs, newest first.
    pub recent: Vec<Job>,
    /// The next calls, soonest first: none for a schedule that is not active.
    pub upcoming: Vec<UpcomingCall>,
    /// What the counts cover: occurrences at or after this instant.
    pub since: DateTime<Utc>,
    pub counts: ScheduleJobCounts,
}

impl Ops {
    /// Describes schedule `id` as of `now` (a deleted one too: its history stays).
    pub async fn schedule_describe(
        &self,
        env: EnvId,
        id: ScheduleId,
        now: DateTime<Utc>,
    ) -> OpsResult<ScheduleDescription> {
        let mut tx = self.store.tenant_read(env).await?;
        let schedule = tx
            .schedule_get(id)
            .await?
            .ok_or(OpsError::NotFound("schedule"))?;
        let paused = pause_record(&mut *tx, &schedule).await?;
        let open_job = tx.job_get_open(id).await?;
        let recent = tx
            .job_list(&JobQuery {
                schedule_id: Some(id),
                limit: DESCRIBE_RECENT,
                ..JobQuery::default()
            })
            .await?;
        let since = now - DESCRIBE_WINDOW;
        let counts = tx.schedule_job_counts(id, since).await?;
        drop(tx);
        let upcoming = upcoming_calls(&schedule);
        Ok(ScheduleDescription {
            schedule,
            paused,
            open_job,
            recent,
            upcoming,
            since,
            counts,
        })
    }
}

/// The next calls of an active schedule from its stored next call on, as the engine will
/// make them.
fn upcoming_calls(schedule: &Schedule) -> Vec<UpcomingCall> {
    let (ScheduleStatus::Active, Some(next)) = (schedule.status, schedule.next_run_at) else {
        return Vec::new();
    };
    let occurrences = schedule.occurrences();
    let first = (occurrences.occurrence_of(next), next);
    let mut calls: Vec<UpcomingCall> = occurrences
        .walk(Some(first))
        .take(DESCRIBE_UPCOMING)
        .map(|(occurrence, at)| UpcomingCall { occurrence, at })
        .collect();
    // A schedule with runs left fires no more than those.
    if let Some(left) = schedule.remaining_runs {
        calls.truncate(usize::try_from(left).unwrap_or(0));
    }
    calls
}
