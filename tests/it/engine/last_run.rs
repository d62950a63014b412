//! A schedule with a run limit completes when its last run is called, not when that run is
//! claimed ahead; a last run withdrawn before its instant (a pause) is given back. So does a
//! schedule whose last occurrence before its end is claimed ahead.

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

/// The last occurrence before `end_at`, claimed ahead: the schedule stays active (and due at
/// that instant, not claimed again even under `allow_all`) until the occurrence is called, then
/// completes, with one event.
pub async fn a_last_occurrence_claimed_ahead_completes_its_schedule_when_called(
    store: Arc<dyn Store>,
) {
    let h = Harness::with_config(store, ahead_config()).await;
    let end = crate::support::t0() + Duration::minutes(2) + Duration::seconds(30);
    let s = h
        .create(ScheduleDecl {
            end_at: Some(end.to_rfc3339()),
            overlap: Some(sentin8_cron::core::policies::Overlap::AllowAll),
            ..cron("* * * * *", 0)
        })
        .await;
    let first = s.next_run_at.unwrap();
    let last = first + Duration::minutes(1);
    assert!(last <= end && last + Duration::minutes(1) > end);
    serving(&h, async {
        // The first occurrence runs; the last is claimed ahead.
        h.clock.set(first);
        h.engine.settled().await;
        h.clock.set(last - Duration::seconds(3));
        h.engine.settled().await;
        assert!(scheduled_job(&h, s.id).await.is_some(), "claimed ahead");
        let before = h.schedule(s.id).await;
        assert_eq!(
            (before.status, before.next_run_at),
            (ScheduleStatus::Active, Some(last)),
            "active until its last occurrence is called"
        );
        h.clock.set(last - Duration::seconds(1));
        h.engine.settled().await;
        h.clock.set(last);
        h.engine.settled().await;
        h.clock.set(last + Duration::minutes(3));
        h.engine.settled().await;
    })
    .await;
    let after = h.schedule(s.id).await;
    assert_eq!(after.status, ScheduleStatus::Completed);
    let jobs = h.jobs(s.id).await;
    assert_eq!(
        jobs.iter()
            .map(|j| (j.scheduled_for, j.status))
            .collect::<Vec<_>>(),
        [(first, JobStatus::Succeeded), (last, JobStatus::Succeeded)],
        "each occurrence once"
    );
    assert_eq!(h.target.requests().len(), 2);
    let events = h.event_types().await;
    let completions = events
        .iter()
        .filter(|t| *t == sentin8_cron::core::events::SCHEDULE_COMPLETED)
        .count();
    assert_eq!(completions, 1, "{events:?}");
}
