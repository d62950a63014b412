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

/// The NATS server for bus tests.
pub fn nats_url() -> String {
    std::env::var("SENTIN8_CRON_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
}

/// True when NATS-backed tests must run (CI): a missing server fails them instead of skipping.
pub fn nats_required() -> bool {
    std::env::var("SENTIN8_CRON_REQUIRE_NATS").is_ok_and(|v| v == "1")
}

/// A JetStream stream and subject prefix of one test, deleted when this value is dropped.
pub struct TestBus {
    pub js: async_nats::jetstream::Context,
    pub stream: String,
    pub prefix: String,
}

impl TestBus {
    /// A connection and fresh names. `None` (the test skips) when NATS is not reachable and
    /// not required. The stream itself is created by the sink under test.
    pub async fn create() -> Option<Self> {
        let url = nats_url();
        let connected = async_nats::ConnectOptions::new()
            .connection_timeout(std::time::Duration::from_secs(3))
            .connect(url.as_str())
            .await;
        let client = match connected {
            Ok(client) => client,
            Err(err) if !nats_required() => {
                eprintln!("skipping: NATS not reachable at {url}: {err}");
                return None;
            }
            Err(err) => panic!("NATS is required but not reachable at {url}: {err}"),
        };
        let id = Uuid::new_v4().simple().to_string();
        Some(Self {
            js: async_nats::jetstream::new(client),
            stream: format!("S8C_TEST_{}", id.to_uppercase()),
            prefix: format!("s8ctest.{id}"),
        })
    }

    /// Sink settings for this test's stream and prefix.
    pub fn settings(&self) -> sentin8_cron::bus::NatsSettings {
        sentin8_cron::bus::NatsSettings::new(nats_url(), self.prefix.clone(), self.stream.clone())
    }

    /// Every message in the stream, in stream order.
    pub async fn messages(&self) -> Vec<async_nats::jetstream::message::StreamMessage> {
        let mut stream = self
            .js
            .get_stream(&self.stream)
            .await
            .expect("stream exists");
        let state = stream.info().await.expect("stream info").state.clone();
        let mut messages = Vec::new();
        if state.messages == 0 {
            return messages;
        }
        for seq in state.first_sequence..=state.last_sequence {
            messages.push(stream.get_raw_message(seq).await.expect("message"));
        }
        messages
    }
}

impl Drop for TestBus {
    fn drop(&mut self) {
        let stream = self.stream.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                if let Ok(client) = async_nats::connect(nats_url()).await {
                    let _ = async_nats::jetstream::new(client)
                        .delete_stream(&stream)
                        .await;
                }
            });
        })
        .join();
    }
}
