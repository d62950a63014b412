//! The tenant operations both backends run the same way: reads by id and small lists whose SQL
//! differs only in placeholders, and the [`shared_tenant_methods!`] macro that puts them, and
//! the named transitions, into each backend's `TenantTx` implementation, so each is written
//! once.

use uuid::Uuid;

use super::{
    ATTEMPT_COLUMNS, AUDIT_COLUMNS, DLQ_COLUMNS, JOB_COLUMNS, OPEN_JOB, OUTBOX_COLUMNS, RowCells,
    SCHEDULE_COLUMNS, Sql, TenantRows, Val, map_row, map_rows,
};
use crate::core::model::*;
use crate::core::store::*;

/// A statement with the transaction's environment as its first value; `text` builds the SQL
/// from that placeholder and the ones it adds.
pub(super) fn scoped<T: TenantRows>(tx: &T, text: impl FnOnce(&str, &mut Sql) -> String) -> Sql {
    let mut sql = Sql::new(T::PLACEHOLDER);
    let env = sql.val(Val::uuid(tx.tenant().0));
    sql.text = text(&env, &mut sql);
    sql
}

/// The row of `table` with `id` in the transaction's environment; `lock` ends the statement
/// (`""`, or a backend's [`TenantRows::FOR_UPDATE`]).
pub(crate) async fn row_by_id<T: TenantRows>(
    tx: &mut T,
    table: &str,
    columns: &str,
    id: Uuid,
    lock: &str,
) -> StoreResult<Option<T::Row>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id));
        format!("SELECT {columns} FROM {table} WHERE env_id = {env} AND id = {id}{lock}")
    });
    tx.fetch_optional(&sql).await
}

/// The schedule with `id`, read with `lock` at its end.
pub(crate) async fn schedule_by_id<T: TenantRows>(
    tx: &mut T,
    id: ScheduleId,
    lock: &str,
) -> StoreResult<Option<Schedule>> {
    let row = row_by_id(tx, "schedules", SCHEDULE_COLUMNS, id.0, lock).await?;
    map_row(row.as_ref(), "schedules", super::schedule)
}

/// The active cron schedules in `timezone`, in id order, their rows locked. A row another
/// transaction holds (a claim moving that schedule's next fire itself) is left out rather than
/// waited for, so this never waits on, or deadlocks with, a claim.
pub(crate) async fn schedules_in_zone<T: TenantRows>(
    tx: &mut T,
    timezone: &str,
) -> StoreResult<Vec<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let timezone = sql.val(Val::text(timezone));
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = {env} AND status = 'active' AND kind = 'cron' \
               AND timezone = {timezone} \
             ORDER BY id{}",
            T::FOR_UPDATE_SKIP_LOCKED
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "schedules", super::schedule)
}

/// Deletes the row of `table` with `id`; whether there was one.
pub(crate) async fn delete_by_id<T: TenantRows>(
    tx: &mut T,
    table: &str,
    id: Uuid,
) -> StoreResult<bool> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id));
        format!("DELETE FROM {table} WHERE env_id = {env} AND id = {id}")
    });
    Ok(tx.execute(&sql).await? == 1)
}

/// The answer written ahead of its record for `attempt` of job `id`.
pub(crate) async fn answer_of<T: TenantRows>(
    tx: &mut T,
    id: JobId,
    attempt: i32,
) -> StoreResult<Option<JobAnswer>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(id.0));
        let attempt = sql.val(Val::I32(attempt));
        format!(
            "SELECT {} FROM job_answers WHERE env_id = {env} AND job_id = {id} \
             AND attempt = {attempt}",
            super::JOB_ANSWER_COLUMNS
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "job_answers", super::job_answer)
}

/// Deletes the answers written ahead for `ids`, in statements of a bounded number of values.
pub(crate) async fn answers_forget<T: TenantRows>(tx: &mut T, ids: &[JobId]) -> StoreResult<u64> {
    let mut forgotten = 0;
    for chunk in ids.chunks(500) {
        let sql = scoped(tx, |env, sql| {
            let list: Vec<String> = chunk.iter().map(|id| sql.val(Val::uuid(id.0))).collect();
            format!(
                "DELETE FROM job_answers WHERE env_id = {env} AND job_id IN ({})",
                list.join(", ")
            )
        });
        forgotten += tx.execute(&sql).await?;
    }
    Ok(forgotten)
}

/// Active schedules with a next fire, soonest first.
pub(crate) async fn schedules_upcoming<T: TenantRows>(
    tx: &mut T,
    limit: u32,
) -> StoreResult<Vec<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let limit = sql.val(Val::I64(i64::from(limit)));
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = {env} AND status = 'active' AND next_run_at IS NOT NULL \
             ORDER BY next_run_at, id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "schedules", super::schedule)
}

/// The first audit entries, oldest first.
pub(crate) async fn audit_first<T: TenantRows>(
    tx: &mut T,
    limit: u32,
) -> StoreResult<Vec<AuditEntry>> {
    let sql = scoped(tx, |env, sql| {
        let limit = sql.val(Val::I64(i64::from(limit)));
        format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_journal WHERE env_id = {env} \
             ORDER BY at, id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "audit_journal", super::audit)
}

/// Outbox events after `after_seq`, in order.
pub(crate) async fn outbox_after<T: TenantRows>(
    tx: &mut T,
    after_seq: i64,
    limit: u32,
) -> StoreResult<Vec<OutboxEvent>> {
    let sql = scoped(tx, |env, sql| {
        let after = sql.val(Val::I64(after_seq));
        let limit = sql.val(Val::I64(i64::from(limit)));
        format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE env_id = {env} AND seq > {after} \
             ORDER BY seq LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "outbox", super::outbox)
}

/// The environment's counts.
pub(crate) async fn counts<T: TenantRows>(tx: &mut T) -> StoreResult<EnvCounts> {
    let sql = scoped(tx, |env, _| super::env_counts_sql(env));
    let row = tx.fetch_one(&sql).await?;
    super::env_counts(&row.cells("counts"))
}

/// The live schedule of `domain` and `schedule_type`.
pub(crate) async fn schedule_by_type<T: TenantRows>(
    tx: &mut T,
    domain: &str,
    schedule_type: &str,
) -> StoreResult<Option<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let domain = sql.val(Val::text(domain));
        let schedule_type = sql.val(Val::text(schedule_type));
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = {env} AND domain = {domain} \
             AND schedule_type = {schedule_type} AND status <> 'deleted'"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "schedules", super::schedule)
}

/// A page of jobs, newest first, filtered as `query` says.
pub(crate) async fn jobs_page<T: TenantRows>(
    tx: &mut T,
    query: &JobQuery,
) -> StoreResult<Vec<Job>> {
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::Uuid(query.schedule_id.map(|id| id.0)));
        let status = sql.val(Val::Text(query.status.map(|s| s.as_str().to_owned())));
        let before = sql.val(Val::Uuid(query.before.map(|id| id.0)));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = {env} \
               AND ({schedule} IS NULL OR schedule_id = {schedule}) \
               AND ({status} IS NULL OR status = {status}) \
               AND ({before} IS NULL OR id < {before}) \
             ORDER BY id DESC LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "jobs", super::job)
}

/// A page of dead letters, newest first, filtered as `query` says.
pub(crate) async fn dlq_page<T: TenantRows>(
    tx: &mut T,
    query: &DlqQuery,
) -> StoreResult<Vec<DlqEntry>> {
    let sql = scoped(tx, |env, sql| {
        let domain = sql.val(Val::Text(query.domain.clone()));
        let schedule = sql.val(Val::Uuid(query.schedule_id.map(|id| id.0)));
        let job = sql.val(Val::Uuid(query.job_id.map(|id| id.0)));
        let before = sql.val(Val::Uuid(query.before.map(|id| id.0)));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        format!(
            "SELECT {DLQ_COLUMNS} FROM dlq WHERE env_id = {env} \
               AND ({domain} IS NULL OR domain = {domain}) \
               AND ({schedule} IS NULL OR schedule_id = {schedule}) \
               AND ({job} IS NULL OR job_id = {job}) \
               AND ({before} IS NULL OR id < {before}) \
             ORDER BY id DESC LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "dlq", super::dlq)
}

/// Claims a pending retry that is due: it becomes the next running attempt, leased.
pub(crate) async fn claim_retry<T: TenantRows>(
    tx: &mut T,
    claim: &JobClaim,
) -> StoreResult<Option<Job>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(claim.id.0));
        let now = sql.val(Val::ts(claim.now));
        let lease = sql.val(Val::ts(claim.lease_until));
        format!(
            "UPDATE jobs SET status = 'running', attempt = attempt + 1, started_at = {now}, \
             next_attempt_at = NULL, updated_at = {now}, lease_until = {lease}, \
             lease_epoch = lease_epoch + 1, called_at = NULL \
             WHERE env_id = {env} AND id = {id} AND status = 'pending' \
               AND next_attempt_at <= {now} \
             RETURNING {JOB_COLUMNS}"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "jobs", super::job)
}

/// An open job of a schedule: its fire claimed ahead if it has one, else its oldest (one
/// unless the schedule lets jobs run side by side).
pub(crate) async fn open_job<T: TenantRows>(
    tx: &mut T,
    schedule_id: ScheduleId,
) -> StoreResult<Option<Job>> {
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::uuid(schedule_id.0));
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = {env} AND schedule_id = {schedule} AND {OPEN_JOB} \
             ORDER BY status = 'scheduled' DESC, scheduled_for LIMIT 1"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "jobs", super::job)
}

/// A schedule's jobs in `statuses`: regular occurrences before backfilled ones, oldest first.
pub(crate) async fn jobs_in_status<T: TenantRows>(
    tx: &mut T,
    schedule_id: ScheduleId,
    statuses: &[JobStatus],
) -> StoreResult<Vec<Job>> {
    if statuses.is_empty() {
        return Ok(Vec::new());
    }
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::uuid(schedule_id.0));
        let names: Vec<String> = statuses
            .iter()
            .map(|s| sql.val(Val::text(s.as_str())))
            .collect();
        format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = {env} AND schedule_id = {schedule} AND status IN ({}) \
             ORDER BY backfill, scheduled_for, id",
            names.join(", ")
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "jobs", super::job)
}

/// A job's attempts, first to last.
pub(crate) async fn attempts_of<T: TenantRows>(
    tx: &mut T,
    job_id: JobId,
) -> StoreResult<Vec<JobAttempt>> {
    let sql = scoped(tx, |env, sql| {
        let job = sql.val(Val::uuid(job_id.0));
        format!(
            "SELECT {ATTEMPT_COLUMNS} FROM job_attempts WHERE env_id = {env} AND job_id = {job} \
             ORDER BY attempt"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "job_attempts", super::attempt)
}

/// A page of the audit journal, newest first, filtered as `query` says.
pub(crate) async fn audit_page<T: TenantRows>(
    tx: &mut T,
    query: &AuditQuery,
) -> StoreResult<Vec<AuditEntry>> {
    let sql = scoped(tx, |env, sql| {
        let schedule = sql.val(Val::Uuid(query.schedule_id.map(|id| id.0)));
        let actor = sql.val(Val::Text(query.actor.clone()));
        let since = sql.val(Val::Ts(query.since));
        let before = sql.val(Val::Uuid(query.before));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_journal WHERE env_id = {env} \
               AND ({schedule} IS NULL OR schedule_id = {schedule}) \
               AND ({actor} IS NULL OR actor = {actor}) \
               AND ({since} IS NULL OR at >= {since}) \
               AND ({before} IS NULL OR id < {before}) \
             ORDER BY id DESC LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "audit_journal", super::audit)
}

/// A page of schedules in id order, filtered as `query` says.
pub(crate) async fn schedules_page<T: TenantRows>(
    tx: &mut T,
    query: &ScheduleQuery,
) -> StoreResult<Vec<Schedule>> {
    let sql = scoped(tx, |env, sql| {
        let domain = sql.val(Val::Text(query.domain.clone()));
        let status = sql.val(Val::Text(query.status.map(|s| s.as_str().to_owned())));
        let deleted = sql.val(Val::Bool(query.include_deleted));
        let after = sql.val(Val::Uuid(query.after.map(|id| id.0)));
        let limit = sql.val(Val::I64(i64::from(query.limit)));
        let needle = sql.val(Val::Text(query.type_contains.clone()));
        let contains = (T::CONTAINS_IGNORING_CASE)("schedule_type", &needle);
        format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = {env} \
               AND ({domain} IS NULL OR domain = {domain}) \
               AND ({status} IS NULL OR status = {status}) \
               AND ({deleted} OR status <> 'deleted') \
               AND ({after} IS NULL OR id > {after}) \
               AND ({needle} IS NULL OR {contains}) \
             ORDER BY id LIMIT {limit}"
        )
    });
    let rows = tx.fetch_all(&sql).await?;
    map_rows(&rows, "schedules", super::schedule)
}

/// A backend's `impl TenantTx` with the methods both backends implement alike written once:
/// `tenant_tx! { impl TenantTx for Backend { its own methods } }`. The backend also implements
/// [`TenantRows`] and has an `env_id` field. (The whole impl is generated so that `async_trait` sees every method.)
macro_rules! tenant_tx {
    (impl TenantTx for $backend:ty { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl TenantTx for $backend {
        $($own)*
        fn env_id(&self) -> $crate::core::model::EnvId {
            self.env_id
        }

        async fn schedule_insert(&mut self, new: &NewSchedule) -> StoreResult<Schedule> {
            $crate::store::rows::insert_schedule(self, new).await
        }

        async fn schedule_get(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
            $crate::store::rows::schedule_by_id(self, id, "").await
        }

        async fn schedule_get_for_update(
            &mut self,
            id: ScheduleId,
        ) -> StoreResult<Option<Schedule>> {
            let lock = <Self as $crate::store::rows::TenantRows>::FOR_UPDATE;
            $crate::store::rows::schedule_by_id(self, id, lock).await
        }

        // Each backend asks "which of these schedules have such a job" its own way
        // (`schedules_with_job`); what they ask is the same.
        async fn schedules_with_open_job(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            self.schedules_with_job(ids, $crate::store::rows::OPEN_JOB)
                .await
        }

        async fn schedules_with_buffered(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            self.schedules_with_job(ids, "status = 'buffered'").await
        }

        async fn schedules_with_buffered_occurrence(
            &mut self,
            ids: &[ScheduleId],
        ) -> StoreResult<Vec<ScheduleId>> {
            self.schedules_with_job(ids, "status = 'buffered' AND NOT backfill")
                .await
        }

        async fn jobs_open_of(&mut self, ids: &[ScheduleId]) -> StoreResult<Vec<Job>> {
            $crate::store::rows::open_jobs_of(self, ids).await
        }

        async fn schedule_list_in_zone(&mut self, timezone: &str) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::schedules_in_zone(self, timezone).await
        }

        async fn job_hours(&mut self, query: &JobHoursQuery) -> StoreResult<JobHours> {
            $crate::store::rows::hours::job_hours_of(self, query).await
        }

        async fn schedule_get_by_type(
            &mut self,
            domain: &str,
            schedule_type: &str,
        ) -> StoreResult<Option<Schedule>> {
            $crate::store::rows::schedule_by_type(self, domain, schedule_type).await
        }

        async fn job_list(&mut self, query: &JobQuery) -> StoreResult<Vec<Job>> {
            $crate::store::rows::jobs_page(self, query).await
        }

        async fn dlq_list(&mut self, query: &DlqQuery) -> StoreResult<Vec<DlqEntry>> {
            $crate::store::rows::dlq_page(self, query).await
        }

        async fn job_claim(&mut self, claim: &JobClaim) -> StoreResult<Option<Job>> {
            $crate::store::rows::claim_retry(self, claim).await
        }

        async fn job_release_uncalled(
            &mut self,
            change: &UncalledRelease,
        ) -> StoreResult<Option<Job>> {
            $crate::store::rows::release_uncalled(self, change).await
        }

        async fn schedule_list_upcoming(&mut self, limit: u32) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::schedules_upcoming(self, limit).await
        }

        async fn schedule_set_next_run(
            &mut self,
            change: &ScheduleSetNextRun,
        ) -> StoreResult<Option<Schedule>> {
            $crate::store::rows::set_schedule_guarded(
                self,
                change.id,
                $crate::store::rows::schedule_set_next_run(change),
            )
            .await
        }

        async fn schedule_set_definition(
            &mut self,
            change: &ScheduleSetDefinition,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_definition(change),
            )
            .await
        }

        async fn schedule_set_status(
            &mut self,
            change: &ScheduleSetStatus,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_status(change),
            )
            .await
        }

        async fn schedule_set_deleted(
            &mut self,
            change: &ScheduleSetDeleted,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_deleted(change),
            )
            .await
        }

        async fn schedule_set_outcome(
            &mut self,
            change: &ScheduleSetOutcome,
        ) -> StoreResult<Schedule> {
            $crate::store::rows::set_schedule(
                self,
                change.id,
                $crate::store::rows::schedule_set_outcome(change),
            )
            .await
        }

        async fn job_attempts_list(&mut self, job_id: JobId) -> StoreResult<Vec<JobAttempt>> {
            $crate::store::rows::attempts_of(self, job_id).await
        }

        async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>> {
            $crate::store::rows::open_job(self, schedule_id).await
        }

        async fn schedule_list(&mut self, query: &ScheduleQuery) -> StoreResult<Vec<Schedule>> {
            $crate::store::rows::schedules_page(self, query).await
        }

        async fn job_set_superseded(
            &mut self,
            change: &JobSetSuperseded,
        ) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_set_superseded(change),
            )
            .await
        }

        async fn job_insert(&mut self, new: &NewJob) -> StoreResult<Job> {
            $crate::store::rows::insert_job(self, new).await
        }

        async fn job_answer_get(
            &mut self,
            id: JobId,
            attempt: i32,
        ) -> StoreResult<Option<JobAnswer>> {
            $crate::store::rows::answer_of(self, id, attempt).await
        }

        async fn job_answers_forget(&mut self, ids: &[JobId]) -> StoreResult<u64> {
            $crate::store::rows::answers_forget(self, ids).await
        }

        async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>> {
            let row = $crate::store::rows::row_by_id(
                self,
                "jobs",
                $crate::store::rows::JOB_COLUMNS,
                id.0,
                "",
            )
            .await?;
            $crate::store::rows::map_row(row.as_ref(), "jobs", $crate::store::rows::job)
        }

        async fn job_set_pending(&mut self, change: &JobSetPending) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_set_pending(change),
            )
            .await
        }

        async fn job_cancel(&mut self, change: &JobCancel) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_cancel(change))
                .await
        }

        async fn job_withdraw(&mut self, change: &JobWithdraw) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_withdraw(change))
                .await
        }

        async fn job_release(&mut self, change: &JobRelease) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(self, change.id, $crate::store::rows::job_release(change))
                .await
        }

        async fn jobs_of_schedule(
            &mut self,
            schedule_id: ScheduleId,
            statuses: &[JobStatus],
        ) -> StoreResult<Vec<Job>> {
            $crate::store::rows::jobs_in_status(self, schedule_id, statuses).await
        }

        async fn job_release_buffered(&mut self, change: &JobRelease) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_release_buffered(change),
            )
            .await
        }

        async fn job_drop_buffered(&mut self, change: &JobCancel) -> StoreResult<Option<Job>> {
            $crate::store::rows::set_job(
                self,
                change.id,
                $crate::store::rows::job_drop_buffered(change),
            )
            .await
        }

        async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry> {
            $crate::store::rows::insert_dlq(self, new).await
        }

        async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>> {
            let row =
                $crate::store::rows::row_by_id(self, "dlq", $crate::store::rows::DLQ_COLUMNS, id.0, "")
                    .await?;
            $crate::store::rows::map_row(row.as_ref(), "dlq", $crate::store::rows::dlq)
        }

        async fn dlq_delete(&mut self, id: DlqId) -> StoreResult<bool> {
            $crate::store::rows::delete_by_id(self, "dlq", id.0).await
        }

        async fn env_counts(&mut self) -> StoreResult<EnvCounts> {
            $crate::store::rows::counts(self).await
        }

        async fn outbox_list(
            &mut self,
            after_seq: i64,
            limit: u32,
        ) -> StoreResult<Vec<OutboxEvent>> {
            $crate::store::rows::outbox_after(self, after_seq, limit).await
        }

        async fn audit_insert(&mut self, entry: &NewAudit) -> StoreResult<()> {
            let sql = $crate::store::rows::Sql::insert(
                <Self as $crate::store::rows::TenantRows>::PLACEHOLDER,
                "audit_journal",
                $crate::store::rows::audit_insert(self.env_id, entry),
                "",
            );
            $crate::store::rows::TenantRows::execute(self, &sql).await?;
            Ok(())
        }

        async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
            $crate::store::rows::audit_first(self, limit).await
        }

        async fn audit_query(&mut self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
            $crate::store::rows::audit_page(self, query).await
        }
        }
    };
}
pub(crate) use tenant_tx;

/// A backend tenant transaction's [`TenantRows`]: its `tx` runs the backend's `query` (the
/// statement with its values bound, named at the expansion site) with `placeholder`; the
/// block holds the backend's spellings (`CONTAINS_IGNORING_CASE`, `FOR_UPDATE`, ...):
/// `tenant_rows!(Backend, Row, { const ...; })`.
macro_rules! tenant_rows {
    ($backend:ty, $row:ty, { $($dialect:tt)* }) => {
        impl $crate::store::rows::TenantRows for $backend {
            type Row = $row;
            const PLACEHOLDER: $crate::store::rows::Placeholder = placeholder;
            $($dialect)*

            fn tenant(&self) -> EnvId {
                self.env_id
            }

            async fn fetch_optional(
                &mut self,
                sql: &$crate::store::rows::Sql,
            ) -> StoreResult<Option<$row>> {
                query(sql)
                    .fetch_optional(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)
            }

            async fn fetch_one(&mut self, sql: &$crate::store::rows::Sql) -> StoreResult<$row> {
                query(sql)
                    .fetch_one(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)
            }

            async fn fetch_all(
                &mut self,
                sql: &$crate::store::rows::Sql,
            ) -> StoreResult<Vec<$row>> {
                query(sql)
                    .fetch_all(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)
            }

            async fn execute(&mut self, sql: &$crate::store::rows::Sql) -> StoreResult<u64> {
                let done = query(sql)
                    .execute(&mut *self.tx)
                    .await
                    .map_err($crate::store::db_err)?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use tenant_rows;
