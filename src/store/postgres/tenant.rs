//! The tenant transaction: every tenant read and write, inside a transaction whose tenant
//! context (the row-level security key) is set when it begins.
//!
//! The statements that read or join a table by arrays of ids run unprepared
//! (`persistent(false)`): PostgreSQL then plans each with its arrays' lengths. A prepared statement switches to a
//! generic plan after five runs, and a generic plan takes an array for 10 elements; with
//! thousands it chose to scan the environment's jobs once per element (seconds per record of
//! a burst). The extra round trip costs less than one such plan.
//!
//! A record expects its jobs `running`, and says so as a join condition (`j.status = u.was`,
//! with `was` a column of the batch), not as a condition on the table: the statistics count
//! the jobs running when they were taken (a few, between bursts), the burst has thousands, and
//! a plan that believed the environment held one running job read the whole batch once for
//! each of them.
//!
//! The same statements name their environment as `(SELECT $1::uuid)`, a value the planner
//! does not see: it then takes the environment for an average one of the table. Given the
//! value, it reads the statistics' count for that environment, which for a tenant enrolled
//! since they were taken is none at all, and a plan for one row rescans the batch per row.

use std::sync::Arc;

use sqlx::postgres::PgRow;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{placeholder, query};
use crate::core::model::*;
use crate::core::store::*;
use crate::store::rows::hours::HoursDialect;
use crate::store::rows::{
    self, EXCLUSIVE_OPEN_JOB, JOB_COLUMNS, SCHEDULE_COLUMNS, TenantRows, prefixed,
};
use crate::store::{Rings, db_err};

/// The first key of an environment's waiting-count lock (`S8`, then `W`).
const WAITING_COUNT_LOCK: i32 = 0x0053_3857;

/// Opens a transaction and sets its tenant context in one round trip (one simple-protocol
/// message with both statements). The context is transaction-local, so it lives exactly as
/// long as this transaction. The env id is a typed UUID, formatted by us: nothing from a
/// request is spliced into the text.
///
/// A tenant transaction reads rows through indexes only, and joins by looking rows up
/// (`enable_seqscan`, `enable_hashjoin` and `enable_mergejoin` off for it): every table a
/// tenant touches has an index that leads with the environment, and its statements work on
/// rows named by key. A whole-table read would cost a tenant every other tenant's rows, and a
/// hash join the whole environment's (a burst's record read its environment's jobs, 15,000 and
/// more, for a batch of 800). The planner takes either for cheaper on a small table, or on
/// statistics a burst has outrun.
pub(super) fn begin_tenant_sql(env_id: EnvId) -> String {
    begin_sql("BEGIN", env_id, None)
}

/// As [`begin_tenant_sql`], for a transaction that only reads (a write in it fails).
pub(super) fn begin_tenant_read_sql(env_id: EnvId) -> String {
    begin_sql("BEGIN READ ONLY", env_id, None)
}

/// As [`begin_tenant_sql`], with the transaction's lock timeout set in the same message.
pub(super) fn begin_tenant_bounded_sql(env_id: EnvId, lock_timeout: std::time::Duration) -> String {
    begin_sql("BEGIN", env_id, Some(lock_timeout))
}

fn begin_sql(begin: &str, env_id: EnvId, lock_timeout: Option<std::time::Duration>) -> String {
    let id: Uuid = env_id.0;
    // A number of milliseconds we format ourselves, like the id.
    let bounded = lock_timeout
        .map(|t| {
            format!(
                ", set_config('lock_timeout', '{}ms', true)",
                t.as_millis().max(1)
            )
        })
        .unwrap_or_default();
    format!(
        "{begin}; SELECT cron.sentin8_set_tenant_context('{id}'::uuid), \
         set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true), \
         set_config('enable_mergejoin', 'off', true){bounded}"
    )
}

/// A transaction with the tenant context set.
pub(super) struct PgTenantTx<'c> {
    pub(super) tx: Transaction<'c, Postgres>,
    pub(super) env_id: EnvId,
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
            on_commit: Rings::new(signals),
            announce,
            after_commit: Vec::new(),
        }
    }

    /// The schedules with `ids`, in id order, read with `lock` at the statement's end.
    async fn schedules_by_ids(
        &mut self,
        ids: &[ScheduleId],
        lock: &str,
    ) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = $1 AND id = ANY($2) \
             ORDER BY id{lock}"
        );
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(&ids)
            .persistent(false)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    /// Those of the schedules `ids` with jobs that match `predicate` (plain SQL), with how
    /// many.
    async fn jobs_per_schedule(
        &mut self,
        ids: &[ScheduleId],
        predicate: &str,
    ) -> StoreResult<Vec<(ScheduleId, u32)>> {
        let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
        let sql = format!(
            "SELECT schedule_id, count(*) FROM jobs WHERE env_id = $1 AND schedule_id = ANY($2) \
             AND {predicate} GROUP BY schedule_id"
        );
        let found: Vec<(Uuid, i64)> = sqlx::query_as(&sql)
            .bind(self.env_id.0)
            .bind(&ids)
            .persistent(false)
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        Ok(found
            .into_iter()
            .map(|(id, n)| (ScheduleId(id), u32::try_from(n).unwrap_or(u32::MAX)))
            .collect())
    }
}

rows::tenant_rows!(PgTenantTx<'_>, PgRow, {
    const CONTAINS_IGNORING_CASE: fn(&str, &str) -> String = |column, needle| {
        format!("strpos(lower({column} COLLATE \"C\"), lower({needle}::text COLLATE \"C\")) > 0")
    };
    const LABEL_VALUE: fn(&mut rows::Sql, &str) -> String =
        |sql, key| format!("(labels ->> {}::text)", sql.val(rows::Val::text(key)));
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const FOR_UPDATE_SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const HOURS: HoursDialect = HoursDialect {
        hour: "floor(extract(epoch FROM scheduled_for) / 3600)::bigint",
        late: "floor(extract(epoch FROM {first} - scheduled_for) * 1000)::bigint",
    };
});

// The methods both backends run alike come from the macro; these are this backend's own.
rows::tenant_tx! {
impl TenantTx for PgTenantTx<'_> {
    fn notify_on_commit(&mut self, channel: Channel) {
        let in_transaction = matches!(self.announce, Announce::InTransaction);
        self.on_commit.request(channel, in_transaction);
        if matches!(self.announce, Announce::AfterCommit(_))
            && !self.after_commit.contains(&channel)
        {
            self.after_commit.push(channel);
        }
    }

    async fn schedule_get_many(
        &mut self,
        ids: &[ScheduleId],
        for_update: bool,
    ) -> StoreResult<Vec<Schedule>> {
        let lock = if for_update { Self::FOR_UPDATE } else { "" };
        self.schedules_by_ids(ids, lock).await
    }

    async fn schedule_get_many_skip_locked(
        &mut self,
        ids: &[ScheduleId],
    ) -> StoreResult<Vec<Schedule>> {
        self.schedules_by_ids(ids, Self::FOR_UPDATE_SKIP_LOCKED).await
    }

    async fn schedule_claim_many(
        &mut self,
        claims: &[ScheduleClaim],
    ) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "UPDATE schedules s SET next_run_at = c.next_run_at, \
                                    updated_at = c.now, remaining_runs = c.remaining_runs \
             FROM unnest($2::uuid[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[], \
                         $6::int[]) \
                  AS c(id, expected, next_run_at, now, remaining_runs) \
             WHERE s.env_id = (SELECT $1::uuid) AND s.id = c.id AND s.status = 'active' \
               AND s.next_run_at = c.expected \
             RETURNING {}",
            prefixed(SCHEDULE_COLUMNS, "s")
        );
        let rows = sqlx::query(&sql)
            .persistent(false)
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
            .bind(claims.iter().map(|c| c.remaining_runs).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "schedules", rows::schedule)
    }

    async fn jobs_waiting_count(&mut self) -> StoreResult<u64> {
        // Two backfills of one environment on different schedules hold no common row: the
        // environment's transaction-scoped lock makes them count, and add, one after the other.
        // (Two int4 keys: a space apart from the schedule locks' bigint keys.)
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2::text))")
            .bind(WAITING_COUNT_LOCK)
            .bind(self.env_id.0)
            .execute(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::waiting_count(self).await
    }

    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
                               next_attempt_at, started_at, idempotency_key, created_at, updated_at, \
                               lease_until, concurrent, backfill) \
             SELECT j.id, j.schedule_id, $1, j.status, j.attempt, j.scheduled_for, \
                    j.next_attempt_at, j.started_at, j.idempotency_key, j.now, j.now, j.lease_until, \
                    j.concurrent, j.backfill \
             FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::int[], $6::timestamptz[], \
                         $7::timestamptz[], $8::timestamptz[], $9::text[], $10::timestamptz[], \
                         $11::timestamptz[], $12::bool[], $13::bool[]) \
                  WITH ORDINALITY AS j(id, schedule_id, status, attempt, scheduled_for, \
                                       next_attempt_at, started_at, idempotency_key, now, \
                                       lease_until, concurrent, backfill, n) \
             ORDER BY j.n \
             ON CONFLICT (schedule_id) WHERE {EXCLUSIVE_OPEN_JOB} DO NOTHING \
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
            .bind(new.iter().map(|j| j.concurrent).collect::<Vec<_>>())
            .bind(new.iter().map(|j| j.backfill).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "jobs", rows::job)
    }

    async fn job_finish_many(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>> {
        self.finish_jobs(finishes).await
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
        .bind(
            events
                .iter()
                .map(|e| sqlx::types::Json(&e.payload))
                .collect::<Vec<_>>(),
        )
        .bind(events.iter().map(|e| e.now).collect::<Vec<_>>())
        .execute(&mut *self.tx)
        .await
        .map_err(db_err)?;
        self.on_commit.request(Channel::Outbox, false);
        Ok(())
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
        this.on_commit.commit(this.tx).await?;
        if let Announce::AfterCommit(announcer) = &this.announce {
            for channel in &this.after_commit {
                announcer.request(*channel);
            }
        }
        Ok(())
    }
}
}
