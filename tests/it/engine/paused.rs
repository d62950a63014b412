//! A schedule paused while its attempt is in flight: only a failure that would be retried waits
//! for the resume (due at once when it comes, never claimed meanwhile); a last allowed attempt
//! and a misconfiguration still land in the DLQ. Every outcome reaches the attempt ledger.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::Duration;
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::decl::ScheduleDecl;
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

/// Pauses the schedule it is calling, then fails the call as told by its schedule type.
struct PausingDispatcher {
    ops: Ops,
    clock: Arc<ManualClock>,
    failures: HashMap<String, fn() -> DispatchError>,
}

#[async_trait]
impl Dispatcher for PausingDispatcher {
    async fn run(&self, request: &RunRequest) -> Result<Value, DispatchError> {
        let actor = Actor {
            name: "operator".into(),
            correlation_id: None,
            now: self.clock.now(),
        };
        self.ops
            .schedule_pause(request.env_id, request.schedule_id, &actor, None)
            .await
            .expect("paused during the call");
        Err(self.failures[&request.schedule_type]())
    }
}

pub async fn a_pause_during_an_attempt_holds_only_retries(store: Arc<dyn Store>) {
    let clock = Arc::new(ManualClock::new(t0()));
    let ops = Ops::new(store.clone());
    let env = EnvId::new();
    let decls: [(ScheduleDecl, fn() -> DispatchError); 3] = [
        (cron("0 * * * *", 3), || {
            DispatchError::Status(503, "busy".into())
        }),
        (cron("0 * * * *", 0), || {
            DispatchError::Status(503, "busy".into())
        }),
        (cron("0 * * * *", 3), || DispatchError::MissingBaseUrl),
    ];
    let mut failures = HashMap::new();
    let mut ids = Vec::new();
    for (decl, failure) in decls {
        failures.insert(decl.schedule_type.clone(), failure);
        let spec = decl.validate(t0()).unwrap();
        let schedule = ops
            .schedule_create(
                env,
                CreateSchedule {
                    domain: "billing".into(),
                    spec,
                    target: Target::validate(&json!({"baseUrl": "http://127.0.0.1:9/billing"}))
                        .unwrap(),
                },
                &Actor {
                    name: "tester".into(),
                    correlation_id: None,
                    now: t0(),
                },
            )
            .await
            .unwrap();
        ids.push(schedule.id);
    }
    let dispatcher = Arc::new(PausingDispatcher {
        ops: Ops::new(store.clone()),
        clock: clock.clone(),
        failures,
    });
    let engine = Engine::new(
        store.clone(),
        dispatcher,
        clock.clone(),
        EngineConfig::default(),
        Arc::new(Metrics::default()),
    );
    let fired_at = t0() + Duration::hours(1);
    clock.set(fired_at);
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 2, "{summary:?}");

    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut jobs = Vec::new();
    for id in &ids {
        let mut list = tx
            .job_list(&JobQuery {
                schedule_id: Some(*id),
                limit: 10,
                ..JobQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(list.len(), 1, "{list:?}");
        jobs.push(list.remove(0));
    }
    // Retryable with retries left: waits for the resume, due as soon as it comes.
    assert_eq!(jobs[0].status, JobStatus::Pending);
    assert_eq!(jobs[0].next_attempt_at, Some(fired_at));
    // The last allowed attempt and the misconfiguration land as they would unpaused.
    assert_eq!(jobs[1].status, JobStatus::Failed);
    assert_eq!(jobs[2].status, JobStatus::Failed);
    let landed: Vec<JobId> = tx
        .dlq_list(&DlqQuery {
            limit: 10,
            ..DlqQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.job_id)
        .collect();
    assert_eq!(landed.len(), 2, "{landed:?}");
    assert!(landed.contains(&jobs[1].id) && landed.contains(&jobs[2].id));
    // Each outcome is in the ledger with its detail.
    let classes = [
        ("status", Some(503)),
        ("status", Some(503)),
        ("configuration", None),
    ];
    for (job, (class, status)) in jobs.iter().zip(classes) {
        let attempts = tx.job_attempts_list(job.id).await.unwrap();
        assert_eq!(attempts.len(), 1, "{attempts:?}");
        assert_eq!(attempts[0].error_class.as_deref(), Some(class));
        assert_eq!(attempts[0].http_status, status);
        assert!(attempts[0].started_at.is_some());
    }
    drop(tx);

    // While paused, the waiting retry is neither due nor attempted.
    clock.set(fired_at + Duration::minutes(30));
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.retried_attempts, 0, "{summary:?}");
    let now = clock.now();
    assert!(store.jobs_due(now, now, 10).await.unwrap().is_empty());
}

/// A one-shot paused during its retries: resuming re-arms its waiting retry (it has no fire of
/// its own ahead), which runs and completes the schedule.
pub async fn a_one_shot_paused_during_its_retries_resumes_and_completes(store: Arc<dyn Store>) {
    let h = super::Harness::new(store).await;
    let run_at = t0() + Duration::minutes(30);
    let once = h
        .create(ScheduleDecl {
            schedule_type: "once-paused".into(),
            run_at: Some(run_at.to_rfc3339()),
            max_retries: Some(3),
            ..ScheduleDecl::default()
        })
        .await;
    h.reply([crate::raw_http::Reply::status(503)]);
    let summary = h.tick_at(run_at).await;
    assert_eq!(summary.retried, 1, "{summary:?}");
    h.ops
        .schedule_pause(h.env, once.id, &h.actor(), None)
        .await
        .unwrap();

    // Paused past its backoff: the retry waits.
    let later = run_at + Duration::hours(2);
    let summary = h.tick_at(later).await;
    assert_eq!(summary.retried_attempts, 0, "{summary:?}");
    assert_eq!(h.target.requests().len(), 1);

    let resumed = h
        .ops
        .schedule_resume(h.env, once.id, &h.actor())
        .await
        .expect("a one-shot with a waiting retry resumes");
    assert_eq!(resumed.status, ScheduleStatus::Active);
    assert_eq!(resumed.next_run_at, None);
    let summary = h.tick_at(later + Duration::seconds(1)).await;
    assert_eq!(
        (summary.retried_attempts, summary.succeeded),
        (1, 1),
        "{summary:?}"
    );
    assert_eq!(h.target.requests().len(), 2);
    assert_eq!(h.schedule(once.id).await.status, ScheduleStatus::Completed);
    let jobs = h.jobs(once.id).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!((jobs[0].status, jobs[0].attempt), (JobStatus::Succeeded, 2));

    // Completed, nothing left open: resuming again is refused as before.
    let err = h
        .ops
        .schedule_resume(h.env, once.id, &h.actor())
        .await
        .unwrap_err();
    match err {
        sentin8_cron::core::ops::OpsError::Invalid(errors) => {
            assert_eq!(errors[0].field, "status", "{errors:?}")
        }
        other => panic!("expected a field error, got {other:?}"),
    }
}

/// A paused schedule runs nothing, so triggering it is refused (a conflict saying how to resume
/// it) and leaves no job. A one-shot whose instant passed while paused is still refused its
/// resume (no fire left); once resumed, a cron schedule can be triggered again.
pub async fn a_paused_schedule_refuses_a_trigger(store: Arc<dyn Store>) {
    let h = super::Harness::new(store).await;
    let run_at = t0() + Duration::minutes(30);
    let once = h
        .create(ScheduleDecl {
            schedule_type: "once-missed".into(),
            run_at: Some(run_at.to_rfc3339()),
            ..ScheduleDecl::default()
        })
        .await;
    h.ops
        .schedule_pause(h.env, once.id, &h.actor(), None)
        .await
        .unwrap();
    match h.ops.schedule_trigger(h.env, once.id, &h.actor()).await {
        Err(sentin8_cron::core::ops::OpsError::Conflict(detail)) => {
            assert!(detail.contains("is paused"), "{detail}");
            assert!(
                detail.contains(&format!("/v1/schedules/{}/resume", once.id)),
                "{detail}"
            );
        }
        other => panic!("expected the trigger refused, got {other:?}"),
    }
    assert!(
        h.jobs(once.id).await.is_empty(),
        "no job waits for the resume"
    );
    h.clock.set(run_at + Duration::hours(1));
    match h.ops.schedule_resume(h.env, once.id, &h.actor()).await {
        Err(sentin8_cron::core::ops::OpsError::Invalid(errors)) => {
            assert_eq!(errors[0].field, "run_at", "{errors:?}")
        }
        other => panic!("expected the resume refused, got {other:?}"),
    }
    assert_eq!(h.schedule(once.id).await.status, ScheduleStatus::Paused);

    let cron = h
        .create(ScheduleDecl {
            schedule_type: "cron-paused".into(),
            cron: Some("0 3 * * *".into()),
            ..ScheduleDecl::default()
        })
        .await;
    h.ops
        .schedule_pause(h.env, cron.id, &h.actor(), None)
        .await
        .unwrap();
    assert!(
        h.ops
            .schedule_trigger(h.env, cron.id, &h.actor())
            .await
            .is_err()
    );
    // A backfill is refused alike: its jobs would only wait for the resume.
    h.clock.set(t0() + Duration::days(3));
    match h
        .ops
        .schedule_backfill(
            h.env,
            cron.id,
            (t0(), t0() + Duration::days(2)),
            None,
            &h.actor(),
        )
        .await
    {
        Err(sentin8_cron::core::ops::OpsError::Conflict(detail)) => {
            assert!(detail.contains("is paused"), "{detail}");
            assert!(detail.contains("then backfill it"), "{detail}");
        }
        other => panic!("expected the backfill refused, got {other:?}"),
    }
    assert!(h.jobs(cron.id).await.is_empty(), "nothing was backfilled");
    h.ops
        .schedule_resume(h.env, cron.id, &h.actor())
        .await
        .unwrap();
    let job = h
        .ops
        .schedule_trigger(h.env, cron.id, &h.actor())
        .await
        .unwrap();
    assert_eq!(h.jobs(cron.id).await, [job]);
}
