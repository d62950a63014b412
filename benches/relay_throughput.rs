//! Relay throughput from PostgreSQL into NATS JetStream.
//!
//! Seeds a fresh database with outbox events, drains it with one relay into a fresh stream, and
//! prints events per second. Two shapes:
//!
//! - **spread**: `SENTIN8_CRON_BENCH_EVENTS` events (default 20,000) over
//!   `SENTIN8_CRON_BENCH_SCHEDULES` schedules (default 2,000), interleaved as a busy system
//!   writes them; a claim holds one event per schedule, so rounds are full batches.
//! - **one schedule**: `SENTIN8_CRON_BENCH_CHAIN` events (default 1,000) of a single schedule,
//!   the worst case: per-schedule order allows one event per round.
//!
//! Needs PostgreSQL (`SENTIN8_CRON_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`, a role that may create databases) and NATS
//! with JetStream (`SENTIN8_CRON_TEST_NATS_URL`, default `nats://127.0.0.1:4222`); without them
//! it says so and exits. Run with `cargo bench --bench relay_throughput`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sentin8_cron::bus::{NatsSettings, NatsSink};
use sentin8_cron::core::clock::SystemClock;
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::{EnvId, EventId, ScheduleId};
use sentin8_cron::core::relay::{Relay, RelayOptions};
use sentin8_cron::core::store::{NewEvent, Store};
use sentin8_cron::store::postgres::PgStore;
use sentin8_cron::store::{self, ConnectOptions};
use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

#[path = "support/bench_env.rs"]
mod bench_env;
use bench_env::{admin_user, count, env_or, with_user_and_db};

/// The whole run stops after this long, whatever it has done.
const RUN_LIMIT: Duration = Duration::from_secs(120);

struct Scenario {
    name: &'static str,
    events: usize,
    schedules: usize,
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("relay_throughput: cannot start a runtime: {err}");
            return;
        }
    };
    let scenarios = [
        Scenario {
            name: "spread",
            events: count("SENTIN8_CRON_BENCH_EVENTS", 20_000),
            schedules: count("SENTIN8_CRON_BENCH_SCHEDULES", 2_000).max(1),
        },
        Scenario {
            name: "one schedule",
            events: count("SENTIN8_CRON_BENCH_CHAIN", 1_000),
            schedules: 1,
        },
    ];
    let outcome = runtime.block_on(async {
        tokio::time::timeout(RUN_LIMIT, async {
            for scenario in &scenarios {
                if scenario.events > 0 {
                    bench(scenario).await?;
                }
            }
            Ok::<(), String>(())
        })
        .await
    });
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(skip)) => println!("relay_throughput: skipped: {skip}"),
        Err(_) => println!("relay_throughput: stopped after {RUN_LIMIT:?}"),
    }
}

async fn bench(scenario: &Scenario) -> Result<(), String> {
    let admin = env_or(
        "SENTIN8_CRON_TEST_DATABASE_URL",
        "postgres://postgres@127.0.0.1:5432/postgres",
    );
    let nats_url = env_or("SENTIN8_CRON_TEST_NATS_URL", "nats://127.0.0.1:4222");
    let id = Uuid::new_v4().simple().to_string();
    let db_name = format!("s8c_bench_{id}");

    let mut admin_conn = PgConnection::connect(&admin)
        .await
        .map_err(|e| format!("PostgreSQL not reachable at {admin}: {e}"))?;
    admin_conn
        .execute(format!("CREATE DATABASE {db_name}").as_str())
        .await
        .map_err(|e| format!("cannot create a database: {e}"))?;
    let result = run(scenario, &admin, &db_name, &nats_url, &id).await;
    let _ = admin_conn
        .execute(format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)").as_str())
        .await;
    result
}

async fn run(
    scenario: &Scenario,
    admin: &str,
    db_name: &str,
    nats_url: &str,
    id: &str,
) -> Result<(), String> {
    let owner_url = with_user_and_db(admin, admin_user(admin), db_name).ok_or("bad admin URL")?;
    store::migrate(&owner_url, false)
        .await
        .map_err(|e| format!("migrate: {e}"))?;
    let service_url =
        with_user_and_db(admin, "sentin8_cron_service", db_name).ok_or("bad admin URL")?;
    let store: Arc<dyn Store> = Arc::new(
        PgStore::connect(&service_url, &ConnectOptions::default())
            .await
            .map_err(|e| format!("connect as the service role: {e}"))?,
    );

    let seeding = Instant::now();
    seed(&store, scenario).await?;
    let seeded_in = seeding.elapsed();

    let settings = NatsSettings::new(
        nats_url.to_owned(),
        format!("s8cbench.{id}"),
        format!("S8C_BENCH_{}", id.to_uppercase()),
    );
    let sink = NatsSink::connect(settings.clone())
        .await
        .map_err(|e| format!("NATS: {e}"))?;
    let context = sink.context().await.map_err(|e| e.to_string())?;
    let relay = Relay::new(
        store.clone(),
        Arc::new(sink),
        Arc::new(SystemClock),
        RelayOptions::default(),
        Arc::new(Metrics::default()),
    );

    let started = Instant::now();
    let mut relayed = 0u64;
    let mut rounds = 0u64;
    let outcome = loop {
        match relay.drain_once().await {
            Ok(summary) => {
                relayed += summary.relayed;
                rounds += summary.rounds;
                if summary.failed > 0 {
                    break Err(format!("{} publishes failed", summary.failed));
                }
                if summary.claimed == 0 {
                    break Ok(());
                }
            }
            Err(err) => break Err(format!("relay: {err}")),
        }
    };
    let elapsed = started.elapsed();

    let mut stream = context
        .get_stream(&settings.stream)
        .await
        .map_err(|e| e.to_string())?;
    let on_stream = stream
        .info()
        .await
        .map(|info| info.state.messages)
        .unwrap_or(0);
    let _ = context.delete_stream(&settings.stream).await;
    outcome?;

    let rate = relayed as f64 / elapsed.as_secs_f64();
    println!(
        "relay_throughput [{}]: {relayed} events ({} schedules) PostgreSQL -> JetStream in \
         {:.2} s over {rounds} rounds: {rate:.0} events/s (seeded in {:.2} s; {on_stream} \
         messages on the stream)",
        scenario.name,
        scenario.schedules,
        elapsed.as_secs_f64(),
        seeded_in.as_secs_f64(),
    );
    if relayed != scenario.events as u64 || on_stream != scenario.events as u64 {
        return Err(format!(
            "expected {} events, relayed {relayed}, {on_stream} on the stream",
            scenario.events
        ));
    }
    Ok(())
}

/// Writes the events the way the service does (tenant transactions of up to 1,000 events).
/// Each schedule belongs to one of four environments; its events interleave with the other
/// schedules' events of that environment.
async fn seed(store: &Arc<dyn Store>, scenario: &Scenario) -> Result<(), String> {
    let envs: Vec<EnvId> = (0..4).map(|_| EnvId::new()).collect();
    let schedules: Vec<ScheduleId> = (0..scenario.schedules).map(|_| ScheduleId::new()).collect();
    let mut by_env: Vec<Vec<(usize, ScheduleId)>> = vec![Vec::new(); envs.len()];
    for n in 0..scenario.events {
        let s = n % schedules.len();
        by_env[s % envs.len()].push((n, schedules[s]));
    }
    let now = chrono::Utc::now();
    for (env, events) in envs.iter().zip(&by_env) {
        for chunk in events.chunks(1000) {
            let mut tx = store.tenant_begin(*env).await.map_err(|e| e.to_string())?;
            for (n, schedule) in chunk {
                tx.outbox_insert(&NewEvent {
                    id: EventId::new(),
                    schedule_id: Some(*schedule),
                    event_type: "io.sentin8.cron.job.succeeded.v1".into(),
                    payload: json!({"n": n, "schedule_id": schedule, "status": "active"}),
                    now,
                })
                .await
                .map_err(|e| e.to_string())?;
            }
            tx.commit().await.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}
