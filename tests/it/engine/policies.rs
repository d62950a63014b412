//! Schedule policies in the engine: the catch-up window after a database outage, jitter
//! (claimed ahead, and across a DST fold that runs twice), start and end, limited runs, and
//! pause on failure through the retry path.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, TimeZone, Utc};
use sentin8_cron::core::cron::OnDstRepeat;
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::model::*;
use sentin8_cron::core::policies::jitter_offset;
use sentin8_cron::core::store::*;

use super::ahead::{ahead_config, called_and_recorded, scheduled_job, serving};
use super::faulty::FaultyStore;
use super::{Harness, cron, settled_until};
use crate::raw_http::Reply;
use crate::support::t0;

fn minute(m: i64) -> DateTime<Utc> {
    t0() + Duration::minutes(m)
}

pub async fn a_missed_fire_older_than_the_catchup_window_does_not_run(store: Arc<dyn Store>) {
    let faulty = FaultyStore::new(store);
    let h = Harness::with_config(faulty.clone(), EngineConfig::default()).await;
    let s = h
        .create(ScheduleDecl {
            catchup_window: Some("5m".into()),
            ..cron("*/10 * * * *", 3)
        })
        .await;
    assert_eq!(h.tick_at(minute(10)).await.fired, 1);
    // The database is away from 00:19 to 00:27: the 00:20 occurrence is 7 minutes old when it
    // comes back, beyond the 5-minute window.
    faulty.set_down(true);
    for m in [19, 20, 25] {
        h.clock.set(minute(m));
        assert!(h.engine.tick().await.is_err());
    }
    faulty.set_down(false);
    let summary = h.tick_at(minute(27)).await;
    assert_eq!((summary.fired, summary.skipped), (0, 1), "{summary:?}");
    let jobs = h.jobs(s.id).await;
    let late = jobs
        .iter()
        .find(|j| j.scheduled_for == minute(20))
        .expect("the missed occurrence is on the record");
    assert_eq!(late.status, JobStatus::Skipped);
    assert_eq!(
        late.missed,
        Some(MissedOccurrences {
            first: minute(20),
            last: minute(20),
            count: 1
        })
    );
    let error = late.error.as_deref().unwrap();
    assert!(error.contains("catch-up window of 5m"), "{error}");
    assert_eq!(h.target.requests().len(), 1, "the stale fire made no call");
    assert_eq!(h.schedule(s.id).await.next_run_at, Some(minute(30)));
    // Down again from 00:29 to 00:34: the 00:30 occurrence is 4 minutes old, inside the
    // window, and runs once, late.
    faulty.set_down(true);
    h.clock.set(minute(30));
    assert!(h.engine.tick().await.is_err());
    faulty.set_down(false);
    let summary = h.tick_at(minute(34)).await;
    assert_eq!((summary.fired, summary.skipped), (1, 0), "{summary:?}");
    let calls = h.target.requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1].json()["scheduled_for"].as_str().unwrap(),
        "2030-01-01T00:30:00Z"
    );
}

pub async fn a_one_shot_missed_beyond_its_window_completes_without_a_call(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h
        .create(ScheduleDecl {
            schedule_type: "once-late".into(),
            run_at: Some(minute(5).to_rfc3339()),
            catchup_window: Some("1m".into()),
            ..ScheduleDecl::default()
        })
        .await;
    let summary = h.tick_at(minute(7)).await;
    assert_eq!((summary.fired, summary.skipped), (0, 1), "{summary:?}");
    let after = h.schedule(s.id).await;
    assert_eq!(
        (after.status, after.next_run_at),
        (ScheduleStatus::Completed, None)
    );
    assert!(h.target.requests().is_empty());
}

pub async fn a_jittered_fire_is_claimed_ahead_and_called_at_its_offset(store: Arc<dyn Store>) {
    let h = Harness::with_config(store, ahead_config()).await;
    let s = h
        .create(ScheduleDecl {
            max_jitter: Some("30s".into()),
            ..cron("*/5 * * * *", 3)
        })
        .await;
    let occurrence = minute(5);
    let offset = jitter_offset(s.id, occurrence, StdDuration::from_secs(30));
    let call = occurrence + offset;
    assert_eq!(s.next_run_at, Some(call), "next_run_at is the call instant");
    h.clock.set(call - Duration::seconds(3));
    serving(&h, async {
        settled_until(&h.engine, "the fire is claimed ahead", || async {
            scheduled_job(&h, s.id).await.is_some()
        })
        .await;
        let job = scheduled_job(&h, s.id).await.unwrap();
        assert_eq!(job.scheduled_for, call);
        let next = h.schedule(s.id).await.next_run_at.unwrap();
        assert_eq!(
            next,
            minute(10) + jitter_offset(s.id, minute(10), StdDuration::from_secs(30)),
            "the next call is the next occurrence's, with its own offset"
        );
        h.clock.set(call - Duration::milliseconds(1));
        h.engine.settled().await;
        assert!(h.target.requests().is_empty(), "called before its offset");
        h.clock.set(call);
        called_and_recorded(&h, s.id).await;
    })
    .await;
    let calls = h.target.requests();
    assert_eq!(calls.len(), 1);
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs[0].started_at, Some(call));
}

pub async fn a_jittered_fold_that_runs_twice_calls_both_in_order(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    // 02:30 in Berlin on 27 October 2030 comes twice (CEST, then CET), an hour apart; a
    // jitter of 40 minutes keeps each call before the next occurrence.
    h.clock
        .set(Utc.with_ymd_and_hms(2030, 10, 26, 12, 0, 0).unwrap());
    let s = h
        .create(ScheduleDecl {
            timezone: Some("Europe/Berlin".into()),
            on_dst_repeat: Some(OnDstRepeat::Twice),
            max_jitter: Some("40m".into()),
            ..cron("30 2 * * *", 3)
        })
        .await;
    let first = Utc.with_ymd_and_hms(2030, 10, 27, 0, 30, 0).unwrap();
    let second = Utc.with_ymd_and_hms(2030, 10, 27, 1, 30, 0).unwrap();
    let jitter = StdDuration::from_secs(40 * 60);
    let calls = [
        first + jitter_offset(s.id, first, jitter),
        second + jitter_offset(s.id, second, jitter),
    ];
    assert_eq!(s.next_run_at, Some(calls[0]));
    assert_eq!(h.tick_at(calls[0]).await.fired, 1);
    assert_eq!(h.schedule(s.id).await.next_run_at, Some(calls[1]));
    assert_eq!(h.tick_at(calls[1]).await.fired, 1);
    let next_day = Utc.with_ymd_and_hms(2030, 10, 28, 1, 30, 0).unwrap();
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        Some(next_day + jitter_offset(s.id, next_day, jitter))
    );
    let mut fired: Vec<_> = h.jobs(s.id).await.iter().map(|j| j.scheduled_for).collect();
    fired.sort();
    assert_eq!(fired, calls);
}

pub async fn start_and_end_bound_the_fires_and_the_end_completes(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h
        .create(ScheduleDecl {
            start_at: Some(minute(5).to_rfc3339()),
            end_at: Some(minute(7).to_rfc3339()),
            ..cron("* * * * *", 3)
        })
        .await;
    assert_eq!(s.next_run_at, Some(minute(5)), "nothing before the start");
    for m in 5..=7 {
        assert_eq!(h.tick_at(minute(m)).await.fired, 1, "minute {m}");
    }
    let after = h.schedule(s.id).await;
    assert_eq!(
        (after.status, after.next_run_at),
        (ScheduleStatus::Completed, None),
        "past its end, completed (not deleted)"
    );
    assert_eq!(h.tick_at(minute(8)).await.fired, 0);
    assert_eq!(h.target.requests().len(), 3);
}

pub async fn remaining_runs_count_down_with_each_fire_and_complete(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h
        .create(ScheduleDecl {
            remaining_runs: Some(2),
            ..cron("* * * * *", 3)
        })
        .await;
    assert_eq!(s.remaining_runs, Some(2));
    // The first call fails: its retry is open when the next minute comes, so that occurrence
    // is skipped, and a skipped occurrence is not a run.
    h.reply([Reply::status(500)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 1);
    assert_eq!(h.schedule(s.id).await.remaining_runs, Some(1));
    let summary = h.tick_at(minute(2)).await;
    assert_eq!(summary.skipped, 1, "{summary:?}");
    assert_eq!(h.schedule(s.id).await.remaining_runs, Some(1));
    assert_eq!(h.tick_at(minute(3)).await.fired, 1);
    let after = h.schedule(s.id).await;
    assert_eq!(after.remaining_runs, Some(0));
    assert_eq!(
        (after.status, after.next_run_at),
        (ScheduleStatus::Completed, None)
    );
    assert_eq!(h.tick_at(minute(4)).await.fired, 0);
    // Given more runs, it is active again from now.
    let patched = h
        .ops
        .schedule_patch(
            h.env,
            s.id,
            sentin8_cron::core::ops::SchedulePatch {
                policies: sentin8_cron::core::decl::PolicyDecl {
                    remaining_runs: Some(Some(1)),
                    ..Default::default()
                },
                ..Default::default()
            },
            &h.actor(),
        )
        .await
        .unwrap();
    assert_eq!(
        (patched.status, patched.next_run_at),
        (ScheduleStatus::Active, Some(minute(5)))
    );
}

pub async fn a_dead_letter_pauses_a_schedule_that_pauses_on_failure(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h
        .create(ScheduleDecl {
            pause_on_failure: Some(true),
            ..cron("*/5 * * * *", 1)
        })
        .await;
    let other = h.create(cron("*/5 * * * *", 0)).await;
    h.reply([Reply::status(500), Reply::status(500), Reply::status(500)]);
    // The first attempt fails, and its one retry (after the backoff) fails too: DLQ.
    h.tick_at(minute(5)).await;
    let retry_at = h
        .jobs(s.id)
        .await
        .iter()
        .find_map(|j| j.next_attempt_at)
        .expect("a retry is pending");
    h.tick_at(retry_at).await;
    assert_eq!(h.dlq().await.len(), 2, "both schedules dead-lettered");
    let paused = h.schedule(s.id).await;
    assert_eq!(paused.status, ScheduleStatus::Paused);
    // A schedule without the policy goes on.
    assert_eq!(h.schedule(other.id).await.status, ScheduleStatus::Active);
    assert!(
        h.event_types()
            .await
            .contains(&"io.sentin8.cron.schedule.paused.v1".to_owned())
    );
    let reason = engine_audit_reason(&h, s.id, "schedule.pause").await;
    assert!(reason.contains("dead-letter queue"), "{reason}");
    // The schedule says so itself: who paused it, and why.
    let record = h
        .ops
        .schedule_paused_by(h.env, &paused)
        .await
        .unwrap()
        .expect("paused, with its record");
    assert_eq!(record.by, "sentin8-cron:engine");
    assert_eq!(record.reason.as_deref(), Some(reason.as_str()));
    // Paused, it fires no more.
    let calls = h.target.requests().len();
    h.tick_at(minute(10)).await;
    let calls_after: Vec<_> = h
        .target
        .requests()
        .into_iter()
        .skip(calls)
        .map(|r| r.json()["schedule_id"].clone())
        .collect();
    assert_eq!(calls_after, [serde_json::json!(other.id)]);
}

pub async fn after_completion_delete_removes_a_schedule_once_its_last_job_has_ended(
    store: Arc<dyn Store>,
) {
    use sentin8_cron::core::policies::AfterCompletion;
    let h = Harness::new(store).await;
    let once = h
        .create(ScheduleDecl {
            schedule_type: "once-then-gone".into(),
            run_at: Some(minute(1).to_rfc3339()),
            after_completion: Some(AfterCompletion::Delete),
            ..ScheduleDecl::default()
        })
        .await;
    let bounded = h
        .create(ScheduleDecl {
            remaining_runs: Some(2),
            after_completion: Some(AfterCompletion::Delete),
            ..cron("* * * * *", 3)
        })
        .await;
    // The one-shot's call succeeds: completed, then deleted in the same record.
    h.reply([Reply::status(200), Reply::status(200)]);
    assert_eq!(h.tick_at(minute(1)).await.fired, 2);
    assert_eq!(h.schedule(once.id).await.status, ScheduleStatus::Deleted);
    assert_eq!(h.schedule(bounded.id).await.status, ScheduleStatus::Active);
    // The bounded schedule's last run fails: it completed as that run was called, and is kept
    // while the run's retry is open.
    h.reply([Reply::status(500)]);
    assert_eq!(h.tick_at(minute(2)).await.fired, 1);
    let completed = h.schedule(bounded.id).await;
    assert_eq!(
        (completed.status, completed.remaining_runs),
        (ScheduleStatus::Completed, Some(0))
    );
    let retry_at = h
        .jobs(bounded.id)
        .await
        .iter()
        .find_map(|j| j.next_attempt_at)
        .expect("a retry is pending");
    h.reply([Reply::status(200)]);
    h.tick_at(retry_at).await;
    assert_eq!(h.schedule(bounded.id).await.status, ScheduleStatus::Deleted);
    assert_eq!(h.target.requests().len(), 4, "no call was withdrawn");
    // Each deletion went out after the completion, by the engine, with why; and is audited.
    let types = h.event_types().await;
    let deleted = types
        .iter()
        .filter(|t| *t == "io.sentin8.cron.schedule.deleted.v1")
        .count();
    assert_eq!(deleted, 2, "{types:?}");
    let last_completed = types
        .iter()
        .rposition(|t| t == "io.sentin8.cron.schedule.completed.v1")
        .unwrap();
    let last_deleted = types
        .iter()
        .rposition(|t| t == "io.sentin8.cron.schedule.deleted.v1")
        .unwrap();
    assert!(last_completed < last_deleted, "{types:?}");
    for id in [once.id, bounded.id] {
        let reason = engine_audit_reason(&h, id, "schedule.delete").await;
        assert!(reason.contains("after_completion"), "{reason}");
    }
}

/// The reason the engine gave in the audit journal for its `action` on schedule `id` (the
/// entry must be there, by the engine).
async fn engine_audit_reason(h: &Harness, id: ScheduleId, action: &str) -> String {
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let audit = tx
        .audit_query(&AuditQuery {
            schedule_id: Some(id),
            actor: None,
            since: None,
            before: None,
            limit: 100,
        })
        .await
        .unwrap();
    let entry = audit
        .iter()
        .find(|a| a.action == action)
        .unwrap_or_else(|| panic!("{action} is not in the audit journal: {audit:?}"));
    assert_eq!(entry.actor, "sentin8-cron:engine");
    entry.after.as_ref().unwrap()["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}
