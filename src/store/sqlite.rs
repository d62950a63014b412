//! The embedded SQLite store: the zero-setup default, held to the same conformance suite as
//! PostgreSQL.
//!
//! SQLite has no row-level security, so tenant scoping is enforced here by construction: a
//! [`TenantTx`] binds its own env_id into every statement; no method takes an env id from its
//! caller. One pooled connection serialises writers (SQLite allows one at a time anyway), which
//! also makes the claim-conditional UPDATE and the open-job index exclusive. Schedule locks are
//! process-local, as the backend's capabilities declare.

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};
use uuid::Uuid;

use super::migrations;
use super::{ConnectOptions, Rings, db_err};
use crate::core::model::*;
use crate::core::store::*;
use crate::core::target::Target;
use crate::core::timing::{Timing, TimingColumns};

const SCHEDULE_COLUMNS: &str = "id, env_id, domain, schedule_type, kind, cron_expr, timezone, \
    run_at, on_dst_gap, on_dst_repeat, target_config, payload, status, next_run_at, last_run_at, \
    retry_count, max_retries, created_at, updated_at, created_by, updated_by";
const JOB_COLUMNS: &str = "id, schedule_id, env_id, status, attempt, scheduled_for, \
    next_attempt_at, started_at, finished_at, result, error, idempotency_key, created_at, updated_at";
const DLQ_COLUMNS: &str = "id, env_id, schedule_id, job_id, domain, schedule_type, payload, \
    attempts, last_error, scheduled_for, landed_at";
const OUTBOX_COLUMNS: &str = "seq, id, env_id, schedule_id, event_type, payload, created_at, \
    relayed_at, attempts, last_error, parked_at";

/// A SQLite-backed [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    locks: Arc<Mutex<HashSet<ScheduleId>>>,
    signals: Arc<Signals>,
}

fn sqlite_options(url: &str) -> StoreResult<SqliteConnectOptions> {
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid SQLite URL: {e}")))?;
    Ok(options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true))
}

impl SqliteStore {
    /// Opens (creating if missing) the database file.
    pub async fn connect(url: &str, options: &ConnectOptions) -> StoreResult<Self> {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // An in-memory database lives as long as its one connection.
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(sqlite_options(url)?)
            .await
            .map_err(db_err)?;
        Ok(Self {
            pool,
            locks: Arc::default(),
            signals: Arc::default(),
        })
    }

    /// Applies pending migrations on this store's own connection (used for `sqlite::memory:`,
    /// where a second connection would see a different database).
    pub async fn migrate_in_place(&self, dry_run: bool) -> StoreResult<Vec<MigrationReport>> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        migrate_conn(&mut conn, dry_run).await
    }
}

/// Applies pending migrations to the database file the URL names.
pub async fn migrate(url: &str, dry_run: bool) -> StoreResult<(Vec<MigrationReport>, Vec<String>)> {
    use sqlx::ConnectOptions as _;
    let mut conn = sqlite_options(url)?.connect().await.map_err(db_err)?;
    let reports = migrate_conn(&mut conn, dry_run).await?;
    Ok((reports, Vec::new()))
}

async fn migrate_conn(
    conn: &mut sqlx::SqliteConnection,
    dry_run: bool,
) -> StoreResult<Vec<MigrationReport>> {
    use sqlx::Connection as _;
    if !dry_run {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, \
             name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)",
        )
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
    }
    let applied = applied_versions(conn).await?;
    migrations::check_applied(migrations::SQLITE, &applied)?;
    let mut reports = Vec::new();
    for migration in migrations::SQLITE {
        let already = applied.iter().any(|(v, _)| *v == migration.version);
        if !already && !dry_run {
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db_err)?;
            sqlx::raw_sql(migration.sql)
                .execute(&mut *tx)
                .await
                .map_err(|e| {
                    StoreError::Schema(format!(
                        "migration {} ({}) failed: {e}",
                        migration.version, migration.name
                    ))
                })?;
            sqlx::query(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(migration.version)
            .bind(migration.name)
            .bind(migration.checksum())
            .bind(Utc::now().timestamp_micros())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
            tx.commit().await.map_err(db_err)?;
        }
        reports.push(MigrationReport {
            version: migration.version,
            name: migration.name.to_owned(),
            applied: !already,
        });
    }
    let unknown: Vec<i64> = applied
        .iter()
        .map(|(v, _)| *v)
        .filter(|v| !migrations::SQLITE.iter().any(|m| m.version == *v))
        .collect();
    if !unknown.is_empty() {
        return Err(StoreError::Schema(format!(
            "the database has schema versions {unknown:?} that this build does not know; \
             run a newer sentin8-cron"
        )));
    }
    Ok(reports)
}

async fn applied_versions(conn: &mut sqlx::SqliteConnection) -> StoreResult<Vec<(i64, String)>> {
    let exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db_err)?;
    if !exists {
        return Ok(Vec::new());
    }
    sqlx::query_as("SELECT version, checksum FROM schema_migrations ORDER BY version")
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)
}

#[async_trait]
impl Store for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: "sqlite",
            advisory_locks: false,
            listen_notify: false,
            row_level_security: false,
        }
    }

    fn signals(&self) -> Arc<Signals> {
        self.signals.clone()
    }

    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        let tx = self.pool.begin().await.map_err(db_err)?;
        Ok(Box::new(SqliteTenantTx {
            tx,
            env_id,
            signals: self.signals.clone(),
            on_commit: Rings::default(),
        }))
    }

    async fn schedule_locks_try(&self, ids: &[ScheduleId]) -> StoreResult<Box<dyn ScheduleLock>> {
        let mut locked = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        let held = ids
            .iter()
            .copied()
            .filter(|id| locked.insert(*id))
            .collect();
        Ok(Box::new(SqliteScheduleLock {
            store: self.clone(),
            held,
            released: false,
        }))
    }

    async fn schedules_due(&self, now: DateTime<Utc>, limit: u32) -> StoreResult<Vec<DueSchedule>> {
        let rows = sqlx::query(
            "SELECT id, env_id, next_run_at FROM schedules \
             WHERE status = 'active' AND next_run_at <= ?1 ORDER BY next_run_at LIMIT ?2",
        )
        .bind(now.timestamp_micros())
        .bind(i64::from(limit.min(1000)))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|row| {
                let c = Cols(row, "schedules");
                Ok(DueSchedule {
                    id: ScheduleId(c.uuid("id")?),
                    env_id: EnvId(c.uuid("env_id")?),
                    next_run_at: c.ts("next_run_at")?,
                })
            })
            .collect()
    }

    async fn jobs_due(
        &self,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<DueJob>> {
        let rows = sqlx::query(
            "SELECT id, schedule_id, env_id, status FROM ( \
                 SELECT * FROM (SELECT id, schedule_id, env_id, status, next_attempt_at AS due_at \
                   FROM jobs WHERE status = 'pending' AND next_attempt_at <= ?1 \
                   ORDER BY next_attempt_at LIMIT ?3) \
                 UNION ALL \
                 SELECT * FROM (SELECT id, schedule_id, env_id, status, started_at AS due_at \
                   FROM jobs WHERE status = 'running' AND started_at < ?2 \
                   ORDER BY started_at LIMIT ?3)) \
             ORDER BY due_at LIMIT ?3",
        )
        .bind(now.timestamp_micros())
        .bind(stale_before.timestamp_micros())
        .bind(i64::from(limit.min(1000)))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|row| {
                let c = Cols(row, "jobs");
                Ok(DueJob {
                    id: JobId(c.uuid("id")?),
                    schedule_id: ScheduleId(c.uuid("schedule_id")?),
                    env_id: EnvId(c.uuid("env_id")?),
                    status: c.parse("status")?,
                })
            })
            .collect()
    }

    async fn wakeup_next(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let micros: Option<i64> = sqlx::query_scalar(
            "SELECT min(t) FROM ( \
                 SELECT min(next_run_at) AS t FROM schedules WHERE status = 'active' \
                 UNION ALL \
                 SELECT min(next_attempt_at) FROM jobs WHERE status = 'pending')",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        micros.map(|m| from_micros(m, "schedules")).transpose()
    }

    async fn dlq_envs(&self) -> StoreResult<Vec<EnvId>> {
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT env_id FROM dlq ORDER BY env_id")
                .fetch_all(&self.pool)
                .await
                .map_err(db_err)?;
        ids.iter()
            .map(|id| {
                Uuid::parse_str(id)
                    .map(EnvId)
                    .map_err(|e| StoreError::Corrupt {
                        table: "dlq",
                        detail: format!("env_id: {e}"),
                    })
            })
            .collect()
    }

    async fn stats_get(&self) -> StoreResult<StoreStats> {
        let row = sqlx::query(
            "SELECT (SELECT count(*) FROM schedules WHERE status = 'active') AS schedules_active, \
                    (SELECT count(*) FROM schedules WHERE status = 'paused') AS schedules_paused, \
                    (SELECT count(*) FROM jobs WHERE status = 'pending') AS jobs_pending, \
                    (SELECT count(*) FROM jobs WHERE status = 'running') AS jobs_running, \
                    (SELECT count(*) FROM dlq) AS dlq_entries, \
                    (SELECT count(*) FROM outbox WHERE relayed_at IS NULL) AS outbox_unrelayed, \
                    (SELECT count(*) FROM outbox \
                      WHERE parked_at IS NOT NULL AND relayed_at IS NULL) AS outbox_parked",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db_err)?;
        let c = Cols(&row, "stats");
        Ok(StoreStats {
            schedules_active: c.get("schedules_active")?,
            schedules_paused: c.get("schedules_paused")?,
            jobs_pending: c.get("jobs_pending")?,
            jobs_running: c.get("jobs_running")?,
            dlq_entries: c.get("dlq_entries")?,
            outbox_unrelayed: c.get("outbox_unrelayed")?,
            outbox_parked: c.get("outbox_parked")?,
        })
    }

    async fn outbox_claim(&self, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>> {
        // One statement: SQLite runs it under its single write lock, so the candidate check
        // and the lease cannot interleave with another claim.
        let sql = format!(
            "UPDATE outbox SET locked_until = ?3, locked_by = ?1 \
             WHERE seq IN ( \
                 SELECT o.seq FROM outbox o \
                  WHERE o.relayed_at IS NULL AND o.parked_at IS NULL \
                    AND (o.locked_until IS NULL OR o.locked_until <= ?2) \
                    AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= ?2) \
                    AND (o.schedule_id IS NULL OR NOT EXISTS ( \
                            SELECT 1 FROM outbox e \
                             WHERE e.schedule_id = o.schedule_id AND e.seq < o.seq \
                               AND e.relayed_at IS NULL AND e.parked_at IS NULL)) \
                  ORDER BY o.seq LIMIT ?4) \
             RETURNING {OUTBOX_COLUMNS}"
        );
        let rows = sqlx::query(&sql)
            .bind(&claim.relay_id)
            .bind(claim.now.timestamp_micros())
            .bind(claim.lease_until.timestamp_micros())
            .bind(i64::from(claim.limit.min(1000)))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        let mut events = rows
            .iter()
            .map(outbox_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        events.sort_by_key(|e| e.seq);
        Ok(events)
    }

    async fn outbox_mark_relayed(&self, relayed: &OutboxRelayed) -> StoreResult<u64> {
        if relayed.seqs.is_empty() {
            return Ok(0);
        }
        let seqs = Value::from(relayed.seqs.clone()).to_string();
        let done = sqlx::query(
            "UPDATE outbox SET relayed_at = ?2, locked_until = NULL, locked_by = NULL, \
             next_attempt_at = NULL \
             WHERE relayed_at IS NULL AND seq IN (SELECT value FROM json_each(?1))",
        )
        .bind(seqs)
        .bind(relayed.now.timestamp_micros())
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(done.rows_affected())
    }

    async fn outbox_mark_failed(
        &self,
        failed: &OutboxFailed,
    ) -> StoreResult<Vec<OutboxFailureRecorded>> {
        let mut recorded = Vec::with_capacity(failed.failures.len());
        if failed.failures.is_empty() {
            return Ok(recorded);
        }
        let mut tx = self.pool.begin().await.map_err(db_err)?;
        for failure in &failed.failures {
            let row = sqlx::query(
                "UPDATE outbox SET attempts = attempts + 1, last_error = substr(?3, 1, 2000), \
                 locked_until = NULL, locked_by = NULL, next_attempt_at = ?5, \
                 parked_at = CASE WHEN ?4 AND attempts + 1 >= ?6 THEN ?7 END \
                 WHERE seq = ?2 AND relayed_at IS NULL AND parked_at IS NULL AND locked_by = ?1 \
                 RETURNING seq, attempts, parked_at IS NOT NULL AS parked",
            )
            .bind(&failed.relay_id)
            .bind(failure.seq)
            .bind(&failure.error)
            .bind(failure.parkable)
            .bind(failed.retry_at.timestamp_micros())
            .bind(failed.max_attempts)
            .bind(failed.now.timestamp_micros())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
            if let Some(row) = row {
                let c = Cols(&row, "outbox");
                recorded.push(OutboxFailureRecorded {
                    seq: c.get("seq")?,
                    attempts: c.get("attempts")?,
                    parked: c.get("parked")?,
                });
            }
        }
        tx.commit().await.map_err(db_err)?;
        recorded.sort_by_key(|r| r.seq);
        Ok(recorded)
    }

    async fn outbox_release(&self, release: &OutboxRelease) -> StoreResult<u64> {
        if release.seqs.is_empty() {
            return Ok(0);
        }
        let done = sqlx::query(
            "UPDATE outbox SET locked_until = NULL, locked_by = NULL \
             WHERE locked_by = ?1 AND relayed_at IS NULL \
               AND seq IN (SELECT value FROM json_each(?2))",
        )
        .bind(&release.relay_id)
        .bind(Value::from(release.seqs.clone()).to_string())
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(done.rows_affected())
    }

    async fn outbox_purge(&self, purge: &OutboxPurge) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM outbox WHERE seq IN ( \
                 SELECT seq FROM outbox \
                  WHERE relayed_at IS NOT NULL AND relayed_at < ?1 \
                  ORDER BY relayed_at LIMIT ?2)",
        )
        .bind(purge.relayed_before.timestamp_micros())
        .bind(i64::from(purge.limit.min(10_000)))
        .execute(&self.pool)
        .await
        .map_err(db_err)?;
        Ok(done.rows_affected())
    }

    async fn schema_status(&self) -> StoreResult<SchemaStatus> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        let applied = applied_versions(&mut conn).await?;
        Ok(SchemaStatus {
            applied: applied.into_iter().map(|(v, _)| v).collect(),
            known: migrations::SQLITE.iter().map(|m| m.version).collect(),
        })
    }
}

/// Process-local schedule locks.
struct SqliteScheduleLock {
    store: SqliteStore,
    held: Vec<ScheduleId>,
    released: bool,
}

impl SqliteScheduleLock {
    fn unlock(&mut self) -> bool {
        if self.released {
            return false;
        }
        self.released = true;
        let mut locked = self.store.locks.lock().unwrap_or_else(|p| p.into_inner());
        // Every lock is removed, even after one that was not held.
        let mut all_held = true;
        for id in &self.held {
            all_held &= locked.remove(id);
        }
        all_held
    }
}

#[async_trait]
impl ScheduleLock for SqliteScheduleLock {
    fn held(&self) -> &[ScheduleId] {
        &self.held
    }

    async fn tenant_begin(&mut self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx + '_>> {
        self.store.tenant_begin(env_id).await
    }

    async fn release(mut self: Box<Self>) -> StoreResult<bool> {
        Ok(self.unlock())
    }
}

impl Drop for SqliteScheduleLock {
    fn drop(&mut self) {
        self.unlock();
    }
}

struct SqliteTenantTx {
    tx: Transaction<'static, Sqlite>,
    env_id: EnvId,
    signals: Arc<Signals>,
    on_commit: Rings,
}

impl SqliteTenantTx {
    fn env(&self) -> String {
        self.env_id.0.to_string()
    }

    async fn one_schedule(&mut self, sql: &str, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let row = sqlx::query(sql)
            .bind(self.env())
            .bind(id.0.to_string())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(schedule_from_row).transpose()
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
        let timing = new.timing.columns();
        let sql = format!(
            "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, timezone, \
             run_at, on_dst_gap, on_dst_repeat, target_config, payload, status, next_run_at, \
             retry_count, max_retries, created_at, updated_at, created_by, updated_by) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 0, ?15, ?16, ?16, ?17, ?17) \
             RETURNING {SCHEDULE_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(new.id.0.to_string())
            .bind(self.env())
            .bind(&new.domain)
            .bind(&new.schedule_type)
            .bind(timing.kind.as_str())
            .bind(&timing.cron_expr)
            .bind(&timing.timezone)
            .bind(timing.run_at.map(|t| t.timestamp_micros()))
            .bind(timing.on_dst_gap.as_str())
            .bind(timing.on_dst_repeat.as_str())
            .bind(json_text(new.target.config()))
            .bind(json_text(&new.payload))
            .bind(new.status.as_str())
            .bind(new.next_run_at.map(|t| t.timestamp_micros()))
            .bind(new.max_retries)
            .bind(new.now.timestamp_micros())
            .bind(&new.actor)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        schedule_from_row(&row)
    }

    async fn schedule_get(&mut self, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE env_id = ?1 AND id = ?2");
        self.one_schedule(&sql, id).await
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
        row.as_ref().map(schedule_from_row).transpose()
    }

    async fn schedule_list(&mut self, query: &ScheduleQuery) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = ?1 \
               AND (?2 IS NULL OR domain = ?2) \
               AND (?3 IS NULL OR status = ?3) \
               AND (?4 OR status <> 'deleted') \
               AND (?5 IS NULL OR id > ?5) \
             ORDER BY id LIMIT ?6"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(&query.domain)
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.include_deleted)
            .bind(query.after.map(|id| id.0.to_string()))
            .bind(i64::from(query.limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows.iter().map(schedule_from_row).collect()
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
        rows.iter().map(schedule_from_row).collect()
    }

    async fn schedule_update(&mut self, s: &Schedule) -> StoreResult<Schedule> {
        let timing = s.timing.columns();
        let sql = format!(
            "UPDATE schedules SET domain = ?3, schedule_type = ?4, kind = ?5, cron_expr = ?6, \
             timezone = ?7, run_at = ?8, on_dst_gap = ?9, on_dst_repeat = ?10, \
             target_config = ?11, payload = ?12, status = ?13, next_run_at = ?14, \
             last_run_at = ?15, retry_count = ?16, max_retries = ?17, updated_at = ?18, \
             updated_by = ?19 \
             WHERE env_id = ?1 AND id = ?2 RETURNING {SCHEDULE_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(s.id.0.to_string())
            .bind(&s.domain)
            .bind(&s.schedule_type)
            .bind(timing.kind.as_str())
            .bind(&timing.cron_expr)
            .bind(&timing.timezone)
            .bind(timing.run_at.map(|t| t.timestamp_micros()))
            .bind(timing.on_dst_gap.as_str())
            .bind(timing.on_dst_repeat.as_str())
            .bind(json_text(s.target.config()))
            .bind(json_text(&s.payload))
            .bind(s.status.as_str())
            .bind(s.next_run_at.map(|t| t.timestamp_micros()))
            .bind(s.last_run_at.map(|t| t.timestamp_micros()))
            .bind(s.retry_count)
            .bind(s.max_retries)
            .bind(s.updated_at.timestamp_micros())
            .bind(&s.updated_by)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => schedule_from_row(&row),
            None => Err(StoreError::NotFound {
                what: "schedule",
                id: s.id.to_string(),
            }),
        }
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
            if let Some(row) = row {
                claimed.push(schedule_from_row(&row)?);
            }
        }
        Ok(claimed)
    }

    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             next_attempt_at, started_at, idempotency_key, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) \
             ON CONFLICT (schedule_id) WHERE status IN ('pending', 'running') DO NOTHING \
             RETURNING {JOB_COLUMNS}"
        );
        let mut opened = Vec::with_capacity(new.len());
        for job in new {
            let row = sqlx::query(&sql)
                .bind(job.id.0.to_string())
                .bind(job.schedule_id.0.to_string())
                .bind(self.env())
                .bind(job.status.as_str())
                .bind(job.attempt)
                .bind(job.scheduled_for.timestamp_micros())
                .bind(job.next_attempt_at.map(|t| t.timestamp_micros()))
                .bind(job.started_at.map(|t| t.timestamp_micros()))
                .bind(Job::idempotency_key_for(job.schedule_id, job.id))
                .bind(job.now.timestamp_micros())
                .fetch_optional(&mut *self.tx)
                .await
                .map_err(db_err)?;
            if let Some(row) = row {
                opened.push(job_from_row(&row)?);
            }
        }
        Ok(opened)
    }

    async fn job_finish_many(&mut self, jobs: &[Job]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "UPDATE jobs SET status = ?4, next_attempt_at = ?5, finished_at = ?6, result = ?7, \
             error = ?8, updated_at = ?9 \
             WHERE env_id = ?1 AND id = ?2 AND status = 'running' AND attempt = ?3 \
             RETURNING {JOB_COLUMNS}"
        );
        let mut finished = Vec::with_capacity(jobs.len());
        for job in jobs {
            let row = sqlx::query(&sql)
                .bind(self.env())
                .bind(job.id.0.to_string())
                .bind(job.attempt)
                .bind(job.status.as_str())
                .bind(job.next_attempt_at.map(|t| t.timestamp_micros()))
                .bind(job.finished_at.map(|t| t.timestamp_micros()))
                .bind(job.result.as_ref().map(json_text))
                .bind(&job.error)
                .bind(job.updated_at.timestamp_micros())
                .fetch_optional(&mut *self.tx)
                .await
                .map_err(db_err)?;
            if let Some(row) = row {
                finished.push(job_from_row(&row)?);
            }
        }
        Ok(finished)
    }

    async fn job_insert(&mut self, new: &NewJob) -> StoreResult<Job> {
        let sql = format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             next_attempt_at, started_at, finished_at, error, idempotency_key, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12) \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(new.id.0.to_string())
            .bind(new.schedule_id.0.to_string())
            .bind(self.env())
            .bind(new.status.as_str())
            .bind(new.attempt)
            .bind(new.scheduled_for.timestamp_micros())
            .bind(new.next_attempt_at.map(|t| t.timestamp_micros()))
            .bind(new.started_at.map(|t| t.timestamp_micros()))
            .bind(new.finished_at.map(|t| t.timestamp_micros()))
            .bind(&new.error)
            .bind(Job::idempotency_key_for(new.schedule_id, new.id))
            .bind(new.now.timestamp_micros())
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        job_from_row(&row)
    }

    async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = ?1 AND id = ?2");
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(id.0.to_string())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = ?1 AND schedule_id = ?2 AND status IN ('pending', 'running')"
        );
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(schedule_id.0.to_string())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(job_from_row).transpose()
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
        rows.iter().map(job_from_row).collect()
    }

    async fn job_update(&mut self, job: &Job) -> StoreResult<Job> {
        let sql = format!(
            "UPDATE jobs SET status = ?3, attempt = ?4, next_attempt_at = ?5, started_at = ?6, \
             finished_at = ?7, result = ?8, error = ?9, updated_at = ?10 \
             WHERE env_id = ?1 AND id = ?2 RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(job.id.0.to_string())
            .bind(job.status.as_str())
            .bind(job.attempt)
            .bind(job.next_attempt_at.map(|t| t.timestamp_micros()))
            .bind(job.started_at.map(|t| t.timestamp_micros()))
            .bind(job.finished_at.map(|t| t.timestamp_micros()))
            .bind(job.result.as_ref().map(json_text))
            .bind(&job.error)
            .bind(job.updated_at.timestamp_micros())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => job_from_row(&row),
            None => Err(StoreError::NotFound {
                what: "job",
                id: job.id.to_string(),
            }),
        }
    }

    async fn job_claim(&mut self, claim: &JobClaim) -> StoreResult<Option<Job>> {
        let sql = format!(
            "UPDATE jobs SET status = 'running', attempt = attempt + 1, started_at = ?3, \
             next_attempt_at = NULL, updated_at = ?3 \
             WHERE env_id = ?1 AND id = ?2 AND status = 'pending' AND next_attempt_at <= ?3 \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(claim.id.0.to_string())
            .bind(claim.now.timestamp_micros())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry> {
        let sql = format!(
            "INSERT INTO dlq (id, env_id, schedule_id, job_id, domain, schedule_type, payload, \
             attempts, last_error, scheduled_for, landed_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING {DLQ_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(new.id.0.to_string())
            .bind(self.env())
            .bind(new.schedule_id.0.to_string())
            .bind(new.job_id.0.to_string())
            .bind(&new.domain)
            .bind(&new.schedule_type)
            .bind(json_text(&new.payload))
            .bind(new.attempts)
            .bind(&new.last_error)
            .bind(new.scheduled_for.timestamp_micros())
            .bind(new.now.timestamp_micros())
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        dlq_from_row(&row)
    }

    async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>> {
        let sql = format!("SELECT {DLQ_COLUMNS} FROM dlq WHERE env_id = ?1 AND id = ?2");
        let row = sqlx::query(&sql)
            .bind(self.env())
            .bind(id.0.to_string())
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(dlq_from_row).transpose()
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
        rows.iter().map(dlq_from_row).collect()
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
        let row = sqlx::query(&super::env_counts_sql("?1"))
            .bind(self.env())
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        let c = Cols(&row, "counts");
        Ok(EnvCounts {
            schedules_active: c.get("schedules_active")?,
            schedules_paused: c.get("schedules_paused")?,
            schedules_completed: c.get("schedules_completed")?,
            jobs_pending: c.get("jobs_pending")?,
            jobs_running: c.get("jobs_running")?,
            jobs_succeeded: c.get("jobs_succeeded")?,
            jobs_failed: c.get("jobs_failed")?,
            jobs_skipped: c.get("jobs_skipped")?,
            dlq_entries: c.get("dlq_entries")?,
        })
    }

    async fn outbox_insert_many(&mut self, events: &[NewEvent]) -> StoreResult<()> {
        for event in events {
            sqlx::query(
                "INSERT INTO outbox (id, env_id, schedule_id, event_type, payload, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .bind(event.id.0.to_string())
            .bind(self.env())
            .bind(event.schedule_id.map(|id| id.0.to_string()))
            .bind(&event.event_type)
            .bind(json_text(&event.payload))
            .bind(event.now.timestamp_micros())
            .execute(&mut *self.tx)
            .await
            .map_err(db_err)?;
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
        rows.iter().map(outbox_from_row).collect()
    }

    async fn audit_insert(&mut self, entry: &NewAudit) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO audit_journal (id, env_id, actor, action, resource_type, resource_id, \
             before, after, correlation_id, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .bind(Uuid::now_v7().to_string())
        .bind(self.env())
        .bind(&entry.actor)
        .bind(&entry.action)
        .bind(&entry.resource_type)
        .bind(&entry.resource_id)
        .bind(entry.before.as_ref().map(json_text))
        .bind(entry.after.as_ref().map(json_text))
        .bind(&entry.correlation_id)
        .bind(entry.now.timestamp_micros())
        .execute(&mut *self.tx)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, env_id, actor, action, resource_type, resource_id, before, after, \
             correlation_id, at FROM audit_journal WHERE env_id = ?1 ORDER BY at, id LIMIT ?2",
        )
        .bind(self.env())
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tx)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|row| {
                let c = Cols(row, "audit_journal");
                Ok(AuditEntry {
                    id: c.uuid("id")?,
                    env_id: EnvId(c.uuid("env_id")?),
                    actor: c.get("actor")?,
                    action: c.get("action")?,
                    resource_type: c.get("resource_type")?,
                    resource_id: c.get("resource_id")?,
                    before: c.opt_json("before")?,
                    after: c.opt_json("after")?,
                    correlation_id: c.get("correlation_id")?,
                    at: c.ts("at")?,
                })
            })
            .collect()
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let this = *self;
        this.tx.commit().await.map_err(db_err)?;
        this.on_commit.ring(&this.signals);
        Ok(())
    }
}

fn json_text(value: &Value) -> String {
    value.to_string()
}

fn from_micros(micros: i64, table: &'static str) -> StoreResult<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros).ok_or_else(|| StoreError::Corrupt {
        table,
        detail: format!("instant {micros} is out of range"),
    })
}

/// Typed column access for one row, with errors that name the table and column.
struct Cols<'r>(&'r SqliteRow, &'static str);

impl<'r> Cols<'r> {
    fn corrupt(&self, column: &str, detail: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            table: self.1,
            detail: format!("{column}: {detail}"),
        }
    }

    fn get<T>(&self, column: &str) -> StoreResult<T>
    where
        T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
    {
        self.0.try_get(column).map_err(|e| self.corrupt(column, e))
    }

    fn uuid(&self, column: &str) -> StoreResult<Uuid> {
        let text: String = self.get(column)?;
        Uuid::parse_str(&text).map_err(|e| self.corrupt(column, e))
    }

    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>> {
        let text: Option<String> = self.get(column)?;
        text.map(|t| Uuid::parse_str(&t).map_err(|e| self.corrupt(column, e)))
            .transpose()
    }

    fn ts(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        from_micros(self.get(column)?, self.1)
    }

    fn opt_ts(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        let micros: Option<i64> = self.get(column)?;
        micros.map(|m| from_micros(m, self.1)).transpose()
    }

    fn json(&self, column: &str) -> StoreResult<Value> {
        let text: String = self.get(column)?;
        serde_json::from_str(&text).map_err(|e| self.corrupt(column, e))
    }

    fn opt_json(&self, column: &str) -> StoreResult<Option<Value>> {
        let text: Option<String> = self.get(column)?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.corrupt(column, e)))
            .transpose()
    }

    fn parse<T>(&self, column: &str) -> StoreResult<T>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        let text: String = self.get(column)?;
        text.parse().map_err(|e: T::Err| self.corrupt(column, e))
    }
}

fn schedule_from_row(row: &SqliteRow) -> StoreResult<Schedule> {
    let c = Cols(row, "schedules");
    Ok(Schedule {
        id: ScheduleId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        domain: c.get("domain")?,
        schedule_type: c.get("schedule_type")?,
        timing: Timing::from_columns(TimingColumns {
            kind: c.parse("kind")?,
            cron_expr: c.get("cron_expr")?,
            timezone: c.get("timezone")?,
            run_at: c.opt_ts("run_at")?,
            on_dst_gap: c.parse("on_dst_gap")?,
            on_dst_repeat: c.parse("on_dst_repeat")?,
        })
        .map_err(|detail| StoreError::Corrupt {
            table: "schedules",
            detail,
        })?,
        target: Target::from_stored(c.json("target_config")?),
        payload: c.json("payload")?,
        status: c.parse("status")?,
        next_run_at: c.opt_ts("next_run_at")?,
        last_run_at: c.opt_ts("last_run_at")?,
        retry_count: c.get("retry_count")?,
        max_retries: c.get("max_retries")?,
        created_at: c.ts("created_at")?,
        updated_at: c.ts("updated_at")?,
        created_by: c.get("created_by")?,
        updated_by: c.get("updated_by")?,
    })
}

fn job_from_row(row: &SqliteRow) -> StoreResult<Job> {
    let c = Cols(row, "jobs");
    Ok(Job {
        id: JobId(c.uuid("id")?),
        schedule_id: ScheduleId(c.uuid("schedule_id")?),
        env_id: EnvId(c.uuid("env_id")?),
        status: c.parse("status")?,
        attempt: c.get("attempt")?,
        scheduled_for: c.ts("scheduled_for")?,
        next_attempt_at: c.opt_ts("next_attempt_at")?,
        started_at: c.opt_ts("started_at")?,
        finished_at: c.opt_ts("finished_at")?,
        result: c.opt_json("result")?,
        error: c.get("error")?,
        idempotency_key: c.get("idempotency_key")?,
        created_at: c.ts("created_at")?,
        updated_at: c.ts("updated_at")?,
    })
}

fn dlq_from_row(row: &SqliteRow) -> StoreResult<DlqEntry> {
    let c = Cols(row, "dlq");
    Ok(DlqEntry {
        id: DlqId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        schedule_id: ScheduleId(c.uuid("schedule_id")?),
        job_id: JobId(c.uuid("job_id")?),
        domain: c.get("domain")?,
        schedule_type: c.get("schedule_type")?,
        payload: c.json("payload")?,
        attempts: c.get("attempts")?,
        last_error: c.get("last_error")?,
        scheduled_for: c.ts("scheduled_for")?,
        landed_at: c.ts("landed_at")?,
    })
}

fn outbox_from_row(row: &SqliteRow) -> StoreResult<OutboxEvent> {
    let c = Cols(row, "outbox");
    Ok(OutboxEvent {
        seq: c.get("seq")?,
        id: EventId(c.uuid("id")?),
        env_id: EnvId(c.uuid("env_id")?),
        schedule_id: c.opt_uuid("schedule_id")?.map(ScheduleId),
        event_type: c.get("event_type")?,
        payload: c.json("payload")?,
        created_at: c.ts("created_at")?,
        relayed_at: c.opt_ts("relayed_at")?,
        attempts: c.get("attempts")?,
        last_error: c.get("last_error")?,
        parked_at: c.opt_ts("parked_at")?,
    })
}
