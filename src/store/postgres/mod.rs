//! The PostgreSQL store: the production backend. Tenant isolation is enforced by the database
//! (row-level security keyed on a transaction-local context), cross-tenant engine reads go
//! through the schema's SECURITY DEFINER functions, and schedule locks are session-level
//! advisory locks on a dedicated connection.
//!
//! `connect` and the [`Store`] entry points live here; `hosts` reads the database URL (one
//! host or several), `failover` follows the host to use among several, `migrate` holds the
//! migration hooks, `locks` the advisory locks, `tenant` the tenant transaction, `reads` the
//! engine's cross-tenant reads and `outbox` the relay's claims and marks.

mod announce;
mod failover;
mod hosts;
mod lifecycle;
mod locks;
mod migrate;
mod outbox;
mod reads;
mod tenant;

use std::sync::{Arc, Weak};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgListener, PgPoolOptions, PgRow};
use sqlx::{PgPool, Postgres};
use tokio::sync::watch;
use uuid::Uuid;

use super::rows::{Cells, Sql, Val};
use super::{ConnectOptions, db_err};
use crate::core::model::*;
use crate::core::store::*;

pub use hosts::DatabaseUrlError;
pub use migrate::migrate;

/// Connections kept for tenant reads (see [`PgStore`]'s `readers`).
const READERS: u32 = 4;

/// A pooled connection that sat idle at least this long is pinged before it is handed out;
/// one used more recently is not ([`alive_if_idle`]).
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// A pool's options, without sqlx's ping before every acquisition: that is a round trip per
/// transaction, a fifth of those of a jittered minute. The pool checks a connection that sat
/// idle instead ([`alive_if_idle`], its `before_acquire`; the failover pool replaces that hook
/// with one that also calls it); a connection that broke while in use fails its statement,
/// which the engine tries again, and is closed.
fn pool_checking_idle(max_connections: u32, acquire_timeout: Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| Box::pin(alive_if_idle(conn, meta)))
}

/// Whether a pooled connection may be handed out: yes when it was used within
/// [`PING_IDLE_AFTER`], else when it answers a ping (an error closes it, and the pool opens
/// another).
pub(super) async fn alive_if_idle(
    conn: &mut sqlx::PgConnection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> Result<bool, sqlx::Error> {
    if meta.idle_for < PING_IDLE_AFTER {
        return Ok(true);
    }
    sqlx::Connection::ping(conn).await.map(|()| true)
}

/// The role the service connects as: subject to row-level security.
pub const SERVICE_ROLE: &str = "sentin8_cron_service";

/// A PostgreSQL-backed [`Store`].
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Connections for [`Store::tenant_read`] (the API's and the admin pages' reads), beside
    /// the pool the engine and the writes share: a burst's records, hand-offs and claims can
    /// hold every connection of that pool for a second, and a read must not queue behind them.
    /// Opened when first used. With several hosts (a failover pair) reads share the pool,
    /// which follows the host in use.
    readers: PgPool,
    rls_bypassed: bool,
    signals: Arc<Signals>,
    announce: tenant::Announce,
    /// The host in use among several, when the URL names several or asks for a writable one.
    keeper: Option<Arc<failover::Keeper>>,
}

impl PgStore {
    /// Connects a pool. The schema's objects are addressed through `search_path = cron`. A
    /// URL naming several hosts (or `target_session_attrs=read-write`) connects to the first
    /// that fits, and follows a failover to another without a restart.
    pub async fn connect(url: &str, options: &ConnectOptions) -> StoreResult<Self> {
        let mut hosts = hosts::HostList::parse(url).map_err(url_err)?;
        let pool_options =
            pool_checking_idle(options.max_connections.max(2), options.acquire_timeout);
        let (pool, readers, keeper) = if hosts.is_single() {
            let host = hosts.hosts.remove(0);
            let readers = pool_checking_idle(READERS, options.acquire_timeout)
                .connect_lazy_with(host.options.clone());
            let pool = pool_options
                .connect_with(host.options)
                .await
                .map_err(db_err)?;
            (pool, readers, None)
        } else {
            let (pool, keeper) =
                failover::connect_pool(hosts, pool_options, options.acquire_timeout).await?;
            (pool.clone(), pool, Some(keeper))
        };
        let rls_bypassed: bool = sqlx::query_scalar(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user",
        )
        .fetch_optional(&pool)
        .await
        .map_err(db_err)?
        .unwrap_or(false);
        Ok(Self {
            pool: pool.clone(),
            readers,
            rls_bypassed,
            signals: Arc::default(),
            announce: match (options.announce_changes, options.announce_after_commit) {
                (false, _) => tenant::Announce::No,
                (true, false) => tenant::Announce::InTransaction,
                (true, true) => {
                    tenant::Announce::AfterCommit(announce::Announcer::start(pool.clone()))
                }
            },
            keeper,
        })
    }

    /// The pool, for tests and benchmarks that need raw access.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A tenant transaction on `pool`, begun by `sql` (one of `tenant.rs`'s openings).
    async fn begin_on(
        &self,
        pool: &PgPool,
        sql: String,
        env_id: EnvId,
    ) -> StoreResult<Box<dyn TenantTx>> {
        let tx = pool.begin_with(sql).await.map_err(db_err)?;
        Ok(Box::new(tenant::PgTenantTx::new(
            tx,
            env_id,
            self.signals.clone(),
            self.announce.clone(),
        )))
    }

    /// True when the connected role bypasses row-level security (a superuser or BYPASSRLS):
    /// tenant isolation then rests on the application alone. `serve` warns loudly about it.
    pub fn rls_bypassed(&self) -> bool {
        self.rls_bypassed
    }
}

fn url_err(err: DatabaseUrlError) -> StoreError {
    StoreError::Config(err.to_string())
}

/// The hosts a PostgreSQL URL names, with a message naming the field at fault when it cannot
/// be used.
pub(crate) fn hosts_of(url: &str) -> StoreResult<hosts::HostList> {
    hosts::HostList::parse(url).map_err(url_err)
}

/// One connection to the host the URL's rule picks (the URL's host when it names one).
async fn connect_one(url: &str) -> StoreResult<sqlx::PgConnection> {
    failover::connect_one(&hosts_of(url)?).await
}

// The methods both backends delegate alike come from the macro; these are this backend's own.
crate::store::store_impl! {
impl Store for PgStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: "postgres",
            advisory_locks: true,
            listen_notify: true,
            row_level_security: !self.rls_bypassed,
            rls_bypassed: self.rls_bypassed,
            embedded: false,
        }
    }

    fn host_search(&self) -> Option<String> {
        self.keeper.as_ref().and_then(|keeper| keeper.search())
    }

    async fn signals_listen(&self) -> StoreResult<()> {
        let listener = listen(&self.pool).await.map_err(db_err)?;
        tokio::spawn(relay_notifications(
            self.pool.clone(),
            listener,
            Arc::downgrade(&self.signals),
            self.keeper.as_ref().map(|keeper| keeper.moved()),
        ));
        Ok(())
    }

    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        self.begin_on(&self.pool, tenant::begin_tenant_sql(env_id), env_id)
            .await
    }

    async fn tenant_begin_bounded(
        &self,
        env_id: EnvId,
        lock_timeout: std::time::Duration,
    ) -> StoreResult<Box<dyn TenantTx>> {
        let sql = tenant::begin_tenant_bounded_sql(env_id, lock_timeout);
        self.begin_on(&self.pool, sql, env_id).await
    }

    async fn tenant_read(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        let sql = tenant::begin_tenant_read_sql(env_id);
        self.begin_on(&self.readers, sql, env_id).await
    }

    async fn schedule_locks_try(&self, ids: &[ScheduleId]) -> StoreResult<Box<dyn ScheduleLock>> {
        locks::try_lock(self, ids).await
    }

    async fn jobs_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        lifecycle::purge(&self.pool, "purge_jobs", purge).await
    }

    async fn audit_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        lifecycle::purge(&self.pool, "purge_audit", purge).await
    }

    async fn schedules_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        lifecycle::purge(&self.pool, "purge_schedules", purge).await
    }

}
}

/// A LISTEN connection on both channels, from the pool (so it goes to the host in use).
async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener
        .listen_all([Channel::Schedules.name(), Channel::Outbox.name()])
        .await?;
    Ok(listener)
}

/// Rings this process's signals when another process notifies, until the store is dropped.
/// When the pool moves to another host (`moved`), the LISTEN connection starts over there: the
/// one it had may still be open to a host that no longer takes the writes that notify.
async fn relay_notifications(
    pool: PgPool,
    mut listener: PgListener,
    signals: Weak<Signals>,
    mut moved: Option<watch::Receiver<u64>>,
) {
    loop {
        let received = tokio::select! {
            received = listener.try_recv() => received,
            changed = host_moved(&mut moved) => {
                if changed.is_err() {
                    return;
                }
                match listen(&pool).await {
                    Ok(fresh) => listener = fresh,
                    Err(err) => {
                        tracing::warn!(error = %err, "change notifications interrupted; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                // Whatever was notified meanwhile went to the old connection.
                Ok(None)
            }
        };
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

/// Resolves when the pool has moved to another host; never without a keeper. An error means
/// the keeper (and so the store) is gone.
async fn host_moved(
    moved: &mut Option<watch::Receiver<u64>>,
) -> Result<(), watch::error::RecvError> {
    match moved {
        Some(moved) => moved.changed().await,
        None => std::future::pending().await,
    }
}

/// PostgreSQL's placeholders: `$1`, `$2`, ...
fn placeholder(n: usize) -> String {
    format!("${n}")
}

type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// Binds a value natively, by reference: a batch's values (a JSON document a row) are
/// encoded straight from the statement, not copied first.
fn bind<'q>(query: PgQuery<'q>, val: &'q Val) -> PgQuery<'q> {
    match val {
        Val::Uuid(v) => query.bind(v),
        Val::Text(v) => query.bind(v.as_deref()),
        Val::I32(v) => query.bind(v),
        Val::Opt32(v) => query.bind(v),
        Val::I64(v) => query.bind(v),
        Val::Bool(v) => query.bind(v),
        Val::Ts(v) => query.bind(v),
        Val::Json(v) => query.bind(v.as_ref()),
    }
}

/// The statement with its values bound.
fn query(sql: &Sql) -> PgQuery<'_> {
    sql.vals.iter().fold(sqlx::query(&sql.text), bind)
}

// PostgreSQL's functions take their counts and limits as `int`.
crate::store::rows::pool_rows!(PgPool, PgRow, count: |n: u32| {
    Val::I32(i32::try_from(n).unwrap_or(i32::MAX))
});

crate::store::rows::row_cells! {
/// A PostgreSQL row's cells, decoded natively.
Cells for PgCells(PgRow, Postgres) {
    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>> {
        self.get(column)
    }
    fn opt_ts(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.get(column)
    }
    fn opt_json(&self, column: &str) -> StoreResult<Option<Value>> {
        self.get(column)
    }
}
}
