//! The relay survives the loss of a NATS server: a three-server JetStream cluster of the test's
//! own (`nats_cluster`), a stream of three replicas, and the relay given all three servers as
//! its bus URL. During a burst of outbox events the server holding the relay's connection (and,
//! where a few step downs manage it, the stream's leadership) is killed with SIGKILL and started
//! again three seconds later. Every event must reach the stream exactly once, in order per
//! schedule, and be marked relayed in the outbox.
//!
//! Needs PostgreSQL and the `nats-server` program; skips without them unless
//! `SENTIN8_CRON_REQUIRE_POSTGRES=1` / `SENTIN8_CRON_REQUIRE_NATS=1`. Bounded: the cluster's
//! start, the drill and the read-back each have their own limit, and the whole test one more.

use std::collections::HashSet;
use std::time::Duration;

use sentin8_cron::core::model::EventId;
use sentin8_cron::core::relay::RelayOptions;

use crate::nats_cluster::{NatsCluster, find_program};
use crate::nats_drill::{Drill, node_loss_drill};
use crate::relay::by_schedule;
use crate::support::{Needs, PgTestDb, skip, unavailable};

/// The whole test, start to finish, cluster included.
const TEST_BOUND: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_reaches_a_three_replica_stream_once_across_a_server_loss() {
    let program = match (unavailable(Needs::NatsServer), find_program()) {
        (Some(reason), _) => return skip(Needs::NatsServer, reason),
        (None, None) => {
            return skip(
                Needs::NatsServer,
                "nats-server is not installed (or set SENTIN8_CRON_NATS_SERVER)",
            );
        }
        (None, Some(program)) => program,
    };
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    tokio::time::timeout(TEST_BOUND, drill(&program, &db))
        .await
        .unwrap_or_else(|_| panic!("the node-loss drill did not end within {TEST_BOUND:?}"));
}

async fn drill(program: &std::path::Path, db: &PgTestDb) {
    let mut cluster = NatsCluster::start(program)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let observer = cluster
        .client("s8c test")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    cluster
        .wait_for_jetstream(
            &async_nats::jetstream::new(observer),
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let id = uuid::Uuid::new_v4().simple().to_string();
    let drill = Drill {
        events: 400,
        schedules: 40,
        burst: Duration::from_secs(4),
        kill_after: Duration::from_secs(1),
        down_for: Duration::from_secs(3),
        settle_bound: Duration::from_secs(20),
        relay: RelayOptions {
            relay_id: "r-cluster".into(),
            ..RelayOptions::default()
        },
    };
    let report = node_loss_drill(
        &mut cluster,
        db.dyn_store(),
        &format!("s8ctest.{id}"),
        &format!("S8C_TEST_{}", id.to_uppercase()),
        &drill,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    let (failures, reasons) = report.failures();
    // Shown with --nocapture, and with any failure below.
    eprintln!(
        "killed {} (stream leader: {}), down {:?}; {} failed publishes {reasons:?}; {} re-sends \
         dropped by the stream; stall {:?}; all relayed {:?} after the burst began, {:?} after \
         it was written",
        report.killed,
        report.killed_leader,
        report.restarted_at - report.killed_at,
        failures,
        report.duplicates_dropped(),
        report.stall(),
        report.all_relayed.map(|at| at - report.burst_started),
        report.all_relayed.map(|at| at - report.burst_written),
    );

    let written = drill.events + drill.schedules;
    assert!(
        report.all_relayed.is_some(),
        "{} events still unrelayed {:?} after the burst\n{}",
        report.leftover_unrelayed,
        drill.settle_bound,
        cluster.logs()
    );
    assert_eq!(report.parked, 0, "nothing parked");
    assert_eq!(report.events.len(), written);
    let unmarked = report
        .events
        .iter()
        .filter(|e| e.relayed_at.is_none())
        .count();
    assert_eq!(unmarked, 0, "every outbox event is marked relayed");

    assert_eq!(
        report.stream_replicas, 3,
        "the sink created a 3-replica stream"
    );
    assert_eq!(
        report.stream_messages, written as u64,
        "one message per event"
    );
    assert_eq!(
        report.stream_ids.len(),
        written,
        "the consumer read them all"
    );
    assert_eq!(report.duplicate_ids(), 0, "no event id twice on the stream");
    let on_stream: HashSet<EventId> = report
        .stream_ids
        .iter()
        .map(|id| id.parse().expect("a message id is an event id"))
        .collect();
    let in_outbox: HashSet<EventId> = report.events.iter().map(|e| e.id).collect();
    assert_eq!(
        on_stream, in_outbox,
        "the stream holds exactly the outbox's events"
    );

    // Per schedule, the stream has the events in outbox order.
    let schedule_of: std::collections::HashMap<EventId, _> = report
        .events
        .iter()
        .map(|e| (e.id, e.schedule_id))
        .collect();
    let want = by_schedule(report.events.iter().map(|e| (e.schedule_id, e.id)));
    let got = by_schedule(report.stream_ids.iter().map(|id| {
        let id: EventId = id.parse().expect("event id");
        (schedule_of[&id], id)
    }));
    assert_eq!(got, want, "per-schedule order on the stream");

    assert!(
        report.rejoined,
        "{} came back as a current replica of the stream\n{}",
        report.killed,
        cluster.logs()
    );
}
