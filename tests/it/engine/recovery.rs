//! Timeouts, stale attempts, the drain of triggered runs, and dry runs.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::{Harness, cron};
use crate::raw_http::Reply;
use crate::support::t0;

pub async fn timeouts_are_failed_attempts(store: Arc<dyn Store>) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_millis(300),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let s = h.create(cron("*/5 * * * *", 1)).await;
    h.reply([Reply::Hang]);
    let summary = h.tick_at(t0() + Duration::minutes(5)).await;
    assert_eq!((summary.failed, summary.retried), (1, 1));
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.status, JobStatus::Pending);
    assert!(
        job.error.as_deref().unwrap().contains("timed out"),
        "{:?}",
        job.error
    );
}

pub async fn stale_attempts_are_recovered_as_failures(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("0 0 * * *", 2)).await;
    // A process claimed the fire and died before recording an outcome.
    let due = s.next_run_at.unwrap();
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    tx.schedule_claim(&ScheduleClaim {
        id: s.id,
        expected_next_run_at: due,
        next_run_at: Some(due + Duration::days(1)),
        now: due,
    })
    .await
    .unwrap()
    .unwrap();
    let orphan = tx
        .job_insert(&NewJob {
            id: JobId::new(),
            schedule_id: s.id,
            status: JobStatus::Running,
            attempt: 1,
            scheduled_for: due,
            next_attempt_at: None,
            started_at: Some(due),
            finished_at: None,
            error: None,
            now: due,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let stale_after = h.engine.config().stale_after;
    let fresh = h.tick_at(due + Duration::seconds(10)).await;
    assert_eq!(fresh.retried, 0, "a live attempt is left alone");
    let later = due + Duration::from_std(stale_after).unwrap() + Duration::seconds(1);
    let recovered = h.tick_at(later).await;
    assert_eq!(recovered.retried, 1);
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.id, orphan.id);
    assert_eq!(job.status, JobStatus::Pending);
    assert!(job.error.as_deref().unwrap().contains("attempt abandoned"));
    // The retry then runs through the target.
    let run = h.tick_at(job.next_attempt_at.unwrap()).await;
    assert_eq!(run.succeeded, 1);
    assert_eq!(h.target.requests()[0].json()["attempt"], 2);
}

pub async fn triggers_and_republishes_run_through_the_drain(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("0 0 1 1 *", 0)).await;
    let job = h
        .ops
        .schedule_trigger(h.env, s.id, &h.actor())
        .await
        .unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    let second = h
        .ops
        .schedule_trigger(h.env, s.id, &h.actor())
        .await
        .unwrap_err();
    assert!(second.to_string().contains("open job"), "{second}");

    h.reply([Reply::status(500)]);
    let summary = h.tick_at(h.now()).await;
    assert_eq!((summary.retried_attempts, summary.dead_lettered), (1, 1));
    let entry = h.dlq().await.remove(0);

    let republished = h
        .ops
        .dlq_republish(h.env, entry.id, &h.actor())
        .await
        .unwrap();
    assert_eq!(republished.status, JobStatus::Pending);
    assert!(
        h.dlq().await.is_empty(),
        "the entry is removed with the republish"
    );
    let summary = h.tick_at(h.now()).await;
    assert_eq!(summary.succeeded, 1);
    let events = h.event_types().await;
    assert!(
        events.contains(&"sentin8:cron:dlq:republished".to_owned()),
        "{events:?}"
    );
    assert_eq!(h.target.requests().len(), 2);
}

pub async fn dry_run_plans_without_firing(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    h.clock.set(t0() + Duration::minutes(5));
    let plan = h.engine.plan().await.unwrap();
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].schedule_id, s.id);
    assert_eq!(plan[0].schedule_type, s.schedule_type);
    assert!(!plan[0].would_skip);
    assert!(h.target.requests().is_empty());
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        s.next_run_at,
        "nothing changed"
    );
}
