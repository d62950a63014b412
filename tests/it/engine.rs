//! The execution engine against real stores and a real HTTP target on 127.0.0.1: firing,
//! retries with backoff, the dead-letter queue, one-shot completion, skipped overlaps, misfires
//! and recovery, with an injected clock (nothing sleeps for the schedule's sake).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::callback::{DispatchConfig, HttpDispatcher, Secret, TokenSettings};
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::{Engine, EngineConfig, TickSummary};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops, OpsError, SchedulePatch};
use sentin8_cron::core::retry::RetryPolicy;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::{CronTiming, Timing};
use serde_json::json;

use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

pub struct Harness {
    pub store: Arc<dyn Store>,
    pub clock: Arc<ManualClock>,
    pub target: RawServer,
    pub replies: Arc<Mutex<VecDeque<Reply>>>,
    pub engine: Engine,
    pub ops: Ops,
    pub env: EnvId,
}

pub fn dispatcher(clock: Arc<dyn Clock>, timeout: StdDuration) -> Arc<HttpDispatcher> {
    let config = DispatchConfig {
        token: TokenSettings::Static(Secret::new("test-m2m-token")),
        job_timeout: timeout,
        egress: crate::support::dev_egress(),
        ..DispatchConfig::default()
    };
    Arc::new(HttpDispatcher::with_clock(&config, clock).expect("dispatcher"))
}

impl Harness {
    pub async fn new(store: Arc<dyn Store>) -> Self {
        Self::with_config(store, EngineConfig::default()).await
    }

    pub async fn with_config(store: Arc<dyn Store>, mut config: EngineConfig) -> Self {
        let clock = Arc::new(ManualClock::new(t0()));
        let replies: Arc<Mutex<VecDeque<Reply>>> = Arc::default();
        let target = RawServer::start({
            let replies = replies.clone();
            move |_req: &Recorded| {
                replies
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or_else(|| Reply::json(200, json!({"ok": true})))
            }
        })
        .await;
        config.job_timeout = config.job_timeout.min(StdDuration::from_secs(5));
        let engine = Engine::new(
            store.clone(),
            dispatcher(clock.clone(), config.job_timeout),
            clock.clone(),
            config,
            Arc::new(Metrics::default()),
        );
        Self {
            ops: Ops::new(store.clone()),
            store,
            clock,
            target,
            replies,
            engine,
            env: EnvId::new(),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn actor(&self) -> Actor {
        Actor {
            name: "tester".into(),
            correlation_id: None,
            now: self.now(),
        }
    }

    pub fn reply(&self, replies: impl IntoIterator<Item = Reply>) {
        self.replies.lock().unwrap().extend(replies);
    }

    pub async fn create(&self, decl: ScheduleDecl) -> Schedule {
        let spec = decl.validate(self.now()).expect("valid declaration");
        self.ops
            .schedule_create(
                self.env,
                CreateSchedule {
                    domain: "billing".into(),
                    spec,
                    target: Target::validate(
                        &json!({"baseUrl": format!("{}/billing", self.target.url())}),
                    )
                    .unwrap(),
                },
                &self.actor(),
            )
            .await
            .expect("schedule created")
    }

    pub async fn tick_at(&self, at: DateTime<Utc>) -> TickSummary {
        self.clock.set(at);
        self.engine.tick().await.expect("tick")
    }

    pub async fn schedule(&self, id: ScheduleId) -> Schedule {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.schedule_get(id).await.unwrap().unwrap()
    }

    pub async fn jobs(&self, id: ScheduleId) -> Vec<Job> {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        let mut jobs = tx
            .job_list(&JobQuery {
                schedule_id: Some(id),
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap();
        jobs.reverse();
        jobs
    }

    pub async fn event_types(&self) -> Vec<String> {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.outbox_list(0, 1000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.event_type)
            .collect()
    }

    pub async fn dlq(&self) -> Vec<DlqEntry> {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.dlq_list(&DlqQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap()
    }
}

pub fn cron(expr: &str, max_retries: u32) -> ScheduleDecl {
    ScheduleDecl {
        schedule_type: format!("job-{}", uuid::Uuid::new_v4().simple()),
        cron: Some(expr.into()),
        max_retries: Some(max_retries),
        payload: Some(json!({"report": "daily"})),
        ..ScheduleDecl::default()
    }
}

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
            "sentin8:cron:schedule:created",
            "sentin8:cron:schedule:completed"
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
            "sentin8:cron:schedule:created",
            "sentin8:cron:job:retried",
            "sentin8:cron:job:retried",
            "sentin8:cron:schedule:failed"
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
            .contains(&"sentin8:cron:job:skipped".to_owned())
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
    // The ticker was down for an hour: one fire now, then the next one after now.
    let now = t0() + Duration::minutes(61);
    let summary = h.tick_at(now).await;
    assert_eq!(summary.fired, 1);
    let after = h.schedule(s.id).await;
    assert_eq!(after.next_run_at, Some(t0() + Duration::minutes(65)));
    assert_eq!(
        h.jobs(s.id).await[0].scheduled_for,
        t0() + Duration::minutes(5)
    );
    let again = h.tick_at(now).await;
    assert_eq!(again.fired, 0, "no catch-up storm");
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

    let paused = h.ops.schedule_pause(h.env, s.id, &h.actor()).await.unwrap();
    assert_eq!(paused.status, ScheduleStatus::Paused);
    // Resuming needs a next fire, which the broken expression cannot give: refused on `cron`.
    match h.ops.schedule_resume(h.env, s.id, &h.actor()).await {
        Err(OpsError::Invalid(errors)) => assert_eq!(errors[0].field, "cron", "{errors:?}"),
        other => panic!("resume of a broken expression: {other:?}"),
    }
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

pub async fn timeouts_are_failed_attempts(store: Arc<dyn Store>) {
    let config = EngineConfig {
        job_timeout: StdDuration::from_millis(300),
        ..EngineConfig::default()
    };
    let h = Harness::with_config(store, config).await;
    let s = h.create(cron("*/5 * * * *", 1)).await;
    h.reply([Reply::Hang]);
    let summary = h.tick_at(t0() + Duration::minutes(5)).await;
    assert_eq!((summary.failed, summary.retried), (1, 1));
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.status, JobStatus::Pending);
    assert!(
        job.error.as_deref().unwrap().contains("timed out"),
        "{:?}",
        job.error
    );
}

pub async fn stale_attempts_are_recovered_as_failures(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("0 0 * * *", 2)).await;
    // A process claimed the fire and died before recording an outcome.
    let due = s.next_run_at.unwrap();
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    tx.schedule_claim(&ScheduleClaim {
        id: s.id,
        expected_next_run_at: due,
        next_run_at: Some(due + Duration::days(1)),
        now: due,
    })
    .await
    .unwrap()
    .unwrap();
    let orphan = tx
        .job_insert(&NewJob {
            id: JobId::new(),
            schedule_id: s.id,
            status: JobStatus::Running,
            attempt: 1,
            scheduled_for: due,
            next_attempt_at: None,
            started_at: Some(due),
            finished_at: None,
            error: None,
            now: due,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let stale_after = h.engine.config().stale_after;
    let fresh = h.tick_at(due + Duration::seconds(10)).await;
    assert_eq!(fresh.retried, 0, "a live attempt is left alone");
    let later = due + Duration::from_std(stale_after).unwrap() + Duration::seconds(1);
    let recovered = h.tick_at(later).await;
    assert_eq!(recovered.retried, 1);
    let job = h.jobs(s.id).await.remove(0);
    assert_eq!(job.id, orphan.id);
    assert_eq!(job.status, JobStatus::Pending);
    assert!(job.error.as_deref().unwrap().contains("attempt abandoned"));
    // The retry then runs through the target.
    let run = h.tick_at(job.next_attempt_at.unwrap()).await;
    assert_eq!(run.succeeded, 1);
    assert_eq!(h.target.requests()[0].json()["attempt"], 2);
}

pub async fn triggers_and_republishes_run_through_the_drain(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("0 0 1 1 *", 0)).await;
    let job = h
        .ops
        .schedule_trigger(h.env, s.id, &h.actor())
        .await
        .unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    let second = h
        .ops
        .schedule_trigger(h.env, s.id, &h.actor())
        .await
        .unwrap_err();
    assert!(second.to_string().contains("open job"), "{second}");

    h.reply([Reply::status(500)]);
    let summary = h.tick_at(h.now()).await;
    assert_eq!((summary.retried_attempts, summary.dead_lettered), (1, 1));
    let entry = h.dlq().await.remove(0);

    let republished = h
        .ops
        .dlq_republish(h.env, entry.id, &h.actor())
        .await
        .unwrap();
    assert_eq!(republished.status, JobStatus::Pending);
    assert!(
        h.dlq().await.is_empty(),
        "the entry is removed with the republish"
    );
    let summary = h.tick_at(h.now()).await;
    assert_eq!(summary.succeeded, 1);
    let events = h.event_types().await;
    assert!(
        events.contains(&"sentin8:cron:dlq:republished".to_owned()),
        "{events:?}"
    );
    assert_eq!(h.target.requests().len(), 2);
}

pub async fn dry_run_plans_without_firing(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h.create(cron("*/5 * * * *", 3)).await;
    h.clock.set(t0() + Duration::minutes(5));
    let plan = h.engine.plan().await.unwrap();
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].schedule_id, s.id);
    assert_eq!(plan[0].schedule_type, s.schedule_type);
    assert!(!plan[0].would_skip);
    assert!(h.target.requests().is_empty());
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        s.next_run_at,
        "nothing changed"
    );
}

#[macro_export]
macro_rules! engine_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::engine as suite;
            $crate::engine_suite!(@tests $make;
                fires_once_and_records_success,
                retries_back_off_then_land_in_the_dlq,
                backoff_is_capped,
                success_resets_the_retry_count,
                one_shots_complete_after_success_or_dlq,
                a_fire_during_a_pending_retry_is_skipped,
                misfires_are_skipped_not_replayed,
                an_unparseable_stored_expression_waits_an_hour,
                a_stored_target_that_fails_at_dispatch_dead_letters_at_once,
                patches_work_on_a_schedule_whose_stored_timing_no_longer_parses,
                timeouts_are_failed_attempts,
                stale_attempts_are_recovered_as_failures,
                triggers_and_republishes_run_through_the_drain,
                dry_run_plans_without_firing,
            );
        }
    };
    (@tests $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let Some((store, _guard)) = $make.await else { return };
                suite::$name(store).await;
            }
        )+
    };
}
