//! Fenced leases: an instance that stalls past its lease (a freeze, a pause, starvation) never
//! calls an occurrence another instance took over, and a dead instance's fire handed off but
//! not called runs seconds after its instant, not as a failed attempt.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::ahead::scheduled_job;
use super::{Harness, cron, dispatcher};

fn config() -> EngineConfig {
    EngineConfig {
        job_timeout: StdDuration::from_secs(30),
        claim_ahead: StdDuration::from_secs(10),
        ..EngineConfig::default()
    }
}

/// An instance on a clock of its own: its process can be frozen (the clock stands still while
/// the others' move on) and woken (the clock jumps, monotonic time included).
fn instance_on_own_clock(h: &Harness, config: EngineConfig) -> (Engine, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(h.now()));
    let engine = Engine::new(
        h.store.clone(),
        dispatcher(clock.clone(), config.job_timeout),
        clock.clone(),
        config,
        Arc::new(Metrics::default()),
    );
    (engine, clock)
}

/// Lets `holder` (on `clock`, running) settle, so it has claimed the schedule's fire ahead,
/// then moves its clock 0.4 s before the instant and lets it settle again: the fire is handed
/// off. No wall-clock polling: the engine says when it has nothing left to do.
async fn handed_off_by(
    h: &Harness,
    holder: &Engine,
    clock: &ManualClock,
    id: ScheduleId,
    due: DateTime<Utc>,
) {
    holder.settled().await;
    assert!(
        scheduled_job(h, id).await.is_some(),
        "the holder claims the fire ahead"
    );
    clock.set(due - Duration::milliseconds(400));
    holder.settled().await;
    assert_eq!(
        h.jobs(id).await[0].status,
        JobStatus::Running,
        "the holder hands the fire off"
    );
}

/// The audit's case: the holder hands its fire off, freezes 0.4 s before the instant for a
/// minute, another instance takes the lapsed attempt over and the call is answered; the holder
/// wakes and must not call the occurrence again.
pub async fn a_holder_frozen_past_its_lease_after_the_hand_off_never_calls(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, config()).await;
    let (holder, holder_clock) = instance_on_own_clock(&h, config());
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    holder_clock.set(due - Duration::seconds(3));
    h.clock.set(due - Duration::seconds(3));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = holder.run(async {
        let _ = stopped.await;
    });
    let scenario = async {
        handed_off_by(&h, &holder, &holder_clock, s.id, due).await;
        holder.settled().await;
        assert!(h.target.requests().is_empty(), "called before its instant");

        // Frozen: the holder's clock stands still while time passes for the others. Once the
        // lease lapsed, the survivor takes the fire over and the call is answered.
        let lease = Duration::from_std(config().lease).unwrap();
        h.clock.set(due + lease + Duration::milliseconds(1));
        for _ in 0..3 {
            h.engine.tick().await.unwrap();
        }
        let job = h.jobs(s.id).await.remove(0);
        assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
        assert_eq!(job.attempt, 1, "released, not recorded as a failed attempt");
        assert_eq!(h.target.requests().len(), 1);
        let late = job.finished_at.unwrap() - due;
        assert!(
            late <= Duration::seconds(5),
            "called {late} after its instant"
        );

        // Woken a minute later: the holder finds its lease short, renews it fenced, finds the
        // job taken over, and does not call.
        holder_clock.set(due + Duration::seconds(60));
        holder.settled().await;
        h.clock.set(due + Duration::seconds(61));
        holder.settled().await;
        assert_eq!(
            h.target.requests().len(),
            1,
            "the woken holder called the occurrence again"
        );
        let job = h.jobs(s.id).await.remove(0);
        assert_eq!(job.status, JobStatus::Succeeded);
        let _ = stop.send(());
    };
    tokio::join!(serve, scenario);
    let job = h.jobs(s.id).await.remove(0);
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let attempts = tx.job_attempts_list(job.id).await.unwrap();
    drop(tx);
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].outcome, AttemptOutcome::Succeeded);
}

/// An instance killed just after its hand-off: the fire runs a lease after its instant, as its
/// first attempt, and the schedule's next occurrence is not skipped for it.
pub async fn a_fire_handed_off_by_a_killed_instance_runs_within_seconds(store: Arc<dyn Store>) {
    // No retries: a failed attempt would be dead-lettered.
    let h = Harness::with_config(store, config()).await;
    let (holder, holder_clock) = instance_on_own_clock(&h, config());
    let s = h.create(cron("* * * * *", 0)).await;
    let due = s.next_run_at.unwrap();
    holder_clock.set(due - Duration::seconds(3));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve = holder.run(async {
        let _ = stopped.await;
    });
    let killed = tokio::select! {
        () = serve => false,
        () = handed_off_by(&h, &holder, &holder_clock, s.id, due) => true,
    };
    assert!(killed, "the instance died after its hand-off");
    drop(stop);
    h.clock
        .set(due + Duration::from_std(config().lease).unwrap() + Duration::milliseconds(1));
    for _ in 0..3 {
        h.engine.tick().await.unwrap();
    }
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.status, JobStatus::Succeeded, "{:?}", job.error);
    assert_eq!(job.attempt, 1);
    assert!(h.dlq().await.is_empty());
    assert!(job.finished_at.unwrap() - due <= Duration::seconds(5));
    // The next occurrence runs as usual.
    h.tick_at(due + Duration::minutes(1)).await;
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert!(
        jobs.iter().all(|j| j.status == JobStatus::Succeeded),
        "{jobs:?}"
    );
    assert_eq!(h.target.requests().len(), 2);
}
