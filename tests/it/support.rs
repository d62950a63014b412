//! Test harness: fresh databases per test, on SQLite (in memory) and PostgreSQL (a database
//! created for the test and dropped after it, reached as the service role, never a superuser),
//! JetStream streams per test, and the record of what was skipped.
//!
//! Tests that need PostgreSQL, NATS or a browser skip when the service is missing (they then
//! report "ok" without having run), unless `SENTIN8_CRON_REQUIRE_POSTGRES`, `_NATS` or
//! `_BROWSER` is `1`, which makes a missing service a failure (and likewise the other kinds
//! of [`Needs`], each with its own variable). A skip is never silent: the
//! first skip of each kind prints a notice (past the test harness's output capture, so a plain
//! `cargo test` shows it) naming the suites, the reason and the variable that makes them
//! required; every skipped test also says so in its own (captured) output. Once a service was
//! found unreachable, later tests skip at once instead of each waiting for a connect timeout.

use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use chrono::{DateTime, TimeZone, Utc};
use sentin8_cron::core::store::Store;
use sentin8_cron::store::{self, ConnectOptions, postgres::PgStore, sqlite::SqliteStore};
use uuid::Uuid;

/// A service some tests need and skip without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    Postgres,
    Nats,
    Browser,
    /// The shell tools the README tour runs: bash, curl, jq and openssl.
    TourTools,
    /// The toolchains of the example targets: Python 3 with `cryptography`, Node.js 20, Go.
    TargetToolchains,
    /// PostgreSQL's server programs (`initdb`, `pg_ctl`, `pg_basebackup`), to run throwaway
    /// clusters of the tests' own.
    PgClusters,
    /// The `nats-server` program, to run a throwaway JetStream cluster of the tests' own. Kept
    /// apart from [`Needs::Nats`] (a server already running) so a missing program does not
    /// skip the tests that only need that server; the same variable makes both required.
    NatsServer,
    /// The ecosystem's checkers: `openapi-spec-validator`, `schemathesis`,
    /// `openapi-python-client`, `nats-py` and `jsonschema` (Python), and Prometheus's `promtool`.
    ApiTools,
}

impl Needs {
    fn index(self) -> usize {
        match self {
            Needs::Postgres => 0,
            Needs::Nats => 1,
            Needs::Browser => 2,
            Needs::TourTools => 3,
            Needs::TargetToolchains => 4,
            Needs::PgClusters => 5,
            Needs::NatsServer => 6,
            Needs::ApiTools => 7,
        }
    }

    /// The suites that skip without this service.
    pub fn suites(self) -> &'static str {
        match self {
            Needs::Postgres => {
                "the PostgreSQL tests (the conformance, engine, API, enroll, admin and relay \
                 suites on PostgreSQL, pg_only, and the NATS relay tests)"
            }
            Needs::Nats => "the NATS JetStream relay tests",
            Needs::Browser => "the admin pages browser test",
            Needs::TourTools => "the README tour test",
            Needs::TargetToolchains => "the example target tests (examples/targets/)",
            Needs::PgClusters => {
                "the failover tests on throwaway PostgreSQL clusters (pg_failover)"
            }
            Needs::NatsServer => "the relay's node-loss test on a throwaway NATS cluster",
            Needs::ApiTools => {
                "the ecosystem's checks: openapi-spec-validator, schemathesis, a generated client, \
                 promtool, events read with nats-py and validated with jsonschema"
            }
        }
    }

    /// The variable that turns the skip into a failure.
    pub fn require_var(self) -> &'static str {
        match self {
            Needs::Postgres => "SENTIN8_CRON_REQUIRE_POSTGRES",
            Needs::Nats => "SENTIN8_CRON_REQUIRE_NATS",
            Needs::Browser => "SENTIN8_CRON_REQUIRE_BROWSER",
            Needs::TourTools => "SENTIN8_CRON_REQUIRE_TOUR_TOOLS",
            Needs::TargetToolchains => "SENTIN8_CRON_REQUIRE_TARGET_TOOLCHAINS",
            Needs::PgClusters => "SENTIN8_CRON_REQUIRE_PG_CLUSTERS",
            Needs::NatsServer => "SENTIN8_CRON_REQUIRE_NATS",
            Needs::ApiTools => "SENTIN8_CRON_REQUIRE_API_TOOLS",
        }
    }

    /// Whether a missing service fails the tests (CI) instead of skipping them.
    pub fn required(self) -> bool {
        std::env::var(self.require_var()).is_ok_and(|v| v == "1")
    }
}

/// Why each service's tests are being skipped, once known.
static UNAVAILABLE: [OnceLock<String>; 8] = [
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
    OnceLock::new(),
];

/// How many tests skipped for each service so far.
static SKIPPED: Mutex<[usize; 8]> = Mutex::new([0; 8]);

/// Why `needs` is known to be unavailable, if it is: later tests skip without trying again.
pub fn unavailable(needs: Needs) -> Option<&'static str> {
    UNAVAILABLE[needs.index()].get().map(String::as_str)
}

/// Records that the running test skips because `needs` is unavailable for `reason`. Panics
/// instead when the service is required. The first skip of each kind prints a notice on the
/// real standard error, which the test harness does not capture.
pub fn skip(needs: Needs, reason: &str) {
    assert!(
        !needs.required(),
        "{} is 1, but {reason}",
        needs.require_var()
    );
    let first = UNAVAILABLE[needs.index()].set(reason.to_owned()).is_ok();
    let count = {
        let mut skipped = SKIPPED.lock().unwrap_or_else(|p| p.into_inner());
        skipped[needs.index()] += 1;
        skipped[needs.index()]
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    // Captured with the test's output: shown for this test with --nocapture or on failure.
    eprintln!("SKIPPED ({count} so far): {test}: {reason}");
    if first {
        // One write, so the notice is not interleaved with the harness's own lines.
        let notice = format!(
            "\nSKIPPED: {}: {reason}. They report \"ok\" without running; set {}=1 to make \
             them fail instead.\n\n",
            needs.suites(),
            needs.require_var()
        );
        let _ = std::io::stderr().lock().write_all(notice.as_bytes());
    }
}

/// How many tests skipped for want of `needs` so far in this process.
pub fn skipped(needs: Needs) -> usize {
    SKIPPED.lock().unwrap_or_else(|p| p.into_inner())[needs.index()]
}

/// The superuser URL used to create and drop test databases.
pub fn admin_url() -> String {
    std::env::var("SENTIN8_CRON_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
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
        if let Some(reason) = unavailable(Needs::Postgres) {
            skip(Needs::Postgres, reason);
            return None;
        }
        let mut conn = match sqlx_connect(&admin).await {
            Ok(conn) => conn,
            Err(err) => {
                skip(
                    Needs::Postgres,
                    &format!("PostgreSQL is not reachable at {admin} ({err})"),
                );
                return None;
            }
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

/// The egress policy of development mode: loopback allowed, as the tests' targets are. Tests
/// of the policy itself build their own.
pub fn dev_egress() -> sentin8_cron::callback::egress::EgressPolicy {
    sentin8_cron::callback::egress::EgressPolicy::parse(&[], None, true).expect("empty policy")
}

/// A fixed instant to build tests around.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}

/// The NATS server for bus tests.
pub fn nats_url() -> String {
    std::env::var("SENTIN8_CRON_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
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
        if let Some(reason) = unavailable(Needs::Nats) {
            skip(Needs::Nats, reason);
            return None;
        }
        let connected = async_nats::ConnectOptions::new()
            .connection_timeout(std::time::Duration::from_secs(3))
            .connect(url.as_str())
            .await;
        let client = match connected {
            Ok(client) => client,
            Err(err) => {
                skip(
                    Needs::Nats,
                    &format!("NATS is not reachable at {url} ({err})"),
                );
                return None;
            }
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

/// A fresh Ed25519 signing key in `dir`, readable by its owner only (as `serve` wants it);
/// its path.
pub fn signing_key(dir: &std::path::Path) -> String {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let key = dir.join("signing.pem");
    let pem = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .unwrap()
        .serialize_pem();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key)
        .unwrap()
        .write_all(pem.as_bytes())
        .unwrap();
    key.display().to_string()
}
