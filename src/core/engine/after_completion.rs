//! `after_completion: delete`: a completed schedule that asks for it is soft-deleted by the
//! engine once nothing of it is left to run, audited and with its `schedule.deleted` event.
//!
//! Completion and the end of the last job are separate moments: a one-shot completes when its
//! job ends, a bounded cron schedule when its last fire is claimed, before that fire's call.
//! Both moments ask [`delete_when_done`], which deletes only when no job of the schedule is
//! claimed ahead, pending, running or buffered, so a call in flight is never withdrawn by it.

use chrono::{DateTime, Utc};

use super::outcome::engine_audit;
use super::parts::ENGINE_ACTOR;
use crate::core::events::{self, EventPayload};
use crate::core::model::{JobStatus, Schedule, ScheduleStatus};
use crate::core::policies::AfterCompletion;
use crate::core::store::{NewEvent, ScheduleSetDeleted, StoreResult, TenantTx};

/// Why the engine deleted it, in its audit entry and event.
pub(crate) const REASON: &str =
    "after_completion: delete (the schedule completed and its last job ended)";

/// The jobs that keep a completed schedule from being deleted: any still to run or running.
const UNFINISHED: &[JobStatus] = &[
    JobStatus::Scheduled,
    JobStatus::Pending,
    JobStatus::Running,
    JobStatus::Buffered,
];

/// Whether `schedule` has completed and asks to be deleted then.
pub(super) fn wants_deleting(schedule: &Schedule) -> bool {
    schedule.status == ScheduleStatus::Completed
        && schedule.policies.after_completion == AfterCompletion::Delete
}

/// Deletes `schedule` (and updates it in place) when it [`wants_deleting`] and no job of it is
/// unfinished; returns the `schedule.deleted` event, to go out after the events of what
/// completed it.
pub(super) async fn delete_when_done(
    tx: &mut dyn TenantTx,
    schedule: &mut Schedule,
    now: DateTime<Utc>,
) -> StoreResult<Option<NewEvent>> {
    if !wants_deleting(schedule)
        || !tx
            .jobs_of_schedule(schedule.id, UNFINISHED)
            .await?
            .is_empty()
    {
        return Ok(None);
    }
    let before = schedule.clone();
    *schedule = tx
        .schedule_set_deleted(&ScheduleSetDeleted {
            id: schedule.id,
            actor: ENGINE_ACTOR.to_owned(),
            now,
        })
        .await?;
    tracing::info!(
        schedule_id = %schedule.id,
        "completed schedule deleted (after_completion: delete)"
    );
    tx.audit_insert(&engine_audit(
        "schedule.delete",
        &before,
        schedule,
        REASON,
        now,
    ))
    .await?;
    Ok(Some(
        EventPayload::for_schedule(events::SCHEDULE_DELETED, schedule, now)
            .with_reason(REASON)
            .by(ENGINE_ACTOR)
            .into_event(schedule),
    ))
}
