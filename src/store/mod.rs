//! The storage backends behind [`crate::core::store::Store`]: PostgreSQL (production) and an
//! embedded SQLite store (the zero-setup default). Only this module holds SQL.
//!
//! The backend is chosen by the database URL's scheme: `postgres://` or `postgresql://` (or
//! libpq's keyword form, `host=a,b dbname=cron`), and `sqlite://PATH` (or `sqlite::memory:`).

pub mod migrations;
pub mod postgres;
mod probe;
mod rows;
pub mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use crate::core::model::ScheduleId;
use crate::core::store::{
    Channel, Conflict, MigrationReport, SchemaStatus, Signals, Store, StoreError, StoreResult,
};

/// The database URL used when none is given: a file in the working directory.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://sentin8-cron.db";

/// Which backend a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    /// The backend's short name, as [`crate::core::store::Capabilities::backend`] gives it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
    }

    /// The migrations this build knows for the backend.
    pub fn migrations(self) -> &'static [migrations::Migration] {
        match self {
            Backend::Postgres => migrations::POSTGRES,
            Backend::Sqlite => migrations::SQLITE,
        }
    }

    /// True for a database with no operator to migrate it (as
    /// [`crate::core::store::Capabilities::embedded`] declares once connected).
    pub fn embedded(self) -> bool {
        matches!(self, Backend::Sqlite)
    }

    /// Picks the backend from the URL scheme, with an actionable error for anything else.
    /// libpq's keyword form (`host=a,b dbname=cron ...`) is PostgreSQL's.
    pub fn from_url(url: &str) -> StoreResult<Self> {
        if crate::util::conninfo::is_conninfo(url) {
            return Ok(Backend::Postgres);
        }
        let scheme = url.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
        match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" => Ok(Backend::Postgres),
            "sqlite" => Ok(Backend::Sqlite),
            "" => Err(StoreError::Config(format!(
                "database URL {:?} has no scheme; use postgres://user@host/db or \
                 sqlite://path/to/file.db",
                redact(url)
            ))),
            other => Err(StoreError::Config(format!(
                "unsupported database URL scheme {other:?}; use postgres://user@host/db \
                 (or postgresql://) for PostgreSQL, or sqlite://path/to/file.db for the \
                 embedded store"
            ))),
        }
    }
}

/// Pool settings shared by both backends.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Upper bound on pooled connections (PostgreSQL; SQLite always uses one writer).
    pub max_connections: u32,
    /// How long to wait for a pooled connection before failing.
    pub acquire_timeout: Duration,
    /// Tells other processes about committed changes (PostgreSQL NOTIFY), so their tickers
    /// wake (a schedule created through one instance is fired on time by another).
    pub announce_changes: bool,
    /// Announces changes after they commit, coalesced, from a connection of its own, instead
    /// of inside each writer's transaction (`serve`: many writers, and a process that lives
    /// on to send them).
    pub announce_after_commit: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
            announce_changes: true,
            announce_after_commit: false,
        }
    }
}

/// Connects to the database the URL names.
pub async fn connect(url: &str, options: &ConnectOptions) -> StoreResult<Arc<dyn Store>> {
    Ok(match Backend::from_url(url)? {
        Backend::Postgres => Arc::new(postgres::PgStore::connect(url, options).await?),
        Backend::Sqlite => Arc::new(sqlite::SqliteStore::connect(url, options).await?),
    })
}

/// What `migrate` did, and what the operator should know.
#[derive(Debug, Clone)]
pub struct MigrateOutcome {
    pub backend: Backend,
    pub migrations: Vec<MigrationReport>,
    pub notes: Vec<String>,
}

/// Applies pending migrations (or, with `dry_run`, reports what would be applied).
pub async fn migrate(url: &str, dry_run: bool) -> StoreResult<MigrateOutcome> {
    let backend = Backend::from_url(url)?;
    let (migrations, notes) = match backend {
        Backend::Postgres => postgres::migrate(url, dry_run).await?,
        Backend::Sqlite => sqlite::migrate(url, dry_run).await?,
    };
    Ok(MigrateOutcome {
        backend,
        migrations,
        notes,
    })
}

/// Applied and known versions, without changing anything.
pub async fn schema_status(url: &str) -> StoreResult<SchemaStatus> {
    let store = connect(
        url,
        &ConnectOptions {
            max_connections: 2,
            ..ConnectOptions::default()
        },
    )
    .await?;
    store.schema_status().await
}

/// The channels a transaction rings when it commits, and which of them other processes must
/// hear about too.
#[derive(Debug)]
pub(crate) struct Rings {
    signals: Arc<Signals>,
    local: Vec<Channel>,
    remote: Vec<Channel>,
}

impl Rings {
    /// None yet; `signals` are this process's, which the local channels ring.
    pub(crate) fn new(signals: Arc<Signals>) -> Self {
        Self {
            signals,
            local: Vec::new(),
            remote: Vec::new(),
        }
    }

    pub(crate) fn request(&mut self, channel: Channel, cross_process: bool) {
        if !self.local.contains(&channel) {
            self.local.push(channel);
        }
        if cross_process && !self.remote.contains(&channel) {
            self.remote.push(channel);
        }
    }

    pub(crate) fn cross_process(&self) -> Vec<Channel> {
        self.remote.clone()
    }

    /// Commits `tx`, then rings the local channels.
    pub(crate) async fn commit<DB: sqlx::Database>(
        self,
        tx: sqlx::Transaction<'_, DB>,
    ) -> StoreResult<()> {
        tx.commit().await.map_err(db_err)?;
        for channel in &self.local {
            self.signals.ring(*channel);
        }
        Ok(())
    }
}

/// The advisory-lock key of a schedule: a 64-bit hash of all 16 bytes of its UUID.
///
/// Ids are UUIDv7, whose first 8 bytes are a millisecond timestamp and 12 random bits, so the
/// key mixes in the random tail: schedules created in the same millisecond get distinct keys
/// (up to 64-bit collisions). A shared key would only make their locks exclude each other; it
/// never lets a schedule fire twice, which the claim-conditional UPDATE and the open-job index
/// rule out.
pub fn lock_key(id: ScheduleId) -> i64 {
    let (hi, lo) = id.0.as_u64_pair();
    // Every byte counts: UUIDv7 ids created in the same millisecond share their first bytes.
    i64::from_be_bytes(mix64(hi ^ mix64(lo)).to_be_bytes())
}

/// The splitmix64 finaliser: a fixed, well-spread 64-bit mix (never change it: keys held by
/// running instances must match across versions).
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

pub use crate::util::url::redact;
pub use probe::{probe_postgres, require_existing_sqlite, sqlite_file};

/// Maps a database error into the store's error, recognising the uniqueness rules the domain
/// cares about by constraint (PostgreSQL) or by message (SQLite names the columns or index).
pub(crate) fn db_err(err: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &err
        && db.is_unique_violation()
    {
        let name = db.constraint().unwrap_or_default();
        let message = db.message();
        let mentions = |needle: &str| name.contains(needle) || message.contains(needle);
        if mentions("jobs_open_per_schedule") || message.contains("jobs.schedule_id") {
            return StoreError::Conflict(Conflict::OpenJobExists);
        }
        if mentions("schedules_type_per_domain") || message.contains("schedules.schedule_type") {
            return StoreError::Conflict(Conflict::ScheduleTypeTaken);
        }
        return StoreError::Conflict(Conflict::DuplicateId);
    }
    StoreError::Database(Box::new(err))
}

/// A backend's `impl Store` with the methods both backends delegate alike written once:
/// `store_impl! { impl Store for Backend { its own methods } }`. Each delegates to the
/// backend's own `reads`, `outbox` and `migrate` modules (named at the expansion site) over
/// its `pool`; the whole impl is generated so that `async_trait` sees every method.
macro_rules! store_impl {
    (impl Store for $backend:ty { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl Store for $backend {
        $($own)*

        fn signals(&self) -> Arc<Signals> {
            self.signals.clone()
        }

        async fn schedules_due(
            &self,
            now: DateTime<Utc>,
            limit: u32,
            seed: u32,
            share: Option<Share>,
        ) -> StoreResult<Vec<DueSchedule>> {
            reads::schedules_due(&self.pool, now, limit, seed, share).await
        }

        async fn instance_beat(
            &self,
            id: Uuid,
            now: DateTime<Utc>,
            stale_before: DateTime<Utc>,
        ) -> StoreResult<Vec<Uuid>> {
            reads::instance_beat(&self.pool, id, now, stale_before).await
        }

        async fn instance_leave(&self, id: Uuid) -> StoreResult<()> {
            reads::instance_leave(&self.pool, id).await
        }

        async fn jobs_lease_renew(&self, renewal: &LeaseRenewal) -> StoreResult<Vec<JobId>> {
            reads::jobs_lease_renew(&self.pool, renewal).await
        }

        async fn jobs_hand_off(
            &self,
            ids: &[JobId],
            lease: chrono::Duration,
            now: DateTime<Utc>,
        ) -> StoreResult<Vec<HandedOff>> {
            reads::jobs_hand_off(&self.pool, ids, lease, now).await
        }

        async fn jobs_due(
            &self,
            now: DateTime<Utc>,
            stale_before: DateTime<Utc>,
            limit: u32,
        ) -> StoreResult<Vec<DueJob>> {
            reads::jobs_due(&self.pool, now, stale_before, limit).await
        }

        async fn wakeup_next(&self) -> StoreResult<Option<DateTime<Utc>>> {
            reads::wakeup_next(&self.pool).await
        }

        async fn statistics_refresh(&self) -> StoreResult<Vec<String>> {
            reads::statistics_refresh(&self.pool).await
        }

        async fn schedules_due_count(&self, until: DateTime<Utc>, cap: u32) -> StoreResult<u64> {
            reads::schedules_due_count(&self.pool, until, cap).await
        }

        async fn job_answers_put(&self, answers: &[JobAnswer]) -> StoreResult<u64> {
            reads::job_answers_put(&self.pool, answers).await
        }

        async fn dlq_envs(&self) -> StoreResult<Vec<EnvId>> {
            reads::dlq_envs(&self.pool).await
        }

        async fn stats_get(&self) -> StoreResult<StoreStats> {
            reads::stats_get(&self.pool).await
        }

        async fn outbox_parked_count(&self) -> StoreResult<i64> {
            reads::outbox_parked_count(&self.pool).await
        }

        async fn schedule_zones_active(&self) -> StoreResult<Vec<ZoneInUse>> {
            reads::schedule_zones_active(&self.pool).await
        }

        async fn envs_with_data(&self, limit: u32) -> StoreResult<Vec<EnvSummary>> {
            reads::envs_with_data(&self.pool, limit).await
        }

        async fn outbox_claim(&self, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>> {
            outbox::claim(&self.pool, claim).await
        }

        async fn outbox_mark_relayed(&self, relayed: &OutboxRelayed) -> StoreResult<u64> {
            outbox::mark_relayed(&self.pool, relayed).await
        }

        async fn outbox_mark_failed(
            &self,
            failed: &OutboxFailed,
        ) -> StoreResult<Vec<OutboxFailureRecorded>> {
            outbox::mark_failed(&self.pool, failed).await
        }

        async fn outbox_release(&self, release: &OutboxRelease) -> StoreResult<u64> {
            outbox::release(&self.pool, release).await
        }

        async fn outbox_purge(&self, purge: &OutboxPurge) -> StoreResult<u64> {
            outbox::purge(&self.pool, purge).await
        }

        async fn schema_status(&self) -> StoreResult<SchemaStatus> {
            let mut conn = self.pool.acquire().await.map_err(db_err)?;
            migrate::schema_status(&mut conn).await
        }
        }
    };
}
pub(crate) use store_impl;

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn lock_key_depends_on_every_byte() {
        let id = ScheduleId(Uuid::parse_str("01234567-89ab-cdef-0011-223344556677").unwrap());
        // Stable: instances of different versions agree on the key.
        assert_eq!(lock_key(id), lock_key(ScheduleId(id.0)));
        // UUIDv7 ids of one millisecond differ only in their later bytes.
        let keys: std::collections::HashSet<i64> = (0..1000u16)
            .map(|n| {
                let mut bytes = *id.0.as_bytes();
                bytes[14..].copy_from_slice(&n.to_be_bytes());
                lock_key(ScheduleId(Uuid::from_bytes(bytes)))
            })
            .collect();
        assert_eq!(keys.len(), 1000);
        let mut last = *id.0.as_bytes();
        last[15] ^= 1;
        assert_ne!(lock_key(id), lock_key(ScheduleId(Uuid::from_bytes(last))));
    }

    #[test]
    fn backend_is_chosen_by_scheme() {
        assert_eq!(
            Backend::from_url("postgres://u@h/db").unwrap(),
            Backend::Postgres
        );
        assert_eq!(
            Backend::from_url("postgresql://u@h/db").unwrap(),
            Backend::Postgres
        );
        assert_eq!(
            Backend::from_url("host=a,b dbname=cron").unwrap(),
            Backend::Postgres
        );
        assert_eq!(Backend::from_url("sqlite://x.db").unwrap(), Backend::Sqlite);
        assert_eq!(
            Backend::from_url("sqlite::memory:").unwrap(),
            Backend::Sqlite
        );
        let err = Backend::from_url("mysql://u:secret@h/db")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unsupported database URL scheme \"mysql\""),
            "{err}"
        );
        assert!(err.contains("postgres://"), "{err}");
        assert!(!err.contains("secret"), "{err}");
        let err = Backend::from_url("just-a-file.db").unwrap_err().to_string();
        assert!(err.contains("has no scheme"), "{err}");
    }
}
