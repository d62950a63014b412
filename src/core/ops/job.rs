//! Job and dead-letter operations: retrying a failed job, republishing a DLQ entry (which
//! supersedes the original job, so one occurrence is never delivered twice) and discarding
//! one (which supersedes the original with no successor: the occurrence never runs).

use super::audit::snapshot;
use super::schedule::live_for_update;
use super::{Actor, Ops, OpsError, OpsResult};
use crate::core::events::{self, EventPayload};
use crate::core::model::*;
use crate::core::policies::Overlap;
use crate::core::store::*;

impl Ops {
    /// Retries a failed job now. Its dead-letter entry, if any, is removed in the same
    /// transaction (it has been dealt with). A job that succeeded, whose occurrence a
    /// republished dead letter runs instead, or whose dead letter was discarded (superseded
    /// either way), is refused: retrying it would deliver the occurrence twice, or one the
    /// operator gave up.
    pub async fn job_retry(&self, env: EnvId, id: JobId, actor: &Actor) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let job = tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))?;
        retryable(&job)?;
        let schedule = live_for_update(&mut *tx, job.schedule_id).await?;
        // Re-read under the schedule's lock: a concurrent republish may have superseded it.
        let job = tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))?;
        retryable(&job)?;
        ensure_no_open_job(&mut *tx, job.schedule_id).await?;
        let retried = tx
            .job_set_pending(&JobSetPending {
                id: job.id,
                next_attempt_at: actor.now,
                now: actor.now,
            })
            .await?
            .ok_or_else(|| OpsError::Conflict("the job changed while retrying it".to_owned()))?;
        let entries = tx
            .dlq_list(&DlqQuery {
                job_id: Some(job.id),
                limit: 1000,
                ..DlqQuery::default()
            })
            .await?;
        for entry in &entries {
            tx.dlq_delete(entry.id).await?;
        }
        let event = EventPayload::for_schedule(events::JOB_RETRIED, &schedule, actor.now)
            .with_job(&retried)
            .by(&actor.name);
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(
            &actor
                .audit(
                    "job.retry",
                    "job",
                    id.to_string(),
                    snapshot(&job),
                    snapshot(&retried),
                )
                .on_schedule(schedule.id),
        )
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(retried)
    }

    /// Republishes a dead-letter entry: a fresh pending job due now, the original job marked
    /// superseded by it, and the entry removed, in one transaction. An entry of a deleted
    /// schedule cannot be republished (409); it can be discarded.
    pub async fn dlq_republish(&self, env: EnvId, id: DlqId, actor: &Actor) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let entry = tx
            .dlq_get(id)
            .await?
            .ok_or(OpsError::NotFound("dead-letter entry"))?;
        let schedule = tx
            .schedule_get_for_update(entry.schedule_id)
            .await?
            .ok_or(OpsError::NotFound("schedule"))?;
        if schedule.status == ScheduleStatus::Deleted {
            return Err(OpsError::Conflict(
                "schedule deleted: its dead letters can only be discarded".to_owned(),
            ));
        }
        // A schedule whose jobs run side by side (`allow_all`) takes the republished run beside
        // its open jobs; any other runs one job at a time.
        let concurrent = schedule.policies.overlap == Overlap::AllowAll;
        if !concurrent {
            ensure_no_open_job(&mut *tx, entry.schedule_id).await?;
        }
        let job = tx
            .job_insert(&NewJob {
                concurrent,
                ..NewJob::pending(schedule.id, entry.scheduled_for, actor.now)
            })
            .await?;
        if !tx.dlq_delete(id).await? {
            return Err(OpsError::NotFound("dead-letter entry"));
        }
        // The original may have been retried by hand since it landed (then it is no longer
        // failed and there is nothing to supersede).
        tx.job_set_superseded(&JobSetSuperseded {
            id: entry.job_id,
            superseded_by: Some(job.id),
            now: actor.now,
        })
        .await?;
        let event = EventPayload::for_schedule(events::DLQ_REPUBLISHED, &schedule, actor.now)
            .with_job(&job)
            .with_dlq(&entry)
            .by(&actor.name);
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(
            &actor
                .audit(
                    "dlq.republish",
                    "dlq",
                    id.to_string(),
                    snapshot(&entry),
                    snapshot(&job),
                )
                .on_schedule(schedule.id),
        )
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(job)
    }

    /// Discards a dead-letter entry: its original job is marked superseded with no successor
    /// in the same transaction, so the occurrence will not run (a retry of that job is
    /// refused). Entries of deleted schedules can be discarded too. The event and the audit
    /// entry commit with the removal.
    pub async fn dlq_discard(&self, env: EnvId, id: DlqId, actor: &Actor) -> OpsResult<DlqEntry> {
        let mut tx = self.store.tenant_begin(env).await?;
        let entry = tx
            .dlq_get(id)
            .await?
            .ok_or(OpsError::NotFound("dead-letter entry"))?;
        // Any status, deleted included: the lock orders this event after the schedule's others.
        let schedule = tx
            .schedule_get_for_update(entry.schedule_id)
            .await?
            .ok_or(OpsError::NotFound("schedule"))?;
        if !tx.dlq_delete(id).await? {
            return Err(OpsError::NotFound("dead-letter entry"));
        }
        // The original may have been retried by hand since it landed (then it is open or
        // finished again, not failed, and the guard leaves it alone) or removed by retention.
        tx.job_set_superseded(&JobSetSuperseded {
            id: entry.job_id,
            superseded_by: None,
            now: actor.now,
        })
        .await?;
        let mut event = EventPayload::for_schedule(events::DLQ_DISCARDED, &schedule, actor.now)
            .with_dlq(&entry)
            .by(&actor.name);
        event.job_id = Some(entry.job_id.to_string());
        event.scheduled_for = Some(entry.scheduled_for);
        event.error = Some(entry.last_error.clone());
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(
            &actor
                .audit("dlq.discard", "dlq", id.to_string(), snapshot(&entry), None)
                .on_schedule(schedule.id),
        )
        .await?;
        tx.commit().await?;
        Ok(entry)
    }
}

/// Refuses a retry that would deliver an occurrence again, naming what ran it instead.
fn retryable(job: &Job) -> OpsResult<()> {
    match (job.status, job.superseded_by) {
        (JobStatus::Failed, _) => Ok(()),
        (JobStatus::Superseded, Some(successor)) => Err(OpsError::Superseded { successor }),
        (JobStatus::Superseded, None) => Err(OpsError::Conflict(
            "this job's dead letter was discarded; the occurrence was given up and will not run"
                .to_owned(),
        )),
        (JobStatus::Succeeded, _) => Err(OpsError::Conflict(
            "this job already succeeded; retrying it would deliver the occurrence twice".to_owned(),
        )),
        (status, _) => Err(OpsError::Conflict(format!(
            "only failed jobs can be retried; this one is {status}"
        ))),
    }
}

/// Refuses to open a second job while the schedule has one (one open job per schedule), with a
/// message that says which job is in the way.
pub(super) async fn ensure_no_open_job(
    tx: &mut dyn TenantTx,
    schedule_id: ScheduleId,
) -> OpsResult<()> {
    match tx.job_get_open(schedule_id).await? {
        Some(open) => Err(OpsError::Conflict(format!(
            "the schedule already has an open job ({}, {}); try again when it has finished",
            open.id, open.status
        ))),
        None => Ok(()),
    }
}
