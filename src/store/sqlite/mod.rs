//! The embedded SQLite store: the zero-setup default, held to the same conformance suite as
//! PostgreSQL.
//!
//! SQLite has no row-level security, so tenant scoping is enforced here by construction: a
//! [`TenantTx`] binds its own env_id into every statement; no method takes an env id from its
//! caller. One pooled connection serialises writers (SQLite allows one at a time anyway), which
//! also makes the claim-conditional UPDATE and the open-job index exclusive. Schedule locks are
//! process-local, as the backend's capabilities declare.
//!
//! `connect` and the [`Store`] entry points live here; `migrate` holds the migration hooks,
//! `locks` the process-local locks, `tenant` the tenant transaction, `reads` the engine's
//! cross-tenant reads and `outbox` the relay's claims and marks.

mod lifecycle;
mod locks;
mod migrate;
mod outbox;
mod reads;
mod tenant;

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Sqlite, SqlitePool};
use uuid::Uuid;

use super::rows::{Cells, Sql, Val, from_micros};
use super::{ConnectOptions, db_err};
use crate::core::model::*;
use crate::core::store::*;

pub use migrate::migrate;

/// Whether an SQLite filename is a file on disk: an in-memory database is named `:memory:`,
/// or by sqlx a `file:` URI of its own.
fn names_a_file(path: &std::path::Path) -> bool {
    let shown = path.to_string_lossy();
    !(shown.is_empty() || shown == ":memory:" || shown.starts_with("file:"))
}

/// Creates a missing database file readable and writable by its owner alone (0600), before
/// SQLite opens it: the file holds every tenant's schedules and payloads, and SQLite gives its
/// `-wal` and `-shm` files the database file's permissions. An existing file is left as it is.
fn create_private(path: &std::path::Path) {
    if !names_a_file(path) || path.exists() {
        return;
    }
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    // A failure is left to SQLite, which says why it cannot create the file (a missing folder,
    // say); one created meanwhile by another process is as good.
    let _ = open.open(path);
}

/// A SQLite-backed [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Connections for [`Store::tenant_read`], `query_only`: in WAL mode they read the last
    /// committed state while the one writer writes. `None` for an in-memory database, which
    /// the pool reaches through its one connection only.
    readers: Option<SqlitePool>,
    /// Of an in-memory database, a connection that does nothing but keep it: SQLite drops such
    /// a database with its last connection, and the pool closes its connection when a query was
    /// cancelled mid-way (a client that hung up, an instance's tick dropped), opening a new one
    /// that would otherwise find an empty database.
    _keeper: Option<Arc<SqliteConnection>>,
    locks: Arc<Mutex<HashSet<ScheduleId>>>,
    signals: Arc<Signals>,
}

fn sqlite_options(url: &str) -> StoreResult<SqliteConnectOptions> {
    let options = SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid SQLite URL: {e}")))?;
    create_private(options.get_filename());
    Ok(options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true))
}

/// Connections that read beside the writer.
const READERS: u32 = 2;

/// The options of a reading connection: the writer's own (`writer`), except that it never
/// creates the file and refuses any write (`query_only`, set after the writer's pragmas).
fn reader_options(writer: &SqliteConnectOptions) -> SqliteConnectOptions {
    writer
        .clone()
        .create_if_missing(false)
        .pragma("query_only", "ON")
}

impl SqliteStore {
    /// Opens (creating if missing) the database file.
    pub async fn connect(url: &str, options: &ConnectOptions) -> StoreResult<Self> {
        let writer = sqlite_options(url)?;
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // An in-memory database lives as long as its one connection.
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(options.acquire_timeout)
            .connect_with(writer.clone())
            .await
            .map_err(db_err)?;
        // Only a database in a file can be shared with other connections. Opened when first
        // used, after the writer has created and migrated the file.
        let readers = crate::store::sqlite_file(url).map(|_| {
            SqlitePoolOptions::new()
                .max_connections(READERS)
                .acquire_timeout(options.acquire_timeout)
                .connect_lazy_with(reader_options(&writer))
        });
        // A database without readers is in memory: it gets its keeper instead.
        let keeper = match readers {
            Some(_) => None,
            None => Some(Arc::new(
                sqlx::ConnectOptions::connect(&writer)
                    .await
                    .map_err(db_err)?,
            )),
        };
        Ok(Self {
            pool,
            readers,
            _keeper: keeper,
            locks: Arc::default(),
            signals: Arc::default(),
        })
    }

    /// Applies pending migrations on this store's own connection (used for `sqlite::memory:`,
    /// where a second connection would see a different database).
    pub async fn migrate_in_place(&self, dry_run: bool) -> StoreResult<Vec<MigrationReport>> {
        let mut conn = self.pool.acquire().await.map_err(db_err)?;
        migrate::migrate_conn(&mut conn, dry_run).await
    }
}

// The methods both backends delegate alike come from the macro; these are this backend's own.
crate::store::store_impl! {
impl Store for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            backend: "sqlite",
            advisory_locks: false,
            listen_notify: false,
            row_level_security: false,
            rls_bypassed: false,
            embedded: true,
        }
    }

    async fn tenant_begin(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        let tx = self.pool.begin().await.map_err(db_err)?;
        Ok(Box::new(tenant::SqliteTenantTx::new(
            tx,
            env_id,
            self.signals.clone(),
        )))
    }

    async fn tenant_read(&self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx>> {
        let pool = self.readers.as_ref().unwrap_or(&self.pool);
        let tx = pool.begin().await.map_err(db_err)?;
        Ok(Box::new(tenant::SqliteTenantTx::new(
            tx,
            env_id,
            self.signals.clone(),
        )))
    }

    async fn schedule_locks_try(&self, ids: &[ScheduleId]) -> StoreResult<Box<dyn ScheduleLock>> {
        Ok(locks::try_lock(self, ids))
    }

    async fn jobs_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        lifecycle::jobs_purge(&self.pool, purge).await
    }

    async fn audit_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        lifecycle::audit_purge(&self.pool, purge).await
    }

    async fn schedules_purge(&self, purge: &RetentionPurge) -> StoreResult<u64> {
        lifecycle::schedules_purge(&self.pool, purge).await
    }

}
}

/// SQLite's placeholders: `?1`, `?2`, ...
fn placeholder(n: usize) -> String {
    format!("?{n}")
}

type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

/// Binds a value as SQLite stores it: uuids as text, instants as integer microseconds, JSON
/// as text. Text is bound by reference, not copied.
fn bind<'q>(query: SqliteQuery<'q>, val: &'q Val) -> SqliteQuery<'q> {
    match val {
        Val::Uuid(v) => query.bind(v.map(|id| id.to_string())),
        Val::Text(v) => query.bind(v.as_deref()),
        Val::I32(v) => query.bind(*v),
        Val::Opt32(v) => query.bind(*v),
        Val::I64(v) => query.bind(*v),
        Val::Bool(v) => query.bind(*v),
        Val::Ts(v) => query.bind(v.map(|t| t.timestamp_micros())),
        Val::Json(v) => query.bind(v.as_ref().map(Value::to_string)),
    }
}

/// The statement with its values bound.
fn query(sql: &Sql) -> SqliteQuery<'_> {
    sql.vals.iter().fold(sqlx::query(&sql.text), bind)
}

crate::store::rows::pool_rows!(SqlitePool, SqliteRow, count: |n: u32| Val::I64(i64::from(n)));

crate::store::rows::row_cells! {
/// A SQLite row's cells, decoded from SQLite's storage classes.
Cells for SqliteCells(SqliteRow, Sqlite) {
    fn opt_uuid(&self, column: &str) -> StoreResult<Option<Uuid>> {
        let text: Option<String> = self.get(column)?;
        text.map(|t| Uuid::parse_str(&t).map_err(|e| self.corrupt(column, e)))
            .transpose()
    }
    fn opt_ts(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        let micros: Option<i64> = self.get(column)?;
        micros.map(|m| from_micros(m, self.1)).transpose()
    }
    fn opt_json(&self, column: &str) -> StoreResult<Option<Value>> {
        let text: Option<String> = self.get(column)?;
        text.map(|t| serde_json::from_str(&t).map_err(|e| self.corrupt(column, e)))
            .transpose()
    }
}
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[tokio::test]
    async fn a_new_embedded_database_and_its_side_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cron.db");
        let store = SqliteStore::connect(
            &format!("sqlite://{}", path.display()),
            &ConnectOptions::default(),
        )
        .await
        .unwrap();
        store.migrate_in_place(false).await.unwrap();
        let mut checked = 0;
        for name in ["cron.db", "cron.db-wal", "cron.db-shm"] {
            let Ok(meta) = std::fs::metadata(dir.path().join(name)) else {
                continue;
            };
            assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{name}");
            checked += 1;
        }
        assert!(checked >= 2, "the database and its write-ahead log exist");
    }

    #[tokio::test]
    async fn an_in_memory_database_outlives_a_closed_connection() {
        let store = SqliteStore::connect("sqlite::memory:", &ConnectOptions::default())
            .await
            .unwrap();
        store.migrate_in_place(false).await.unwrap();
        // What the pool does with a connection whose query was cancelled mid-way.
        let mut conn = store.pool.acquire().await.unwrap();
        conn.close_on_drop();
        drop(conn);
        let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
            .fetch_one(&store.pool)
            .await
            .expect("the new connection finds the migrated database");
        assert_eq!(jobs, 0);
    }

    #[test]
    fn an_in_memory_database_names_no_file_to_create() {
        for url in ["sqlite::memory:", "sqlite://:memory:"] {
            let options = SqliteConnectOptions::from_str(url).unwrap();
            assert!(!names_a_file(options.get_filename()), "{url}");
        }
        let options = SqliteConnectOptions::from_str("sqlite://data/cron.db").unwrap();
        assert!(names_a_file(options.get_filename()));
    }
}
