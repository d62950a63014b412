//! The outbox relay loop over both stores with a scripted sink: order, parking, outages,
//! leases, retention and wake-ups. The real sinks are tested in `relay_sinks`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::clock::{Clock, ManualClock, SystemClock};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};
use sentin8_cron::core::relay::{Delivery, Relay, RelayOptions, Sink, SinkError};
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use serde_json::json;
use tokio::sync::Notify;

use crate::conformance::insert_event;

// ---------------------------------------------------------------------------------------------
// Helpers

pub(crate) fn actor(now: DateTime<Utc>) -> Actor {
    Actor {
        name: "tester@example.com".into(),
        correlation_id: Some("req-1".into()),
        now,
    }
}

pub(crate) async fn create_schedule(
    ops: &Ops,
    env: EnvId,
    name: &str,
    now: DateTime<Utc>,
) -> Schedule {
    let decl = ScheduleDecl {
        schedule_type: name.into(),
        cron: Some("0 3 * * *".into()),
        payload: Some(json!({"report": name})),
        ..ScheduleDecl::default()
    };
    let spec = decl.validate(now).expect("valid declaration");
    let target = json!({"baseUrl": "http://127.0.0.1:9/app"});
    ops.schedule_create(
        env,
        CreateSchedule {
            domain: "billing".into(),
            spec,
            target: Target::validate(&target).unwrap(),
        },
        &actor(now),
    )
    .await
    .expect("schedule created")
}

pub(crate) fn options(relay_id: &str) -> RelayOptions {
    RelayOptions {
        relay_id: relay_id.into(),
        batch_size: 10,
        concurrency: 4,
        publish_timeout: StdDuration::from_secs(10),
        ..RelayOptions::default()
    }
}

pub(crate) fn relay(
    store: &Arc<dyn Store>,
    sink: Arc<dyn Sink>,
    clock: Arc<dyn Clock>,
    options: RelayOptions,
) -> Relay {
    Relay::new(
        store.clone(),
        sink,
        clock,
        options,
        Arc::new(Metrics::default()),
    )
}

/// Every outbox event of `envs`, in seq order.
pub(crate) async fn outbox(store: &Arc<dyn Store>, envs: &[EnvId]) -> Vec<OutboxEvent> {
    let mut all = Vec::new();
    for env in envs {
        let mut tx = store.tenant_begin(*env).await.unwrap();
        all.extend(tx.outbox_list(0, 10_000).await.unwrap());
    }
    all.sort_by_key(|e| e.seq);
    all
}

/// For each schedule, its events' ids in the order given.
pub(crate) fn by_schedule(
    events: impl IntoIterator<Item = (Option<ScheduleId>, EventId)>,
) -> HashMap<ScheduleId, Vec<EventId>> {
    let mut map: HashMap<ScheduleId, Vec<EventId>> = HashMap::new();
    for (schedule, id) in events {
        if let Some(schedule) = schedule {
            map.entry(schedule).or_default().push(id);
        }
    }
    map
}

/// A sink that records deliveries, refuses chosen events, and can play an unreachable bus.
#[derive(Default)]
struct ScriptedSink {
    delivered: Mutex<Vec<OutboxEvent>>,
    attempts: Mutex<HashMap<EventId, u32>>,
    refuse: Mutex<HashSet<EventId>>,
    down: Mutex<bool>,
    published: Notify,
}

impl ScriptedSink {
    fn delivered_ids(&self) -> Vec<EventId> {
        self.delivered
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.id)
            .collect()
    }
}

#[async_trait]
impl Sink for ScriptedSink {
    fn kind(&self) -> &'static str {
        "scripted"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        *self.attempts.lock().unwrap().entry(event.id).or_default() += 1;
        if *self.down.lock().unwrap() {
            return Err(SinkError::Unavailable("connection refused".into()));
        }
        if self.refuse.lock().unwrap().contains(&event.id) {
            return Err(SinkError::Rejected("refused by the test".into()));
        }
        self.delivered.lock().unwrap().push(event.clone());
        self.published.notify_one();
        Ok(Delivery::default())
    }
}

// ---------------------------------------------------------------------------------------------
// The relay loop, on every backend

pub async fn drain_relays_everything_in_schedule_order(store: Arc<dyn Store>) {
    let ops = Ops::new(store.clone());
    let (env_a, env_b) = (EnvId::new(), EnvId::new());
    let now = Utc::now();
    let s1 = create_schedule(&ops, env_a, "s1", now).await;
    let s2 = create_schedule(&ops, env_b, "s2", now).await;
    ops.schedule_pause(env_a, s1.id, &actor(now), None)
        .await
        .unwrap();
    ops.schedule_pause(env_b, s2.id, &actor(now), None)
        .await
        .unwrap();
    ops.schedule_resume(env_a, s1.id, &actor(now))
        .await
        .unwrap();
    ops.schedule_delete(env_b, s2.id, &actor(now))
        .await
        .unwrap();
    let loose = insert_event(&store, env_a, None, "loose").await;

    let sink = Arc::new(ScriptedSink::default());
    let clock = Arc::new(ManualClock::new(now));
    let mut opts = options("r1");
    opts.batch_size = 2;
    let relay = relay(&store, sink.clone(), clock, opts);
    let summary = relay.drain_once().await.unwrap();
    assert_eq!(summary.relayed, 7, "{summary:?}");
    assert_eq!(summary.claimed, 7);
    assert_eq!(summary.failed, 0);
    assert!(summary.rounds >= 4, "batches of two: {summary:?}");
    assert_eq!(relay.metrics().events_relayed.load(Ordering::Relaxed), 7);

    let stored = outbox(&store, &[env_a, env_b]).await;
    assert!(stored.iter().all(|e| e.relayed_at.is_some()));
    let delivered = sink.delivered_ids();
    assert!(delivered.contains(&loose));
    let want = by_schedule(stored.iter().map(|e| (e.schedule_id, e.id)));
    let got = by_schedule(
        sink.delivered
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.schedule_id, e.id)),
    );
    assert_eq!(got, want, "each schedule's events in commit order");
    assert_eq!(want[&s1.id].len(), 3);

    let again = relay.drain_once().await.unwrap();
    assert_eq!(again.claimed, 0);
    assert_eq!(store.stats_get().await.unwrap().outbox_unrelayed, 0);
}

pub async fn refused_events_park_and_release_their_schedule(store: Arc<dyn Store>) {
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let now = Utc::now();
    let s1 = create_schedule(&ops, env, "s1", now).await;
    ops.schedule_pause(env, s1.id, &actor(now), None)
        .await
        .unwrap();
    let s2 = create_schedule(&ops, env, "s2", now).await;
    let events = outbox(&store, &[env]).await;
    let (created1, paused1, created2) = (events[0].id, events[1].id, events[2].id);
    assert_eq!(events[2].schedule_id, Some(s2.id));

    let sink = Arc::new(ScriptedSink::default());
    sink.refuse.lock().unwrap().insert(created1);
    let clock = Arc::new(ManualClock::new(now));
    let mut opts = options("r1");
    opts.max_attempts = 2;
    let relay = relay(&store, sink.clone(), clock.clone(), opts);

    // s1's first event is refused; s2 is not held up by it, s1's next event is.
    let first = relay.drain_once().await.unwrap();
    assert_eq!((first.relayed, first.failed, first.parked), (1, 1, 0));
    assert!(!first.bus_unavailable);
    assert_eq!(sink.delivered_ids(), [created2]);
    // Within the backoff nothing is retried.
    let idle = relay.drain_once().await.unwrap();
    assert_eq!(idle.claimed, 0);

    // The second refusal parks it, and the schedule's next event goes out in the same drain.
    clock.advance(Duration::seconds(2));
    let second = relay.drain_once().await.unwrap();
    assert_eq!((second.relayed, second.failed, second.parked), (1, 1, 1));
    assert_eq!(sink.delivered_ids(), [created2, paused1]);
    assert_eq!(sink.attempts.lock().unwrap()[&created1], 2);
    assert_eq!(relay.metrics().relay_failures.load(Ordering::Relaxed), 2);
    assert_eq!(relay.metrics().events_parked.load(Ordering::Relaxed), 1);
    let stats = store.stats_get().await.unwrap();
    assert_eq!(stats.outbox_parked, 1);
    assert_eq!(
        stats.outbox_unrelayed, 1,
        "the parked event is still unrelayed"
    );

    let parked = &outbox(&store, &[env]).await[0];
    assert_eq!(parked.id, created1);
    assert_eq!(parked.attempts, 2);
    assert!(parked.parked_at.is_some());
    assert!(
        parked.last_error.as_deref().unwrap().contains("refused"),
        "{parked:?}"
    );
    // Parked stays parked.
    clock.advance(Duration::hours(1));
    sink.refuse.lock().unwrap().clear();
    assert_eq!(relay.drain_once().await.unwrap().claimed, 0);
}

pub async fn an_unreachable_bus_parks_nothing(store: Arc<dyn Store>) {
    let env = EnvId::new();
    for i in 0..3 {
        insert_event(&store, env, Some(ScheduleId::new()), &format!("e{i}")).await;
    }
    let sink = Arc::new(ScriptedSink::default());
    *sink.down.lock().unwrap() = true;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let mut opts = options("r1");
    opts.max_attempts = 1;
    let relay = relay(&store, sink.clone(), clock.clone(), opts);

    for _ in 0..3 {
        let summary = relay.drain_once().await.unwrap();
        assert_eq!((summary.failed, summary.parked), (3, 0), "{summary:?}");
        assert!(summary.bus_unavailable);
        assert_eq!(summary.rounds, 1, "the drain stops at an unreachable bus");
        clock.advance(Duration::seconds(2));
    }
    assert_eq!(store.stats_get().await.unwrap().outbox_parked, 0);
    assert!(
        outbox(&store, &[env])
            .await
            .iter()
            .all(|e| e.attempts == 3 && e.parked_at.is_none())
    );

    *sink.down.lock().unwrap() = false;
    let summary = relay.drain_once().await.unwrap();
    assert_eq!((summary.relayed, summary.failed), (3, 0));
}

pub async fn an_outage_stops_the_round_and_releases_the_rest(store: Arc<dyn Store>) {
    let env = EnvId::new();
    for i in 0..5 {
        insert_event(&store, env, Some(ScheduleId::new()), &format!("e{i}")).await;
    }
    let sink = Arc::new(ScriptedSink::default());
    *sink.down.lock().unwrap() = true;
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let mut opts = options("r1");
    opts.concurrency = 1;
    let relay = relay(&store, sink.clone(), clock.clone(), opts);
    let summary = relay.drain_once().await.unwrap();
    assert_eq!(
        (summary.claimed, summary.failed, summary.released),
        (5, 1, 4),
        "{summary:?}"
    );
    assert_eq!(sink.attempts.lock().unwrap().len(), 1, "one try, then stop");
    // The four untried events are free for anyone at once, with no attempt counted.
    let other = store
        .outbox_claim(&OutboxClaim {
            relay_id: "r2".into(),
            now: clock.now(),
            lease_until: clock.now() + Duration::seconds(30),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(other.len(), 4);
    assert!(other.iter().all(|e| e.attempts == 0));
}

/// Moves the clock forward by 15 s per publish, like a very slow bus.
struct SlowSink(Arc<ManualClock>, ScriptedSink);

#[async_trait]
impl Sink for SlowSink {
    fn kind(&self) -> &'static str {
        "slow"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        self.0.advance(Duration::seconds(15));
        self.1.publish(event).await
    }
}

pub async fn publishes_start_only_while_the_lease_lasts(store: Arc<dyn Store>) {
    let env = EnvId::new();
    for i in 0..3 {
        insert_event(&store, env, None, &format!("e{i}")).await;
    }
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let sink = Arc::new(SlowSink(clock.clone(), ScriptedSink::default()));
    let mut opts = options("r1");
    opts.concurrency = 1;
    opts.lease = StdDuration::from_secs(30);
    opts.publish_timeout = StdDuration::from_secs(10);
    opts.max_rounds_per_drain = 1;
    let relay = relay(&store, sink.clone(), clock.clone(), opts);
    // Started at +0 s and +15 s; at +30 s a publish could outlive the lease (+30 s), so the
    // third event is given back instead of racing another relay for it.
    let summary = relay.drain_once().await.unwrap();
    assert_eq!((summary.relayed, summary.released), (2, 1), "{summary:?}");
    assert_eq!(sink.1.delivered_ids().len(), 2);
    let summary = relay.drain_once().await.unwrap();
    assert_eq!(summary.relayed, 1);
}

pub async fn retention_deletes_old_relayed_events(store: Arc<dyn Store>) {
    let env = EnvId::new();
    for i in 0..5 {
        insert_event(&store, env, None, &format!("e{i}")).await;
    }
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let mut opts = options("r1");
    opts.retention = StdDuration::from_secs(3600);
    opts.purge_batch = 2;
    let relay = relay(
        &store,
        Arc::new(ScriptedSink::default()),
        clock.clone(),
        opts,
    );
    let summary = relay.drain_once().await.unwrap();
    assert_eq!((summary.relayed, summary.purged), (5, 0));
    clock.advance(Duration::minutes(59));
    assert_eq!(relay.drain_once().await.unwrap().purged, 0);
    clock.advance(Duration::minutes(2));
    // Batches of two until done.
    assert_eq!(relay.drain_once().await.unwrap().purged, 5);
    assert!(outbox(&store, &[env]).await.is_empty());
}

/// The relay's loop on a task, polling far beyond a test's patience (only commits, and its
/// own steps, wake it in time), until [`RunningLoop::stop`].
struct RunningLoop {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningLoop {
    fn start(store: &Arc<dyn Store>, sink: Arc<ScriptedSink>) -> Self {
        let mut opts = options("r1");
        opts.poll_interval = StdDuration::from_secs(600);
        let relay = relay(store, sink, Arc::new(SystemClock), opts);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            relay
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Self { stop, task }
    }

    /// Shuts the loop down and waits for it to end.
    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(StdDuration::from_secs(10), self.task)
            .await
            .expect("the loop stops on shutdown")
            .expect("the loop did not panic");
    }
}

pub async fn the_loop_wakes_on_commit_and_stops_on_shutdown(store: Arc<dyn Store>) {
    let sink = Arc::new(ScriptedSink::default());
    // Only the commit signal can wake the loop in time.
    let running = RunningLoop::start(&store, sink.clone());

    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    for name in ["first", "second"] {
        let woken = sink.published.notified();
        create_schedule(&ops, env, name, Utc::now()).await;
        tokio::time::timeout(StdDuration::from_secs(10), woken)
            .await
            .unwrap_or_else(|_| panic!("the {name} commit woke the relay"));
    }
    assert_eq!(sink.delivered_ids().len(), 2);

    running.stop().await;
}

/// A round claims one event per schedule: a round that claimed less than a batch ends the
/// loop's drain, and the next begins a step later with no commit to wake it. A schedule's
/// later events follow its first without waiting for the safety poll.
pub async fn the_loop_relays_a_schedules_later_events_after_a_partial_round(store: Arc<dyn Store>) {
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let now = Utc::now();
    let schedule = create_schedule(&ops, env, "paused-and-resumed", now).await;
    ops.schedule_pause(env, schedule.id, &actor(now), None)
        .await
        .unwrap();
    ops.schedule_resume(env, schedule.id, &actor(now))
        .await
        .unwrap();
    let sink = Arc::new(ScriptedSink::default());
    // No commit after the loop starts.
    let running = RunningLoop::start(&store, sink.clone());

    let all_three = async {
        while sink.delivered_ids().len() < 3 {
            sink.published.notified().await;
        }
    };
    tokio::time::timeout(StdDuration::from_secs(10), all_three)
        .await
        .expect("the schedule's three events relayed, one round each");
    let stored = outbox(&store, &[env]).await;
    assert_eq!(
        sink.delivered_ids(),
        stored.iter().map(|e| e.id).collect::<Vec<_>>(),
        "in commit order"
    );
    running.stop().await;
}

/// Instantiates every relay-loop test for one backend.
#[macro_export]
macro_rules! relay_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::relay as suite;
            $crate::conformance_suite!(@tests $make;
                drain_relays_everything_in_schedule_order,
                refused_events_park_and_release_their_schedule,
                an_unreachable_bus_parks_nothing,
                an_outage_stops_the_round_and_releases_the_rest,
                publishes_start_only_while_the_lease_lasts,
                retention_deletes_old_relayed_events,
                the_loop_wakes_on_commit_and_stops_on_shutdown,
                the_loop_relays_a_schedules_later_events_after_a_partial_round,
            );
        }
    };
}
