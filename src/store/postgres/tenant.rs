//! The tenant transaction: every tenant read and write, inside a transaction whose tenant
//! context (the row-level security key) is set when it begins.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{PgCells, placeholder, query};
use crate::core::model::*;
use crate::core::store::*;
use crate::store::rows::hours::{self, HourRow, HoursDialect, job_hours_sql};
use crate::store::rows::{
    self, AUDIT_COLUMNS, DLQ_COLUMNS, JOB_COLUMNS, OPEN_JOB, OUTBOX_COLUMNS, SCHEDULE_COLUMNS, Sql,
    prefixed,
};
use crate::store::{Rings, db_err};

/// Opens a transaction and sets its tenant context in one round trip (one simple-protocol
/// message with both statements). The context is transaction-local, so it lives exactly as
/// long as this transaction. The env id is a typed UUID, formatted by us: nothing from a
/// request is spliced into the text.
pub(super) fn begin_tenant_sql(env_id: EnvId) -> String {
    let id: Uuid = env_id.0;
    format!("BEGIN; SELECT cron.sentin8_set_tenant_context('{id}'::uuid)")
}

/// A transaction with the tenant context set.
pub(super) struct PgTenantTx<'c> {
    pub(super) tx: Transaction<'c, Postgres>,
    pub(super) env_id: EnvId,
    signals: Arc<Signals>,
    on_commit: Rings,
    announce: Announce,
    /// Channels to hand to the announcer once committed.
    after_commit: Vec<Channel>,
}

/// How a committed change reaches other processes.
#[derive(Debug, Clone)]
pub(super) enum Announce {
    /// It does not (tests of one process).
    No,
    /// NOTIFY inside the transaction: delivered exactly when it commits (one-shot commands,
    /// which may exit right after).
    InTransaction,
    /// After the commit, through the store's coalescing announcer (`serve`): no NOTIFY in the
    /// writer's transaction, so commits are not serialised on the notification queue.
    AfterCommit(super::announce::Announcer),
}

impl<'c> PgTenantTx<'c> {
    pub(super) fn new(
        tx: Transaction<'c, Postgres>,
        env_id: EnvId,
        signals: Arc<Signals>,
        announce: Announce,
    ) -> Self {
        Self {
            tx,
            env_id,
            signals,
            on_commit: Rings::default(),
            announce,
            after_commit: Vec::new(),
        }
    }

    async fn one_schedule(&mut self, sql: &str, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let row = sqlx::query(sql)
            .bind(self.env_id.0)
            .bind(id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "schedules", rows::schedule)
    }
}

impl rows::TenantRows for PgTenantTx<'_> {
    type Row = PgRow;
    const PLACEHOLDER: rows::Placeholder = placeholder;

    fn tenant(&self) -> EnvId {
        self.env_id
    }

    async fn fetch_optional(&mut self, sql: &Sql) -> StoreResult<Option<PgRow>> {
        query(sql)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)
    }

    async fn fetch_one(&mut self, sql: &Sql) -> StoreResult<PgRow> {
        query(sql).fetch_one(&mut *self.tx).await.map_err(db_err)
    }
}

#[async_trait]
impl TenantTx for PgTenantTx<'_> {
    fn env_id(&self) -> EnvId {
        self.env_id
    }

    async fn lock_timeout_set(&mut self, timeout: std::time::Duration) -> StoreResult<()> {
        sqlx::query("SELECT set_config('lock_timeout', $1, true)")
            .bind(format!("{}ms", timeout.as_millis().max(1)))
            .execute(&mut *self.tx)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    fn notify_on_commit(&mut self, channel: Channel) {
        let in_transaction = matches!(self.announce, Announce::InTransaction);
        self.on_commit.request(channel, in_transaction);
        if matches!(self.announce, Announce::AfterCommit(_))
            && !self.after_commit.contains(&channel)
        {
            self.after_commit.push(channel);
        }
    }

    async fn schedule_insert(&mut self, new: &NewSchedule) -> StoreResult<Schedule> {
        rows::insert_schedule(self, new).await
    }

    async fn schedule_get(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = $1 AND id = $2");
        self.one_schedule(&sql, id).await
    }

    async fn schedule_get_for_update(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = $1 AND id = $2 FOR UPDATE"
        );
        self.one_schedule(&sql, id).await
    }

    async fn schedule_get_by_type(
        &mut self,
        domain: &str,
        schedule_type: &str,
    ) -> StoreResult<Option<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = $1 AND domain = $2 AND schedule_type = $3 AND status <> 'deleted'"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
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
             WHERE env_id = $1 \
               AND ($2::text IS NULL OR domain = $2) \
               AND ($3::text IS NULL OR status = $3) \
               AND ($4 OR status <> 'deleted') \
               AND ($5::uuid IS NULL OR id > $5) \
               AND ($7::text IS NULL OR strpos(lower(schedule_type COLLATE \"C\"), lower($7::text COLLATE \"C\")) > 0) \
             ORDER BY id LIMIT $6"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(&query.domain)
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.include_deleted)
            .bind(query.after.map(|id| id.0))
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
             WHERE env_id = $1 AND status = 'active' AND next_run_at IS NOT NULL \
             ORDER BY next_run_at, id LIMIT $2"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(i64::from(limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn schedule_list_in_zone(&mut self, timezone: &str) -> StoreResult<Vec<Schedule>> {
        // SKIP LOCKED: a row another instance is claiming right now is left out rather than
        // waited for, so this never waits on (or deadlocks with) a claim; that claim moves the
        // schedule's next fire itself.
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = $1 AND status = 'active' AND kind = 'cron' AND timezone = $2 \
             ORDER BY id FOR UPDATE SKIP LOCKED"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
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
        for_update: bool,
    ) -> StoreResult<Vec<Schedule>> {
        let lock = if for_update { " FOR UPDATE" } else { "" };
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = $1 AND id = ANY($2) \
             ORDER BY id{lock}"
        );
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(&ids)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn schedule_get_many_skip_locked(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = $1 AND id = ANY($2) \
             ORDER BY id FOR UPDATE SKIP LOCKED"
        );
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(&ids)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn schedule_claim_many(
        &mut self,
        claims: &[ScheduleClaim],
    ) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "UPDATE schedules s SET next_run_at = c.next_run_at, last_run_at = c.now, \
                                    updated_at = c.now \
             FROM unnest($2::uuid[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[]) \
                  AS c(id, expected, next_run_at, now) \
             WHERE s.env_id = $1 AND s.id = c.id AND s.status = 'active' \
               AND s.next_run_at = c.expected \
             RETURNING {}",
            prefixed(SCHEDULE_COLUMNS, "s")
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(claims.iter().map(|c| c.id.0).collect::<Vec<_>>())
            .bind(
                claims
                    .iter()
                    .map(|c| c.expected_next_run_at)
                    .collect::<Vec<_>>(),
            )
            .bind(claims.iter().map(|c| c.next_run_at).collect::<Vec<_>>())
            .bind(claims.iter().map(|c| c.now).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
                               next_attempt_at, started_at, idempotency_key, created_at, updated_at, \
                               lease_until) \
             SELECT j.id, j.schedule_id, $1, j.status, j.attempt, j.scheduled_for, \
                    j.next_attempt_at, j.started_at, j.idempotency_key, j.now, j.now, j.lease_until \
             FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::int[], $6::timestamptz[], \
                         $7::timestamptz[], $8::timestamptz[], $9::text[], $10::timestamptz[], \
                         $11::timestamptz[]) \
                  WITH ORDINALITY AS j(id, schedule_id, status, attempt, scheduled_for, \
                                       next_attempt_at, started_at, idempotency_key, now, \
                                       lease_until, n) \
             ORDER BY j.n \
             ON CONFLICT (schedule_id) WHERE {OPEN_JOB} DO NOTHING \
             RETURNING {JOB_COLUMNS}"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(new.iter().map(|j| j.id.0).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.schedule_id.0).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.status.as_str()).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.attempt).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.scheduled_for).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.next_attempt_at).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.started_at).collect::<Vec<_>>())
            .bind(
                new.iter()
                    .map(|j| Job::idempotency_key_for(j.schedule_id, j.id))
                    .collect::<Vec<_>>(),
            )
            .bind(new.iter().map(|j| j.now).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.lease_until).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "jobs", rows::job)
    }

    async fn job_finish_many(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "UPDATE jobs j SET status = u.status, next_attempt_at = u.next_attempt_at, \
                               finished_at = u.finished_at, result = u.result, error = u.error, \
                               updated_at = u.updated_at \
             FROM unnest($2::uuid[], $3::int[], $4::text[], $5::timestamptz[], \
                         $6::timestamptz[], $7::jsonb[], $8::text[], $9::timestamptz[], \
                         $10::timestamptz[]) \
                  AS u(id, attempt, status, next_attempt_at, finished_at, result, error, \
                       updated_at, lease_by) \
             WHERE j.env_id = $1 AND j.id = u.id AND (j.status = 'running') IS TRUE \
               AND j.attempt = u.attempt \
               AND (u.lease_by IS NULL OR j.lease_until IS NULL OR j.lease_until < u.lease_by) \
             RETURNING {}",
            prefixed(JOB_COLUMNS, "j")
        );
        let columns: Vec<rows::FinishColumns> = finishes.iter().map(rows::job_finish).collect();
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(finishes.iter().map(|f| f.id.0).collect::<Vec<_>>())
            .bind(finishes.iter().map(|f| f.attempt).collect::<Vec<_>>())
            .bind(columns.iter().map(|c| c.status).collect::<Vec<_>>())
            .bind(
                columns
                    .iter()
                    .map(|c| c.next_attempt_at)
                    .collect::<Vec<_>>(),
            )
            .bind(columns.iter().map(|c| c.finished_at).collect::<Vec<_>>())
            .bind(columns.iter().map(|c| c.result.clone()).collect::<Vec<_>>())
            .bind(columns.iter().map(|c| c.error.clone()).collect::<Vec<_>>())
            .bind(finishes.iter().map(|f| f.now).collect::<Vec<_>>())
            .bind(
                finishes
                    .iter()
                    .map(|f| f.lease_expired_by)
                    .collect::<Vec<_>>(),
            )
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        let written = rows::map_rows(&rows, "jobs", rows::job)?;
        let recorded: Vec<&JobFinish> = finishes
            .iter()
            .filter(|f| written.iter().any(|j| j.id == f.id))
            .collect();
        self.attempts_insert(&recorded).await?;
        Ok(written)
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
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = $1 AND id = $2");
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "jobs", rows::job)
    }

    async fn schedules_with_open_job(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<ScheduleId>> {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let sql = format!(
            "SELECT schedule_id FROM jobs WHERE env_id = $1 AND schedule_id = ANY($2) \
             AND {OPEN_JOB}"
        );
        let open: Vec<Uuid> = sqlx::query_scalar(&sql)
            .bind(self.env_id.0)
            .bind(&ids)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        Ok(open.into_iter().map(ScheduleId).collect())
    }

    async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = $1 AND schedule_id = $2 AND {OPEN_JOB}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(schedule_id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "jobs", rows::job)
    }

    async fn job_list(&mut self, query: &JobQuery) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = $1 \
               AND ($2::uuid IS NULL OR schedule_id = $2) \
               AND ($3::text IS NULL OR status = $3) \
               AND ($4::uuid IS NULL OR id < $4) \
             ORDER BY id DESC LIMIT $5"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(query.schedule_id.map(|id| id.0))
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.before.map(|id| id.0))
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
            "UPDATE jobs SET status = 'running', attempt = attempt + 1, started_at = $3, \
             next_attempt_at = NULL, updated_at = $3, lease_until = $4 \
             WHERE env_id = $1 AND id = $2 AND status = 'pending' AND next_attempt_at <= $3 \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(claim.id.0)
            .bind(claim.now)
            .bind(claim.lease_until)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "jobs", rows::job)
    }

    async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry> {
        rows::insert_dlq(self, new).await
    }

    async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>> {
        let sql = format!("SELECT {DLQ_COLUMNS} FROM dlq WHERE env_id = $1 AND id = $2");
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_row(row.as_ref(), "dlq", rows::dlq)
    }

    async fn dlq_list(&mut self, query: &DlqQuery) -> StoreResult<Vec<DlqEntry>> {
        let sql = format!(
            "SELECT {DLQ_COLUMNS} FROM dlq \
             WHERE env_id = $1 \
               AND ($2::text IS NULL OR domain = $2) \
               AND ($3::uuid IS NULL OR schedule_id = $3) \
               AND ($4::uuid IS NULL OR id < $4) \
               AND ($6::uuid IS NULL OR job_id = $6) \
             ORDER BY id DESC LIMIT $5"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(&query.domain)
            .bind(query.schedule_id.map(|id| id.0))
            .bind(query.before.map(|id| id.0))
            .bind(i64::from(query.limit))
            .bind(query.job_id.map(|id| id.0))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "dlq", rows::dlq)
    }

    async fn dlq_delete(&mut self, id: DlqId) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM dlq WHERE env_id = $1 AND id = $2")
            .bind(self.env_id.0)
            .bind(id.0)
            .execute(&mut *self.tx)
            .await
            .map_err(db_err)?;
        Ok(done.rows_affected() == 1)
    }

    async fn env_counts(&mut self) -> StoreResult<EnvCounts> {
        let row = sqlx::query(&rows::env_counts_sql("$1"))
            .bind(self.env_id.0)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::env_counts(&PgCells(&row, "counts"))
    }

    async fn job_hours(&mut self, query: &JobHoursQuery) -> StoreResult<JobHours> {
        const DIALECT: HoursDialect = HoursDialect {
            hour: "floor(extract(epoch FROM scheduled_for) / 3600)::bigint",
            late: "floor(extract(epoch FROM {first} - scheduled_for) * 1000)::bigint",
            env: "$1",
            from: "$2",
            to: "$3",
            schedule: "$4::uuid",
        };
        let mut rows = Vec::with_capacity(2);
        for by_hour in [true, false] {
            let found: Vec<HourRow> = sqlx::query_as(&job_hours_sql(&DIALECT, by_hour))
                .bind(self.env_id.0)
                .bind(query.from)
                .bind(query.to)
                .bind(query.schedule_id.map(|id| id.0))
                .fetch_all(&mut *self.tx)
                .await
                .map_err(db_err)?;
            rows.push(found);
        }
        let window = rows.pop().and_then(|mut w| w.pop());
        hours::job_hours(rows.pop().unwrap_or_default(), window)
    }

    async fn outbox_insert_many(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO outbox (id, env_id, schedule_id, event_type, payload, created_at) \
             SELECT e.id, $1, e.schedule_id, e.event_type, e.payload, e.created_at \
             FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::jsonb[], $6::timestamptz[]) \
                  WITH ORDINALITY AS e(id, schedule_id, event_type, payload, created_at, n) \
             ORDER BY e.n",
        )
        .bind(self.env_id.0)
        .bind(events.iter().map(|e| e.id.0).collect::<Vec<_>>())
        .bind(
            events
                .iter()
                .map(|e| e.schedule_id.map(|id| id.0))
                .collect::<Vec<_>>(),
        )
        .bind(
            events
                .iter()
                .map(|e| e.event_type.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(events.iter().map(|e| e.payload.clone()).collect::<Vec<_>>())
        .bind(events.iter().map(|e| e.now).collect::<Vec<_>>())
        .execute(&mut *self.tx)
        .await
        .map_err(db_err)?;
        self.on_commit.request(Channel::Outbox, false);
        Ok(())
    }

    async fn outbox_list(&mut self, after_seq: i64, limit: u32) -> StoreResult<Vec<OutboxEvent>> {
        let sql = format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE env_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
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
            "SELECT {AUDIT_COLUMNS} FROM audit_journal WHERE env_id = $1 ORDER BY at, id LIMIT $2"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(i64::from(limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "audit_journal", rows::audit)
    }

    async fn audit_query(&mut self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
        self.audit_page(query).await
    }

    async fn commit(mut self: Box<Self>) -> StoreResult<()> {
        for channel in self.on_commit.cross_process() {
            // Delivered to listeners when (and only if) the transaction commits.
            sqlx::query("SELECT pg_notify($1, '')")
                .bind(channel.name())
                .execute(&mut *self.tx)
                .await
                .map_err(db_err)?;
        }
        let this = *self;
        this.tx.commit().await.map_err(db_err)?;
        this.on_commit.ring(&this.signals);
        if let Announce::AfterCommit(announcer) = &this.announce {
            for channel in &this.after_commit {
                announcer.request(*channel);
            }
        }
        Ok(())
    }
}
