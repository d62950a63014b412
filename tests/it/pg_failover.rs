//! A failover pair of the tests' own: two throwaway PostgreSQL clusters on free loopback ports
//! (a primary, and a streaming standby copied from it with `pg_basebackup -R`). The store
//! connects to the writable one whichever order a multi-host URL lists them in (URL and
//! keyword forms), and when the primary dies and the standby is promoted the running store
//! moves to it without a restart: health says `degraded` while it searches, a write succeeds
//! within a bounded time, and the LISTEN connection follows.
//!
//! The clusters need PostgreSQL's server programs (found with `pg_config --bindir`, or
//! `SENTIN8_CRON_PG_BINDIR`); without them these tests skip unless
//! `SENTIN8_CRON_REQUIRE_PG_CLUSTERS=1`. PostgreSQL refuses to run as root, so a root test
//! process runs them as the `postgres` user. Every wait is bounded, and a cluster is stopped
//! (its directory removed) when its guard drops, a failing test's included.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::Clock;
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::store::Store;
use sentin8_cron::server::system::HealthRules;
use sentin8_cron::store::postgres::PgStore;
use sentin8_cron::store::{self, ConnectOptions};
use serde_json::Value;

use crate::api::{ADMIN, Api};
use crate::conformance::new_schedule;
use crate::support::{Needs, skip, unavailable};

mod outage;

/// How long a cluster may take to start, stop or be promoted.
const PG_CTL_WAIT: Duration = Duration::from_secs(20);

/// How long the store may take to find the promoted standby and write to it.
const FAILOVER_BOUND: Duration = Duration::from_secs(20);

/// Where the server programs are, and whom they run as.
struct Tools {
    bindir: PathBuf,
    /// `postgres` when this process is root.
    run_as: Option<&'static str>,
    /// The owner to give the clusters' directory (uid, gid), when `run_as` is set.
    owner: Option<(u32, u32)>,
}

impl Tools {
    fn find() -> Result<Tools, String> {
        let bindir = match std::env::var_os("SENTIN8_CRON_PG_BINDIR") {
            Some(dir) => PathBuf::from(dir),
            None => Command::new("pg_config")
                .arg("--bindir")
                .output()
                .ok()
                .filter(|out| out.status.success())
                .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
                .ok_or("pg_config is not on the PATH (or set SENTIN8_CRON_PG_BINDIR)")?,
        };
        for program in ["initdb", "pg_ctl", "pg_basebackup"] {
            if !bindir.join(program).is_file() {
                return Err(format!("{program} is not in {}", bindir.display()));
            }
        }
        let root = id(&["-u"]).as_deref() == Some("0");
        if !root {
            return Ok(Tools {
                bindir,
                run_as: None,
                owner: None,
            });
        }
        let runuser = Command::new("runuser")
            .arg("--help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !runuser.is_ok_and(|status| status.success()) {
            return Err("running as root, and runuser is not on the PATH".into());
        }
        let uid = id(&["-u", "postgres"]).and_then(|n| n.parse().ok());
        let gid = id(&["-g", "postgres"]).and_then(|n| n.parse().ok());
        match (uid, gid) {
            (Some(uid), Some(gid)) => Ok(Tools {
                bindir,
                run_as: Some("postgres"),
                owner: Some((uid, gid)),
            }),
            _ => Err("running as root, and there is no postgres user to run the clusters".into()),
        }
    }

    /// A server program, run as the clusters' user, from `dir` (which that user can enter).
    fn command(&self, program: &str, dir: &Path) -> Command {
        let path = self.bindir.join(program);
        let mut command = match self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(path);
                c
            }
            None => Command::new(path),
        };
        command.current_dir(dir);
        command
    }
}

fn id(args: &[&str]) -> Option<String> {
    let out = Command::new("id").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs `command` to completion within `limit`, killing it past that.
fn run(mut command: Command, limit: Duration) -> Result<(), String> {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                return Err(format!("{what}: {status}: {stderr}"));
            }
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: still running after {limit:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Runs blocking work (a server program) off the test's runtime; its panic is the test's.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// One running cluster; stopped when dropped.
struct Cluster {
    tools: Arc<Tools>,
    base: PathBuf,
    data: PathBuf,
    port: u16,
    running: bool,
}

impl Cluster {
    fn start(tools: Arc<Tools>, base: &Path, name: &str, port: u16) -> Cluster {
        let mut cluster = Cluster {
            tools,
            base: base.to_owned(),
            data: base.join(name),
            port,
            running: false,
        };
        cluster.restart();
        cluster
    }

    /// Starts the server on its data directory and port (again, after a kill).
    fn restart(&mut self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c full_page_writes=off -c synchronous_commit=off -c shared_buffers=16MB \
             -c max_connections=40",
            self.port,
            self.base.display()
        );
        let name = self.data.file_name().unwrap_or_default().to_string_lossy();
        let mut start = self.pg_ctl();
        start
            .arg("-l")
            .arg(self.base.join(format!("{name}.log")))
            .args(["-o", &options, "start"]);
        // Marked running first, so a start that fails half-way is still stopped on drop.
        self.running = true;
        if let Err(err) = run(start, PG_CTL_WAIT) {
            panic!("{err}\n{}", self.log());
        }
    }

    fn pg_ctl(&self) -> Command {
        let mut command = self.tools.command("pg_ctl", &self.base);
        command
            .arg("-D")
            .arg(&self.data)
            .args(["-w", "-t", &PG_CTL_WAIT.as_secs().to_string()]);
        command
    }

    fn log(&self) -> String {
        let name = self.data.file_name().unwrap_or_default().to_string_lossy();
        std::fs::read_to_string(self.base.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Stops the server at once, as a crash would.
    fn kill(&mut self) {
        if self.running {
            let mut stop = self.pg_ctl();
            stop.args(["-m", "immediate", "stop"]);
            let _ = run(stop, PG_CTL_WAIT);
            self.running = false;
        }
    }

    /// Stops the server cleanly: what it acknowledged stays (these clusters commit
    /// asynchronously for speed, so a kill may drop the last commits).
    fn stop(&mut self) {
        if self.running {
            let mut stop = self.pg_ctl();
            stop.args(["-m", "fast", "stop"]);
            run(stop, PG_CTL_WAIT).expect("the server stops");
            self.running = false;
        }
    }

    fn promote(&self) {
        let mut promote = self.pg_ctl();
        promote.arg("promote");
        run(promote, PG_CTL_WAIT).expect("the standby is promoted");
    }

    /// `host:port` as the store names it.
    fn label(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn superuser_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A primary and its streaming standby, migrated; both stopped and removed when dropped.
struct Pair {
    primary: Cluster,
    standby: Cluster,
    // Dropped last: the clusters stop before their directory goes.
    _dir: tempfile::TempDir,
}

impl Pair {
    /// `None` (the test skips) without the server programs, unless they are required.
    async fn start() -> Option<Pair> {
        if let Some(reason) = unavailable(Needs::PgClusters) {
            skip(Needs::PgClusters, reason);
            return None;
        }
        let tools = match Tools::find() {
            Ok(tools) => Arc::new(tools),
            Err(reason) => {
                skip(Needs::PgClusters, &reason);
                return None;
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("s8c-pg")
            .tempdir()
            .expect("a temporary directory");
        let base = dir.path().to_owned();
        if let Some((uid, gid)) = tools.owner {
            std::os::unix::fs::chown(&base, Some(uid), Some(gid)).expect("chown the cluster dir");
        }
        let primary = blocking({
            let (tools, base) = (tools.clone(), base.clone());
            move || {
                let mut initdb = tools.command("initdb", &base);
                initdb.arg("-D").arg(base.join("primary")).args([
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "-N",
                ]);
                run(initdb, PG_CTL_WAIT).expect("initdb");
                Cluster::start(tools, &base, "primary", free_port())
            }
        })
        .await;
        // The schema first, so the standby's copy has it.
        store::migrate(&primary.superuser_url(), false)
            .await
            .expect("the primary migrates");
        let primary_port = primary.port;
        let standby = blocking(move || {
            let mut backup = tools.command("pg_basebackup", &base);
            backup
                .args(["-h", "127.0.0.1", "-p", &primary_port.to_string()])
                .args(["-U", "postgres", "-D"])
                .arg(base.join("standby"))
                .args(["-R", "-X", "stream", "-c", "fast", "--no-sync"]);
            run(backup, PG_CTL_WAIT).expect("pg_basebackup");
            Cluster::start(tools, &base, "standby", free_port())
        })
        .await;
        Some(Pair {
            primary,
            standby,
            _dir: dir,
        })
    }

    /// The service role's URL naming `first`, then `second`, as a failover pair.
    fn url(first: &Cluster, second: &Cluster, attrs: &str) -> String {
        format!(
            "postgres://sentin8_cron_service@127.0.0.1:{},127.0.0.1:{}/postgres\
             ?target_session_attrs={attrs}",
            first.port, second.port
        )
    }
}

fn options() -> ConnectOptions {
    ConnectOptions {
        max_connections: 4,
        // Short, so writes during the search fail fast and are tried again.
        acquire_timeout: Duration::from_secs(2),
        ..ConnectOptions::default()
    }
}

/// The port of the server the store's pool is connected to.
async fn server_port(store: &PgStore) -> u16 {
    let port: i32 = sqlx::query_scalar("SELECT inet_server_port()")
        .fetch_one(store.pool())
        .await
        .expect("the store answers");
    u16::try_from(port).expect("a port")
}

/// One tenant write: a schedule inserted and committed.
async fn write(store: &dyn Store, env: EnvId) -> Result<(), String> {
    let mut tx = store.tenant_begin(env).await.map_err(|e| e.to_string())?;
    let name = format!("failover-{}", uuid::Uuid::new_v4().simple());
    tx.schedule_insert(&new_schedule(&name, "billing"))
        .await
        .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())
}

/// Health as an admin sees it, with a fresh reachability probe (the test clock moves past the
/// probe's cache) and a recent tick (this server runs no ticker).
async fn health(api: &Api) -> (StatusCode, Value) {
    api.clock.advance(chrono::Duration::seconds(2));
    api.metrics
        .last_tick_unix
        .store(api.clock.now().timestamp(), Ordering::Relaxed);
    let admin = api.token(ADMIN);
    let (status, body, _) = api
        .call(Method::GET, "/v1/health", Some(&admin), None)
        .await;
    (status, body)
}

/// Polls `check` every 100 ms until it gives a value, for at most `limit`.
async fn within<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_connects_to_the_writable_host_in_either_order() {
    let Some(pair) = Pair::start().await else {
        return;
    };
    let (primary, standby) = (&pair.primary, &pair.standby);
    let env = EnvId::new();
    let keyword_form = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=sentin8_cron_service dbname=postgres \
         target_session_attrs=read-write",
        standby.port, primary.port
    );
    for url in [
        Pair::url(primary, standby, "read-write"),
        Pair::url(standby, primary, "read-write"),
        keyword_form,
    ] {
        let store = PgStore::connect(&url, &options()).await.expect(&url);
        assert_eq!(server_port(&store).await, primary.port, "{url}");
        write(&store, env).await.expect("a write on the primary");
        assert_eq!(store.host_search(), None);
    }

    // `any` is libpq's default: the first host that answers, a standby included.
    let store = PgStore::connect(&Pair::url(standby, primary, "any"), &options())
        .await
        .expect("any host");
    assert_eq!(server_port(&store).await, standby.port);

    // The standby alone is refused for writing, each host named with its reason.
    let only_standby = format!(
        "postgres://sentin8_cron_service@{}/postgres?target_session_attrs=read-write",
        standby.label()
    );
    let quick = ConnectOptions {
        acquire_timeout: Duration::from_millis(100),
        ..options()
    };
    let err = PgStore::connect(&only_standby, &quick)
        .await
        .expect_err("a standby is not writable")
        .to_string();
    assert!(
        err.contains(&format!(
            "no writable database host: {} read-only",
            standby.label()
        )),
        "{err}"
    );

    // `migrate` goes to the writable host too (nothing left to apply there).
    let owner = format!(
        "postgres://postgres@{},{}/postgres?target_session_attrs=read-write",
        standby.label(),
        primary.label()
    );
    let outcome = store::migrate(&owner, false).await.expect("migrate");
    assert!(outcome.migrations.iter().all(|m| !m.applied));

    // The probe before a pool opens passes while one host accepts, and names every host
    // when none does.
    let closed = free_port();
    store::probe_postgres(&format!(
        "postgres://u@127.0.0.1:{closed},{}/postgres",
        primary.label()
    ))
    .await
    .expect("one host accepts");
    let err = store::probe_postgres(&format!(
        "postgres://u@127.0.0.1:{closed},127.0.0.1:{closed}/postgres"
    ))
    .await
    .expect_err("no host accepts")
    .to_string();
    assert!(
        err.contains("any of its hosts") && err.matches("connection refused").count() == 2,
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_a_promoted_standby_without_a_restart() {
    let Some(mut pair) = Pair::start().await else {
        return;
    };
    let url = Pair::url(&pair.primary, &pair.standby, "read-write");
    let store = Arc::new(PgStore::connect(&url, &options()).await.expect("connect"));
    store.signals_listen().await.expect("listen");
    let api = Api::start_with_health(store.clone(), HealthRules::default()).await;
    let env = EnvId::new();
    write(store.as_ref(), env).await.expect("a write before");
    let (status, body) = health(&api).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ok")),
        "{body}"
    );

    // The primary dies: the store searches, and health says so (degraded, not unavailable).
    pair.primary.kill();
    let reasons = within(Duration::from_secs(10), "health says degraded", || async {
        let (status, body) = health(&api).await;
        (body["status"] == "degraded").then(|| {
            assert_eq!(status, StatusCode::OK, "{body}");
            body["reasons"].to_string()
        })
    })
    .await;
    assert!(
        reasons.contains("searching for a writable database host"),
        "{reasons}"
    );
    assert!(reasons.contains(&pair.primary.label()), "{reasons}");
    let search = within(
        Duration::from_secs(10),
        "a search round names both hosts",
        || {
            let search = store.host_search();
            async move { search.filter(|s| s.contains(" read-only")) }
        },
    )
    .await;
    assert!(
        search.contains(&format!("{} read-only", pair.standby.label())),
        "{search}"
    );

    // The standby is promoted: the same store writes to it, with no restart.
    let promoted = Instant::now();
    pair.standby.promote();
    within(
        FAILOVER_BOUND,
        "a write on the promoted standby",
        || async { write(store.as_ref(), env).await.ok() },
    )
    .await;
    eprintln!(
        "wrote to the promoted standby {:?} after promoting it",
        promoted.elapsed()
    );
    assert_eq!(server_port(&store).await, pair.standby.port);
    within(Duration::from_secs(10), "health ok again", || async {
        (health(&api).await.1["status"] == "ok").then_some(())
    })
    .await;
    assert_eq!(store.host_search(), None);

    // The LISTEN connection moved too: it is on the new primary, and hears a NOTIFY there.
    let mut admin = {
        use sqlx::Connection;
        sqlx::PgConnection::connect(&pair.standby.superuser_url())
            .await
            .expect("the new primary")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE usename = 'sentin8_cron_service' AND query LIKE 'LISTEN %'",
        )
        .fetch_one(&mut admin)
        .await
        .expect("pg_stat_activity");
        if listening > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "LISTEN on the new primary within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let signals = store.signals();
    // Wake-ups the reconnection and the writes rang are drained first.
    while tokio::time::timeout(Duration::from_millis(300), signals.outbox.notified())
        .await
        .is_ok()
    {}
    sqlx::query("SELECT pg_notify('sentin8_cron_outbox', '')")
        .execute(&mut admin)
        .await
        .expect("notify");
    tokio::time::timeout(Duration::from_secs(5), signals.outbox.notified())
        .await
        .expect("the store hears a NOTIFY on the new primary");
}
