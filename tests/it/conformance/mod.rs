//! The storage conformance suite: one body of tests generic over the seam, run against every
//! backend. A backend change must keep all of it green; a new rule of the seam gets a test here.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::{CronTiming, Timing};
use serde_json::json;

use crate::support::t0;

mod admin_reads;
mod calendars;
mod counts_and_locks;
mod engine;
mod instances;
mod job_transitions;
mod jobs;
mod labels;
mod leases;
mod outbox;
mod scheduled;
mod schedules;
mod transitions;

pub use admin_reads::*;
pub use calendars::*;
pub use counts_and_locks::*;
pub use engine::*;
pub use instances::*;
pub use job_transitions::*;
pub use jobs::*;
pub use labels::*;
pub use leases::*;
pub use outbox::*;
pub use scheduled::*;
pub use schedules::*;
pub use transitions::*;

pub fn new_schedule(schedule_type: &str, domain: &str) -> NewSchedule {
    NewSchedule {
        id: ScheduleId::new(),
        domain: domain.to_owned(),
        schedule_type: schedule_type.to_owned(),
        timing: Timing::Cron(CronTiming::from_stored(
            "*/5 * * * *",
            "Europe/London",
            OnDstGap::Skip,
            OnDstRepeat::Twice,
        )),
        target: Target::from_stored(json!({"baseUrl": "http://127.0.0.1:9/billing"})),
        payload: json!({"report": schedule_type, "nested": {"n": 1}}),
        status: ScheduleStatus::Active,
        next_run_at: Some(t0() + Duration::minutes(5)),
        max_retries: 4,
        policies: Default::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
        actor: "tester".to_owned(),
        now: t0(),
    }
}

pub fn new_job(schedule_id: ScheduleId, status: JobStatus) -> NewJob {
    let running = status == JobStatus::Running;
    NewJob {
        id: JobId::new(),
        schedule_id,
        status,
        attempt: i32::from(running),
        scheduled_for: t0(),
        next_attempt_at: (status == JobStatus::Pending).then(t0),
        started_at: running.then(t0),
        finished_at: None,
        error: None,
        lease_until: None,
        missed: None,
        concurrent: false,
        backfill: false,
        now: t0(),
    }
}

/// A soft delete by the test actor at t0.
pub fn deleted_by_tester(id: ScheduleId) -> ScheduleSetDeleted {
    ScheduleSetDeleted {
        id,
        actor: "tester".into(),
        now: t0(),
    }
}

/// A status change at t0.
pub fn status_at(id: ScheduleId, status: ScheduleStatus) -> ScheduleSetStatus {
    ScheduleSetStatus {
        id,
        status,
        now: t0(),
    }
}

/// A listing of an environment's schedules, the first hundred (the reading connections' tests).
pub fn first_hundred() -> ScheduleQuery {
    ScheduleQuery {
        limit: 100,
        ..ScheduleQuery::default()
    }
}

pub async fn insert_schedule(store: &Arc<dyn Store>, env: EnvId, new: NewSchedule) -> Schedule {
    let mut tx = store.tenant_begin(env).await.unwrap();
    let schedule = tx.schedule_insert(&new).await.unwrap();
    tx.commit().await.unwrap();
    schedule
}

pub async fn insert_event(
    store: &Arc<dyn Store>,
    env: EnvId,
    schedule_id: Option<ScheduleId>,
    label: &str,
) -> EventId {
    let id = EventId::new();
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.outbox_insert(&NewEvent {
        id,
        schedule_id,
        event_type: "io.sentin8.cron.schedule.updated.v1".into(),
        payload: json!({"label": label}),
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    id
}

/// Instantiates every conformance test for one backend.
#[macro_export]
macro_rules! conformance_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::conformance as suite;
            $crate::conformance_suite!(@tests $make;
                schedule_round_trips,
                one_shot_schedule_round_trips,
                inconsistent_schedules_are_refused,
                schedule_type_is_unique_per_domain_among_live_schedules,
                schedules_and_audit_entries_insert_many_in_the_order_given,
                schedule_listing_filters_and_pages,
                tenants_never_see_each_other,
                one_open_job_per_schedule,
                job_listing_is_newest_first_with_filters,
                claims_are_conditional,
                dlq_round_trips_and_lists,
                a_failed_event_write_aborts_the_domain_write,
                outbox_and_audit_keep_order_and_content,
                due_selection_is_ordered_and_limited,
                due_jobs_cover_retries_and_stale_attempts,
                answers_written_ahead_belong_to_running_attempts,
                leased_attempts_are_due_when_the_lease_runs_out,
                due_selection_is_round_robin_across_environments,
                same_instant_ties_are_ordered_by_seed,
                instances_beat_and_are_forgotten_when_stale,
                instances_share_what_is_claimed_ahead,
                stats_count_across_tenants,
                env_counts_and_upcoming_stay_in_their_tenant,
                a_job_for_the_next_call_is_found_unless_skipped_or_backfilled,
                a_schedules_jobs_are_counted_since_an_instant,
                schedule_locks_exclude_each_other,
                commits_ring_signals_and_rollbacks_do_not,
                schema_is_current_after_migration,
                batch_operations_match_their_single_forms,
                outbox_claims_follow_seq_and_schedule_order,
                outbox_leases_expire,
                outbox_failures_back_off_and_park,
                outbox_releases_free_claims_at_once,
                outbox_purge_keeps_pending_and_parked_events,
                schedule_set_definition_writes_the_definition_status_and_next_fire,
                schedule_set_status_writes_status_and_updated_at_only,
                schedule_set_deleted_clears_the_next_fire_and_retry_count,
                schedule_set_outcome_writes_retry_count_and_completes_on_request,
                job_finish_writes_each_outcome_if_the_attempt_still_runs,
                a_finish_moves_the_last_run_forward_only,
                job_set_pending_retries_only_failed_jobs,
                job_set_superseded_ends_only_failed_jobs,
                buffered_and_concurrent_jobs_keep_the_open_job_rule,
                jobs_insert_many_and_the_first_buffered_ones,
                waiting_counts_of_one_environment_follow_each_other,
                a_recovered_finish_needs_the_lease_to_have_run_out,
                job_cancel_fails_only_pending_jobs,
                hand_off_and_withdrawal_take_a_held_fire_once,
                a_lapsed_claim_is_released_once,
                a_scheduled_job_is_an_unstarted_open_first_attempt,
                schedule_set_next_run_writes_next_fire_and_updated_at_only,
                zones_in_use_are_listed_across_tenants_and_schedules_by_zone_within_one,
                job_hours_sum_each_hour_and_rank_lateness,
                job_hours_round_sub_millisecond_lateness_down,
                job_hours_take_a_retried_jobs_first_attempt,
                envs_with_data_list_ids_and_live_counts,
                schedule_type_search_is_case_insensitive_and_pages,
                labels_round_trip_and_selectors_list_what_the_rule_matches,
                calendars_and_exclusions_round_trip_per_environment,
                jobs_and_dead_letters_are_listed_by_their_schedules_labels,
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
