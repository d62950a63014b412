//! A schedule with a run limit completes when its last run is called, not when that run is
//! claimed ahead; a last run withdrawn before its instant (a pause) is given back.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::ahead::{ahead_config, scheduled_job, serving};
use super::{Harness, cron};

/// A schedule with one run left, its clock 3 s before that run's instant.
async fn one_run_left(store: Arc<dyn Store>) -> (Harness, Schedule, DateTime<Utc>) {
    let h = Harness::with_config(store, ahead_config()).await;
    let s = h
        .create(ScheduleDecl {
            remaining_runs: Some(1),
            ..cron("* * * * *", 0)
        })
        .await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    (h, s, due)
}

pub async fn a_last_run_claimed_ahead_completes_its_schedule_when_called(store: Arc<dyn Store>) {
    let (h, s, due) = one_run_left(store).await;
    serving(&h, async {
        h.engine.settled().await;
        assert!(scheduled_job(&h, s.id).await.is_some(), "claimed ahead");
        let before = h.schedule(s.id).await;
        assert_eq!(
            (before.status, before.remaining_runs, before.next_run_at),
            (ScheduleStatus::Active, Some(0), Some(due)),
            "active until its last run is called"
        );
        h.clock.set(due);
        h.engine.settled().await;
        let after = h.schedule(s.id).await;
        assert_eq!(after.status, ScheduleStatus::Completed);
        assert_eq!(after.remaining_runs, Some(0));
        h.clock.set(due + Duration::minutes(3));
        h.engine.settled().await;
    })
    .await;
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0].status, JobStatus::Succeeded, "{:?}", jobs[0].error);
    assert_eq!(h.target.requests().len(), 1);
}

pub async fn a_last_run_withdrawn_by_a_pause_is_given_back(store: Arc<dyn Store>) {
    let (h, s, due) = one_run_left(store).await;
    serving(&h, async {
        h.engine.settled().await;
        assert!(scheduled_job(&h, s.id).await.is_some(), "claimed ahead");
        let paused = h
            .ops
            .schedule_pause(h.env, s.id, &h.actor(), None)
            .await
            .unwrap();
        assert_eq!(
            paused.remaining_runs,
            Some(1),
            "the withdrawn run is given back"
        );
        h.clock.set(due + Duration::seconds(30));
        h.engine.settled().await;
        assert!(
            h.target.requests().is_empty(),
            "a paused schedule is not called"
        );
        let resumed = h
            .ops
            .schedule_resume(h.env, s.id, &h.actor())
            .await
            .unwrap();
        let next = resumed.next_run_at.unwrap();
        assert_eq!(resumed.remaining_runs, Some(1));
        h.clock.set(next);
        h.engine.settled().await;
        h.clock.set(next + Duration::minutes(2));
        h.engine.settled().await;
    })
    .await;
    assert_eq!(h.target.requests().len(), 1, "its one run ran once");
    let after = h.schedule(s.id).await;
    assert_eq!(
        (after.status, after.remaining_runs),
        (ScheduleStatus::Completed, Some(0))
    );
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 2, "the withdrawn fire and the run: {jobs:?}");
    assert_eq!(jobs[0].status, JobStatus::Skipped);
    assert_eq!(jobs[1].status, JobStatus::Succeeded);
}
