//! Test harness: fresh databases per test, on SQLite (in memory) and PostgreSQL (a database
//! created for the test and dropped after it, reached as the service role, never a superuser).

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use sentin8_cron::core::store::Store;
use sentin8_cron::store::{self, ConnectOptions, postgres::PgStore, sqlite::SqliteStore};
use uuid::Uuid;

/// The superuser URL used to create and drop test databases.
pub fn admin_url() -> String {
    std::env::var("SENTIN8_CRON_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// True when PostgreSQL-backed tests must run (CI): a missing server fails them instead of
/// skipping them.
pub fn postgres_required() -> bool {
    std::env::var("SENTIN8_CRON_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
}

/// Replaces the user and database of a PostgreSQL URL.
pub fn with_user_and_db(url: &str, user: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("URL has a scheme");
    let host_and_path = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host_and_path.split('/').next().unwrap_or("127.0.0.1");
    format!("{scheme}://{user}@{host}/{db}")
}

/// A fresh in-memory SQLite store, migrated.
pub async fn sqlite_store() -> Arc<dyn Store> {
    let store = SqliteStore::connect("sqlite::memory:", &ConnectOptions::default())
        .await
        .expect("in-memory SQLite opens");
    store
        .migrate_in_place(false)
        .await
        .expect("SQLite migrates");
    Arc::new(store)
}

/// A fresh, migrated SQLite database in a file, so another process (the binary) can open it
/// too. The directory is removed when the returned guard is dropped.
pub async fn sqlite_file_store() -> (Arc<dyn Store>, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}", dir.path().join("cron.db").display());
    store::migrate(&url, false).await.expect("SQLite migrates");
    let store = store::connect(&url, &ConnectOptions::default())
        .await
        .expect("SQLite opens");
    (store, url, dir)
}

/// A database created for one test, dropped when this value is dropped.
pub struct PgTestDb {
    pub name: String,
    /// The migrated database, reached as the service role.
    pub store: Arc<PgStore>,
    /// The service role's URL for this database.
    pub service_url: String,
}

impl PgTestDb {
    /// Creates and migrates a fresh database. `None` (the test skips) when PostgreSQL is not
    /// reachable and not required.
    pub async fn create() -> Option<Self> {
        let admin = admin_url();
        let mut conn = match sqlx_connect(&admin).await {
            Ok(conn) => conn,
            Err(err) if !postgres_required() => {
                eprintln!("skipping: PostgreSQL not reachable at {admin}: {err}");
                return None;
            }
            Err(err) => panic!("PostgreSQL is required but not reachable at {admin}: {err}"),
        };
        let name = format!("s8c_test_{}", Uuid::new_v4().simple());
        sqlx::Executor::execute(&mut conn, format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create test database");
        let owner_url = with_user_and_db(&admin, admin_user(&admin), &name);
        store::migrate(&owner_url, false)
            .await
            .expect("migrate test database");
        let service_url = with_user_and_db(&admin, "sentin8_cron_service", &name);
        let store = PgStore::connect(&service_url, &ConnectOptions::default())
            .await
            .expect("connect as the service role");
        assert!(
            !store.rls_bypassed(),
            "tests must run as a role subject to RLS"
        );
        Some(Self {
            name,
            store: Arc::new(store),
            service_url,
        })
    }

    pub fn dyn_store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The owner's URL for this database (may change the schema; bypasses RLS).
    pub fn owner_url(&self) -> String {
        let admin = admin_url();
        with_user_and_db(&admin, admin_user(&admin), &self.name)
    }
}

fn admin_user(url: &str) -> &str {
    url.split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .map(|(user, _)| user.split(':').next().unwrap_or("postgres"))
        .unwrap_or("postgres")
}

async fn sqlx_connect(url: &str) -> Result<sqlx::PgConnection, sqlx::Error> {
    use sqlx::Connection;
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        sqlx::PgConnection::connect(url),
    )
    .await
    .map_err(|_| sqlx::Error::PoolTimedOut)?
}

impl Drop for PgTestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        let admin = admin_url();
        // Drop runs inside a test's runtime; a separate thread with its own runtime can block.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx_connect(&admin).await {
                    let _ = sqlx::Executor::execute(
                        &mut conn,
                        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str(),
                    )
                    .await;
                }
            });
        })
        .join();
    }
}

/// A fixed instant to build tests around.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}
