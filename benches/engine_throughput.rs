//! Engine throughput and lateness, on PostgreSQL and on SQLite, against a local HTTP target that
//! answers 200, with every call signed and checked by the egress policy as `serve` does.
//!
//! - burst: N schedules due at once; ticks run until every one fired; fires per second, with
//!   signed calls and, for comparison, without.
//! - steady: schedules falling due at a steady 500 per second for 10 s, served by the real
//!   wake-up loop (`Engine::run`); lateness = attempt start minus due instant (p50, p99, max).
//! - the raw commit rate of the same PostgreSQL (single-row insert + update transactions per
//!   second over 16 connections), so the engine's figure can be read as a ratio on any machine.
//!
//! Run: `cargo bench --bench engine_throughput` (PostgreSQL at SENTIN8_CRON_BENCH_DATABASE_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres; about a minute).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use chrono::Utc;
use sentin8_cron::callback::egress::EgressPolicy;
use sentin8_cron::callback::signing::CallSigner;
use sentin8_cron::callback::{DispatchConfig, HttpDispatcher, Secret, TokenSettings};
use sentin8_cron::core::clock::{Clock, SystemClock};
use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::{CronTiming, Timing};
use sentin8_cron::store::{self, ConnectOptions};
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};

const ENVS: usize = 10;

fn admin_url() -> String {
    std::env::var("SENTIN8_CRON_BENCH_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn with_user_and_db(url: &str, user: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("URL has a scheme");
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    let host = host.split('/').next().unwrap_or("127.0.0.1");
    format!("{scheme}://{user}@{host}/{db}")
}

async fn target() -> String {
    let app = Router::new().route(
        "/v1/internal/schedules/run",
        post(|| async { axum::Json(json!({"ok": true})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Seeds `count` schedules spread over the environments; schedule i is due at `due(i)`.
async fn seed(
    store: &Arc<dyn Store>,
    envs: &[EnvId],
    count: usize,
    base_url: &str,
    due: impl Fn(usize) -> chrono::DateTime<Utc>,
) {
    let now = SystemClock.now();
    for (e, env) in envs.iter().enumerate() {
        let mut tx = store.tenant_begin(*env).await.unwrap();
        for i in (e..count).step_by(envs.len()) {
            tx.schedule_insert(&NewSchedule {
                id: ScheduleId::new(),
                domain: "bench".into(),
                schedule_type: format!("job-{i}-{}", uuid::Uuid::new_v4().simple()),
                // Fires once during the run: the next fire is next year.
                timing: Timing::Cron(CronTiming::from_stored(
                    "0 0 1 1 *",
                    "UTC",
                    OnDstGap::Shift,
                    OnDstRepeat::Once,
                )),
                target: Target::from_stored(json!({"baseUrl": base_url})),
                payload: json!({"i": i}),
                status: ScheduleStatus::Active,
                next_run_at: Some(due(i)),
                max_retries: 3,
                policies: Default::default(),
                remaining_runs: None,
                labels: Default::default(),
                exclude: Default::default(),
                actor: "bench".into(),
                now,
            })
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
    }
}

/// The production wiring: its URL checked by an egress policy that names the target's
/// origin, the static token sent to that named origin, and (when `signed`) every call signed
/// with Ed25519, as `serve` does.
fn engine(store: Arc<dyn Store>, metrics: Arc<Metrics>, base_url: &str, signed: bool) -> Engine {
    let config = DispatchConfig {
        token: TokenSettings::Static(Secret::new("bench-token")),
        egress: EgressPolicy::parse(&[base_url.to_owned()], None, false).unwrap(),
        ..DispatchConfig::default()
    };
    let mut dispatcher = HttpDispatcher::new(&config).unwrap();
    if signed {
        dispatcher = dispatcher.signed(Arc::new(
            CallSigner::generate_dev("https://cron.bench").unwrap(),
        ));
    }
    Engine::new(
        store,
        Arc::new(dispatcher),
        Arc::new(SystemClock),
        EngineConfig {
            batch_size: 200,
            concurrency: 64,
            ..EngineConfig::default()
        },
        metrics,
    )
}

async fn burst(store: Arc<dyn Store>, base_url: &str, count: usize, signed: bool) -> f64 {
    let envs: Vec<EnvId> = (0..ENVS).map(|_| EnvId::new()).collect();
    let due_at = SystemClock.now() - chrono::Duration::seconds(1);
    seed(&store, &envs, count, base_url, |_| due_at).await;
    let engine = engine(store, Arc::new(Metrics::default()), base_url, signed);
    let started = Instant::now();
    let mut fired = 0;
    while fired < count as u64 {
        let summary = engine.tick().await.unwrap();
        assert_eq!(summary.errors, 0, "{summary:?}");
        fired += summary.succeeded;
        if summary.due == 0 {
            break;
        }
    }
    assert_eq!(fired, count as u64);
    count as f64 / started.elapsed().as_secs_f64()
}

struct Lateness {
    fires: usize,
    p50: Duration,
    p99: Duration,
    max: Duration,
}

async fn steady(
    store: Arc<dyn Store>,
    base_url: &str,
    per_second: usize,
    seconds: usize,
) -> Lateness {
    let envs: Vec<EnvId> = (0..ENVS).map(|_| EnvId::new()).collect();
    let count = per_second * seconds;
    let start = SystemClock.now() + chrono::Duration::seconds(3);
    let step = 1_000_000 / per_second as i64;
    seed(&store, &envs, count, base_url, |i| {
        start + chrono::Duration::microseconds(step * i as i64)
    })
    .await;
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(engine(store.clone(), metrics, base_url, true));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let loop_task = tokio::spawn({
        let engine = engine.clone();
        async move {
            engine
                .run(async move {
                    let _ = stopped.await;
                })
                .await
        }
    });
    // Wait for the last fire (bounded).
    let deadline = Instant::now() + Duration::from_secs(seconds as u64 + 60);
    let mut late = Vec::new();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        late.clear();
        for env in &envs {
            let mut tx = store.tenant_begin(*env).await.unwrap();
            let jobs = tx
                .job_list(&JobQuery {
                    status: Some(JobStatus::Succeeded),
                    limit: 1000,
                    ..JobQuery::default()
                })
                .await
                .unwrap();
            late.extend(jobs.iter().filter_map(|j| {
                j.started_at
                    .map(|s| (s - j.scheduled_for).to_std().unwrap_or_default())
            }));
        }
        if late.len() >= count {
            break;
        }
    }
    let _ = stop.send(());
    let _ = loop_task.await;
    late.sort();
    assert!(!late.is_empty(), "nothing fired");
    Lateness {
        fires: late.len(),
        p50: late[late.len() / 2],
        p99: late[late.len() * 99 / 100],
        max: late[late.len() - 1],
    }
}

async fn pg_commit_rate(owner_url: &str) -> f64 {
    let mut setup = PgConnection::connect(owner_url).await.unwrap();
    setup
        .execute("CREATE TABLE commit_probe (id bigserial PRIMARY KEY, n bigint NOT NULL)")
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let url = owner_url.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut conn = PgConnection::connect(&url).await.unwrap();
            let mut done = 0u64;
            while Instant::now() < until {
                let mut tx = conn.begin().await.unwrap();
                let id: i64 =
                    sqlx::query_scalar("INSERT INTO commit_probe (n) VALUES (0) RETURNING id")
                        .fetch_one(&mut *tx)
                        .await
                        .unwrap();
                sqlx::query("UPDATE commit_probe SET n = n + 1 WHERE id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / 5.0
}

async fn postgres_store(name: &str) -> (Arc<dyn Store>, String) {
    let admin = admin_url();
    let mut conn = PgConnection::connect(&admin)
        .await
        .expect("PostgreSQL reachable");
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    let owner = with_user_and_db(&admin, "postgres", name);
    store::migrate(&owner, false).await.unwrap();
    let service = with_user_and_db(&admin, "sentin8_cron_service", name);
    let store = store::connect(
        &service,
        &ConnectOptions {
            max_connections: std::env::var("BENCH_POOL")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(24),
            ..ConnectOptions::default()
        },
    )
    .await
    .unwrap();
    (store, owner)
}

async fn sqlite_store(dir: &std::path::Path, name: &str) -> Arc<dyn Store> {
    let url = format!("sqlite://{}", dir.join(name).display());
    store::migrate(&url, false).await.unwrap();
    store::connect(&url, &ConnectOptions::default())
        .await
        .unwrap()
}

async fn drop_db(name: &str) {
    let mut conn = PgConnection::connect(&admin_url()).await.unwrap();
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let base_url = target().await;
    let dir = tempfile::tempdir().unwrap();

    let (pg, owner) = postgres_store("s8c_bench_engine_burst").await;
    let pg_burst = burst(pg, &base_url, 5_000, true).await;
    let commit_rate = pg_commit_rate(&owner).await;
    drop_db("s8c_bench_engine_burst").await;
    // The same burst without signatures, in the same run, for the cost of signing.
    let (pg, _) = postgres_store("s8c_bench_engine_unsigned").await;
    let pg_unsigned = burst(pg, &base_url, 5_000, false).await;
    drop_db("s8c_bench_engine_unsigned").await;
    let (pg, _) = postgres_store("s8c_bench_engine_steady").await;
    let pg_steady = steady(pg, &base_url, 500, 10).await;
    drop_db("s8c_bench_engine_steady").await;

    // Unsigned, then signed. On a shared machine the first SQLite burst after the PostgreSQL
    // runs was the slower one whichever it was, so compare across runs, not one pair.
    let lite_unsigned = burst(
        sqlite_store(dir.path(), "unsigned.db").await,
        &base_url,
        5_000,
        false,
    )
    .await;
    let lite_burst = burst(
        sqlite_store(dir.path(), "burst.db").await,
        &base_url,
        5_000,
        true,
    )
    .await;
    let lite_steady = steady(
        sqlite_store(dir.path(), "steady.db").await,
        &base_url,
        500,
        10,
    )
    .await;

    println!(
        "| backend | burst: fires/s (5,000 due at once) | steady 500/s for 10 s: fires | lateness p50 | p99 | max |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, rate, lat) in [
        ("PostgreSQL", pg_burst, &pg_steady),
        ("SQLite", lite_burst, &lite_steady),
    ] {
        println!(
            "| {name} | {rate:.0} | {} | {:.1?} | {:.1?} | {:.1?} |",
            lat.fires, lat.p50, lat.p99, lat.max
        );
    }
    println!(
        "\nraw PostgreSQL commit rate (insert + update per transaction, 16 connections): {commit_rate:.0} tx/s; \
         engine burst / commit rate = {:.2}",
        pg_burst / commit_rate
    );
    println!(
        "burst without signing in the same run: PostgreSQL {pg_unsigned:.0} fires/s, SQLite \
         {lite_unsigned:.0} fires/s"
    );
}
