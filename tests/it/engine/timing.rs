//! Misfires, pending retries, and stored timings or targets that no longer parse.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{OpsError, SchedulePatch};
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::{CronTiming, Timing};
use serde_json::json;

use super::{Harness, cron};
use crate::raw_http::Reply;
use crate::support::t0;

pub async fn a_fire_during_a_pending_retry_is_skipped(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/1 * * * *", 3)).await;
    h.reply([Reply::status(500)]);
    let due = t0() + Duration::minutes(1);
    h.tick_at(due).await; // fails; retry due at +60s, i.e. exactly the next regular fire
    // At the next minute the regular fire is due and so is the retry: the fire is skipped
    // (the retry's job is still open) and the retry runs.
    let summary = h.tick_at(due + Duration::minutes(1)).await;
    assert_eq!(summary.skipped, 1);
    assert_eq!(summary.retried_attempts, 1);
    let jobs = h.jobs(s.id).await;
    let statuses: Vec<_> = jobs.iter().map(|j| j.status).collect();
    assert_eq!(statuses, [JobStatus::Succeeded, JobStatus::Skipped]);
    assert!(jobs[1].error.as_deref().unwrap().contains("still pending"));
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        Some(due + Duration::minutes(2))
    );
    assert!(
        h.event_types()
            .await
            .contains(&"io.sentin8.cron.job.skipped.v1".to_owned())
    );
    assert_eq!(
        h.target.requests().len(),
        2,
        "the skipped fire made no call"
    );
}

pub async fn misfires_are_skipped_not_replayed(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    // The ticker was down for an hour: the latest occurrence (:60) fires now, once, then the
    // next one after now.
    let now = t0() + Duration::minutes(61);
    let summary = h.tick_at(now).await;
    assert_eq!((summary.fired, summary.skipped), (1, 1));
    let after = h.schedule(s.id).await;
    assert_eq!(after.next_run_at, Some(t0() + Duration::minutes(65)));
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs[0].scheduled_for, t0() + Duration::minutes(60));
    assert_eq!(jobs[0].status, JobStatus::Succeeded);
    let calls = h.target.requests();
    assert_eq!(calls.len(), 1);
    let called_for: chrono::DateTime<chrono::Utc> = calls[0].json()["scheduled_for"]
        .as_str()
        .expect("the call names its occurrence")
        .parse()
        .unwrap();
    assert_eq!(called_for, t0() + Duration::minutes(60));
    // The occurrences before it that nobody fired (:05 to :55) are on the record as one
    // skipped job.
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1].status, JobStatus::Skipped);
    assert_eq!(
        jobs[1].missed,
        Some(MissedOccurrences {
            first: t0() + Duration::minutes(5),
            last: t0() + Duration::minutes(55),
            count: 11,
        })
    );
    assert_eq!(jobs[1].scheduled_for, t0() + Duration::minutes(5));
    assert!(
        jobs[1]
            .error
            .as_deref()
            .unwrap()
            .contains("11 occurrence(s)")
    );
    assert!(
        h.event_types()
            .await
            .contains(&"io.sentin8.cron.job.skipped.v1".to_owned())
    );
    assert_eq!(
        h.engine
            .metrics()
            .skipped
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let again = h.tick_at(now).await;
    assert_eq!(again.fired, 0, "no catch-up storm");
    assert_eq!(h.jobs(s.id).await.len(), 2, "nothing recorded twice");
}

pub async fn an_unparseable_stored_expression_waits_an_hour(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let mut broken = h.schedule(s.id).await;
    let cron = broken.timing.cron().unwrap().clone();
    broken.timing = Timing::Cron(CronTiming::from_stored(
        "this is not cron",
        &cron.timezone,
        cron.on_dst_gap,
        cron.on_dst_repeat,
    ));
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    tx.schedule_set_definition(&ScheduleSetDefinition::to_match(
        &broken,
        &broken.updated_by,
        broken.updated_at,
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();
    // The row still loads, with its text and the parse failure.
    let loaded = h.schedule(s.id).await;
    assert_eq!(loaded.timing.cron_expression(), Some("this is not cron"));
    assert!(loaded.timing.cron().unwrap().zoned().is_err());
    let now = t0() + Duration::minutes(5);
    let summary = h.tick_at(now).await;
    assert_eq!(summary.fired, 1, "the due fire still runs");
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        Some(now + Duration::hours(1))
    );
}

/// Writes a stored target straight into the row, as an older build or a hand edit could have.
async fn store_target(h: &Harness, id: ScheduleId, config: serde_json::Value) {
    let mut schedule = h.schedule(id).await;
    schedule.target = Target::from_stored(config);
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    tx.schedule_set_definition(&ScheduleSetDefinition::to_match(
        &schedule,
        "hand-edit",
        schedule.updated_at,
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

pub async fn a_stored_target_that_fails_at_dispatch_dead_letters_at_once(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let bad_port = h.create(cron("0 * * * *", 5)).await;
    let missing = h.create(cron("0 * * * *", 5)).await;
    store_target(
        &h,
        bad_port.id,
        json!({"baseUrl": "http://127.0.0.1:99999"}),
    )
    .await;
    store_target(&h, missing.id, json!({"region": "eu"})).await;
    // It still loads, with its problem kept for dispatch.
    let loaded = h.schedule(bad_port.id).await;
    assert_eq!(
        loaded.target.config(),
        &json!({"baseUrl": "http://127.0.0.1:99999"})
    );
    assert!(loaded.target.base_url().is_err());

    let due = t0() + Duration::hours(1);
    let summary = h.tick_at(due).await;
    assert_eq!(
        (
            summary.fired,
            summary.failed,
            summary.retried,
            summary.dead_lettered
        ),
        (2, 2, 0, 2),
        "no retries are burnt on a misconfiguration"
    );
    assert!(h.target.requests().is_empty(), "nothing was called");

    let dlq = h.dlq().await;
    assert_eq!(dlq.len(), 2);
    for (id, reason) in [
        (bad_port.id, "invalid baseUrl in target_config"),
        (missing.id, "missing baseUrl in target_config"),
    ] {
        let entry = dlq.iter().find(|e| e.schedule_id == id).expect("entry");
        assert_eq!(entry.attempts, 1);
        assert!(
            entry.last_error.starts_with("configuration: "),
            "{}",
            entry.last_error
        );
        assert!(entry.last_error.contains(reason), "{}", entry.last_error);
        let jobs = h.jobs(id).await;
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].status, jobs[0].attempt), (JobStatus::Failed, 1));
        let schedule = h.schedule(id).await;
        assert_eq!(schedule.retry_count, 0);
        assert_eq!(
            schedule.status,
            ScheduleStatus::Active,
            "the DLQ never stops a schedule"
        );
        assert_eq!(schedule.next_run_at, Some(due + Duration::hours(1)));
    }
    // Nothing is left pending for a later tick.
    let later = h.tick_at(due + Duration::minutes(30)).await;
    assert_eq!((later.retried_attempts, later.fired), (0, 0));
}

pub async fn patches_work_on_a_schedule_whose_stored_timing_no_longer_parses(
    store: Arc<dyn Store>,
) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    let mut broken = h.schedule(s.id).await;
    broken.timing = Timing::Cron(CronTiming::from_stored(
        "61 * * * *",
        "UTC",
        Default::default(),
        Default::default(),
    ));
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    tx.schedule_set_definition(&ScheduleSetDefinition::to_match(
        &broken,
        "hand-edit",
        broken.updated_at,
    ))
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let patched = h
        .ops
        .schedule_patch(
            h.env,
            s.id,
            SchedulePatch {
                payload: Some(json!({"report": "weekly"})),
                max_retries: Some(1),
                ..SchedulePatch::default()
            },
            &h.actor(),
        )
        .await
        .expect("a payload-only patch does not touch the timing");
    assert_eq!(patched.payload, json!({"report": "weekly"}));
    assert_eq!(patched.max_retries, 1);
    assert_eq!(patched.timing.cron_expression(), Some("61 * * * *"));
    assert_eq!(patched.next_run_at, s.next_run_at);

    let paused = h
        .ops
        .schedule_pause(h.env, s.id, &h.actor(), None)
        .await
        .unwrap();
    assert_eq!(paused.status, ScheduleStatus::Paused);
    // Resuming works too: like the engine, it looks at the broken expression again in an hour.
    let resumed = h
        .ops
        .schedule_resume(h.env, s.id, &h.actor())
        .await
        .expect("resume of a broken expression");
    assert_eq!(resumed.status, ScheduleStatus::Active);
    assert_eq!(
        resumed.next_run_at,
        Some(h.actor().now + chrono::Duration::hours(1))
    );
    // A new expression repairs it; the zone is kept.
    let repaired = h
        .ops
        .schedule_patch(
            h.env,
            s.id,
            SchedulePatch {
                cron: Some("0 * * * *".into()),
                status: Some(ScheduleStatus::Active),
                ..SchedulePatch::default()
            },
            &h.actor(),
        )
        .await
        .unwrap();
    assert_eq!(repaired.timing.cron_expression(), Some("0 * * * *"));
    assert_eq!(repaired.timing.timezone(), Some("UTC"));
    assert_eq!(repaired.next_run_at, Some(t0() + Duration::hours(1)));
    // A bad target in a patch is a field error, and nothing changes.
    match h
        .ops
        .schedule_patch(
            h.env,
            s.id,
            SchedulePatch {
                target_config: Some(json!({"baseUrl": "http://127.0.0.1:99999"})),
                ..SchedulePatch::default()
            },
            &h.actor(),
        )
        .await
    {
        Err(OpsError::Invalid(errors)) => {
            assert_eq!(errors[0].field, "target_config.baseUrl", "{errors:?}")
        }
        other => panic!("bad target patch: {other:?}"),
    }
    assert_eq!(h.schedule(s.id).await, repaired);
}
