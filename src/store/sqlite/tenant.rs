//! The tenant transaction: every tenant read and write binds the transaction's own env id.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{Sqlite, Transaction};

use super::{SqliteCells, placeholder, query};
use crate::core::model::*;
use crate::core::store::*;
use crate::store::rows::hours::{self, HourRow, HoursDialect, job_hours_sql};
use crate::store::rows::{
    self, AUDIT_COLUMNS, DLQ_COLUMNS, JOB_COLUMNS, OPEN_JOB, OUTBOX_COLUMNS, SCHEDULE_COLUMNS, Sql,
    TenantRows, Val,
};
use crate::store::{Rings, db_err};

pub(super) struct SqliteTenantTx {
    pub(super) tx: Transaction<'static, Sqlite>,
    pub(super) env_id: EnvId,
    signals: Arc<Signals>,
    on_commit: Rings,
}

impl SqliteTenantTx {
    pub(super) fn new(
        tx: Transaction<'static, Sqlite>,
        env_id: EnvId,
        signals: Arc<Signals>,
    ) -> Self {
        Self {
            tx,
            env_id,
            signals,
            on_commit: Rings::default(),
        }
    }

    pub(super) fn env(&self) -> String {
        self.env_id.0.to_string()
    }

    /// A statement that binds the env id as `?1` and an id as `?2`, returning at most one row.
    async fn by_id(&mut self, sql: &str, id: uuid::Uuid) -> StoreResult<Option<SqliteRow>> {
        sqlx::query(sql)
            .bind(self.env())
            .bind(id.to_string())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)
    }
}

impl rows::TenantRows for SqliteTenantTx {
    type Row = SqliteRow;
    const PLACEHOLDER: rows::Placeholder = placeholder;

    fn tenant(&self) -> EnvId {
        self.env_id
    }

    async fn fetch_optional(&mut self, sql: &Sql) -> StoreResult<Option<SqliteRow>> {
        query(sql)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)
    }

    async fn fetch_one(&mut self, sql: &Sql) -> StoreResult<SqliteRow> {
        query(sql).fetch_one(&mut *self.tx).await.map_err(db_err)
    }
}

#[async_trait]
impl TenantTx for SqliteTenantTx {
    fn env_id(&self) -> EnvId {
        self.env_id
    }

    fn notify_on_commit(&mut self, channel: Channel) {
        // One process owns the file in practice; other processes fall back to polling.
        self.on_commit.request(channel, false);
    }

    async fn schedule_insert(&mut self, new: &NewSchedule) -> StoreResult<Schedule> {
        rows::insert_schedule(self, new).await
    }

    async fn schedule_get(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = ?1 AND id = ?2");
        let row = self.by_id(&sql, id.0).await?;
        rows::map_row(row.as_ref(), "schedules", rows::schedule)
    }

    async fn schedule_get_for_update(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        // One connection serialises every transaction: a plain read is already exclusive.
        self.schedule_get(id).await
    }

    async fn schedule_get_by_type(
        &mut self,
        domain: &str,
        schedule_type: &str,
    ) -> StoreResult<Option<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = ?1 AND domain = ?2 AND schedule_type = ?3 AND status <> 'deleted'"
        );
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(domain)
            .bind(schedule_type)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "schedules", rows::schedule)
    }

    async fn schedule_list(&mut self, query: &ScheduleQuery) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = ?1 \
               AND (?2 IS NULL OR domain = ?2) \
               AND (?3 IS NULL OR status = ?3) \
               AND (?4 OR status <> 'deleted') \
               AND (?5 IS NULL OR id > ?5) \
               AND (?7 IS NULL OR instr(lower(schedule_type), lower(?7)) > 0) \
             ORDER BY id LIMIT ?6"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(&query.domain)
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.include_deleted)
            .bind(query.after.map(|id| id.0.to_string()))
            .bind(i64::from(query.limit))
            .bind(&query.type_contains)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn schedule_list_upcoming(&mut self, limit: u32) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = ?1 AND status = 'active' AND next_run_at IS NOT NULL \
             ORDER BY next_run_at, id LIMIT ?2"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(i64::from(limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn schedule_list_in_zone(&mut self, timezone: &str) -> StoreResult<Vec<Schedule>> {
        // One connection serialises every transaction: plain reads are already exclusive.
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = ?1 AND status = 'active' AND kind = 'cron' AND timezone = ?2 \
             ORDER BY id"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(timezone)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn schedule_set_next_run(
        &mut self,
        change: &ScheduleSetNextRun,
    ) -> StoreResult<Option<Schedule>> {
        rows::set_schedule_guarded(self, change.id, rows::schedule_set_next_run(change)).await
    }

    async fn schedule_set_definition(
        &mut self,
        change: &ScheduleSetDefinition,
    ) -> StoreResult<Schedule> {
        rows::set_schedule(self, change.id, rows::schedule_set_definition(change)).await
    }

    async fn schedule_set_status(&mut self, change: &ScheduleSetStatus) -> StoreResult<Schedule> {
        rows::set_schedule(self, change.id, rows::schedule_set_status(change)).await
    }

    async fn schedule_set_deleted(&mut self, change: &ScheduleSetDeleted) -> StoreResult<Schedule> {
        rows::set_schedule(self, change.id, rows::schedule_set_deleted(change)).await
    }

    async fn schedule_set_outcome(&mut self, change: &ScheduleSetOutcome) -> StoreResult<Schedule> {
        rows::set_schedule(self, change.id, rows::schedule_set_outcome(change)).await
    }

    async fn schedule_get_many(
        &mut self,
        ids: &[ScheduleId],
        _for_update: bool,
    ) -> StoreResult<Vec<Schedule>> {
        // One connection serialises every transaction: plain reads are already exclusive.
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(schedule) = self.schedule_get(*id).await? {
                found.push(schedule);
            }
        }
        found.sort_by_key(|s| s.id);
        found.dedup_by_key(|s| s.id);
        Ok(found)
    }

    async fn schedule_claim_many(
        &mut self,
        claims: &[ScheduleClaim],
    ) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "UPDATE schedules SET next_run_at = ?4, last_run_at = ?5, updated_at = ?5 \
             WHERE env_id = ?1 AND id = ?2 AND status = 'active' AND next_run_at = ?3 \
             RETURNING {SCHEDULE_COLUMNS}"
        );
        let mut claimed = Vec::with_capacity(claims.len());
        for claim in claims {
            let row = sqlx::query(&sql)
                .bind(self.env())
                .bind(claim.id.0.to_string())
                .bind(claim.expected_next_run_at.timestamp_micros())
                .bind(claim.next_run_at.map(|t| t.timestamp_micros()))
                .bind(claim.now.timestamp_micros())
                .fetch_optional(&mut *self.tx)
                .await
                .map_err(db_err)?;
            claimed.extend(rows::map_row(row.as_ref(), "schedules", rows::schedule)?);
        }
        Ok(claimed)
    }

    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
        let mut opened = Vec::with_capacity(new.len());
        for job in new {
            let columns = rows::job_insert(self.env_id, job);
            let mut sql = Sql::insert(placeholder, "jobs", columns, "");
            sql.text = format!(
                "{} ON CONFLICT (schedule_id) WHERE {OPEN_JOB} DO NOTHING \
                 RETURNING {JOB_COLUMNS}",
                sql.text
            );
            let row = self.fetch_optional(&sql).await?;
            opened.extend(rows::map_row(row.as_ref(), "jobs", rows::job)?);
        }
        Ok(opened)
    }

    async fn job_finish_many(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>> {
        let mut finished = Vec::with_capacity(finishes.len());
        for finish in finishes {
            let sql = rows::job_finish_sql(
                placeholder,
                Val::uuid(self.env_id.0),
                Val::uuid(finish.id.0),
                finish,
            );
            let row = self.fetch_optional(&sql).await?;
            if let Some(job) = rows::map_row(row.as_ref(), "jobs", rows::job)? {
                self.attempts_insert(&[finish]).await?;
                finished.push(job);
            }
        }
        Ok(finished)
    }

    async fn job_attempts_list(&mut self, job_id: JobId) -> StoreResult<Vec<JobAttempt>> {
        self.attempts_list(job_id).await
    }

    async fn job_set_superseded(&mut self, change: &JobSetSuperseded) -> StoreResult<Option<Job>> {
        rows::set_job(self, change.id, rows::job_set_superseded(change)).await
    }

    async fn job_insert(&mut self, new: &NewJob) -> StoreResult<Job> {
        rows::insert_job(self, new).await
    }

    async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = ?1 AND id = ?2");
        let row = self.by_id(&sql, id.0).await?;
        rows::map_row(row.as_ref(), "jobs", rows::job)
    }

    async fn schedules_with_open_job(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<ScheduleId>> {
        let sql =
            format!("SELECT id FROM jobs WHERE env_id = ?1 AND schedule_id = ?2 AND {OPEN_JOB}");
        let mut open = Vec::new();
        for id in ids {
            if self.by_id(&sql, id.0).await?.is_some() {
                open.push(*id);
            }
        }
        Ok(open)
    }

    async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = ?1 AND schedule_id = ?2 AND {OPEN_JOB}"
        );
        let row = self.by_id(&sql, schedule_id.0).await?;
        rows::map_row(row.as_ref(), "jobs", rows::job)
    }

    async fn job_list(&mut self, query: &JobQuery) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = ?1 \
               AND (?2 IS NULL OR schedule_id = ?2) \
               AND (?3 IS NULL OR status = ?3) \
               AND (?4 IS NULL OR id < ?4) \
             ORDER BY id DESC LIMIT ?5"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(query.schedule_id.map(|id| id.0.to_string()))
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.before.map(|id| id.0.to_string()))
            .bind(i64::from(query.limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "jobs", rows::job)
    }

    async fn job_set_pending(&mut self, change: &JobSetPending) -> StoreResult<Option<Job>> {
        rows::set_job(self, change.id, rows::job_set_pending(change)).await
    }

    async fn job_cancel(&mut self, change: &JobCancel) -> StoreResult<Option<Job>> {
        rows::set_job(self, change.id, rows::job_cancel(change)).await
    }

    async fn job_withdraw(&mut self, change: &JobWithdraw) -> StoreResult<Option<Job>> {
        rows::set_job(self, change.id, rows::job_withdraw(change)).await
    }

    async fn job_release(&mut self, change: &JobRelease) -> StoreResult<Option<Job>> {
        rows::set_job(self, change.id, rows::job_release(change)).await
    }

    async fn job_claim(&mut self, claim: &JobClaim) -> StoreResult<Option<Job>> {
        let sql = format!(
            "UPDATE jobs SET status = 'running', attempt = attempt + 1, started_at = ?3, \
             next_attempt_at = NULL, updated_at = ?3, lease_until = ?4 \
             WHERE env_id = ?1 AND id = ?2 AND status = 'pending' AND next_attempt_at <= ?3 \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(claim.id.0.to_string())
            .bind(claim.now.timestamp_micros())
            .bind(claim.lease_until.timestamp_micros())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "jobs", rows::job)
    }

    async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry> {
        rows::insert_dlq(self, new).await
    }

    async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>> {
        let sql = format!("SELECT {DLQ_COLUMNS} FROM dlq WHERE env_id = ?1 AND id = ?2");
        let row = self.by_id(&sql, id.0).await?;
        rows::map_row(row.as_ref(), "dlq", rows::dlq)
    }

    async fn dlq_list(&mut self, query: &DlqQuery) -> StoreResult<Vec<DlqEntry>> {
        let sql = format!(
            "SELECT {DLQ_COLUMNS} FROM dlq \
             WHERE env_id = ?1 \
               AND (?2 IS NULL OR domain = ?2) \
               AND (?3 IS NULL OR schedule_id = ?3) \
               AND (?4 IS NULL OR id < ?4) \
               AND (?6 IS NULL OR job_id = ?6) \
             ORDER BY id DESC LIMIT ?5"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(&query.domain)
            .bind(query.schedule_id.map(|id| id.0.to_string()))
            .bind(query.before.map(|id| id.0.to_string()))
            .bind(i64::from(query.limit))
            .bind(query.job_id.map(|id| id.0.to_string()))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "dlq", rows::dlq)
    }

    async fn dlq_delete(&mut self, id: DlqId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM dlq WHERE env_id = ?1 AND id = ?2")
            .bind(self.env())
            .bind(id.0.to_string())
            .execute(&mut *self.tx)
            .await
            .map_err(db_err)?;
        Ok(done.rows_affected() == 1)
    }

    async fn env_counts(&mut self) -> StoreResult<EnvCounts> {
        let row = sqlx::query(&rows::env_counts_sql("?1"))
            .bind(self.env())
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::env_counts(&SqliteCells(&row, "counts"))
    }

    async fn job_hours(&mut self, query: &JobHoursQuery) -> StoreResult<JobHours> {
        const DIALECT: HoursDialect = HoursDialect {
            hour: "scheduled_for / 3600000000",
            late: "({first} - scheduled_for) / 1000",
            env: "?1",
            from: "?2",
            to: "?3",
            schedule: "?4",
        };
        let mut rows = Vec::with_capacity(2);
        for by_hour in [true, false] {
            let found: Vec<HourRow> = sqlx::query_as(&job_hours_sql(&DIALECT, by_hour))
                .bind(self.env())
                .bind(query.from.timestamp_micros())
                .bind(query.to.timestamp_micros())
                .bind(query.schedule_id.map(|id| id.0.to_string()))
                .fetch_all(&mut *self.tx)
                .await
                .map_err(db_err)?;
            rows.push(found);
        }
        let window = rows.pop().and_then(|mut w| w.pop());
        hours::job_hours(rows.pop().unwrap_or_default(), window)
    }

    async fn outbox_insert_many(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        for event in events {
            let columns = rows::outbox_insert(self.env_id, event);
            let sql = Sql::insert(placeholder, "outbox", columns, "");
            query(&sql).execute(&mut *self.tx).await.map_err(db_err)?;
        }
        if !events.is_empty() {
            self.on_commit.request(Channel::Outbox, false);
        }
        Ok(())
    }

    async fn outbox_list(&mut self, after_seq: i64, limit: u32) -> StoreResult<Vec<OutboxEvent>> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE env_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(after_seq)
            .bind(i64::from(limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "outbox", rows::outbox)
    }

    async fn audit_insert(&mut self, entry: &NewAudit) -> StoreResult<()> {
        let columns = rows::audit_insert(self.env_id, entry);
        let sql = Sql::insert(placeholder, "audit_journal", columns, "");
        query(&sql).execute(&mut *self.tx).await.map_err(db_err)?;
        Ok(())
    }

    async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_journal WHERE env_id = ?1 ORDER BY at, id LIMIT ?2"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(i64::from(limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "audit_journal", rows::audit)
    }

    async fn audit_query(&mut self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
        self.audit_page(query).await
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let this = *self;
        this.tx.commit().await.map_err(db_err)?;
        this.on_commit.ring(&this.signals);
        Ok(())
    }
}
