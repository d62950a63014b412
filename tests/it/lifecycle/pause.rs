//! A pause that pauses: a paused schedule's pending retry is neither attempted nor landed,
//! and wakes nobody; resuming re-arms it. A schedule whose stored expression no longer parses
//! can still be paused, resumed, patched (without timing) and deleted.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use chrono::Duration;
use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{Actor, Ops, SchedulePatch};
use sentin8_cron::core::store::*;
use sentin8_cron::core::timing::{CronTiming, Timing};
use serde_json::json;

use super::{switchable_target, triggered};
use crate::api::Api;
use crate::conformance::{insert_schedule, new_schedule};
use crate::support::t0;

pub async fn a_paused_schedule_s_retries_wait_until_resumed(store: Arc<dyn Store>) {
    let api = Api::start(store.clone()).await;
    let env = api.env_a;
    let target = switchable_target(Arc::new(AtomicBool::new(true))).await;
    let (schedule_id, job_id) = triggered(&api, &target, 3).await;
    let schedule_id = ScheduleId(schedule_id.parse().unwrap());
    let job_id = JobId(job_id.parse().unwrap());
    api.clock.advance(Duration::seconds(1));
    assert_eq!(api.engine().tick().await.unwrap().retried, 1);
    assert_eq!(target.requests().len(), 1);

    let ops = Ops::new(store.clone());
    let actor = |api: &Api| Actor {
        name: "operator".into(),
        correlation_id: None,
        now: sentin8_cron::core::clock::Clock::now(api.clock.as_ref()),
    };
    ops.schedule_pause(env, schedule_id, &actor(&api), None)
        .await
        .unwrap();
    // Long past every backoff: still nothing is attempted, nothing lands, nothing is due.
    for _ in 0..5 {
        api.clock.advance(Duration::hours(2));
        let summary = api.engine().tick().await.unwrap();
        assert_eq!(summary.retried_attempts, 0, "{summary:?}");
        assert_eq!(summary.dead_lettered, 0, "{summary:?}");
    }
    assert_eq!(target.requests().len(), 1, "no attempt while paused");
    let now = sentin8_cron::core::clock::Clock::now(api.clock.as_ref());
    assert!(store.jobs_due(now, now, 100).await.unwrap().is_empty());
    assert!(
        store.wakeup_next().await.unwrap().is_none(),
        "a paused schedule's retry wakes nobody"
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    let job = tx.job_get(job_id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    assert!(
        tx.dlq_list(&DlqQuery {
            limit: 10,
            ..DlqQuery::default()
        })
        .await
        .unwrap()
        .is_empty()
    );
    drop(tx);

    ops.schedule_resume(env, schedule_id, &actor(&api))
        .await
        .unwrap();
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(
        summary.retried_attempts, 1,
        "resume re-arms the retry: {summary:?}"
    );
    assert_eq!(target.requests().len(), 2);
}

pub async fn a_broken_stored_expression_can_be_paused_resumed_patched_and_deleted(
    store: Arc<dyn Store>,
) {
    let env = EnvId::new();
    let mut new = new_schedule("broken", "billing");
    new.timing = Timing::Cron(CronTiming::from_stored(
        "61 * * * *",
        "Europe/London",
        OnDstGap::Skip,
        OnDstRepeat::Twice,
    ));
    let schedule = insert_schedule(&store, env, new).await;
    let ops = Ops::new(store.clone());
    let actor = Actor {
        name: "operator".into(),
        correlation_id: None,
        now: t0() + Duration::minutes(1),
    };
    let paused = ops
        .schedule_pause(env, schedule.id, &actor, None)
        .await
        .unwrap();
    assert_eq!(paused.status, ScheduleStatus::Paused);
    let patched = ops
        .schedule_patch(
            env,
            schedule.id,
            SchedulePatch {
                payload: Some(json!({"n": 2})),
                ..SchedulePatch::default()
            },
            &actor,
        )
        .await
        .unwrap();
    assert_eq!(patched.payload, json!({"n": 2}));
    let resumed = ops.schedule_resume(env, schedule.id, &actor).await.unwrap();
    assert_eq!(resumed.status, ScheduleStatus::Active);
    assert_eq!(
        resumed.next_run_at,
        Some(actor.now + Duration::hours(1)),
        "looked at again in an hour, as the engine does"
    );
    assert_eq!(resumed.timing.cron_expression(), Some("61 * * * *"));
    let deleted = ops.schedule_delete(env, schedule.id, &actor).await.unwrap();
    assert_eq!(deleted.status, ScheduleStatus::Deleted);
}
