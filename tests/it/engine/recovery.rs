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
    let orphan = h
        .claimed_elsewhere(
            &s,
            due,
            due + Duration::days(1),
            NewJob {
                lease_until: Some(due + Duration::seconds(15)),
                ..NewJob::running(s.id, due, due)
            },
        )
        .await;
    h.mark_called(&orphan, due + Duration::seconds(15)).await;

    // Its lease (15 s) is not renewed by anyone: it is recovered once the lease ran out,
    // within the job timeout and a few seconds, and its retry is due at once.
    let fresh = h.tick_at(due + Duration::seconds(10)).await;
    assert_eq!(fresh.retried, 0, "a live attempt is left alone");
    let later = due + Duration::seconds(16);
    let recovered = h.tick_at(later).await;
    assert_eq!(recovered.retried, 1);
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.id, orphan.id);
    assert_eq!(job.status, JobStatus::Pending);
    assert!(job.error.as_deref().unwrap().contains("attempt abandoned"));
    assert_eq!(job.next_attempt_at, Some(later));
    // The retry then runs through the target, long before the schedule's next fire.
    let run = h.tick_at(later).await;
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
        events.contains(&"io.sentin8.cron.dlq.republished.v1".to_owned()),
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

/// An instance dies mid-call before any renewal told the store its call had started: once
/// its (short) lease ran out another instance releases the attempt, which runs again as the
/// same attempt with the same key, not as a failed one.
/// A harness whose engine has a 30 s job timeout and `lease`, with a schedule due now whose
/// call will hang.
async fn due_with_a_hanging_call(
    store: Arc<dyn Store>,
    lease: StdDuration,
) -> (
    Harness,
    EngineConfig,
    Schedule,
    chrono::DateTime<chrono::Utc>,
) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(30),
        lease,
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config.clone()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.reply([Reply::Hang]);
    h.clock.set(due);
    (h, config, s, due)
}

pub async fn a_killed_instances_attempt_is_recovered_within_its_lease(store: Arc<dyn Store>) {
    let (h, config, s, due) = due_with_a_hanging_call(store, StdDuration::from_secs(2)).await;
    // The instance dies mid-call: its tick is dropped while the call hangs, so the attempt
    // is never recorded and its lease never renewed.
    let killed = tokio::select! {
        _ = h.engine.tick() => false,
        () = h.target.arrived(1) => true,
    };
    assert!(
        killed,
        "the call was still in flight when the instance died"
    );
    let running = h.jobs(s.id).await.remove(0);
    assert_eq!(running.status, JobStatus::Running);
    assert_eq!(running.called_at, None, "no renewal marked the call");

    // Another instance takes it over once the lease ran out: seconds, not the job timeout.
    let other = h.another_instance(config.clone());
    let lease = Duration::from_std(config.lease).unwrap();
    h.clock.set(due + lease - Duration::milliseconds(500));
    other.tick().await.unwrap();
    assert_eq!(h.target.requests().len(), 1, "still leased");
    let recovered_at = due + lease + Duration::milliseconds(1);
    h.clock.set(recovered_at);
    other.tick().await.unwrap();
    let mut job = h.jobs(s.id).await.remove(0);
    if job.status == JobStatus::Pending {
        other.tick().await.unwrap();
        job = h.jobs(s.id).await.remove(0);
    }
    assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
    assert_eq!(job.attempt, 1, "released, not a failed attempt");
    let calls = h.target.requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[0].header("idempotency-key"),
        calls[1].header("idempotency-key"),
        "the same occurrence, the same key"
    );
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let attempts = tx.job_attempts_list(job.id).await.unwrap();
    drop(tx);
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].outcome, AttemptOutcome::Succeeded);
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        Some(due + Duration::minutes(5))
    );
}

/// An instance dies mid-call after a renewal told the store its call had started: the attempt
/// may have reached the service, so it is recorded as a failed attempt and retried at once.
pub async fn a_killed_instances_started_call_is_a_failed_attempt(store: Arc<dyn Store>) {
    let (h, config, s, due) = due_with_a_hanging_call(store, StdDuration::from_secs(3)).await;
    let job_id = || async { h.jobs(s.id).await.first().map(|j| j.id) };
    let killed = tokio::select! {
        _ = h.engine.tick() => false,
        () = async {
            h.target.arrived(1).await;
            // The lease runs low: the renewal marks the call started.
            h.clock.set(due + Duration::seconds(2));
            super::settled_beside_calls_until(&h.engine, "the renewal marks the call", || async {
                let Some(id) = job_id().await else { return false };
                let mut tx = h.store.tenant_begin(h.env).await.unwrap();
                let job = tx.job_get(id).await.unwrap().unwrap();
                job.called_at.is_some()
            })
            .await;
        } => true,
    };
    assert!(killed, "the call was in flight when the instance died");
    let other = h.another_instance(config.clone());
    h.clock.set(
        due + Duration::seconds(2)
            + Duration::from_std(config.lease).unwrap()
            + Duration::milliseconds(1),
    );
    let recovered = other.tick().await.unwrap();
    assert_eq!(recovered.retried_attempts, 1, "{recovered:?}");
    let mut job = h.jobs(s.id).await.remove(0);
    if job.status == JobStatus::Pending {
        other.tick().await.unwrap();
        job = h.jobs(s.id).await.remove(0);
    }
    assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
    assert_eq!(job.attempt, 2);
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let attempts = tx.job_attempts_list(job.id).await.unwrap();
    drop(tx);
    assert_eq!(attempts[0].error_class.as_deref(), Some("abandoned"));
}

/// Waits until the schedule's running attempt is leased past the clock's present again: its
/// instance renewed it once the clock moved past the lease.
async fn renewed(h: &Harness, id: ScheduleId) {
    let job = h.jobs(id).await[0].id;
    super::settled_beside_calls_until(&h.engine, "the lease is renewed past the clock", || async {
        let now = h.now();
        let lapsed = h.store.jobs_due(now, now, 100).await.unwrap();
        !lapsed.iter().any(|d| d.id == job)
    })
    .await;
}

pub async fn the_serve_loop_renews_leases_while_a_call_is_in_flight(store: Arc<dyn Store>) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(2),
        lease: StdDuration::from_secs(1),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config.clone()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.reply([Reply::Hang]);
    h.clock.set(due);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = h.engine.run(async {
        let _ = stopped.await;
    });
    let other = h.another_instance(config.clone());
    let probe = async {
        h.target.arrived(1).await;
        assert_eq!(h.target.requests().len(), 1, "the call is in flight");
        // The clock passes the first lease (not the call's 2 s timeout): the renewal, on the
        // same clock, is due and runs (no wall-clock wait for a third of a lease).
        h.clock.set(due + Duration::milliseconds(1500));
        renewed(&h, s.id).await;
        let summary = other.tick().await.unwrap();
        assert_eq!(
            summary.retried_attempts, 0,
            "another instance leaves a renewed attempt alone: {summary:?}"
        );
        let _ = stop.send(());
    };
    tokio::join!(serving, probe);
    // Stopping let the call in flight finish (its timeout) and recorded it, once.
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].status, JobStatus::Pending);
    assert!(jobs[0].error.as_deref().unwrap().contains("timed out"));
    assert_eq!(h.target.requests().len(), 1);
}

pub async fn a_single_tick_renews_leases_while_a_call_is_in_flight(store: Arc<dyn Store>) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(2),
        lease: StdDuration::from_secs(1),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config.clone()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.reply([Reply::Hang]);
    h.clock.set(due);
    let other = h.another_instance(config.clone());
    let probe = async {
        h.target.arrived(1).await;
        assert_eq!(h.target.requests().len(), 1, "the call is in flight");
        // The clock passes the first lease (not the call's timeout); `tick --once` renews it
        // like the loop does.
        h.clock.set(due + Duration::milliseconds(1500));
        renewed(&h, s.id).await;
        other.tick().await.unwrap()
    };
    let (tick, summary) = tokio::join!(h.engine.tick(), probe);
    assert_eq!(
        summary.retried_attempts, 0,
        "another instance leaves a renewed attempt alone: {summary:?}"
    );
    assert_eq!(tick.unwrap().failed, 1);
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 1);
    assert!(jobs[0].error.as_deref().unwrap().contains("timed out"));
    assert_eq!(h.target.requests().len(), 1);
}

/// An instance dies after its call was answered and before the outcome's record (records wait
/// while a burst's calls go out): the answer was written ahead, so the instance that recovers
/// the attempt records it as the success it was, and the service is not called again.
pub async fn an_answer_outlives_an_instance_killed_before_its_record(store: Arc<dyn Store>) {
    use serde_json::json;

    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(1),
        lease: StdDuration::from_secs(2),
        ..EngineConfig::default()
    };
    let faulty = super::FaultyStore::new(store.clone());
    let h = Harness::with_config(faulty.clone(), config.clone()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.reply([Reply::After(
        StdDuration::from_millis(200),
        Box::new(Reply::json(200, json!({"answer": 42}))),
    )]);
    h.clock.set(due);
    // The answer written ahead, read past the held transactions.
    let written_ahead = || {
        let store = store.clone();
        let env = h.env;
        async move {
            let mut tx = store.tenant_begin(env).await.unwrap();
            let jobs = tx
                .job_list(&JobQuery {
                    limit: 10,
                    ..Default::default()
                })
                .await
                .unwrap();
            match jobs.first() {
                Some(job) => tx.job_answer_get(job.id, job.attempt).await.unwrap(),
                None => None,
            }
        }
    };
    // The instance dies once the answer is written and its record is held up.
    let killed = tokio::select! {
        _ = h.engine.tick() => false,
        () = async {
            h.target.arrived(1).await;
            faulty.hold_tenant_transactions(true);
            super::until("the answer is written ahead", || async {
                written_ahead().await.is_some()
            })
            .await;
        } => true,
    };
    assert!(killed, "the record was held up when the instance died");
    faulty.hold_tenant_transactions(false);
    let answer = written_ahead().await.unwrap();
    assert_eq!(answer.answer, json!({"succeeded": {"answer": 42}}));
    let running = h.jobs(s.id).await.remove(0);
    assert_eq!(running.status, JobStatus::Running, "not recorded yet");

    // Another instance recovers it once the lease ran out: recorded as answered.
    let other = h.another_instance(config.clone());
    let lease = Duration::from_std(config.lease).unwrap();
    h.clock.set(due + lease + Duration::milliseconds(1));
    let recovered = other.tick().await.unwrap();
    assert_eq!(recovered.retried_attempts, 0, "{recovered:?}");
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
    assert_eq!(job.attempt, 1);
    assert_eq!(job.result, Some(json!({"answer": 42})));
    assert_eq!(h.target.requests().len(), 1, "the service was called again");
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let attempts = tx.job_attempts_list(job.id).await.unwrap();
    assert_eq!(
        tx.job_answer_get(job.id, 1).await.unwrap(),
        None,
        "kept after its record"
    );
    drop(tx);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Succeeded);
    assert_eq!(
        attempts[0].finished_at, answer.answered_at,
        "the ledger ends the attempt when it was answered"
    );
}

/// A lease is written again only when it runs low: an attempt recorded within a renewal or two
/// of its lease's start (a burst's) costs no renewal.
pub async fn a_fresh_lease_is_not_renewed(store: Arc<dyn Store>) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(5),
        // A renewal every second; a lease is renewed once it has 1.5 s or less left.
        lease: StdDuration::from_secs(3),
        ..EngineConfig::default()
    };
    let faulty = super::FaultyStore::new(store);
    let h = Harness::with_config(faulty.clone(), config).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.reply([Reply::Hang]);
    h.clock.set(due);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = h.engine.run(async {
        let _ = stopped.await;
    });
    let probe = async {
        h.target.arrived(1).await;
        h.engine.settled_beside_calls().await;
        h.clock.set(due + Duration::seconds(1));
        h.engine.settled_beside_calls().await;
        assert_eq!(faulty.renewals(), 0, "a lease with 2 s left was renewed");
        h.clock.set(due + Duration::seconds(2));
        h.engine.settled_beside_calls().await;
        assert_eq!(faulty.renewals(), 1, "the lease running low is renewed");
        assert_eq!(h.jobs(s.id).await[0].status, JobStatus::Running);
        // Past the call's timeout: stopping does not wait for it on the wall clock.
        h.clock.set(due + Duration::seconds(6));
        let _ = stop.send(());
    };
    tokio::join!(serving, probe);
}
