//! Job and dead-letter operations: retrying a failed job, republishing a DLQ entry.

use chrono::{DateTime, Utc};

use super::audit::snapshot;
use super::schedule::live_for_update;
use super::{Actor, Ops, OpsError, OpsResult};
use crate::core::events::{self, EventPayload};
use crate::core::model::*;
use crate::core::store::*;

impl Ops {
    /// Retries a failed job now. Its dead-letter entry, if any, is removed in the same
    /// transaction (it has been dealt with).
    pub async fn job_retry(&self, env: EnvId, id: JobId, actor: &Actor) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let job = tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))?;
        let schedule = live_for_update(&mut *tx, job.schedule_id).await?;
        if job.status != JobStatus::Failed {
            return Err(OpsError::Conflict(format!(
                "only failed jobs can be retried; this one is {}",
                job.status
            )));
        }
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
        tx.audit_insert(&actor.audit(
            "job.retry",
            "job",
            id.to_string(),
            snapshot(&job),
            snapshot(&retried),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(retried)
    }

    /// Republishes a dead-letter entry: a fresh pending job due now, and the entry removed, in
    /// one transaction.
    pub async fn dlq_republish(&self, env: EnvId, id: DlqId, actor: &Actor) -> OpsResult<Job> {
        let mut tx = self.store.tenant_begin(env).await?;
        let entry = tx
            .dlq_get(id)
            .await?
            .ok_or(OpsError::NotFound("dead-letter entry"))?;
        let schedule = live_for_update(&mut *tx, entry.schedule_id).await?;
        ensure_no_open_job(&mut *tx, entry.schedule_id).await?;
        let job = tx
            .job_insert(&pending_now(schedule.id, entry.scheduled_for, actor.now))
            .await?;
        if !tx.dlq_delete(id).await? {
            return Err(OpsError::NotFound("dead-letter entry"));
        }
        let event = EventPayload::for_schedule(events::DLQ_REPUBLISHED, &schedule, actor.now)
            .with_job(&job)
            .with_dlq(&entry)
            .by(&actor.name);
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(&actor.audit(
            "dlq.republish",
            "dlq",
            id.to_string(),
            snapshot(&entry),
            snapshot(&job),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(job)
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

pub(super) fn pending_now(
    schedule_id: ScheduleId,
    scheduled_for: DateTime<Utc>,
    now: DateTime<Utc>,
) -> NewJob {
    NewJob {
        id: JobId::new(),
        schedule_id,
        status: JobStatus::Pending,
        attempt: 0,
        scheduled_for,
        next_attempt_at: Some(now),
        started_at: None,
        finished_at: None,
        error: None,
        lease_until: None,
        missed: None,
        now,
    }
}
