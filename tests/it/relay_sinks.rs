//! The relay's real sinks: the webhook sink against a raw HTTP listener, and the NATS JetStream
//! sink against a real server (with PostgreSQL): subjects, message ids, payloads, outages, racing
//! relays and per-schedule order as seen on the stream.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{Duration, Utc};
use hmac::{Hmac, Mac};
use sentin8_cron::bus::{NatsSink, SigningKey, WebhookSink, subject_for};
use sentin8_cron::core::clock::{Clock, ManualClock, SystemClock};
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::Ops;
use sentin8_cron::core::relay::{Delivery, EventEnvelope, Relay, RelaySummary, Sink, SinkError};
use sentin8_cron::core::store::*;
use sentin8_cron::store::ConnectOptions;
use sentin8_cron::store::postgres::PgStore;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::conformance::insert_event;
use crate::raw_http::{RawServer, Reply};
use crate::support::{PgTestDb, TestBus};

use crate::relay::{actor, by_schedule, create_schedule, options, outbox, relay};

mod stream_order;

// ---------------------------------------------------------------------------------------------
// The webhook sink

/// Verifies a Standard Webhooks signature the way a receiver would: recompute
/// HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}") and compare it with any of the
/// space-separated `v1,<base64>` signatures.
fn verify_webhook(secret: &str, id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ secret"))
        .expect("base64 secret");
    let mut signed = format!("{id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
    mac.update(&signed);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    header
        .split(' ')
        .filter_map(|sig| sig.strip_prefix("v1,"))
        .any(|sig| sig == expected)
}

#[tokio::test]
async fn webhook_deliveries_are_signed_in_the_standard_webhooks_format() {
    let server = RawServer::start(|_| Reply::status(204)).await;
    let store = crate::support::sqlite_store().await;
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let now = Utc::now();
    let schedule = create_schedule(&ops, env, "nightly", now).await;
    ops.schedule_pause(env, schedule.id, &actor(now), None)
        .await
        .unwrap();

    let secret = format!(
        "whsec_{}",
        STANDARD.encode(b"a webhook signing key, 32 bytes!")
    );
    let clock = Arc::new(ManualClock::new(now));
    let url = format!("{}/hooks/sentin8", server.url()).parse().unwrap();
    let sink = WebhookSink::new(
        url,
        Some(SigningKey::parse(&secret).unwrap()),
        clock.clone(),
    )
    .unwrap();
    let relay = relay(&store, Arc::new(sink), clock, options("r1"));
    let summary = relay.drain_once().await.unwrap();
    assert_eq!(summary.relayed, 2, "{summary:?}");
    assert_eq!(summary.rounds, 3, "one event of the schedule per round");

    let requests = server.requests();
    let events = outbox(&store, &[env]).await;
    assert_eq!(requests.len(), 2);
    for (request, event) in requests.iter().zip(&events) {
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/hooks/sentin8");
        assert_eq!(
            request.header("content-type"),
            Some("application/cloudevents+json; charset=utf-8")
        );
        let id = request.header("webhook-id").expect("webhook-id");
        assert_eq!(id, event.id.to_string());
        let timestamp = request.header("webhook-timestamp").expect("timestamp");
        assert_eq!(timestamp, now.timestamp().to_string());
        let signature = request.header("webhook-signature").expect("signature");
        assert!(
            verify_webhook(&secret, id, timestamp, &request.body, signature),
            "signature {signature} verifies"
        );
        // Tampering with anything signed breaks it.
        assert!(!verify_webhook(
            &secret,
            id,
            &(now.timestamp() + 1).to_string(),
            &request.body,
            signature
        ));
        let body = request.json();
        assert_eq!(body["id"], id);
        assert_eq!(body["type"], event.event_type);
        assert_eq!(body["source"], format!("/sentin8-cron/envs/{env}"));
        assert_eq!(body["subject"], format!("schedules/{}", schedule.id));
        assert_eq!(body["data"], event.payload);
    }
    assert_eq!(
        requests[0].json()["type"],
        "io.sentin8.cron.schedule.created.v1"
    );
    assert_eq!(
        requests[1].json()["type"],
        "io.sentin8.cron.schedule.paused.v1"
    );
}

#[tokio::test]
async fn webhook_answers_map_to_acknowledgements_refusals_and_outages() {
    let server =
        RawServer::start(
            |request| match request.json()["data"]["label"].as_str().unwrap_or("") {
                "ok" => Reply::status(200),
                "throttled" => Reply::status(429),
                "broken" => Reply::status(503),
                "moved" => Reply::status(308).with_header("location", "http://127.0.0.1:9/"),
                _ => Reply::status(400),
            },
        )
        .await;
    let url = format!("{}/hook", server.url()).parse().unwrap();
    let sink = WebhookSink::new(url, None, Arc::new(SystemClock)).unwrap();
    let event = |label: &str| OutboxEvent {
        seq: 1,
        id: EventId::new(),
        env_id: EnvId::new(),
        schedule_id: None,
        event_type: "io.sentin8.cron.schedule.created.v1".into(),
        payload: json!({"label": label}),
        created_at: Utc::now(),
        relayed_at: None,
        attempts: 0,
        last_error: None,
        parked_at: None,
    };
    assert_eq!(sink.publish(&event("ok")).await, Ok(Delivery::default()));
    for label in ["throttled", "broken"] {
        let err = sink.publish(&event(label)).await.unwrap_err();
        assert!(!err.parkable(), "{label}: {err}");
    }
    for label in ["moved", "bad"] {
        let err = sink.publish(&event(label)).await.unwrap_err();
        assert!(err.parkable(), "{label}: {err}");
    }
    // Unsigned without a key; the redirect was not followed.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.header("webhook-signature").is_none())
    );
    assert_eq!(server.requests().len(), 5);

    let dead = format!("http://{}/hook", dead_address().await)
        .parse()
        .unwrap();
    let sink = WebhookSink::new(dead, None, Arc::new(SystemClock)).unwrap();
    let err = sink.publish(&event("ok")).await.unwrap_err();
    assert!(matches!(err, SinkError::Unavailable(_)), "{err:?}");
}

/// A loopback address nobody listens on.
async fn dead_address() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

// ---------------------------------------------------------------------------------------------
// NATS JetStream, with PostgreSQL

async fn pg_and_bus() -> Option<(PgTestDb, TestBus)> {
    let bus = TestBus::create().await?;
    let db = PgTestDb::create().await?;
    Some((db, bus))
}

fn header<'a>(message: &'a async_nats::jetstream::message::StreamMessage, name: &str) -> &'a str {
    message
        .headers
        .get(name)
        .map(|v| v.as_str())
        .unwrap_or_default()
}

fn body(message: &async_nats::jetstream::message::StreamMessage) -> Value {
    serde_json::from_slice(&message.payload).expect("message body is JSON")
}

#[tokio::test]
async fn events_from_operations_arrive_on_jetstream() {
    let Some((db, bus)) = pg_and_bus().await else {
        return;
    };
    let store = db.dyn_store();
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let now = Utc::now();
    let s1 = create_schedule(&ops, env, "nightly", now).await;
    ops.schedule_pause(env, s1.id, &actor(now), None)
        .await
        .unwrap();
    ops.schedule_resume(env, s1.id, &actor(now)).await.unwrap();
    let s2 = create_schedule(&ops, env, "hourly", now).await;
    ops.schedule_delete(env, s2.id, &actor(now)).await.unwrap();

    let sink = Arc::new(NatsSink::connect(bus.settings()).await.expect("connects"));
    let relay = relay(&store, sink, Arc::new(SystemClock), options("r1"));
    let summary = relay.drain_once().await.unwrap();
    assert_eq!((summary.relayed, summary.failed), (5, 0), "{summary:?}");

    let events = outbox(&store, &[env]).await;
    let messages = bus.messages().await;
    assert_eq!(messages.len(), 5);
    let by_id: HashMap<String, _> = messages
        .iter()
        .map(|m| (header(m, "Nats-Msg-Id").to_owned(), m))
        .collect();
    for event in &events {
        let message = by_id[&event.id.to_string()];
        let suffix = event.event_type.trim_start_matches("io.sentin8.cron.");
        assert_eq!(message.subject.as_str(), format!("{}.{suffix}", bus.prefix));
        assert_eq!(
            message.subject.as_str(),
            subject_for(&bus.prefix, &event.event_type)
        );
        let envelope: EventEnvelope = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(envelope, EventEnvelope::of(event));
    }
    let subjects: Vec<&str> = messages.iter().map(|m| m.subject.as_str()).collect();
    let expect = |s: &str| format!("{}.schedule.{s}.v1", bus.prefix);
    assert_eq!(
        subjects.iter().filter(|s| **s == expect("created")).count(),
        2
    );
    let paused = messages
        .iter()
        .find(|m| m.subject.as_str() == expect("paused"))
        .expect("paused event");
    let paused = body(paused);
    assert_eq!(paused["type"], "io.sentin8.cron.schedule.paused.v1");
    assert_eq!(paused["specversion"], "1.0");
    assert_eq!(paused["source"], format!("/sentin8-cron/envs/{env}"));
    assert_eq!(paused["subject"], format!("schedules/{}", s1.id));
    assert_eq!(paused["data"]["env_id"], env.to_string());
    assert_eq!(paused["data"]["status"], "paused");
    assert_eq!(paused["data"]["schedule_type"], "nightly");
    assert_eq!(paused["data"]["actor"], "tester@example.com");
    assert_eq!(
        paused["data"]["changes"]["status"],
        serde_json::json!({"before": "active", "after": "paused"})
    );
    assert_eq!(
        header(
            messages
                .iter()
                .find(|m| m.subject.as_str() == expect("paused"))
                .unwrap(),
            "content-type"
        ),
        "application/cloudevents+json; charset=utf-8"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.subject.as_str() == expect("deleted"))
    );
    // The stream was created with the documented subjects, and keeps events for a bounded
    // time (7 days unless told otherwise), not for ever.
    let mut stream = bus.js.get_stream(&bus.stream).await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.config.subjects, [format!("{}.>", bus.prefix)]);
    assert_eq!(
        info.config.max_age,
        std::time::Duration::from_secs(7 * 24 * 3600)
    );
}

#[tokio::test]
async fn an_outage_delays_events_but_delivers_each_exactly_once() {
    let Some((db, bus)) = pg_and_bus().await else {
        return;
    };
    let store = db.dyn_store();
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let mut schedules = Vec::new();
    for i in 0..3 {
        schedules.push(create_schedule(&ops, env, &format!("s{i}"), clock.now()).await);
    }

    // The bus is down: a dead port.
    let mut down_settings = bus.settings();
    down_settings.url = format!("nats://{}", dead_address().await);
    down_settings.connect_timeout = StdDuration::from_secs(2);
    let down = relay(
        &store,
        Arc::new(NatsSink::new(down_settings)),
        clock.clone(),
        options("r-down"),
    );
    let summary = down.drain_once().await.unwrap();
    assert_eq!((summary.relayed, summary.failed, summary.parked), (0, 3, 0));
    assert!(summary.bus_unavailable);
    // Events keep being produced during the outage.
    for schedule in &schedules {
        ops.schedule_pause(env, schedule.id, &actor(clock.now()), None)
            .await
            .unwrap();
    }
    insert_event(&store, env, None, "loose").await;
    clock.advance(Duration::seconds(3));
    let summary = down.drain_once().await.unwrap();
    assert_eq!((summary.relayed, summary.parked), (0, 0));
    assert!(summary.failed > 0);

    // The bus is back.
    clock.advance(Duration::seconds(3));
    let sink = Arc::new(NatsSink::new(bus.settings()));
    let up = relay(&store, sink.clone(), clock.clone(), options("r-up"));
    let mut relayed = 0;
    loop {
        let summary = up.drain_once().await.unwrap();
        assert_eq!(summary.failed, 0, "{summary:?}");
        relayed += summary.relayed;
        if summary.claimed == 0 {
            break;
        }
    }
    assert_eq!(relayed, 7);
    let stats = store.stats_get().await.unwrap();
    assert_eq!((stats.outbox_unrelayed, stats.outbox_parked), (0, 0));

    let events = outbox(&store, &[env]).await;
    let messages = bus.messages().await;
    let ids: Vec<String> = messages
        .iter()
        .map(|m| header(m, "Nats-Msg-Id").to_owned())
        .collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(ids.len(), 7);
    assert_eq!(unique.len(), 7);
    for event in &events {
        assert!(unique.contains(&event.id.to_string()));
    }
    // The three creations and the loose event were tried during the outage; the pauses
    // waited behind the creations.
    assert_eq!(events.iter().filter(|e| e.attempts > 0).count(), 4);

    // A re-send of an acknowledged event (a relay that died before recording the ack) is
    // dropped by the stream's duplicate window.
    let again = sink.publish(&events[0]).await.expect("acknowledged");
    assert!(again.duplicate);
    assert_eq!(bus.messages().await.len(), 7);
}

/// Publishes through `inner`, recording every publish and any overlap of two publishes of the
/// same event.
struct WatchingSink {
    inner: NatsSink,
    in_flight: Arc<Mutex<HashSet<EventId>>>,
    publishes: Arc<Mutex<HashMap<EventId, u32>>>,
    overlaps: Arc<Mutex<Vec<EventId>>>,
}

#[async_trait]
impl Sink for WatchingSink {
    fn kind(&self) -> &'static str {
        "watching"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        if !self.in_flight.lock().unwrap().insert(event.id) {
            self.overlaps.lock().unwrap().push(event.id);
        }
        *self.publishes.lock().unwrap().entry(event.id).or_default() += 1;
        let result = self.inner.publish(event).await;
        self.in_flight.lock().unwrap().remove(&event.id);
        result
    }
}

/// Two relays, each with its own store connection pool and bus connection (as two processes
/// would have), sharing the watch lists.
async fn two_relays(
    db: &PgTestDb,
    bus: &TestBus,
) -> (
    Relay,
    Relay,
    Arc<Mutex<HashMap<EventId, u32>>>,
    Arc<Mutex<Vec<EventId>>>,
) {
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let publishes = Arc::new(Mutex::new(HashMap::new()));
    let overlaps = Arc::new(Mutex::new(Vec::new()));
    let mut relays = Vec::new();
    for name in ["r-a", "r-b"] {
        let store: Arc<dyn Store> = Arc::new(
            PgStore::connect(&db.service_url, &ConnectOptions::default())
                .await
                .unwrap(),
        );
        let sink = WatchingSink {
            inner: NatsSink::new(bus.settings()),
            in_flight: in_flight.clone(),
            publishes: publishes.clone(),
            overlaps: overlaps.clone(),
        };
        let mut opts = options(name);
        opts.batch_size = 16;
        opts.concurrency = 8;
        opts.poll_interval = StdDuration::from_millis(200);
        relays.push(relay(&store, Arc::new(sink), Arc::new(SystemClock), opts));
    }
    let b = relays.pop().unwrap();
    let a = relays.pop().unwrap();
    (a, b, publishes, overlaps)
}

/// Checks the stream: every event exactly once, and each schedule's events in seq order.
async fn assert_stream_matches_outbox(bus: &TestBus, events: &[OutboxEvent]) {
    let messages = bus.messages().await;
    let ids: Vec<EventId> = messages
        .iter()
        .map(|m| {
            header(m, "Nats-Msg-Id")
                .parse()
                .expect("msg id is an event id")
        })
        .collect();
    let unique: HashSet<&EventId> = ids.iter().collect();
    assert_eq!(ids.len(), events.len(), "one message per event");
    assert_eq!(unique.len(), events.len());
    let schedules: HashMap<EventId, Option<ScheduleId>> =
        events.iter().map(|e| (e.id, e.schedule_id)).collect();
    let want = by_schedule(events.iter().map(|e| (e.schedule_id, e.id)));
    let got = by_schedule(ids.iter().map(|id| (schedules[id], *id)));
    assert_eq!(got.len(), want.len());
    for (schedule, order) in &want {
        assert_eq!(&got[schedule], order, "order of schedule {schedule}");
    }
}

#[tokio::test]
async fn two_racing_relays_publish_each_event_exactly_once() {
    let Some((db, bus)) = pg_and_bus().await else {
        return;
    };
    let store = db.dyn_store();
    let envs = [EnvId::new(), EnvId::new()];
    let schedules: Vec<(EnvId, ScheduleId)> =
        (0..30).map(|i| (envs[i % 2], ScheduleId::new())).collect();
    // Interleaved: 30 schedules x 8 events, plus a loose event every so often.
    for round in 0..8 {
        for (i, (env, schedule)) in schedules.iter().enumerate() {
            insert_event(&store, *env, Some(*schedule), &format!("{round}")).await;
            if i % 10 == 0 {
                insert_event(&store, *env, None, "loose").await;
            }
        }
    }
    let events = outbox(&store, &envs).await;
    assert_eq!(events.len(), 264);

    let (a, b, publishes, overlaps) = two_relays(&db, &bus).await;
    let mut totals = (RelaySummary::default(), RelaySummary::default());
    for _ in 0..1000 {
        let (ra, rb) = tokio::join!(a.drain_once(), b.drain_once());
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        totals.0.relayed += ra.relayed;
        totals.1.relayed += rb.relayed;
        assert_eq!(ra.failed + rb.failed, 0);
        if ra.claimed + rb.claimed == 0 && store.stats_get().await.unwrap().outbox_unrelayed == 0 {
            break;
        }
    }
    assert_eq!(totals.0.relayed + totals.1.relayed, 264);
    assert!(
        totals.0.relayed > 0 && totals.1.relayed > 0,
        "both relays took part: {} / {}",
        totals.0.relayed,
        totals.1.relayed
    );
    assert!(overlaps.lock().unwrap().is_empty(), "no concurrent publish");
    let publishes = publishes.lock().unwrap().clone();
    assert_eq!(publishes.len(), 264);
    assert!(publishes.values().all(|n| *n == 1), "each published once");
    assert_stream_matches_outbox(&bus, &events).await;
}
