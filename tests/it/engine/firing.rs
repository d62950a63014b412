//! Firing, retries with backoff, the DLQ and one-shot completion.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::{EngineConfig, TickSummary};
use sentin8_cron::core::model::*;
use sentin8_cron::core::retry::RetryPolicy;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use serde_json::json;

use super::{Harness, cron};
use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

pub async fn fires_once_and_records_success(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    assert_eq!(s.next_run_at, Some(t0() + Duration::minutes(5)));

    let idle = h.tick_at(t0() + Duration::minutes(4)).await;
    assert_eq!(idle, TickSummary::default(), "nothing is due yet");
    assert!(h.target.requests().is_empty());

    let due = t0() + Duration::minutes(5);
    let summary = h.tick_at(due).await;
    assert_eq!((summary.due, summary.fired, summary.succeeded), (1, 1, 1));

    let requests = h.target.requests();
    assert_eq!(requests.len(), 1);
    let call = &requests[0];
    assert_eq!(call.method, "POST");
    assert_eq!(call.path, "/billing/v1/internal/schedules/run");
    assert_eq!(call.bearer(), Some("test-m2m-token"));
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    let envelope = call.json();
    assert_eq!(envelope["schedule_id"], json!(s.id));
    assert_eq!(envelope["job_id"], json!(job.id));
    assert_eq!(envelope["env_id"], json!(h.env));
    assert_eq!(envelope["domain"], "billing");
    assert_eq!(envelope["schedule_type"], json!(s.schedule_type));
    assert_eq!(envelope["payload"], json!({"report": "daily"}));
    assert_eq!(envelope["attempt"], 1);
    assert_eq!(envelope["correlation_id"], json!(s.id.to_string()));
    let key = format!("schedule:{}:{}", s.id, job.id);
    assert_eq!(envelope["idempotency_key"], json!(key));
    assert_eq!(call.header("idempotency-key"), Some(key.as_str()));
    let scheduled_for: DateTime<Utc> =
        serde_json::from_value(envelope["scheduled_for"].clone()).unwrap();
    assert_eq!(scheduled_for, due);

    assert_eq!(job.status, JobStatus::Succeeded);
    assert_eq!(job.result, Some(json!({"ok": true})));
    assert_eq!(job.scheduled_for, due);
    let after = h.schedule(s.id).await;
    assert_eq!(after.next_run_at, Some(due + Duration::minutes(5)));
    assert_eq!(after.last_run_at, Some(due));
    assert_eq!(
        h.event_types().await,
        [
            "io.sentin8.cron.schedule.created.v1",
            "io.sentin8.cron.job.succeeded.v1"
        ]
    );

    // Ticking again at the same instant fires nothing: the schedule already advanced.
    let again = h.tick_at(due).await;
    assert_eq!(again.fired, 0);
    assert_eq!(h.target.requests().len(), 1);
}

pub async fn retries_back_off_then_land_in_the_dlq(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("0 * * * *", 2)).await;
    h.reply([Reply::status(503), Reply::status(500), Reply::status(502)]);
    let due = t0() + Duration::hours(1);

    let first = h.tick_at(due).await;
    assert_eq!((first.fired, first.failed, first.retried), (1, 1, 1));
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(job.error.as_deref(), Some("proxy-back status 503"));
    assert_eq!(job.next_attempt_at, Some(due + Duration::seconds(60)));
    assert_eq!(h.schedule(s.id).await.retry_count, 1);

    // Not before the backoff has elapsed.
    let early = h.tick_at(due + Duration::seconds(59)).await;
    assert_eq!(early.retried_attempts, 0);
    assert_eq!(h.target.requests().len(), 1);

    let second = h.tick_at(due + Duration::seconds(60)).await;
    assert_eq!((second.retried_attempts, second.retried), (1, 1));
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.attempt, 2);
    assert_eq!(
        job.next_attempt_at,
        Some(due + Duration::seconds(60 + 120)),
        "backoff doubles"
    );
    assert_eq!(h.schedule(s.id).await.retry_count, 2);

    let third = h.tick_at(due + Duration::seconds(180)).await;
    assert_eq!((third.retried_attempts, third.dead_lettered), (1, 1));
    let jobs = h.jobs(s.id).await;
    assert_eq!(jobs.len(), 1, "retries reuse one job");
    assert_eq!(jobs[0].status, JobStatus::Failed);
    assert_eq!(jobs[0].attempt, 3);
    let schedule = h.schedule(s.id).await;
    assert_eq!(schedule.retry_count, 0, "reset on DLQ landing");
    assert_eq!(
        schedule.status,
        ScheduleStatus::Active,
        "the DLQ never stops a schedule"
    );
    assert_eq!(schedule.next_run_at, Some(due + Duration::hours(1)));

    let dlq = h.dlq().await;
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].job_id, jobs[0].id);
    assert_eq!(dlq[0].attempts, 3);
    assert_eq!(dlq[0].last_error, "proxy-back status 502");
    assert_eq!(dlq[0].scheduled_for, due);

    // Every attempt carried the same idempotency key and a growing attempt number.
    let calls = h.target.requests();
    let attempts: Vec<_> = calls.iter().map(|c| c.json()["attempt"].clone()).collect();
    assert_eq!(attempts, [json!(1), json!(2), json!(3)]);
    let keys: Vec<_> = calls
        .iter()
        .map(|c| c.header("idempotency-key").unwrap().to_owned())
        .collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));

    assert_eq!(
        h.event_types().await,
        [
            "io.sentin8.cron.schedule.created.v1",
            "io.sentin8.cron.job.retried.v1",
            "io.sentin8.cron.job.retried.v1",
            "io.sentin8.cron.job.failed.v1"
        ]
    );
    // The next regular fire runs normally.
    let next = h.tick_at(due + Duration::hours(1)).await;
    assert_eq!(next.succeeded, 1);
}

pub async fn backoff_is_capped(store: Arc<dyn Store>) {
    let config = EngineConfig {
        retry: RetryPolicy {
            base: StdDuration::from_secs(60),
            cap: StdDuration::from_secs(150),
        },
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let s = h.create(cron("0 0 1 1 *", 5)).await;
    h.reply((0..4).map(|_| Reply::status(500)));
    let mut at = s.next_run_at.unwrap();
    let mut delays = Vec::new();
    for _ in 0..4 {
        h.tick_at(at).await;
        let job = h.jobs(s.id).await.remove(0);
        let next = job.next_attempt_at.expect("a retry is pending");
        delays.push((next - at).num_seconds());
        at = next;
    }
    assert_eq!(delays, [60, 120, 150, 150]);
}

pub async fn success_resets_the_retry_count(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("0 * * * *", 3)).await;
    h.reply([Reply::status(500)]);
    let due = t0() + Duration::hours(1);
    h.tick_at(due).await;
    assert_eq!(h.schedule(s.id).await.retry_count, 1);
    let retry = h.tick_at(due + Duration::seconds(60)).await;
    assert_eq!(retry.succeeded, 1);
    assert_eq!(h.schedule(s.id).await.retry_count, 0);
    assert_eq!(h.jobs(s.id).await[0].status, JobStatus::Succeeded);
}

pub async fn one_shots_complete_after_success_or_dlq(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let run_at = t0() + Duration::minutes(30);
    let ok = h
        .create(ScheduleDecl {
            schedule_type: "once-ok".into(),
            run_at: Some(run_at.to_rfc3339()),
            ..ScheduleDecl::default()
        })
        .await;
    let doomed = h
        .create(ScheduleDecl {
            schedule_type: "once-doomed".into(),
            run_at: Some(run_at.to_rfc3339()),
            max_retries: Some(0),
            ..ScheduleDecl::default()
        })
        .await;
    assert_eq!(ok.kind(), ScheduleKind::Once);
    assert_eq!(ok.next_run_at, Some(run_at));
    // The target fails exactly the doomed schedule's call.
    h.replies.lock().unwrap().clear();
    let doomed_id = doomed.id;
    let target = RawServer::start(move |req: &Recorded| {
        if req.json()["schedule_id"] == json!(doomed_id) {
            Reply::status(500)
        } else {
            Reply::json(200, json!({"done": 1}))
        }
    })
    .await;
    for id in [ok.id, doomed.id] {
        let mut schedule = h.schedule(id).await;
        schedule.target = Target::from_stored(json!({"baseUrl": target.url()}));
        let mut tx = h.store.tenant_begin(h.env).await.unwrap();
        tx.schedule_set_definition(&ScheduleSetDefinition::to_match(
            &schedule,
            &schedule.updated_by,
            schedule.updated_at,
        ))
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    let summary = h.tick_at(run_at).await;
    assert_eq!(
        (summary.fired, summary.succeeded, summary.dead_lettered),
        (2, 1, 1)
    );
    let ok = h.schedule(ok.id).await;
    assert_eq!(ok.status, ScheduleStatus::Completed);
    assert_eq!(ok.next_run_at, None);
    let doomed = h.schedule(doomed.id).await;
    assert_eq!(doomed.status, ScheduleStatus::Completed);
    assert_eq!(h.dlq().await.len(), 1);

    // Completed one-shots never fire again.
    let later = h.tick_at(run_at + Duration::days(1)).await;
    assert_eq!(later.due, 0);
    assert_eq!(target.requests().len(), 2);
}
