//! What the engine counts, counted once: a lapsed lease that two instances find is one failure,
//! and an attempt's duration in the ledger is its call alone, not the wait for its record.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use chrono::Duration;
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{FaultyStore, Harness, cron};
use crate::support::t0;

/// Twenty attempts whose instance died (their leases ran out) are found by two instances at
/// once: each is recorded once, and the two instances' failure counts add up to twenty.
pub async fn a_lapsed_lease_found_by_two_instances_is_one_failure(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let mut orphans = Vec::new();
    let due = t0() + Duration::hours(1);
    for _ in 0..20 {
        let s = h.create(cron("0 * * * *", 3)).await;
        let orphan = h
            .claimed_elsewhere(
                &s,
                due,
                due + Duration::hours(1),
                NewJob {
                    started_at: Some(due),
                    lease_until: Some(due + Duration::seconds(15)),
                    ..NewJob::running(s.id, due, due)
                },
            )
            .await;
        h.mark_called(&orphan, due + Duration::seconds(15)).await;
        orphans.push(orphan.id);
    }
    let other = Engine::new(
        h.store.clone(),
        super::dispatcher(h.clock.clone(), StdDuration::from_secs(5)),
        h.clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    // Both instances find the lapsed leases in the same instant and race to record them.
    h.clock.set(due + Duration::seconds(16));
    let (a, b) = tokio::join!(h.engine.tick(), other.tick());
    let (a, b) = (a.unwrap(), b.unwrap());
    let failures = h.engine.metrics().failures.load(Ordering::Relaxed)
        + other.metrics().failures.load(Ordering::Relaxed);
    let retries = h.engine.metrics().retries.load(Ordering::Relaxed)
        + other.metrics().retries.load(Ordering::Relaxed);
    assert_eq!((failures, retries), (20, 20), "{a:?} {b:?}");
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    for id in orphans {
        let attempts = tx.job_attempts_list(id).await.unwrap();
        assert_eq!(attempts[0].error_class.as_deref(), Some("abandoned"));
    }
}

/// Moves the clock forward by the call's duration while the call runs, and says when it was
/// called.
struct TimedDispatcher {
    clock: Arc<ManualClock>,
    takes: Duration,
    called: Arc<Notify>,
}

#[async_trait]
impl Dispatcher for TimedDispatcher {
    async fn run(&self, _request: &RunRequest) -> Result<Value, DispatchError> {
        self.clock.advance(self.takes);
        self.called.notify_one();
        Ok(json!({"ok": true}))
    }
}

/// A 300 ms call whose record waits 8 s (the recorder's transactions are held up): the ledger
/// says 300 ms, the attempt ended when the call did, and its outcome was durable 8 s after the
/// answer.
pub async fn an_attempts_duration_is_its_call_alone(store: Arc<dyn Store>) {
    let h = Harness::new(store.clone()).await;
    let s = h.create(cron("*/5 * * * *", 0)).await;
    let due = s.next_run_at.unwrap();
    let faulty = FaultyStore::new(store);
    let called = Arc::new(Notify::new());
    let metrics = Arc::new(Metrics::default());
    let engine = Engine::new(
        faulty.clone(),
        Arc::new(TimedDispatcher {
            clock: h.clock.clone(),
            takes: Duration::milliseconds(300),
            called: called.clone(),
        }),
        h.clock.clone(),
        EngineConfig::default(),
        metrics.clone(),
    );
    h.clock.set(due);
    // The record and the answer written ahead of it both wait, so the 8 s pass before the
    // outcome is durable however the threads are scheduled.
    faulty.hold_tenant_transactions(true);
    faulty.hold_answers(true);
    let tick = engine.tick();
    tokio::pin!(tick);
    tokio::select! {
        _ = &mut tick => panic!("the tick ended while its record was held up"),
        () = called.notified() => {}
    }
    h.clock.advance(Duration::seconds(8));
    faulty.hold_answers(false);
    faulty.hold_tenant_transactions(false);
    let summary = tick.await.unwrap();
    assert_eq!(summary.succeeded, 1, "{summary:?}");

    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.status, JobStatus::Succeeded);
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let attempts = tx.job_attempts_list(job.id).await.unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].started_at, Some(due));
    assert_eq!(attempts[0].duration_ms, Some(300));
    assert_eq!(
        attempts[0].finished_at,
        due + Duration::milliseconds(300),
        "the attempt ended with its call"
    );
    assert!(h.clock.now() >= due + Duration::seconds(8));
    // The 8 s between the answer and its record are what a crash would have left to call
    // again: the outcome-durability histogram holds them.
    assert_eq!(metrics.outcome_durable.count(), 1);
    let text = metrics.render(None);
    assert!(
        text.contains("sentin8_cron_outcome_durable_seconds_bucket{le=\"5\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("sentin8_cron_outcome_durable_seconds_bucket{le=\"10\"} 1\n"),
        "{text}"
    );
}
