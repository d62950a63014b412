//! The event contract end to end: a lifecycle run that makes every event type sentin8-cron
//! emits, relayed to a real JetStream stream and read back by a standard NATS client
//! (nats-py), each message validated against the JSON Schema of its type as published in
//! `docs/events/` (`tests/fixtures/validate_events.py`), in the schedule's order.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::bus::NatsSink;
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::events;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::SchedulePatch;
use sentin8_cron::core::policies::Overlap;
use sentin8_cron::core::relay::Sink;
use sentin8_cron::core::retry::RetryPolicy;
use sentin8_cron::core::store::Store;
use serde_json::json;

use super::{Harness, cron};
use crate::raw_http::Reply;
use crate::relay::{options, outbox, relay};
use crate::support::{Needs, TestBus, nats_url, skip, t0};

fn minute(m: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(m)
}

fn python_has(modules: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|out| out.status.success())
}

pub async fn every_event_of_a_lifecycle_run_is_a_cloudevent_its_schema_accepts(
    store: Arc<dyn Store>,
) {
    if !python_has("nats, jsonschema, rfc3339_validator") {
        skip(
            Needs::ApiTools,
            "python3 with nats-py, jsonschema and rfc3339-validator is not installed",
        );
        return;
    }
    let Some(bus) = TestBus::create().await else {
        return;
    };
    // Retries come 150 s later: an open job outlasts the next fires.
    let config = EngineConfig {
        retry: RetryPolicy {
            base: StdDuration::from_secs(150),
            cap: StdDuration::from_secs(150),
        },
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store.clone(), config).await;
    let (env, ops) = (h.env, &h.ops);

    // A: every minute, buffer_one, one retry. Patched, paused with a note, resumed, triggered.
    let a = h
        .create(ScheduleDecl {
            overlap: Some(Overlap::BufferOne),
            ..cron("* * * * *", 1)
        })
        .await;
    let patch = SchedulePatch {
        payload: Some(json!({"report": "weekly"})),
        ..SchedulePatch::default()
    };
    ops.schedule_patch(env, a.id, patch, &h.actor())
        .await
        .unwrap();
    ops.schedule_pause(env, a.id, &h.actor(), Some("month-end freeze"))
        .await
        .unwrap();
    ops.schedule_resume(env, a.id, &h.actor()).await.unwrap();
    ops.schedule_trigger(env, a.id, &h.actor()).await.unwrap();
    assert_eq!(h.tick_at(t0()).await.succeeded, 1);
    // Its 00:01 fire fails (a retry at 00:03:30); 00:02 is buffered, 00:03 skipped; the retry
    // fails too and dead-letters, and the buffered 00:02 then runs.
    h.reply([Reply::status(500), Reply::status(500)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 1);
    assert_eq!(h.tick_at(minute(2)).await.buffered, 1);
    assert_eq!(h.tick_at(minute(3)).await.skipped, 1);
    h.tick_at(minute(3) + Duration::seconds(30)).await;
    h.engine.tick().await.unwrap();
    let dead = h.dlq().await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    // Republished, it runs again and succeeds; a backfill of one past occurrence runs too.
    ops.dlq_republish(env, dead[0].id, &h.actor())
        .await
        .unwrap();
    h.engine.tick().await.unwrap();
    ops.schedule_backfill(env, a.id, (minute(1), minute(1)), None, &h.actor())
        .await
        .unwrap();
    for _ in 0..3 {
        h.engine.tick().await.unwrap();
    }
    ops.schedule_delete(env, a.id, &h.actor()).await.unwrap();

    // B: pauses on failure, no retries; its dead letter is discarded.
    let b = h
        .create(ScheduleDecl {
            pause_on_failure: Some(true),
            ..cron("* * * * *", 0)
        })
        .await;
    h.reply([Reply::status(500)]);
    h.tick_at(minute(4)).await;
    assert_eq!(h.schedule(b.id).await.status, ScheduleStatus::Paused);
    let dead = h.dlq().await;
    let entry = dead
        .iter()
        .find(|d| d.schedule_id == b.id)
        .expect("B's dead letter");
    ops.dlq_discard(env, entry.id, &h.actor()).await.unwrap();

    // C: a one-shot, done when its job ends; D: one run, done as it is called.
    let c = h
        .create(ScheduleDecl {
            schedule_type: "once".into(),
            run_at: Some(minute(5).to_rfc3339()),
            ..ScheduleDecl::default()
        })
        .await;
    let d = h
        .create(ScheduleDecl {
            remaining_runs: Some(1),
            ..cron("*/5 * * * *", 0)
        })
        .await;
    h.tick_at(minute(5)).await;
    h.engine.tick().await.unwrap();
    for id in [c.id, d.id] {
        assert_eq!(h.schedule(id).await.status, ScheduleStatus::Completed);
    }

    // E: cancel_other; its 00:06 fire fails and waits for a retry, which 00:07 cancels.
    h.create(ScheduleDecl {
        overlap: Some(Overlap::CancelOther),
        ..cron("* * * * *", 1)
    })
    .await;
    h.reply([Reply::status(500)]);
    h.tick_at(minute(6)).await;
    assert_eq!(h.tick_at(minute(7)).await.cancelled, 1);

    let written = outbox(&store, &[env]).await;
    let types: BTreeSet<&str> = written.iter().map(|e| e.event_type.as_str()).collect();
    let all: BTreeSet<&str> = events::ALL.iter().copied().collect();
    assert_eq!(types, all, "the run makes every type");

    let sink: Arc<dyn Sink> = Arc::new(NatsSink::connect(bus.settings()).await.expect("connects"));
    let summary = relay(&store, sink, h.clock.clone(), options("contract"))
        .drain_once()
        .await
        .unwrap();
    assert_eq!(summary.relayed as usize, written.len(), "{summary:?}");

    let schemas = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/events");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/validate_events.py"
    );
    let run = tokio::process::Command::new("python3")
        .arg(script)
        .arg(nats_url())
        .arg(&bus.stream)
        .arg(&bus.prefix)
        .arg(schemas)
        .arg(written.len().to_string())
        .kill_on_drop(true)
        .output();
    let run = tokio::time::timeout(StdDuration::from_secs(60), run)
        .await
        .expect("the validation ended in time")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains(&format!("validated: {}", written.len())),
        "the events do not all validate:\n{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Each schedule's events came in the order they were written.
    let mut read: HashMap<String, Vec<String>> = HashMap::new();
    for line in stdout.lines().filter(|l| l.starts_with('[')) {
        let [_, id, _, subject]: [serde_json::Value; 4] = serde_json::from_str(line).unwrap();
        read.entry(subject.as_str().unwrap().to_owned())
            .or_default()
            .push(id.as_str().unwrap().to_owned());
    }
    let mut expected: HashMap<String, Vec<String>> = HashMap::new();
    for event in &written {
        expected
            .entry(format!("schedules/{}", event.schedule_id.unwrap()))
            .or_default()
            .push(event.id.to_string());
    }
    assert_eq!(read, expected);

    // What the events say, beyond their shape.
    let data = |t: &str| -> Vec<serde_json::Value> {
        written
            .iter()
            .filter(|e| e.event_type == t)
            .map(|e| e.payload.clone())
            .collect()
    };
    let updated = data(events::SCHEDULE_UPDATED);
    assert_eq!(
        updated[0]["changes"],
        json!({"payload": {"before": {"report": "daily"}, "after": {"report": "weekly"}}})
    );
    let completed = data(events::SCHEDULE_COMPLETED);
    let reasons: BTreeSet<&str> = completed
        .iter()
        .map(|p| p["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        BTreeSet::from([
            "its one-shot job ended",
            "its last run was called (remaining_runs reached 0)"
        ])
    );
    let paused = data(events::SCHEDULE_PAUSED);
    assert_eq!(paused[0]["reason"], "month-end freeze");
    assert!(
        paused[1]["reason"]
            .as_str()
            .unwrap()
            .starts_with("paused on failure"),
        "{}",
        paused[1]
    );
}
