//! Overlap policies and backfill in the engine: `buffer_one` keeps one occurrence for when
//! the open job ends (and keeps it across a crash), `allow_all` runs occurrences side by side,
//! and a backfill runs its occurrences one after another under `skip`.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::model::*;
use sentin8_cron::core::policies::Overlap;
use sentin8_cron::core::retry::RetryPolicy;
use sentin8_cron::core::store::*;

use super::{Harness, cron, settled_until};
use crate::raw_http::Reply;
use crate::support::t0;

pub(super) fn minute(m: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(m)
}

pub(super) fn with_overlap(overlap: Overlap, expr: &str) -> ScheduleDecl {
    ScheduleDecl {
        overlap: Some(overlap),
        ..cron(expr, 3)
    }
}

/// Retries after 150 s: an open job outlasts two fires of an every-minute schedule.
fn slow_retries() -> EngineConfig {
    EngineConfig {
        retry: retries_after(150),
        ..EngineConfig::default()
    }
}

/// Every retry `secs` after the failure before it.
pub(super) fn retries_after(secs: u64) -> RetryPolicy {
    RetryPolicy {
        base: StdDuration::from_secs(secs),
        cap: StdDuration::from_secs(secs),
    }
}

/// The occurrences the target was called for, in the order of the calls.
pub(super) fn called_for(h: &Harness) -> Vec<String> {
    h.target
        .requests()
        .iter()
        .map(|c| c.json()["scheduled_for"].as_str().unwrap().to_owned())
        .collect()
}

pub(super) fn statuses_by_occurrence(jobs: &[Job]) -> Vec<(DateTime<Utc>, JobStatus)> {
    let mut shape: Vec<_> = jobs.iter().map(|j| (j.scheduled_for, j.status)).collect();
    shape.sort_by_key(|(at, _)| *at);
    shape
}

pub async fn buffer_one_keeps_one_occurrence_for_when_the_open_job_ends(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, slow_retries()).await;
    let s = h
        .create(with_overlap(Overlap::BufferOne, "* * * * *"))
        .await;
    h.reply([Reply::status(500)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 1); // fails; its retry is due at 03:30
    let summary = h.tick_at(minute(2)).await;
    assert_eq!((summary.buffered, summary.skipped), (1, 0), "{summary:?}");
    let summary = h.tick_at(minute(3)).await;
    assert_eq!(
        (summary.buffered, summary.skipped),
        (0, 1),
        "one occurrence waits at most: {summary:?}"
    );
    // The retry succeeds, and the buffered 00:02 occurrence runs as soon as it is recorded.
    // (The tick that records the retry may end before the released one is due to it.)
    h.tick_at(minute(3) + Duration::seconds(30)).await;
    h.engine.tick().await.unwrap();
    let jobs = h.jobs(s.id).await;
    assert_eq!(
        statuses_by_occurrence(&jobs),
        [
            (minute(1), JobStatus::Succeeded),
            (minute(2), JobStatus::Succeeded),
            (minute(3), JobStatus::Skipped),
        ]
    );
    let calls = h.target.requests();
    assert_eq!(calls.len(), 3, "first try, its retry, the buffered one");
    assert_eq!(
        calls[2].json()["scheduled_for"].as_str().unwrap(),
        "2030-01-01T00:02:00Z"
    );
    assert!(
        h.event_types()
            .await
            .contains(&"io.sentin8.cron.job.buffered.v1".to_owned())
    );
}

pub async fn a_buffered_occurrence_outlives_the_instance_that_held_the_open_job(
    store: Arc<dyn Store>,
) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_secs(1),
        lease: StdDuration::from_secs(2),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config.clone()).await;
    let s = h
        .create(with_overlap(Overlap::BufferOne, "* * * * *"))
        .await;
    // 00:01 fails; at 00:02 its retry is due beside the next fire, which is buffered; the
    // retry's call hangs and its instance dies mid-call.
    h.reply([Reply::status(500), Reply::Hang]);
    h.tick_at(minute(1)).await;
    h.clock.set(minute(2));
    let killed = tokio::select! {
        _ = h.engine.tick() => false,
        () = h.target.arrived(2) => true,
    };
    assert!(killed, "the retry was in flight when the instance died");
    let buffered: Vec<_> = h
        .jobs(s.id)
        .await
        .into_iter()
        .filter(|j| j.status == JobStatus::Buffered)
        .collect();
    assert_eq!(buffered.len(), 1, "the buffered occurrence is durable");
    // Another instance recovers the lapsed attempt, retries it, and then runs the buffered
    // occurrence, once.
    let other = h.another_instance(config.clone());
    let lease = Duration::from_std(config.lease).unwrap();
    h.clock.set(minute(2) + lease + Duration::milliseconds(1));
    for _ in 0..4 {
        other.tick().await.unwrap();
    }
    let jobs = h.jobs(s.id).await;
    assert_eq!(
        statuses_by_occurrence(&jobs),
        [
            (minute(1), JobStatus::Succeeded),
            (minute(2), JobStatus::Succeeded),
        ]
    );
    let ran = jobs.iter().find(|j| j.id == buffered[0].id).unwrap();
    assert_eq!(ran.attempt, 1, "called once");
    assert_eq!(h.target.requests().len(), 4);
}

pub async fn allow_all_runs_occurrences_side_by_side(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, slow_retries()).await;
    let s = h.create(with_overlap(Overlap::AllowAll, "* * * * *")).await;
    h.reply([Reply::status(500)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 1); // fails; its retry stays open
    let summary = h.tick_at(minute(2)).await;
    assert_eq!((summary.fired, summary.skipped), (1, 0), "{summary:?}");
    let jobs = h.jobs(s.id).await;
    assert_eq!(
        statuses_by_occurrence(&jobs),
        [
            (minute(1), JobStatus::Pending),
            (minute(2), JobStatus::Succeeded),
        ]
    );
    assert!(jobs.iter().all(|j| j.concurrent));
    assert_ne!(jobs[0].idempotency_key, jobs[1].idempotency_key);
    // Both open at once: the 00:03 fire runs too while 00:01's retry still waits.
    h.reply([Reply::Hang]);
    h.clock.set(minute(3));
    tokio::select! {
        _ = h.engine.tick() => {}
        () = h.target.arrived(3) => {}
    }
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let open = tx
        .jobs_of_schedule(s.id, &[JobStatus::Pending, JobStatus::Running])
        .await
        .unwrap();
    assert_eq!(open.len(), 2, "{open:?}");
}

/// Under `allow_all` each job has its own retry budget: a second job's first failure is
/// retried however many retries an earlier job of the schedule has made.
pub async fn allow_all_jobs_retry_on_budgets_of_their_own(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, slow_retries()).await;
    let s = h
        .create(ScheduleDecl {
            max_retries: Some(1),
            ..with_overlap(Overlap::AllowAll, "* * * * *")
        })
        .await;
    // 00:01 fails and waits for its retry; 00:02 fails on its first attempt too.
    h.reply([Reply::status(500), Reply::status(500)]);
    h.tick_at(minute(1)).await;
    let summary = h.tick_at(minute(2)).await;
    assert_eq!(
        (summary.retried, summary.dead_lettered),
        (1, 0),
        "{summary:?}"
    );
    let jobs = h.jobs(s.id).await;
    assert_eq!(
        statuses_by_occurrence(&jobs),
        [
            (minute(1), JobStatus::Pending),
            (minute(2), JobStatus::Pending),
        ]
    );
    assert!(
        h.dlq().await.is_empty(),
        "a first failure was dead-lettered"
    );
    // Each spends its own: 00:01's retry fails and it lands in the DLQ, while the 00:03 fire's
    // first failure is retried and 00:02's budget is untouched.
    h.reply([Reply::status(500), Reply::status(500)]);
    let summary = h.tick_at(minute(1) + Duration::seconds(151)).await;
    assert_eq!(
        (summary.dead_lettered, summary.retried),
        (1, 1),
        "{summary:?}"
    );
    let jobs = h.jobs(s.id).await;
    let second = jobs.iter().find(|j| j.scheduled_for == minute(2)).unwrap();
    assert_eq!((second.status, second.attempt), (JobStatus::Pending, 1));

    // Its dead letter is republished beside the open jobs, as its own concurrent run.
    let entry = h.dlq().await.remove(0);
    let republished = h
        .ops
        .dlq_republish(h.env, entry.id, &h.actor())
        .await
        .expect("republished while other jobs are open");
    assert!(republished.concurrent);
    assert_eq!(republished.status, JobStatus::Pending);
}

pub async fn a_backfill_under_skip_runs_one_occurrence_at_a_time(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/10 * * * *", 3)).await;
    h.clock.set(minute(5));
    let done = h
        .ops
        .schedule_backfill(
            h.env,
            s.id,
            (t0() - Duration::minutes(30), t0()),
            None,
            &h.actor(),
        )
        .await
        .unwrap();
    let occurrences: Vec<_> = done.jobs.iter().map(|j| j.scheduled_for).collect();
    assert_eq!(
        occurrences,
        [-30, -20, -10, 0].map(|m| t0() + Duration::minutes(m))
    );
    assert_eq!(done.started, 1, "one at a time");
    assert!(done.jobs.iter().all(|j| j.backfill));
    // The first backfilled call fails: its retry (due 00:06) is open when the regular 00:10
    // fire comes, which is skipped under `skip`; then the others run, one after another.
    h.reply([Reply::status(500)]);
    h.tick_at(minute(5)).await;
    let summary = h.tick_at(minute(10)).await;
    assert_eq!(summary.skipped, 1, "{summary:?}");
    for _ in 0..4 {
        h.engine.tick().await.unwrap();
    }
    let jobs = h.jobs(s.id).await;
    let backfilled: Vec<_> = jobs.iter().filter(|j| j.backfill).collect();
    assert_eq!(backfilled.len(), 4);
    assert!(
        backfilled.iter().all(|j| j.status == JobStatus::Succeeded),
        "{backfilled:?}"
    );
    assert_eq!(
        called_for(&h),
        [
            "2029-12-31T23:30:00Z",
            "2029-12-31T23:30:00Z",
            "2029-12-31T23:40:00Z",
            "2029-12-31T23:50:00Z",
            "2030-01-01T00:00:00Z",
        ],
        "in order, none beside another"
    );
    let regular = jobs.iter().find(|j| j.scheduled_for == minute(10)).unwrap();
    assert_eq!(regular.status, JobStatus::Skipped);
    assert!(
        h.event_types()
            .await
            .contains(&"io.sentin8.cron.schedule.backfilled.v1".to_owned())
    );
    // A range with too many occurrences, or in the future, is refused by field.
    let err = h
        .ops
        .schedule_backfill(h.env, s.id, (t0(), minute(60)), None, &h.actor())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("to: "), "{err}");
    let err = h
        .ops
        .schedule_backfill(
            h.env,
            s.id,
            (t0() - Duration::days(30), t0()),
            None,
            &h.actor(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than 1000"), "{err}");
}

pub async fn a_backfill_waiting_behind_a_withdrawn_fire_is_released(store: Arc<dyn Store>) {
    use super::ahead::{ahead_config, scheduled_job, serving};
    use sentin8_cron::core::ops::SchedulePatch;

    let h = Harness::with_config(store, ahead_config()).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let due = s.next_run_at.unwrap();
    h.clock.set(due - Duration::seconds(3));
    serving(&h, async {
        settled_until(&h.engine, "the fire is claimed ahead", || async {
            scheduled_job(&h, s.id).await.is_some()
        })
        .await;
        // The backfill waits behind the held fire (it excludes others)...
        let done = h
            .ops
            .schedule_backfill(
                h.env,
                s.id,
                (t0() - Duration::minutes(10), t0() - Duration::minutes(5)),
                None,
                &h.actor(),
            )
            .await
            .unwrap();
        assert_eq!((done.jobs.len(), done.started), (2, 0));
        // ...and runs once a new timing withdraws that fire.
        h.ops
            .schedule_patch(
                h.env,
                s.id,
                SchedulePatch {
                    cron: Some("*/7 * * * *".into()),
                    ..SchedulePatch::default()
                },
                &h.actor(),
            )
            .await
            .unwrap();
        let jobs = h.jobs(s.id).await;
        let released: Vec<_> = jobs
            .iter()
            .filter(|j| j.backfill && j.status != JobStatus::Buffered)
            .collect();
        assert_eq!(released.len(), 1, "{jobs:?}");
        // The withdrawn fire's instant comes and goes without a call for it (a stopping engine
        // waits for the instants of the fires it holds).
        h.clock.set(due);
        h.engine.settled().await;
    })
    .await;
    let calls: Vec<String> = h
        .target
        .requests()
        .iter()
        .map(|c| c.json()["scheduled_for"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !calls.contains(&due.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        "the withdrawn fire was called: {calls:?}"
    );
}

/// An environment's jobs waiting their turn are capped: a backfill that would leave more
/// waiting is refused whole (409, naming the setting), and the cap is each environment's own.
pub async fn a_backfill_beyond_the_environments_waiting_cap_is_refused(store: Arc<dyn Store>) {
    let h = Harness::new(store.clone()).await;
    let ops = sentin8_cron::core::ops::Ops::new(store).with_waiting_cap(5);
    let s = h.create(cron("*/10 * * * *", 3)).await;
    h.clock.set(minute(5));
    let range = |minutes: i64| (t0() - Duration::minutes(minutes), t0());
    // Four occurrences: one starts, three wait.
    let (from, to) = range(30);
    let first = ops
        .schedule_backfill(h.env, s.id, (from, to), None, &h.actor())
        .await
        .unwrap();
    assert_eq!((first.jobs.len(), first.started), (4, 1));
    let before = h.jobs(s.id).await.len();
    // Three more would leave six waiting: refused, and nothing of it written.
    let (from, to) = range(20);
    let refused = ops
        .schedule_backfill(h.env, s.id, (from, to), None, &h.actor())
        .await
        .unwrap_err();
    match &refused {
        sentin8_cron::core::ops::OpsError::Conflict(detail) => {
            assert!(
                detail.contains("3 jobs waiting") && detail.contains("at most 5"),
                "{detail}"
            );
            assert!(detail.contains("SENTIN8_CRON_MAX_WAITING_JOBS"), "{detail}");
        }
        other => panic!("a conflict, not {other:?}"),
    }
    assert_eq!(h.jobs(s.id).await.len(), before);
    // Two fit.
    let (from, to) = range(10);
    ops.schedule_backfill(h.env, s.id, (from, to), None, &h.actor())
        .await
        .unwrap();
    // Another environment has a cap of its own.
    let other_env = EnvId::new();
    let other = h
        .create_in(other_env, &h.target.url(), cron("*/10 * * * *", 3))
        .await;
    let (from, to) = range(30);
    let theirs = ops
        .schedule_backfill(other_env, other.id, (from, to), None, &h.actor())
        .await
        .unwrap();
    assert_eq!(theirs.jobs.len(), 4);
}
