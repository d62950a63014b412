//! A call that panics inside the scheduler still ends in a recorded outcome: its job does not
//! stay running for the life of the process.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use chrono::Duration;
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use sentin8_cron::core::engine::{Engine, EngineConfig};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use serde_json::{Value, json};

use super::cron;
use crate::support::t0;

/// Panics on its first call, answers every later one.
#[derive(Default)]
struct PanicsOnce {
    calls: AtomicUsize,
}

#[async_trait]
impl Dispatcher for PanicsOnce {
    async fn run(&self, _: &RunRequest) -> Result<Value, DispatchError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("a defect in the call path");
        }
        Ok(json!({"ok": true}))
    }
}

pub async fn a_call_that_panics_is_recorded_as_a_failed_attempt(store: Arc<dyn Store>) {
    let clock = Arc::new(ManualClock::new(t0()));
    let env = EnvId::new();
    let actor = Actor {
        name: "tester".into(),
        correlation_id: None,
        now: t0(),
    };
    let schedule = Ops::new(store.clone())
        .schedule_create(
            env,
            CreateSchedule {
                domain: "billing".into(),
                spec: cron("0 * * * *", 3).validate(t0()).unwrap(),
                target: Target::validate(&json!({"baseUrl": "http://127.0.0.1:9/billing"}))
                    .unwrap(),
            },
            &actor,
        )
        .await
        .unwrap();
    let dispatcher = Arc::new(PanicsOnce::default());
    let engine = Engine::new(
        store.clone(),
        dispatcher.clone(),
        clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    clock.set(t0() + Duration::hours(1));
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.fired, 1, "{summary:?}");
    let jobs = |store: Arc<dyn Store>| async move {
        let mut tx = store.tenant_begin(env).await.unwrap();
        let job = tx
            .job_list(&JobQuery {
                schedule_id: Some(schedule.id),
                limit: 10,
                ..JobQuery::default()
            })
            .await
            .unwrap()
            .remove(0);
        let attempts = tx.job_attempts_list(job.id).await.unwrap();
        (job, attempts)
    };
    let (job, attempts) = jobs(store.clone()).await;
    assert_eq!(job.status, JobStatus::Pending, "not left running");
    assert_eq!(attempts[0].error_class.as_deref(), Some("internal"));

    // Its retry runs after the backoff like any other.
    clock.set(t0() + Duration::hours(1) + Duration::minutes(10));
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.retried_attempts, 1, "{summary:?}");
    let (job, _) = jobs(store).await;
    assert_eq!(job.status, JobStatus::Succeeded);
    assert_eq!(dispatcher.calls.load(Ordering::SeqCst), 2);
}
