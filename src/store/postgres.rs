//! The PostgreSQL store: the production backend. Tenant isolation is enforced by the database
//! (row-level security keyed on a transaction-local context), cross-tenant engine reads go
//! through the schema's SECURITY DEFINER functions, and schedule locks are session-level
//! advisory locks on a dedicated connection.

use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgRow};
use sqlx::{Executor, PgConnection, PgPool, Postgres, Row, Transaction};
use uuid::Uuid;

use super::migrations::{self, Migration};
use super::{ConnectOptions, Rings, db_err, lock_key};
use crate::core::model::*;
use crate::core::store::*;
use crate::core::target::Target;
use crate::core::timing::{Timing, TimingColumns};

/// The role the service connects as: subject to row-level security.
pub const SERVICE_ROLE: &str = "sentin8_cron_service";

const SCHEDULE_COLUMNS: &str = "id, env_id, domain, schedule_type, kind, cron_expr, timezone, \
    run_at, on_dst_gap, on_dst_repeat, target_config, payload, status, next_run_at, last_run_at, \
    retry_count, max_retries, created_at, updated_at, created_by, updated_by";
const JOB_COLUMNS: &str = "id, schedule_id, env_id, status, attempt, scheduled_for, \
    next_attempt_at, started_at, finished_at, result, error, idempotency_key, created_at, updated_at";
const DLQ_COLUMNS: &str = "id, env_id, schedule_id, job_id, domain, schedule_type, payload, \
    attempts, last_error, scheduled_for, landed_at";
const OUTBOX_COLUMNS: &str = "seq, id, env_id, schedule_id, event_type, payload, created_at, \
    relayed_at, attempts, last_error, parked_at";

/// A PostgreSQL-backed [`Store`].
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    rls_bypassed: bool,
    signals: Arc<Signals>,
    announce_changes: bool,
}

impl PgStore {
    /// Connects a pool. The schema's objects are addressed through `search_path = cron`.
    pub async fn connect(url: &str, options: &ConnectOptions) -> StoreResult<Self> {
        let connect = pg_options(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect)
            .await
            .map_err(db_err)?;
        let rls_bypassed: bool = sqlx::query_scalar(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user",
        )
        .fetch_optional(&pool)
        .await
        .map_err(db_err)?
        .unwrap_or(false);
        Ok(Self {
            pool,
            rls_bypassed,
            signals: Arc::default(),
            announce_changes: options.announce_changes,
        })
    }

    /// The pool, for tests and benchmarks that need raw access.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// True when the connected role bypasses row-level security (a superuser or BYPASSRLS):
    /// tenant isolation then rests on the application alone. `serve` warns loudly about it.
    pub fn rls_bypassed(&self) -> bool {
        self.rls_bypassed
    }
}

fn pg_options(url: &str) -> StoreResult<PgConnectOptions> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid PostgreSQL URL: {e}")))?;
    Ok(options
        .application_name("sentin8-cron")
        .options([("search_path", "cron")]))
}

#[async_trait]
impl Store for PgStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: "postgres",
            advisory_locks: true,
            listen_notify: true,
            row_level_security: !self.rls_bypassed,
        }
    }

    fn signals(&self) -> Arc<Signals> {
        self.signals.clone()
    }

    async fn signals_listen(&self) -> StoreResult<()> {
        let mut listener = PgListener::connect_with(&self.pool).await.map_err(db_err)?;
        listener
            .listen_all([Channel::Schedules.name(), Channel::Outbox.name()])
            .await
            .map_err(db_err)?;
        tokio::spawn(relay_notifications(listener, Arc::downgrade(&self.signals)));
        Ok(())
    }

    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        let tx = self
            .pool
            .begin_with(begin_tenant_sql(env_id))
            .await
            .map_err(db_err)?;
        Ok(Box::new(PgTenantTx::new(
            tx,
            env_id,
            self.signals.clone(),
            self.announce_changes,
        )))
    }

    async fn schedule_locks_try(&self, ids: &[ScheduleId]) -> StoreResult<Box<dyn ScheduleLock>> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        let keys: Vec<i64> = ids.iter().map(|id| lock_key(*id)).collect();
        // Session locks are re-entrant: two ids sharing a key both get it (and both unlock).
        let taken: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_try_advisory_lock(k) FROM unnest($1::bigint[]) WITH ORDINALITY AS t(k, n) \
             ORDER BY n",
        )
        .bind(&keys)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)?;
        let held: Vec<ScheduleId> = ids
            .iter()
            .zip(taken)
            .filter_map(|(id, taken)| taken.then_some(*id))
            .collect();
        Ok(Box::new(PgScheduleLock {
            conn: Some(conn),
            held,
            signals: self.signals.clone(),
            announce_changes: self.announce_changes,
        }))
    }

    async fn schedules_due(&self, now: DateTime<Utc>, limit: u32) -> StoreResult<Vec<DueSchedule>> {
        let rows = sqlx::query("SELECT id, env_id, next_run_at FROM cron.due_schedules($1, $2)")
            .bind(clamp_limit(limit))
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|row| {
                Ok(DueSchedule {
                    id: ScheduleId(get(row, "id", "schedules")?),
                    env_id: EnvId(get(row, "env_id", "schedules")?),
                    next_run_at: get(row, "next_run_at", "schedules")?,
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
        let rows =
            sqlx::query("SELECT id, schedule_id, env_id, status FROM cron.due_jobs($1, $2, $3)")
                .bind(clamp_limit(limit))
                .bind(now)
                .bind(stale_before)
                .fetch_all(&self.pool)
                .await
                .map_err(db_err)?;
        rows.iter()
            .map(|row| {
                Ok(DueJob {
                    id: JobId(get(row, "id", "jobs")?),
                    schedule_id: ScheduleId(get(row, "schedule_id", "jobs")?),
                    env_id: EnvId(get(row, "env_id", "jobs")?),
                    status: parse_text(row, "status", "jobs")?,
                })
            })
            .collect()
    }

    async fn wakeup_next(&self) -> StoreResult<Option<DateTime<Utc>>> {
        sqlx::query_scalar("SELECT cron.next_wakeup()")
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)
    }

    async fn dlq_envs(&self) -> StoreResult<Vec<EnvId>> {
        let ids: Vec<Uuid> = sqlx::query_scalar("SELECT cron.dlq_envs()")
            .fetch_all(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(ids.into_iter().map(EnvId).collect())
    }

    async fn stats_get(&self) -> StoreResult<StoreStats> {
        let row =
            sqlx::query("SELECT s.*, o.* FROM cron.stats() s CROSS JOIN cron.outbox_stats() o")
                .fetch_one(&self.pool)
                .await
                .map_err(db_err)?;
        Ok(StoreStats {
            schedules_active: get(&row, "schedules_active", "stats")?,
            schedules_paused: get(&row, "schedules_paused", "stats")?,
            jobs_pending: get(&row, "jobs_pending", "stats")?,
            jobs_running: get(&row, "jobs_running", "stats")?,
            dlq_entries: get(&row, "dlq_entries", "stats")?,
            outbox_unrelayed: get(&row, "outbox_unrelayed", "stats")?,
            outbox_parked: get(&row, "outbox_parked", "stats")?,
        })
    }

    async fn outbox_claim(&self, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>> {
        let rows = sqlx::query(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM cron.outbox_claim($1, $2, $3, $4)"
        ))
        .bind(&claim.relay_id)
        .bind(claim.now)
        .bind(claim.lease_until)
        .bind(clamp_limit(claim.limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        let mut events = rows
            .iter()
            .map(outbox_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        // UPDATE ... RETURNING does not promise an order.
        events.sort_by_key(|e| e.seq);
        Ok(events)
    }

    async fn outbox_mark_relayed(&self, relayed: &OutboxRelayed) -> StoreResult<u64> {
        if relayed.seqs.is_empty() {
            return Ok(0);
        }
        let changed: i64 = sqlx::query_scalar("SELECT cron.outbox_mark_relayed($1, $2)")
            .bind(&relayed.seqs)
            .bind(relayed.now)
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(u64::try_from(changed).unwrap_or(0))
    }

    async fn outbox_mark_failed(
        &self,
        failed: &OutboxFailed,
    ) -> StoreResult<Vec<OutboxFailureRecorded>> {
        if failed.failures.is_empty() {
            return Ok(Vec::new());
        }
        let seqs: Vec<i64> = failed.failures.iter().map(|f| f.seq).collect();
        let errors: Vec<&str> = failed.failures.iter().map(|f| f.error.as_str()).collect();
        let parkable: Vec<bool> = failed.failures.iter().map(|f| f.parkable).collect();
        let rows = sqlx::query(
            "SELECT seq, attempts, parked FROM cron.outbox_mark_failed($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&failed.relay_id)
        .bind(&seqs)
        .bind(&errors)
        .bind(&parkable)
        .bind(failed.now)
        .bind(failed.retry_at)
        .bind(failed.max_attempts)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err)?;
        let mut recorded = rows
            .iter()
            .map(|row| {
                Ok(OutboxFailureRecorded {
                    seq: get(row, "seq", "outbox")?,
                    attempts: get(row, "attempts", "outbox")?,
                    parked: get(row, "parked", "outbox")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        recorded.sort_by_key(|r| r.seq);
        Ok(recorded)
    }

    async fn outbox_release(&self, release: &OutboxRelease) -> StoreResult<u64> {
        if release.seqs.is_empty() {
            return Ok(0);
        }
        let released: i64 = sqlx::query_scalar("SELECT cron.outbox_release($1, $2)")
            .bind(&release.relay_id)
            .bind(&release.seqs)
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(u64::try_from(released).unwrap_or(0))
    }

    async fn outbox_purge(&self, purge: &OutboxPurge) -> StoreResult<u64> {
        let deleted: i64 = sqlx::query_scalar("SELECT cron.outbox_purge($1, $2)")
            .bind(purge.relayed_before)
            .bind(i32::try_from(purge.limit.min(10_000)).unwrap_or(10_000))
            .fetch_one(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(u64::try_from(deleted).unwrap_or(0))
    }

    async fn schema_status(&self) -> StoreResult<SchemaStatus> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        schema_status(&mut conn).await
    }
}

/// Rings this process's signals when another process notifies, until the store is dropped.
async fn relay_notifications(mut listener: PgListener, signals: Weak<Signals>) {
    loop {
        let received = listener.try_recv().await;
        let Some(signals) = signals.upgrade() else {
            return;
        };
        match received {
            Ok(Some(notification)) => match notification.channel() {
                c if c == Channel::Schedules.name() => signals.ring(Channel::Schedules),
                c if c == Channel::Outbox.name() => signals.ring(Channel::Outbox),
                _ => {}
            },
            // The connection dropped and was re-established: anything may have been missed.
            Ok(None) => {
                signals.ring(Channel::Schedules);
                signals.ring(Channel::Outbox);
            }
            Err(err) => {
                tracing::warn!(error = %err, "change notifications interrupted; retrying");
                drop(signals);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// A column list with every column qualified by `alias` (for statements that join).
fn prefixed(columns: &str, alias: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn clamp_limit(limit: u32) -> i32 {
    i32::try_from(limit.min(1000)).unwrap_or(1000)
}

async fn schema_status(conn: &mut PgConnection) -> StoreResult<SchemaStatus> {
    let exists: bool =
        sqlx::query_scalar("SELECT to_regclass('cron.schema_migrations') IS NOT NULL")
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err)?;
    let applied = if exists {
        sqlx::query_scalar("SELECT version FROM cron.schema_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?
    } else {
        Vec::new()
    };
    Ok(SchemaStatus {
        applied,
        known: migrations::POSTGRES.iter().map(|m| m.version).collect(),
    })
}

/// Applies pending migrations as the connected (owner) role. Returns what it did and notes for
/// the operator.
pub async fn migrate(url: &str, dry_run: bool) -> StoreResult<(Vec<MigrationReport>, Vec<String>)> {
    let options = pg_options(url)?;
    let mut conn = PgConnection::connect_with_opts(options).await?;
    let mut notes = Vec::new();

    let (is_super, bypass_rls, create_role): (bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut conn)
    .await
    .map_err(db_err)?;
    if !is_super && !bypass_rls {
        return Err(StoreError::Config(
            "the migrating role must bypass row-level security (a superuser or a role with \
             BYPASSRLS): it owns the schema, and the engine's SECURITY DEFINER functions read \
             across tenants with its rights"
                .into(),
        ));
    }

    let role: Option<(bool, bool)> =
        sqlx::query_as("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1")
            .bind(SERVICE_ROLE)
            .fetch_optional(&mut conn)
            .await
            .map_err(db_err)?;
    match role {
        Some((true, _)) | Some((_, true)) => {
            return Err(StoreError::Config(format!(
                "the role {SERVICE_ROLE} exists but bypasses row-level security; run \
                 `ALTER ROLE {SERVICE_ROLE} NOSUPERUSER NOBYPASSRLS;` and migrate again"
            )));
        }
        Some(_) => {}
        None if dry_run => notes.push(format!("would create the role {SERVICE_ROLE}")),
        None if is_super || create_role => {
            conn.execute(
                format!(
                    "CREATE ROLE {SERVICE_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB \
                     NOCREATEROLE NOREPLICATION"
                )
                .as_str(),
            )
            .await
            .map_err(db_err)?;
            notes.push(format!(
                "created the role {SERVICE_ROLE} (NOBYPASSRLS); give it a password with \
                 `ALTER ROLE {SERVICE_ROLE} PASSWORD '...'` unless your server trusts it otherwise"
            ));
        }
        None => {
            return Err(StoreError::Config(format!(
                "the role {SERVICE_ROLE} does not exist and the migrating role may not create \
                 it; ask an administrator to run `CREATE ROLE {SERVICE_ROLE} LOGIN NOSUPERUSER \
                 NOBYPASSRLS;` and migrate again"
            )));
        }
    }

    let mut reports = Vec::new();
    if !dry_run {
        conn.execute(
            "CREATE SCHEMA IF NOT EXISTS cron; \
             CREATE TABLE IF NOT EXISTS cron.schema_migrations ( \
                 version bigint PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, \
                 applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .map_err(db_err)?;
    }
    let status = schema_status(&mut conn).await?;
    verify_checksums(&mut conn, &status).await?;
    for migration in migrations::POSTGRES {
        let already = status.applied.contains(&migration.version);
        if !already && !dry_run {
            apply(&mut conn, migration).await?;
        }
        reports.push(MigrationReport {
            version: migration.version,
            name: migration.name.to_owned(),
            applied: !already,
        });
    }
    if !dry_run {
        conn.execute(format!("GRANT SELECT ON cron.schema_migrations TO {SERVICE_ROLE}").as_str())
            .await
            .map_err(db_err)?;
    }
    status_newer_check(&status)?;
    Ok((reports, notes))
}

fn status_newer_check(status: &SchemaStatus) -> StoreResult<()> {
    let unknown = status.unknown();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(StoreError::Schema(format!(
            "the database has schema versions {unknown:?} that this build does not know; \
             run a newer sentin8-cron"
        )))
    }
}

async fn verify_checksums(conn: &mut PgConnection, status: &SchemaStatus) -> StoreResult<()> {
    if status.applied.is_empty() {
        return Ok(());
    }
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT version, checksum FROM cron.schema_migrations")
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)?;
    migrations::check_applied(migrations::POSTGRES, &rows)
}

async fn apply(conn: &mut PgConnection, migration: &Migration) -> StoreResult<()> {
    let mut tx = conn.begin_tx().await?;
    // Serialises concurrent `migrate` runs; the version check below is then authoritative.
    sqlx::query("SELECT pg_advisory_xact_lock(7355608001)")
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let done: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM cron.schema_migrations WHERE version = $1)",
    )
    .bind(migration.version)
    .fetch_one(&mut *tx)
    .await
    .map_err(db_err)?;
    if !done {
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
            "INSERT INTO cron.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(migration.checksum())
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    }
    tx.commit().await.map_err(db_err)
}

/// Opening a connection and a transaction, with errors mapped into the store's.
trait PgConnectionExt {
    async fn connect_with_opts(options: PgConnectOptions) -> StoreResult<PgConnection>;
    async fn begin_tx(&mut self) -> StoreResult<Transaction<'_, Postgres>>;
    async fn begin_tenant(&mut self, env_id: EnvId) -> StoreResult<Transaction<'_, Postgres>>;
}

impl PgConnectionExt for PgConnection {
    async fn connect_with_opts(options: PgConnectOptions) -> StoreResult<PgConnection> {
        use sqlx::ConnectOptions as _;
        options.connect().await.map_err(db_err)
    }

    async fn begin_tx(&mut self) -> StoreResult<Transaction<'_, Postgres>> {
        use sqlx::Connection as _;
        self.begin().await.map_err(db_err)
    }

    async fn begin_tenant(&mut self, env_id: EnvId) -> StoreResult<Transaction<'_, Postgres>> {
        use sqlx::Connection as _;
        self.begin_with(begin_tenant_sql(env_id))
            .await
            .map_err(db_err)
    }
}

/// Opens a transaction and sets its tenant context in one round trip (one simple-protocol
/// message with both statements). The context is transaction-local, so it lives exactly as
/// long as this transaction. The env id is a typed UUID, formatted by us: nothing from a
/// request is spliced into the text.
fn begin_tenant_sql(env_id: EnvId) -> String {
    let id: Uuid = env_id.0;
    format!("BEGIN; SELECT cron.sentin8_set_tenant_context('{id}'::uuid)")
}

/// Session-level advisory locks held on their own pooled connection.
struct PgScheduleLock {
    conn: Option<PoolConnection<Postgres>>,
    held: Vec<ScheduleId>,
    signals: Arc<Signals>,
    announce_changes: bool,
}

#[async_trait]
impl ScheduleLock for PgScheduleLock {
    fn held(&self) -> &[ScheduleId] {
        &self.held
    }

    async fn tenant_begin(&mut self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx + '_>> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| StoreError::Config("schedule lock already released".into()))?;
        let tx = conn.begin_tenant(env_id).await?;
        Ok(Box::new(PgTenantTx::new(
            tx,
            env_id,
            self.signals.clone(),
            self.announce_changes,
        )))
    }

    async fn release(mut self: Box<Self>) -> StoreResult<bool> {
        let Some(mut conn) = self.conn.take() else {
            return Ok(false);
        };
        if self.held.is_empty() {
            return Ok(true);
        }
        let keys: Vec<i64> = self.held.iter().map(|id| lock_key(*id)).collect();
        let released: Result<Vec<bool>, _> =
            sqlx::query_scalar("SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k")
                .bind(&keys)
                .fetch_all(&mut *conn)
                .await;
        match released {
            Ok(held) => Ok(held.iter().all(|h| *h)),
            Err(err) => {
                // The session state is unknown: never hand this connection to someone else.
                conn.close_on_drop();
                Err(db_err(err))
            }
        }
    }
}

impl Drop for PgScheduleLock {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take()
            && !self.held.is_empty()
        {
            // Dropped without release (a panic or a cancelled task): closing the session is the
            // only way to free a session lock without awaiting.
            tracing::warn!(
                locks = self.held.len(),
                "schedule locks dropped without release; closing their connection"
            );
            conn.close_on_drop();
        }
    }
}

/// A transaction with the tenant context set.
struct PgTenantTx<'c> {
    tx: Transaction<'c, Postgres>,
    env_id: EnvId,
    signals: Arc<Signals>,
    on_commit: Rings,
    announce_changes: bool,
}

impl<'c> PgTenantTx<'c> {
    fn new(
        tx: Transaction<'c, Postgres>,
        env_id: EnvId,
        signals: Arc<Signals>,
        announce_changes: bool,
    ) -> Self {
        Self {
            tx,
            env_id,
            signals,
            on_commit: Rings::default(),
            announce_changes,
        }
    }

    async fn one_schedule(&mut self, sql: &str, id: ScheduleId) -> StoreResult<Option<Schedule>> {
        let row = sqlx::query(sql)
            .bind(self.env_id.0)
            .bind(id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(schedule_from_row).transpose()
    }
}

#[async_trait]
impl TenantTx for PgTenantTx<'_> {
    fn env_id(&self) -> EnvId {
        self.env_id
    }

    fn notify_on_commit(&mut self, channel: Channel) {
        self.on_commit.request(channel, self.announce_changes);
    }

    async fn schedule_insert(&mut self, new: &NewSchedule) -> StoreResult<Schedule> {
        let timing = new.timing.columns();
        let sql = format!(
            "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, timezone, \
             run_at, on_dst_gap, on_dst_repeat, target_config, payload, status, next_run_at, \
             retry_count, max_retries, created_at, updated_at, created_by, updated_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 0, $15, $16, $16, $17, $17) \
             RETURNING {SCHEDULE_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(new.id.0)
            .bind(self.env_id.0)
            .bind(&new.domain)
            .bind(&new.schedule_type)
            .bind(timing.kind.as_str())
            .bind(&timing.cron_expr)
            .bind(&timing.timezone)
            .bind(timing.run_at)
            .bind(timing.on_dst_gap.as_str())
            .bind(timing.on_dst_repeat.as_str())
            .bind(new.target.config())
            .bind(&new.payload)
            .bind(new.status.as_str())
            .bind(new.next_run_at)
            .bind(new.max_retries)
            .bind(new.now)
            .bind(&new.actor)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        schedule_from_row(&row)
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
        row.as_ref().map(schedule_from_row).transpose()
    }

    async fn schedule_list(&mut self, query: &ScheduleQuery) -> StoreResult<Vec<Schedule>> {
        let sql = format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE env_id = $1 \
               AND ($2::text IS NULL OR domain = $2) \
               AND ($3::text IS NULL OR status = $3) \
               AND ($4 OR status <> 'deleted') \
               AND ($5::uuid IS NULL OR id > $5) \
             ORDER BY id LIMIT $6"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(&query.domain)
            .bind(query.status.map(|s| s.as_str()))
            .bind(query.include_deleted)
            .bind(query.after.map(|id| id.0))
            .bind(i64::from(query.limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows.iter().map(schedule_from_row).collect()
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
        rows.iter().map(schedule_from_row).collect()
    }

    async fn schedule_update(&mut self, s: &Schedule) -> StoreResult<Schedule> {
        let timing = s.timing.columns();
        let sql = format!(
            "UPDATE schedules SET domain = $3, schedule_type = $4, kind = $5, cron_expr = $6, \
             timezone = $7, run_at = $8, on_dst_gap = $9, on_dst_repeat = $10, \
             target_config = $11, payload = $12, status = $13, next_run_at = $14, \
             last_run_at = $15, retry_count = $16, max_retries = $17, updated_at = $18, \
             updated_by = $19 \
             WHERE env_id = $1 AND id = $2 RETURNING {SCHEDULE_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(s.id.0)
            .bind(&s.domain)
            .bind(&s.schedule_type)
            .bind(timing.kind.as_str())
            .bind(&timing.cron_expr)
            .bind(&timing.timezone)
            .bind(timing.run_at)
            .bind(timing.on_dst_gap.as_str())
            .bind(timing.on_dst_repeat.as_str())
            .bind(s.target.config())
            .bind(&s.payload)
            .bind(s.status.as_str())
            .bind(s.next_run_at)
            .bind(s.last_run_at)
            .bind(s.retry_count)
            .bind(s.max_retries)
            .bind(s.updated_at)
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
        rows.iter().map(schedule_from_row).collect()
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
        rows.iter().map(schedule_from_row).collect()
    }

    async fn job_open_many(&mut self, new: &[NewJob]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
                               next_attempt_at, started_at, idempotency_key, created_at, updated_at) \
             SELECT j.id, j.schedule_id, $1, j.status, j.attempt, j.scheduled_for, \
                    j.next_attempt_at, j.started_at, j.idempotency_key, j.now, j.now \
             FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::int[], $6::timestamptz[], \
                         $7::timestamptz[], $8::timestamptz[], $9::text[], $10::timestamptz[]) \
                  WITH ORDINALITY AS j(id, schedule_id, status, attempt, scheduled_for, \
                                       next_attempt_at, started_at, idempotency_key, now, n) \
             ORDER BY j.n \
             ON CONFLICT (schedule_id) WHERE status IN ('pending', 'running') DO NOTHING \
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
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows.iter().map(job_from_row).collect()
    }

    async fn job_finish_many(&mut self, jobs: &[Job]) -> StoreResult<Vec<Job>> {
        let sql = format!(
            "UPDATE jobs j SET status = u.status, next_attempt_at = u.next_attempt_at, \
                               finished_at = u.finished_at, result = u.result, error = u.error, \
                               updated_at = u.updated_at \
             FROM unnest($2::uuid[], $3::int[], $4::text[], $5::timestamptz[], \
                         $6::timestamptz[], $7::jsonb[], $8::text[], $9::timestamptz[]) \
                  AS u(id, attempt, status, next_attempt_at, finished_at, result, error, updated_at) \
             WHERE j.env_id = $1 AND j.id = u.id AND j.status = 'running' \
               AND j.attempt = u.attempt \
             RETURNING {}",
            prefixed(JOB_COLUMNS, "j")
        );
        let rows = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(jobs.iter().map(|j| j.id.0).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.attempt).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.status.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.next_attempt_at).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.finished_at).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.result.clone()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.error.clone()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.updated_at).collect::<Vec<_>>())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows.iter().map(job_from_row).collect()
    }

    async fn job_insert(&mut self, new: &NewJob) -> StoreResult<Job> {
        let sql = format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             next_attempt_at, started_at, finished_at, error, idempotency_key, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(new.id.0)
            .bind(new.schedule_id.0)
            .bind(self.env_id.0)
            .bind(new.status.as_str())
            .bind(new.attempt)
            .bind(new.scheduled_for)
            .bind(new.next_attempt_at)
            .bind(new.started_at)
            .bind(new.finished_at)
            .bind(&new.error)
            .bind(Job::idempotency_key_for(new.schedule_id, new.id))
            .bind(new.now)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        job_from_row(&row)
    }

    async fn job_get(&mut self, id: JobId) -> StoreResult<Option<Job>> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = $1 AND id = $2");
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn job_get_open(&mut self, schedule_id: ScheduleId) -> StoreResult<Option<Job>> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs \
             WHERE env_id = $1 AND schedule_id = $2 AND status IN ('pending', 'running')"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(schedule_id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(job_from_row).transpose()
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
        rows.iter().map(job_from_row).collect()
    }

    async fn job_update(&mut self, job: &Job) -> StoreResult<Job> {
        let sql = format!(
            "UPDATE jobs SET status = $3, attempt = $4, next_attempt_at = $5, started_at = $6, \
             finished_at = $7, result = $8, error = $9, updated_at = $10 \
             WHERE env_id = $1 AND id = $2 RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(job.id.0)
            .bind(job.status.as_str())
            .bind(job.attempt)
            .bind(job.next_attempt_at)
            .bind(job.started_at)
            .bind(job.finished_at)
            .bind(&job.result)
            .bind(&job.error)
            .bind(job.updated_at)
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
            "UPDATE jobs SET status = 'running', attempt = attempt + 1, started_at = $3, \
             next_attempt_at = NULL, updated_at = $3 \
             WHERE env_id = $1 AND id = $2 AND status = 'pending' AND next_attempt_at <= $3 \
             RETURNING {JOB_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(claim.id.0)
            .bind(claim.now)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn dlq_insert(&mut self, new: &NewDlqEntry) -> StoreResult<DlqEntry> {
        let sql = format!(
            "INSERT INTO dlq (id, env_id, schedule_id, job_id, domain, schedule_type, payload, \
             attempts, last_error, scheduled_for, landed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {DLQ_COLUMNS}"
        );
        let row = sqlx::query(&sql)
            .bind(new.id.0)
            .bind(self.env_id.0)
            .bind(new.schedule_id.0)
            .bind(new.job_id.0)
            .bind(&new.domain)
            .bind(&new.schedule_type)
            .bind(&new.payload)
            .bind(new.attempts)
            .bind(&new.last_error)
            .bind(new.scheduled_for)
            .bind(new.now)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        dlq_from_row(&row)
    }

    async fn dlq_get(&mut self, id: DlqId) -> StoreResult<Option<DlqEntry>> {
        let sql = format!("SELECT {DLQ_COLUMNS} FROM dlq WHERE env_id = $1 AND id = $2");
        let row = sqlx::query(&sql)
            .bind(self.env_id.0)
            .bind(id.0)
            .fetch_optional(&mut *self.tx)
            .await
            .map_err(db_err)?;
        row.as_ref().map(dlq_from_row).transpose()
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
        rows.iter().map(dlq_from_row).collect()
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
        let row = sqlx::query(&super::env_counts_sql("$1"))
            .bind(self.env_id.0)
            .fetch_one(&mut *self.tx)
            .await
            .map_err(db_err)?;
        let get = |column: &str| get::<i64>(&row, column, "counts");
        Ok(EnvCounts {
            schedules_active: get("schedules_active")?,
            schedules_paused: get("schedules_paused")?,
            schedules_completed: get("schedules_completed")?,
            jobs_pending: get("jobs_pending")?,
            jobs_running: get("jobs_running")?,
            jobs_succeeded: get("jobs_succeeded")?,
            jobs_failed: get("jobs_failed")?,
            jobs_skipped: get("jobs_skipped")?,
            dlq_entries: get("dlq_entries")?,
        })
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
        rows.iter().map(outbox_from_row).collect()
    }

    async fn audit_insert(&mut self, entry: &NewAudit) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO audit_journal (id, env_id, actor, action, resource_type, resource_id, \
             before, after, correlation_id, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(Uuid::now_v7())
        .bind(self.env_id.0)
        .bind(&entry.actor)
        .bind(&entry.action)
        .bind(&entry.resource_type)
        .bind(&entry.resource_id)
        .bind(&entry.before)
        .bind(&entry.after)
        .bind(&entry.correlation_id)
        .bind(entry.now)
        .execute(&mut *self.tx)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn audit_list(&mut self, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, env_id, actor, action, resource_type, resource_id, before, after, \
             correlation_id, at FROM audit_journal WHERE env_id = $1 ORDER BY at, id LIMIT $2",
        )
        .bind(self.env_id.0)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.tx)
        .await
        .map_err(db_err)?;
        rows.iter()
            .map(|row| {
                Ok(AuditEntry {
                    id: get(row, "id", "audit_journal")?,
                    env_id: EnvId(get(row, "env_id", "audit_journal")?),
                    actor: get(row, "actor", "audit_journal")?,
                    action: get(row, "action", "audit_journal")?,
                    resource_type: get(row, "resource_type", "audit_journal")?,
                    resource_id: get(row, "resource_id", "audit_journal")?,
                    before: get(row, "before", "audit_journal")?,
                    after: get(row, "after", "audit_journal")?,
                    correlation_id: get(row, "correlation_id", "audit_journal")?,
                    at: get(row, "at", "audit_journal")?,
                })
            })
            .collect()
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
        Ok(())
    }
}

fn get<'r, T>(row: &'r PgRow, column: &str, table: &'static str) -> StoreResult<T>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(column).map_err(|e| StoreError::Corrupt {
        table,
        detail: format!("{column}: {e}"),
    })
}

fn parse_text<T>(row: &PgRow, column: &str, table: &'static str) -> StoreResult<T>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let text: String = get(row, column, table)?;
    text.parse().map_err(|e: T::Err| StoreError::Corrupt {
        table,
        detail: format!("{column}: {e}"),
    })
}

fn schedule_from_row(row: &PgRow) -> StoreResult<Schedule> {
    const T: &str = "schedules";
    Ok(Schedule {
        id: ScheduleId(get(row, "id", T)?),
        env_id: EnvId(get(row, "env_id", T)?),
        domain: get(row, "domain", T)?,
        schedule_type: get(row, "schedule_type", T)?,
        timing: Timing::from_columns(TimingColumns {
            kind: parse_text(row, "kind", T)?,
            cron_expr: get(row, "cron_expr", T)?,
            timezone: get(row, "timezone", T)?,
            run_at: get(row, "run_at", T)?,
            on_dst_gap: parse_text(row, "on_dst_gap", T)?,
            on_dst_repeat: parse_text(row, "on_dst_repeat", T)?,
        })
        .map_err(|detail| StoreError::Corrupt { table: T, detail })?,
        target: Target::from_stored(get(row, "target_config", T)?),
        payload: get(row, "payload", T)?,
        status: parse_text(row, "status", T)?,
        next_run_at: get(row, "next_run_at", T)?,
        last_run_at: get(row, "last_run_at", T)?,
        retry_count: get(row, "retry_count", T)?,
        max_retries: get(row, "max_retries", T)?,
        created_at: get(row, "created_at", T)?,
        updated_at: get(row, "updated_at", T)?,
        created_by: get(row, "created_by", T)?,
        updated_by: get(row, "updated_by", T)?,
    })
}

fn job_from_row(row: &PgRow) -> StoreResult<Job> {
    const T: &str = "jobs";
    Ok(Job {
        id: JobId(get(row, "id", T)?),
        schedule_id: ScheduleId(get(row, "schedule_id", T)?),
        env_id: EnvId(get(row, "env_id", T)?),
        status: parse_text(row, "status", T)?,
        attempt: get(row, "attempt", T)?,
        scheduled_for: get(row, "scheduled_for", T)?,
        next_attempt_at: get(row, "next_attempt_at", T)?,
        started_at: get(row, "started_at", T)?,
        finished_at: get(row, "finished_at", T)?,
        result: get(row, "result", T)?,
        error: get(row, "error", T)?,
        idempotency_key: get(row, "idempotency_key", T)?,
        created_at: get(row, "created_at", T)?,
        updated_at: get(row, "updated_at", T)?,
    })
}

fn dlq_from_row(row: &PgRow) -> StoreResult<DlqEntry> {
    const T: &str = "dlq";
    Ok(DlqEntry {
        id: DlqId(get(row, "id", T)?),
        env_id: EnvId(get(row, "env_id", T)?),
        schedule_id: ScheduleId(get(row, "schedule_id", T)?),
        job_id: JobId(get(row, "job_id", T)?),
        domain: get(row, "domain", T)?,
        schedule_type: get(row, "schedule_type", T)?,
        payload: get(row, "payload", T)?,
        attempts: get(row, "attempts", T)?,
        last_error: get(row, "last_error", T)?,
        scheduled_for: get(row, "scheduled_for", T)?,
        landed_at: get(row, "landed_at", T)?,
    })
}

fn outbox_from_row(row: &PgRow) -> StoreResult<OutboxEvent> {
    const T: &str = "outbox";
    Ok(OutboxEvent {
        seq: get(row, "seq", T)?,
        id: EventId(get(row, "id", T)?),
        env_id: EnvId(get(row, "env_id", T)?),
        schedule_id: get::<Option<Uuid>>(row, "schedule_id", T)?.map(ScheduleId),
        event_type: get(row, "event_type", T)?,
        payload: get(row, "payload", T)?,
        created_at: get(row, "created_at", T)?,
        relayed_at: get(row, "relayed_at", T)?,
        attempts: get(row, "attempts", T)?,
        last_error: get(row, "last_error", T)?,
        parked_at: get(row, "parked_at", T)?,
    })
}
