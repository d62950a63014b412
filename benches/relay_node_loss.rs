//! The relay through the loss of a NATS server: a three-server JetStream cluster on loopback
//! (started here, removed after), a stream of three replicas, the relay given all three servers
//! as its bus URL and `serve`'s relay defaults. A burst of `SENTIN8_CRON_BENCH_EVENTS` outbox
//! events (default 5,000, over `SENTIN8_CRON_BENCH_SCHEDULES` schedules, default 500) is
//! written over 5 s; 1.5 s in, the server holding the relay's connection (made the stream's
//! leader first, where a few step downs manage it) is killed with SIGKILL, and started again
//! 3 s later.
//!
//! Prints the events delivered, ids on the stream more than once, re-sends the stream dropped,
//! failed publishes, the relay's stall (the longest time without an acknowledged publish from
//! the kill until everything was relayed, against the longest before the kill) and the time to
//! relay everything. Exits non-zero when an event is missing or doubled.
//!
//! Needs PostgreSQL (`SENTIN8_CRON_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`, a role that may create databases) and the
//! `nats-server` program (`SENTIN8_CRON_NATS_SERVER`, else the `PATH`); without them it says so
//! and exits. Run with `cargo bench --bench relay_node_loss`.

// The cluster and the drill are the node-loss test's own; this bench reads only part of their
// report.
#[allow(dead_code)]
#[path = "../tests/it/nats_cluster.rs"]
mod nats_cluster;
#[path = "../tests/it/nats_drill.rs"]
mod nats_drill;

use std::sync::Arc;
use std::time::Duration;

use nats_cluster::{NatsCluster, find_program};
use nats_drill::{Drill, DrillReport, node_loss_drill};
use sentin8_cron::core::relay::RelayOptions;
use sentin8_cron::core::store::Store;
use sentin8_cron::store::postgres::PgStore;
use sentin8_cron::store::{self, ConnectOptions};
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

#[path = "support/bench_env.rs"]
mod bench_env;
use bench_env::{admin_user, count, env_or, with_user_and_db};

/// The whole run stops after this long, whatever it has done.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Why the run did not produce figures.
enum Stop {
    /// A service or program is missing: not a failure of the relay.
    Skip(String),
    /// The drill ran and lost or doubled events, or broke down.
    Fail(String),
}

fn main() {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("relay_node_loss: cannot start a runtime: {err}");
            return;
        }
    };
    let outcome = runtime.block_on(async { tokio::time::timeout(RUN_LIMIT, bench()).await });
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(Stop::Skip(why))) => println!("relay_node_loss: skipped: {why}"),
        Ok(Err(Stop::Fail(why))) => {
            println!("relay_node_loss: FAILED: {why}");
            std::process::exit(1);
        }
        Err(_) => {
            println!("relay_node_loss: stopped after {RUN_LIMIT:?}");
            std::process::exit(1);
        }
    }
}

async fn bench() -> Result<(), Stop> {
    let program = find_program().ok_or_else(|| {
        Stop::Skip("nats-server is not installed (or set SENTIN8_CRON_NATS_SERVER)".into())
    })?;
    let admin = env_or(
        "SENTIN8_CRON_TEST_DATABASE_URL",
        "postgres://postgres@127.0.0.1:5432/postgres",
    );
    let id = Uuid::new_v4().simple().to_string();
    let db_name = format!("s8c_bench_{id}");
    let mut admin_conn = PgConnection::connect(&admin)
        .await
        .map_err(|e| Stop::Skip(format!("PostgreSQL not reachable at {admin}: {e}")))?;
    admin_conn
        .execute(format!("CREATE DATABASE {db_name}").as_str())
        .await
        .map_err(|e| Stop::Skip(format!("cannot create a database: {e}")))?;
    let result = run(&program, &admin, &db_name, &id).await;
    let _ = admin_conn
        .execute(format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)").as_str())
        .await;
    result
}

async fn run(program: &std::path::Path, admin: &str, db_name: &str, id: &str) -> Result<(), Stop> {
    let fail = Stop::Fail;
    let owner_url = with_user_and_db(admin, admin_user(admin), db_name)
        .ok_or_else(|| fail("bad admin URL".into()))?;
    store::migrate(&owner_url, false)
        .await
        .map_err(|e| fail(format!("migrate: {e}")))?;
    let service_url = with_user_and_db(admin, "sentin8_cron_service", db_name)
        .ok_or_else(|| fail("bad admin URL".into()))?;
    let store: Arc<dyn Store> = Arc::new(
        PgStore::connect(&service_url, &ConnectOptions::default())
            .await
            .map_err(|e| fail(format!("connect as the service role: {e}")))?,
    );

    let mut cluster = NatsCluster::start(program).await.map_err(fail)?;
    let observer = cluster.client("s8c bench").await.map_err(fail)?;
    cluster
        .wait_for_jetstream(
            &async_nats::jetstream::new(observer),
            Duration::from_secs(30),
        )
        .await
        .map_err(fail)?;

    let drill = Drill {
        events: count("SENTIN8_CRON_BENCH_EVENTS", 5_000),
        schedules: count("SENTIN8_CRON_BENCH_SCHEDULES", 500).max(1),
        burst: Duration::from_secs(5),
        kill_after: Duration::from_millis(1_500),
        down_for: Duration::from_secs(3),
        settle_bound: Duration::from_secs(90),
        relay: RelayOptions {
            relay_id: "relay-node-loss".into(),
            ..RelayOptions::default()
        },
    };
    let report = node_loss_drill(
        &mut cluster,
        store,
        &format!("s8cbench.{id}"),
        &format!("S8C_BENCH_{}", id.to_uppercase()),
        &drill,
    )
    .await
    .map_err(fail)?;
    print(&drill, &report);
    check(&drill, &report).map_err(|why| fail(format!("{why}\n{}", cluster.logs())))
}

fn print(drill: &Drill, report: &DrillReport) {
    let written = report.events.len();
    let in_outbox: std::collections::HashSet<String> =
        report.events.iter().map(|e| e.id.to_string()).collect();
    let delivered: std::collections::HashSet<&String> = report
        .stream_ids
        .iter()
        .filter(|id| in_outbox.contains(*id))
        .collect();
    let (failed, reasons) = report.failures();
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let before = report.longest_gap(report.burst_started, report.killed_at);
    println!(
        "relay_node_loss: {} events written ({} burst events over {} over {} schedules, plus \
         one warm-up event each)",
        written,
        drill.events,
        secs(drill.burst),
        drill.schedules
    );
    println!(
        "  killed {} at {} into the burst (it {} the stream's leader), started again after {}; \
         rejoined as a current replica: {}",
        report.killed,
        secs(report.killed_at - report.burst_started),
        if report.killed_leader {
            "was"
        } else {
            "was not"
        },
        secs(report.restarted_at - report.killed_at),
        report.rejoined
    );
    println!(
        "  delivered {} of {written}; ids on the stream more than once: {}; messages on the \
         stream: {} (replicas: {})",
        delivered.len(),
        report.duplicate_ids(),
        report.stream_messages,
        report.stream_replicas
    );
    println!(
        "  publishes: {} acknowledged, of which {} re-sends the stream dropped; {failed} failed: \
         {reasons:?}",
        report.acks().count(),
        report.duplicates_dropped()
    );
    println!(
        "  stall: {} without an acknowledged publish after the kill (longest before it: {})",
        secs(report.stall()),
        secs(before)
    );
    let after_kill = |at: std::time::Instant| secs(at.saturating_duration_since(report.killed_at));
    let failed_at: Vec<std::time::Instant> = report
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, nats_drill::Outcome::Failed(_)))
        .map(|(at, _)| *at)
        .collect();
    if let (Some(first), Some(last)) = (failed_at.first(), failed_at.last()) {
        println!(
            "  publishes failed from {} to {} after the kill; the first acknowledged after it at {}",
            after_kill(*first),
            after_kill(*last),
            report
                .acks()
                .find(|at| *at > report.killed_at)
                .map_or_else(|| "never".into(), after_kill)
        );
    }
    match report.all_relayed {
        Some(at) => println!(
            "  all relayed {} after the burst began ({} after its last event was written); \
             parked: {}",
            secs(at - report.burst_started),
            secs(at.saturating_duration_since(report.burst_written)),
            report.parked
        ),
        None => println!(
            "  NOT all relayed within {} of the burst's end: {} left",
            secs(drill.settle_bound),
            report.leftover_unrelayed
        ),
    }
}

fn check(drill: &Drill, report: &DrillReport) -> Result<(), String> {
    let written = drill.events + drill.schedules;
    if report.all_relayed.is_none() || report.parked != 0 {
        return Err(format!(
            "{} events unrelayed, {} parked",
            report.leftover_unrelayed, report.parked
        ));
    }
    let unmarked = report
        .events
        .iter()
        .filter(|e| e.relayed_at.is_none())
        .count();
    let distinct: std::collections::HashSet<&String> = report.stream_ids.iter().collect();
    if report.events.len() != written
        || unmarked != 0
        || distinct.len() != written
        || report.duplicate_ids() != 0
    {
        return Err(format!(
            "{written} events written, {} in the outbox ({unmarked} not marked relayed), {} \
             distinct ids on the stream, {} doubled",
            report.events.len(),
            distinct.len(),
            report.duplicate_ids()
        ));
    }
    Ok(())
}
