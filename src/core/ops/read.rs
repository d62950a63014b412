//! Reads: a record by id, pages of records, and one environment's overview, each in a
//! read-only transaction ([`Store::tenant_read`]).

use super::{Ops, OpsError, OpsResult};
use crate::core::model::*;
use crate::core::store::*;

impl Ops {
    /// A schedule, unless it does not exist here or is deleted.
    pub async fn schedule_get(&self, env: EnvId, id: ScheduleId) -> OpsResult<Schedule> {
        self.schedule_read(env, id, false).await
    }

    /// A schedule; a deleted one only with `include_deleted` (its dead letters and jobs still
    /// point at it).
    pub async fn schedule_read(
        &self,
        env: EnvId,
        id: ScheduleId,
        include_deleted: bool,
    ) -> OpsResult<Schedule> {
        let mut tx = self.store.tenant_read(env).await?;
        tx.schedule_get(id)
            .await?
            .filter(|s| include_deleted || s.status != ScheduleStatus::Deleted)
            .ok_or(OpsError::NotFound("schedule"))
    }

    /// A page of schedules (deleted ones left out unless the query asks for them).
    pub async fn schedule_list(
        &self,
        env: EnvId,
        query: &ScheduleQuery,
    ) -> OpsResult<Vec<Schedule>> {
        storable_filter("domain", query.domain.as_deref())?;
        storable_filter("type_contains", query.type_contains.as_deref())?;
        let mut tx = self.store.tenant_read(env).await?;
        Ok(tx.schedule_list(query).await?)
    }

    /// A job of this environment.
    pub async fn job_get(&self, env: EnvId, id: JobId) -> OpsResult<Job> {
        let mut tx = self.store.tenant_read(env).await?;
        tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))
    }

    /// A job of this environment with every recorded attempt, first attempt first, read in
    /// one transaction.
    pub async fn job_get_with_attempts(
        &self,
        env: EnvId,
        id: JobId,
    ) -> OpsResult<(Job, Vec<JobAttempt>)> {
        let mut tx = self.store.tenant_read(env).await?;
        let job = tx.job_get(id).await?.ok_or(OpsError::NotFound("job"))?;
        let attempts = tx.job_attempts_list(id).await?;
        Ok((job, attempts))
    }

    /// A page of the audit journal, newest first.
    pub async fn audit_list(&self, env: EnvId, query: &AuditQuery) -> OpsResult<Vec<AuditEntry>> {
        if let Some(Err(problem)) = query
            .actor
            .as_deref()
            .map(|actor| crate::core::storable::check_text("actor", actor))
        {
            return Err(OpsError::Invalid(vec![problem]));
        }
        let mut tx = self.store.tenant_read(env).await?;
        Ok(tx.audit_query(query).await?)
    }

    /// A page of jobs, newest first.
    pub async fn job_list(&self, env: EnvId, query: &JobQuery) -> OpsResult<Vec<Job>> {
        let mut tx = self.store.tenant_read(env).await?;
        Ok(tx.job_list(query).await?)
    }

    /// Which of these jobs a pause holds: pending (a retry, or a run triggered or republished
    /// before the pause) while their schedule is paused, so nothing claims them until it is
    /// resumed. Reads the schedules of the pending jobs in one read.
    pub async fn jobs_held_by_pause(
        &self,
        env: EnvId,
        jobs: &[Job],
    ) -> OpsResult<std::collections::HashSet<JobId>> {
        let pending: Vec<&Job> = jobs
            .iter()
            .filter(|job| job.status == JobStatus::Pending)
            .collect();
        if pending.is_empty() {
            return Ok(std::collections::HashSet::new());
        }
        let mut ids: Vec<ScheduleId> = pending.iter().map(|job| job.schedule_id).collect();
        ids.sort();
        ids.dedup();
        let mut tx = self.store.tenant_read(env).await?;
        let paused: std::collections::HashSet<ScheduleId> = tx
            .schedule_get_many(&ids, false)
            .await?
            .into_iter()
            .filter(|s| s.status == ScheduleStatus::Paused)
            .map(|s| s.id)
            .collect();
        Ok(pending
            .into_iter()
            .filter(|job| paused.contains(&job.schedule_id))
            .map(|job| job.id)
            .collect())
    }

    /// A dead-letter entry of this environment.
    pub async fn dlq_get(&self, env: EnvId, id: DlqId) -> OpsResult<DlqEntry> {
        let mut tx = self.store.tenant_read(env).await?;
        tx.dlq_get(id)
            .await?
            .ok_or(OpsError::NotFound("dead-letter entry"))
    }

    /// A page of dead-letter entries, newest first.
    pub async fn dlq_list(&self, env: EnvId, query: &DlqQuery) -> OpsResult<Vec<DlqEntry>> {
        storable_filter("domain", query.domain.as_deref())?;
        let mut tx = self.store.tenant_read(env).await?;
        Ok(tx.dlq_list(query).await?)
    }

    /// One environment's jobs in a window, summed up per hour (optionally one schedule's).
    pub async fn job_hours(&self, env: EnvId, query: &JobHoursQuery) -> OpsResult<JobHours> {
        let mut tx = self.store.tenant_read(env).await?;
        Ok(tx.job_hours(query).await?)
    }

    /// The environments that hold schedules, ids and counts only (at most `limit`).
    pub async fn envs_with_data(&self, limit: u32) -> OpsResult<Vec<EnvSummary>> {
        Ok(self.store.envs_with_data(limit).await?)
    }

    /// What the operator's overview shows of one environment, read in one transaction: counts
    /// by status, the latest `failures` failed jobs not resolved yet (a job whose dead letter
    /// was republished is `superseded`, one retried is open or finished again, so neither is
    /// listed) (each with its schedule, deleted or not,
    /// for a readable label) and the `upcoming` active schedules that fire soonest.
    pub async fn env_overview(
        &self,
        env: EnvId,
        failures: u32,
        upcoming: u32,
    ) -> OpsResult<EnvOverview> {
        let mut tx = self.store.tenant_read(env).await?;
        let counts = tx.env_counts().await?;
        let failed = tx
            .job_list(&JobQuery {
                status: Some(JobStatus::Failed),
                limit: failures,
                ..JobQuery::default()
            })
            .await?;
        let mut schedules: Vec<Schedule> = Vec::new();
        let mut recent_failures = Vec::with_capacity(failed.len());
        for job in failed {
            let known = schedules.iter().find(|s| s.id == job.schedule_id).cloned();
            let schedule = match known {
                Some(schedule) => Some(schedule),
                None => {
                    let fetched = tx.schedule_get(job.schedule_id).await?;
                    schedules.extend(fetched.clone());
                    fetched
                }
            };
            recent_failures.push((job, schedule));
        }
        let upcoming = tx.schedule_list_upcoming(upcoming).await?;
        Ok(EnvOverview {
            counts,
            recent_failures,
            upcoming,
        })
    }
}

/// One environment at a glance (see [`Ops::env_overview`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvOverview {
    pub counts: EnvCounts,
    /// Failed jobs, newest first, with their schedule when it still exists in any state.
    pub recent_failures: Vec<(Job, Option<Schedule>)>,
    /// Active schedules, soonest next fire first.
    pub upcoming: Vec<Schedule>,
}

/// A text filter is compared with stored text, so it must be text every store can hold.
fn storable_filter(field: &str, text: Option<&str>) -> OpsResult<()> {
    match text.map(|text| crate::core::storable::check_text(field, text)) {
        Some(Err(problem)) => Err(OpsError::Invalid(vec![problem])),
        _ => Ok(()),
    }
}
