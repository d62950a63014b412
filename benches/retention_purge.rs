//! Retention on PostgreSQL under load: does removing millions of old jobs stall the ticker?
//!
//! Loads `PURGE_BENCH_JOBS` (default 10 000 000) finished jobs, 60 days old, into a fresh
//! database, plus `PURGE_BENCH_SCHEDULES` (default 200) schedules that are all due at every
//! tick. The ticker then runs `PURGE_BENCH_TICKS` (default 150) ticks, each a minute later on
//! a manual clock, so every tick claims, calls (an in-process dispatcher that answers at once:
//! only the database's share is measured) and records every schedule: first with nothing else
//! running, then while the retention worker deletes the old jobs continuously (its batches back
//! to back, no pause: harsher than `serve`'s pacing). It prints the tick duration's p50, p99 and
//! max in both phases, the rows deleted during the second and the purge rate, and a `pgbench`
//! TPS figure of the same server from the same run (TPC-B-like, scale 10, 4 clients, 15 s), so
//! the figures can be read against the machine.
//!
//! Run: `cargo bench --bench retention_purge` (PostgreSQL at SENTIN8_CRON_BENCH_DATABASE_URL,
//! default postgres://postgres@127.0.0.1:5432/postgres; `pgbench` on the PATH).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
use sentin8_cron::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::retention::{Retention, RetentionConfig};
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::{CronTiming, Timing};
use sentin8_cron::store::{self, ConnectOptions};
use serde_json::{Value, json};
use sqlx::{Connection, Executor, PgConnection};

const DB: &str = "s8c_bench_retention_purge";
const PGBENCH_DB: &str = "s8c_bench_retention_pgbench";

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

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

/// Answers every call at once: the ticker's time is then the database's.
struct Instant200;

#[async_trait]
impl Dispatcher for Instant200 {
    async fn run(&self, _request: &RunRequest) -> Result<Value, DispatchError> {
        Ok(json!({"ok": true}))
    }
}

async fn recreate(name: &str) -> String {
    let mut conn = PgConnection::connect(&admin_url())
        .await
        .expect("PostgreSQL reachable");
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await
        .unwrap();
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .unwrap();
    with_user_and_db(&admin_url(), "postgres", name)
}

/// `count` every-minute schedules in one environment, first due at `start`.
async fn seed_schedules(store: &Arc<dyn Store>, env: EnvId, count: u64, start: DateTime<Utc>) {
    let mut tx = store.tenant_begin(env).await.unwrap();
    for i in 0..count {
        tx.schedule_insert(&NewSchedule {
            id: ScheduleId::new(),
            domain: "bench".into(),
            schedule_type: format!("every-minute-{i}"),
            timing: Timing::Cron(CronTiming::from_stored(
                "* * * * *",
                "UTC",
                OnDstGap::Shift,
                OnDstRepeat::Once,
            )),
            target: Target::from_stored(json!({"baseUrl": "http://127.0.0.1:9"})),
            payload: json!({}),
            status: ScheduleStatus::Active,
            next_run_at: Some(start),
            max_retries: 3,
            policies: Default::default(),
            remaining_runs: None,
            labels: Default::default(),
            exclude: Default::default(),
            actor: "bench".into(),
            now: start,
        })
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

/// `count` succeeded jobs of one (paused) schedule, finished 60 days before `now`, loaded by
/// the schema owner in chunks of a million. Their ids ascend (as time-ordered ids do), so the
/// load appends to the indexes.
async fn load_old_jobs(
    owner: &str,
    store: &Arc<dyn Store>,
    env: EnvId,
    count: u64,
    now: DateTime<Utc>,
) {
    let mut tx = store.tenant_begin(env).await.unwrap();
    let archive = NewSchedule {
        id: ScheduleId::new(),
        domain: "bench".into(),
        schedule_type: "archive".into(),
        timing: Timing::Cron(CronTiming::from_stored(
            "0 0 1 1 *",
            "UTC",
            OnDstGap::Shift,
            OnDstRepeat::Once,
        )),
        target: Target::from_stored(json!({"baseUrl": "http://127.0.0.1:9"})),
        payload: json!({}),
        status: ScheduleStatus::Paused,
        next_run_at: None,
        max_retries: 3,
        policies: Default::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
        actor: "bench".into(),
        now,
    };
    let archive = tx.schedule_insert(&archive).await.unwrap();
    tx.commit().await.unwrap();
    let mut conn = PgConnection::connect(owner).await.unwrap();
    let old = now - chrono::Duration::days(60);
    let chunk = 1_000_000u64;
    let mut loaded = 0;
    while loaded < count {
        let n = chunk.min(count - loaded);
        sqlx::query(
            "INSERT INTO cron.jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
                                    started_at, finished_at, result, idempotency_key, \
                                    created_at, updated_at) \
             SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, $1, $2, \
                    'succeeded', 1, t, t, t, '{\"ok\": true}', \
                    'schedule:' || $1 || ':' || g, t, t \
               FROM (SELECT g, $3 - g * interval '1 millisecond' AS t \
                       FROM generate_series($4::bigint, $5::bigint) g) s",
        )
        .bind(archive.id.0)
        .bind(env.0)
        .bind(old)
        .bind(i64::try_from(loaded).unwrap())
        .bind(i64::try_from(loaded + n - 1).unwrap())
        .execute(&mut conn)
        .await
        .unwrap();
        loaded += n;
        eprintln!("  loaded {loaded} old jobs");
    }
    conn.execute("VACUUM ANALYZE cron.jobs").await.unwrap();
}

/// How many of the old jobs are still there.
async fn old_jobs_left(owner: &str) -> u64 {
    let mut conn = PgConnection::connect(owner).await.unwrap();
    let left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM cron.jobs j JOIN cron.schedules s ON s.id = j.schedule_id \
          WHERE s.schedule_type = 'archive'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    u64::try_from(left).unwrap_or(0)
}

/// Ticks `ticks` times, a minute apart on `clock`; the wall-clock duration of each.
async fn run_ticks(engine: &Engine, clock: &ManualClock, ticks: u64, due: u64) -> Vec<Duration> {
    let mut durations = Vec::with_capacity(ticks as usize);
    for _ in 0..ticks {
        clock.advance(chrono::Duration::minutes(1));
        let started = Instant::now();
        let summary = engine.tick().await.unwrap();
        durations.push(started.elapsed());
        assert_eq!(summary.succeeded, due, "every schedule ran: {summary:?}");
    }
    durations
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn report(label: &str, mut durations: Vec<Duration>) {
    durations.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{label:<32} ticks {:>4}  p50 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms",
        durations.len(),
        ms(percentile(&durations, 50.0)),
        ms(percentile(&durations, 99.0)),
        ms(*durations.last().unwrap()),
    );
}

/// pgbench's TPS on a scratch database of the same server: TPC-B-like, scale 10, 4 clients.
fn pgbench_tps() -> Option<f64> {
    let url = with_user_and_db(&admin_url(), "postgres", PGBENCH_DB);
    let init = std::process::Command::new("pgbench")
        .args(["-i", "-q", "-s", "10", &url])
        .output()
        .ok()?;
    if !init.status.success() {
        eprintln!(
            "pgbench -i failed: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        return None;
    }
    let run = std::process::Command::new("pgbench")
        .args(["-c", "4", "-j", "2", "-T", "15", "-n", &url])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&run.stdout);
    text.lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| {
            l.trim_start_matches("tps = ")
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("retention_purge: bench");
        return;
    }
    let jobs = setting("PURGE_BENCH_JOBS", 10_000_000);
    let schedules = setting("PURGE_BENCH_SCHEDULES", 200);
    let ticks = setting("PURGE_BENCH_TICKS", 150);

    recreate(PGBENCH_DB).await;
    let tps = pgbench_tps();

    let owner = recreate(DB).await;
    store::migrate(&owner, false).await.unwrap();
    let service = with_user_and_db(&admin_url(), "sentin8_cron_service", DB);
    let store = store::connect(&service, &ConnectOptions::default())
        .await
        .unwrap();
    // In the past of the database's clock: the purge functions keep anything younger than a
    // day by it.
    let start: DateTime<Utc> = "2025-01-01T00:00:00Z".parse().unwrap();
    let env = EnvId::new();
    let loading = Instant::now();
    load_old_jobs(&owner, &store, env, jobs, start).await;
    let load_time = loading.elapsed();
    seed_schedules(&store, env, schedules, start).await;

    let clock = Arc::new(ManualClock::new(start));
    let engine = Engine::new(
        store.clone(),
        Arc::new(Instant200),
        clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    // Warm-up: the first ticks fill caches and plans.
    run_ticks(&engine, &clock, 10, schedules).await;
    let quiet = run_ticks(&engine, &clock, ticks, schedules).await;

    // The purge, back to back, on its own clock: everything finished 30 days before `start`.
    let purge_clock = Arc::new(ManualClock::new(start));
    let config = RetentionConfig {
        budget: Duration::MAX,
        pause: Duration::ZERO,
        ..RetentionConfig::default()
    };
    let retention = Retention::new(store.clone(), purge_clock, config);
    let purge = tokio::spawn(async move { retention.pass().await });
    let purging = Instant::now();
    let during = run_ticks(&engine, &clock, ticks, schedules).await;
    let window = purging.elapsed();
    // Stopping the worker between two batches loses nothing: each batch is its own statement.
    purge.abort();
    let _ = purge.await;
    let removed = jobs - old_jobs_left(&owner).await;

    println!(
        "old jobs loaded: {jobs} in {:.0} s; due schedules per tick: {schedules}",
        load_time.as_secs_f64()
    );
    report("tick, no purge", quiet);
    report("tick, during the purge", during);
    println!(
        "purge: {removed} jobs deleted in {:.1} s while ticking ({:.0} rows/s, batches of {}, no pause)",
        window.as_secs_f64(),
        removed as f64 / window.as_secs_f64(),
        config.batch
    );
    match tps {
        Some(tps) => println!("pgbench (TPC-B-like, scale 10, 4 clients, 15 s): {tps:.0} tps"),
        None => println!("pgbench: not available"),
    }
    for name in [DB, PGBENCH_DB] {
        let mut conn = PgConnection::connect(&admin_url()).await.unwrap();
        let _ = conn
            .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
            .await;
    }
}
