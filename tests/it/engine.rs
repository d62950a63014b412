//! The execution engine against real stores and a real HTTP target on 127.0.0.1: firing,
//! retries with backoff, the dead-letter queue, one-shot completion, skipped overlaps, misfires
//! and recovery, with an injected clock (nothing sleeps for the schedule's sake).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use chrono::{DateTime, Utc};
use sentin8_cron::callback::{DispatchConfig, HttpDispatcher, Secret, TokenSettings};
use sentin8_cron::core::clock::{Clock, ManualClock};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::{Engine, EngineConfig, TickSummary};
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use serde_json::json;

use crate::raw_http::{RawServer, Recorded, Reply};
use crate::support::t0;

mod ahead;
mod counting;
mod defects;
mod events;
mod exclusions;
mod faulty;
mod fenced;
mod firing;
mod intervals;
mod last_run;
mod observed;
mod overlap;
mod overlap_modes;
mod paused;
mod pipeline;
mod policies;
mod recovery;
mod timing;
mod traced;

pub use ahead::*;
pub use counting::*;
pub use defects::*;
pub use events::*;
pub use exclusions::*;
pub use faulty::FaultyStore;
pub use fenced::*;
pub use firing::*;
pub use intervals::*;
pub use last_run::*;
pub use observed::*;
pub use overlap::*;
pub use overlap_modes::*;
pub use paused::*;
pub use pipeline::*;
pub use policies::*;
pub use recovery::*;
pub use timing::*;
pub use traced::*;

/// Waits until `done` holds, looking again every 10 ms, for at most 20 s (a bound for a broken
/// engine, never reached by a working one: no test waits on it for time to pass).
pub async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..2000 {
        if done().await {
            return;
        }
        tokio::time::sleep(StdDuration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

/// Waits until `engine` (running) has settled, then until `done` holds: a condition the
/// engine brings about at its clock's instant holds once it has nothing left to do, so this
/// waits on the engine, not on the wall clock. Looks again after a second and third settling
/// (an answer from the real listener may land just as the engine settles).
pub async fn settled_until<F, Fut>(engine: &Engine, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..3 {
        engine.settled().await;
        if done().await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the engine settled, yet not {what}");
}

/// [`settled_until`] for what an engine brings about beside a call still out (a renewal of
/// its lease, say): waits until it has nothing left to do but wait for its calls.
pub async fn settled_beside_calls_until<F, Fut>(engine: &Engine, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..3 {
        engine.settled_beside_calls().await;
        if done().await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the engine settled beside its calls, yet not {what}");
}

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
        self.create_in(self.env, &self.target.url(), decl).await
    }

    /// Creates a schedule in `env` calling back `base_url`.
    pub async fn create_in(&self, env: EnvId, base_url: &str, decl: ScheduleDecl) -> Schedule {
        let spec = decl.validate(self.now()).expect("valid declaration");
        self.ops
            .schedule_create(
                env,
                CreateSchedule {
                    domain: "billing".into(),
                    spec,
                    target: Target::validate(&json!({"baseUrl": format!("{base_url}/billing")}))
                        .unwrap(),
                },
                &self.actor(),
            )
            .await
            .expect("schedule created")
    }

    /// Another instance on the same store and clock, with `config` as given (its calls bounded
    /// by its own job timeout) and metrics of its own.
    pub fn another_instance(&self, config: EngineConfig) -> Engine {
        Engine::new(
            self.store.clone(),
            dispatcher(self.clock.clone(), config.job_timeout),
            self.clock.clone(),
            config,
            Arc::new(Metrics::default()),
        )
    }

    pub async fn tick_at(&self, at: DateTime<Utc>) -> TickSummary {
        self.clock.set(at);
        self.engine.tick().await.expect("tick")
    }

    /// What another instance leaves behind when it stops after a claim: `s` advanced from its
    /// occurrence `due` to `next`, and `job` opened for the occurrence, committed as `now`.
    pub async fn claimed_elsewhere(
        &self,
        s: &Schedule,
        due: DateTime<Utc>,
        next: DateTime<Utc>,
        job: NewJob,
    ) -> Job {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.schedule_claim(&ScheduleClaim {
            id: s.id,
            expected_next_run_at: due,
            next_run_at: Some(next),
            remaining_runs: None,
            now: job.now,
        })
        .await
        .unwrap()
        .expect("claimed");
        let job = tx.job_insert(&job).await.unwrap();
        tx.commit().await.unwrap();
        job
    }

    pub async fn schedule(&self, id: ScheduleId) -> Schedule {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.schedule_get(id).await.unwrap().unwrap()
    }

    /// Tells the store, as the holder's renewal does, that `job`'s call started (so a lapsed
    /// lease is a failed attempt, not a release), keeping its lease until `lease_until`.
    pub async fn mark_called(&self, job: &Job, lease_until: DateTime<Utc>) {
        let renewed = self
            .store
            .jobs_lease_renew(&LeaseRenewal {
                leases: vec![HeldLease {
                    id: job.id,
                    epoch: job.lease_epoch,
                    called: true,
                }],
                until: lease_until,
                now: job.scheduled_for,
            })
            .await
            .unwrap();
        assert_eq!(renewed, vec![job.id], "marked");
    }

    pub async fn jobs(&self, id: ScheduleId) -> Vec<Job> {
        self.jobs_in(self.env, id).await
    }

    /// A schedule's jobs in `env`, oldest first.
    pub async fn jobs_in(&self, env: EnvId, id: ScheduleId) -> Vec<Job> {
        let mut tx = self.store.tenant_begin(env).await.unwrap();
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

#[macro_export]
macro_rules! engine_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::engine as suite;
            $crate::engine_suite!(@tests $make;
                fires_once_and_records_success,
                every_event_of_a_lifecycle_run_is_a_cloudevent_its_schema_accepts,
                calls_are_measured_by_status_class_and_counted_by_environment,
                each_attempt_is_a_span_of_the_jobs_trace_and_its_call_continues_it,
                a_fire_claimed_ahead_traces_its_claim_hand_off_call_and_record,
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
                a_killed_instances_attempt_is_recovered_within_its_lease,
                a_killed_instances_started_call_is_a_failed_attempt,
                a_holder_frozen_past_its_lease_after_the_hand_off_never_calls,
                a_fire_handed_off_by_a_killed_instance_runs_within_seconds,
                an_answer_outlives_an_instance_killed_before_its_record,
                the_serve_loop_renews_leases_while_a_call_is_in_flight,
                a_fresh_lease_is_not_renewed,
                a_single_tick_renews_leases_while_a_call_is_in_flight,
                a_slow_record_never_turns_answers_into_timeouts,
                an_outcome_is_recorded_after_the_database_comes_back,
                hanging_targets_cost_their_own_tenant_and_every_occurrence_is_recorded,
                a_database_outage_is_recorded_as_missed_occurrences,
                the_breaker_fails_fast_and_a_good_probe_closes_it,
                one_tenants_open_circuit_leaves_other_tenants_calls_alone,
                a_retry_waits_for_a_slot_under_its_environments_cap,
                triggers_and_republishes_run_through_the_drain,
                a_pause_during_an_attempt_holds_only_retries,
                a_one_shot_paused_during_its_retries_resumes_and_completes,
                a_paused_schedule_refuses_a_trigger,
                a_call_that_panics_is_recorded_as_a_failed_attempt,
                dry_run_plans_without_firing,
                a_fire_claimed_ahead_is_called_at_its_instant_not_before,
                a_fire_held_by_a_claim_that_crosses_its_instant_is_called_once,
                a_schedule_paused_before_its_claimed_instant_is_not_called,
                an_open_job_does_not_skip_a_fire_claimed_ahead,
                a_fire_held_by_a_stopped_instance_is_released_not_failed,
                two_instances_share_a_small_burst,
                a_lapsed_lease_found_by_two_instances_is_one_failure,
                an_attempts_duration_is_its_call_alone,
                a_change_while_a_round_runs_starts_another_round,
                a_hand_off_whose_answer_was_lost_is_taken_back,
                a_missed_fire_older_than_the_catchup_window_does_not_run,
                a_one_shot_missed_beyond_its_window_completes_without_a_call,
                a_jittered_fire_is_claimed_ahead_and_called_at_its_offset,
                a_jittered_fold_that_runs_twice_calls_both_in_order,
                start_and_end_bound_the_fires_and_the_end_completes,
                remaining_runs_count_down_with_each_fire_and_complete,
                a_last_run_claimed_ahead_completes_its_schedule_when_called,
                a_last_run_withdrawn_by_a_pause_is_given_back,
                a_last_occurrence_claimed_ahead_completes_its_schedule_when_called,
                a_dead_letter_pauses_a_schedule_that_pauses_on_failure,
                after_completion_delete_removes_a_schedule_once_its_last_job_has_ended,
                an_interval_fires_at_its_phase_past_each_period_across_a_clock_change,
                an_intervals_jittered_calls_stay_inside_their_periods,
                a_served_interval_calls_every_occurrence_once_under_each_overlap,
                a_seconds_field_is_called_at_each_of_its_seconds,
                buffer_one_keeps_one_occurrence_for_when_the_open_job_ends,
                a_buffered_occurrence_outlives_the_instance_that_held_the_open_job,
                allow_all_runs_occurrences_side_by_side,
                allow_all_jobs_retry_on_budgets_of_their_own,
                a_backfill_under_skip_runs_one_occurrence_at_a_time,
                a_backfill_beyond_the_environments_waiting_cap_is_refused,
                a_backfill_waiting_behind_a_withdrawn_fire_is_released,
                buffer_all_runs_every_waiting_occurrence_in_order_up_to_its_bound,
                cancel_other_cancels_a_waiting_retry_and_runs_the_new_occurrence,
                cancel_other_aborts_the_open_jobs_call_on_the_instance_that_holds_it,
                cancel_other_aborts_its_own_call_at_once_in_the_serve_loop,
                a_backfill_runs_under_the_overlap_policy_it_names,
                excluded_occurrences_are_skipped_naming_what_excluded_them,
                a_calendar_must_exist_to_be_named_and_stays_while_named,
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
