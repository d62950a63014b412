//! The overlap modes that keep or replace: `buffer_all` keeps every occurrence due while a job
//! is open (up to its bound) and runs them one after another, in order; `cancel_other` cancels
//! the open job (aborting its call, on whichever instance holds it) and runs the new one.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::model::*;
use sentin8_cron::core::policies::Overlap;
use sentin8_cron::core::store::*;

use super::overlap::{called_for, minute, retries_after, statuses_by_occurrence, with_overlap};
use super::{Harness, cron};
use crate::raw_http::Reply;
use crate::support::t0;

/// Under `buffer_all` every occurrence due while the job is open waits, up to the bound
/// (`max_buffered`); a further one is skipped, on the record, naming the bound. When the open
/// job ends they run one after another, oldest first, none beside another.
pub async fn buffer_all_runs_every_waiting_occurrence_in_order_up_to_its_bound(
    store: Arc<dyn Store>,
) {
    let config = EngineConfig {
        retry: retries_after(250),
        max_buffered: 2,
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let s = h
        .create(with_overlap(Overlap::BufferAll, "* * * * *"))
        .await;
    // 00:01 fails; its retry is due at 00:05:10, so 00:02, 00:03 and 00:04 come while it is open.
    h.reply([Reply::status(500)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 1);
    for (m, buffered, skipped) in [(2, 1, 0), (3, 1, 0), (4, 0, 1)] {
        let summary = h.tick_at(minute(m)).await;
        assert_eq!(
            (summary.buffered, summary.skipped),
            (buffered, skipped),
            "00:0{m}: {summary:?}"
        );
    }
    let jobs = h.jobs(s.id).await;
    let full = jobs.iter().find(|j| j.scheduled_for == minute(4)).unwrap();
    assert_eq!(full.status, JobStatus::Skipped);
    let reason = full.error.as_deref().unwrap();
    assert!(
        reason.contains("2 occurrences") && reason.contains("--max-buffered"),
        "{reason}"
    );
    // The retry succeeds, then 00:02 and 00:03 run, in order.
    h.tick_at(minute(5) + Duration::seconds(10)).await;
    for _ in 0..3 {
        h.engine.tick().await.unwrap();
    }
    assert_eq!(
        called_for(&h),
        [
            "2030-01-01T00:01:00Z",
            "2030-01-01T00:01:00Z",
            "2030-01-01T00:02:00Z",
            "2030-01-01T00:03:00Z",
        ],
        "one after another, oldest first"
    );
    assert_eq!(
        statuses_by_occurrence(&h.jobs(s.id).await),
        [
            (minute(1), JobStatus::Succeeded),
            (minute(2), JobStatus::Succeeded),
            (minute(3), JobStatus::Succeeded),
            (minute(4), JobStatus::Skipped),
            (minute(5), JobStatus::Skipped),
        ]
    );
}

/// Under `cancel_other` an occurrence due while the job waits for its retry cancels it: the
/// job ends `cancelled` (never retried), with its event, and the new occurrence runs.
pub async fn cancel_other_cancels_a_waiting_retry_and_runs_the_new_occurrence(
    store: Arc<dyn Store>,
) {
    let config = EngineConfig {
        retry: retries_after(150),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let s = h
        .create(with_overlap(Overlap::CancelOther, "* * * * *"))
        .await;
    h.reply([Reply::status(500)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 1);
    let summary = h.tick_at(minute(2)).await;
    assert_eq!(
        (summary.cancelled, summary.fired, summary.skipped),
        (1, 1, 0),
        "{summary:?}"
    );
    // The cancelled retry's instant passes without a call (00:03 is a regular fire).
    h.tick_at(minute(1) + Duration::seconds(151)).await;
    let jobs = h.jobs(s.id).await;
    let first = jobs.iter().find(|j| j.scheduled_for == minute(1)).unwrap();
    assert_eq!(first.status, JobStatus::Cancelled);
    let reason = first.error.as_deref().unwrap();
    assert!(
        reason.contains("cancel_other") && reason.contains("00:02:00"),
        "{reason}"
    );
    let second = jobs.iter().find(|j| j.scheduled_for == minute(2)).unwrap();
    assert_eq!(second.status, JobStatus::Succeeded);
    assert_eq!(
        called_for(&h),
        [
            "2030-01-01T00:01:00Z",
            "2030-01-01T00:02:00Z",
            "2030-01-01T00:03:00Z"
        ]
    );
    assert!(
        h.event_types()
            .await
            .contains(&"io.sentin8.cron.job.cancelled.v1".to_owned())
    );
    assert!(h.dlq().await.is_empty());
}

/// The open job's call hangs on one instance when the next occurrence comes (two seconds
/// later, inside the call's timeout); another instance claims it, cancels the job and runs the
/// new occurrence. The first instance's next lease renewal finds the job no longer its own and
/// aborts the call (counted), and its outcome is refused: the cancelled job stays cancelled.
pub async fn cancel_other_aborts_the_open_jobs_call_on_the_instance_that_holds_it(
    store: Arc<dyn Store>,
) {
    let config = EngineConfig {
        lease: StdDuration::from_secs(1),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config.clone()).await;
    let s = h.create(every_2s_cancel_other()).await;
    let first = s.next_run_at.unwrap();
    let second = first + Duration::seconds(2);
    h.reply([Reply::Hang]);
    h.clock.set(first);
    let other = h.another_instance(config);
    let probe = async {
        h.target.arrived(1).await;
        h.clock.set(second);
        let summary = other.tick().await.unwrap();
        // Time goes on (inside the call's timeout): the first instance renews its leases.
        h.clock.set(second + Duration::milliseconds(600));
        summary
    };
    // A bound for a broken abort: the hanging call would otherwise end only at its timeout.
    let (tick, summary) = tokio::time::timeout(StdDuration::from_secs(20), async {
        tokio::join!(h.engine.tick(), probe)
    })
    .await
    .expect("the first instance's tick ended");
    assert_eq!((summary.cancelled, summary.fired), (1, 1), "{summary:?}");
    let tick = tick.unwrap();
    assert_eq!(
        (tick.failed, tick.retried, tick.lost),
        (0, 0, 1),
        "the aborted call's outcome is refused: {tick:?}"
    );
    assert_eq!(
        h.engine
            .metrics()
            .calls
            .aborted
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let jobs = h.jobs(s.id).await;
    let cancelled = jobs.iter().find(|j| j.scheduled_for == first).unwrap();
    assert_eq!(
        (cancelled.status, cancelled.next_attempt_at),
        (JobStatus::Cancelled, None),
        "cancelled while its call was in flight"
    );
    let replaced = jobs.iter().find(|j| j.scheduled_for == second).unwrap();
    assert_eq!(replaced.status, JobStatus::Succeeded);
}

/// Every two seconds, cancelling the open job: the next occurrence comes while a hanging call
/// is still inside its timeout (the harness's 5 s).
fn every_2s_cancel_other() -> ScheduleDecl {
    ScheduleDecl {
        schedule_type: "interval.cancel_other".into(),
        every: Some("2s".into()),
        overlap: Some(Overlap::CancelOther),
        ..ScheduleDecl::default()
    }
}

/// In the serve loop the instance that cancels the open job holds its call itself: the call is
/// aborted at once, and stopping the loop does not wait for it.
pub async fn cancel_other_aborts_its_own_call_at_once_in_the_serve_loop(store: Arc<dyn Store>) {
    use super::ahead::{ahead_config, serve_through};
    let h = Harness::with_config(store, ahead_config()).await;
    let s = h.create(every_2s_cancel_other()).await;
    let first = s.next_run_at.unwrap();
    h.reply([Reply::Hang]);
    let end = first + Duration::seconds(5);
    tokio::time::timeout(StdDuration::from_secs(30), serve_through(&h, end, true))
        .await
        .expect("the loop stopped without waiting for the hanging call");
    assert_eq!(
        h.engine
            .metrics()
            .calls
            .aborted
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert_eq!(
        statuses_by_occurrence(&h.jobs(s.id).await),
        [
            (first, JobStatus::Cancelled),
            (first + Duration::seconds(2), JobStatus::Succeeded),
            (first + Duration::seconds(4), JobStatus::Succeeded),
        ]
    );
}

/// A backfill may name its own overlap policy: under `skip` only the first occurrence runs,
/// under `buffer_one` one more waits, the rest are skipped on the record (with their events);
/// under `allow_all` they run side by side even for a schedule that skips; `cancel_other` is
/// refused, naming the field.
pub async fn a_backfill_runs_under_the_overlap_policy_it_names(store: Arc<dyn Store>) {
    use sentin8_cron::core::ops::OpsError;
    let h = Harness::new(store).await;
    let s = h.create(cron("*/10 * * * *", 3)).await;
    h.clock.set(minute(5));
    let hour = |from: i64| {
        (
            t0() - Duration::minutes(from),
            t0() - Duration::minutes(from - 30),
        )
    };
    let statuses = |jobs: &[Job]| jobs.iter().map(|j| j.status).collect::<Vec<_>>();

    let done = h
        .ops
        .schedule_backfill(h.env, s.id, hour(300), Some(Overlap::Skip), &h.actor())
        .await
        .unwrap();
    assert_eq!((done.jobs.len(), done.started, done.skipped), (4, 1, 3));
    assert_eq!(done.overlap, Overlap::Skip);
    assert_eq!(
        statuses(&done.jobs),
        [
            JobStatus::Pending,
            JobStatus::Skipped,
            JobStatus::Skipped,
            JobStatus::Skipped
        ],
        "the oldest runs"
    );
    let reason = done.jobs[1].error.as_deref().unwrap();
    assert!(reason.contains("overlap skip"), "{reason}");
    h.engine.tick().await.unwrap();

    let done = h
        .ops
        .schedule_backfill(h.env, s.id, hour(200), Some(Overlap::BufferOne), &h.actor())
        .await
        .unwrap();
    assert_eq!((done.started, done.skipped), (1, 2));
    assert_eq!(
        statuses(&done.jobs),
        [
            JobStatus::Pending,
            JobStatus::Buffered,
            JobStatus::Skipped,
            JobStatus::Skipped
        ]
    );
    for _ in 0..3 {
        h.engine.tick().await.unwrap();
    }

    let done = h
        .ops
        .schedule_backfill(h.env, s.id, hour(100), Some(Overlap::AllowAll), &h.actor())
        .await
        .unwrap();
    assert_eq!((done.started, done.skipped), (4, 0), "side by side");
    assert!(done.jobs.iter().all(|j| j.concurrent));
    // (A drain claims one job of a schedule at a time, under its lock.)
    for _ in 0..4 {
        h.engine.tick().await.unwrap();
    }
    let calls = called_for(&h);
    assert_eq!(calls.len(), 1 + 2 + 4, "{calls:?}");

    let refused = h
        .ops
        .schedule_backfill(
            h.env,
            s.id,
            hour(400),
            Some(Overlap::CancelOther),
            &h.actor(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, OpsError::Invalid(errors) if errors[0].field == "overlap"),
        "{refused:?}"
    );
    let skipped_events = h
        .event_types()
        .await
        .iter()
        .filter(|t| *t == "io.sentin8.cron.job.skipped.v1")
        .count();
    assert_eq!(skipped_events, 3 + 2);
}
