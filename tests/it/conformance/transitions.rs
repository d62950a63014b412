//! One test per named transition: each asserts exactly which columns the transition changed
//! and that every other column kept its value.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sentin8_cron::core::timing::Timing;
use serde_json::json;

use super::{insert_schedule, new_job, new_schedule};
use crate::support::t0;

pub(super) fn later(seconds: i64) -> DateTime<Utc> {
    t0() + Duration::seconds(seconds)
}

/// A schedule with every column away from its insert default (a transition's stray write shows).
async fn worn_schedule(store: &Arc<dyn Store>, env: EnvId) -> Schedule {
    let s = insert_schedule(store, env, new_schedule("worn", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let due = s.next_run_at.unwrap();
    tx.schedule_claim(&ScheduleClaim {
        id: s.id,
        expected_next_run_at: due,
        next_run_at: Some(due + Duration::minutes(5)),
        remaining_runs: None,
        now: due,
    })
    .await
    .unwrap()
    .unwrap();
    // Its last run: the record of a call that started at the instant.
    assert_eq!(call_recorded(&mut *tx, s.id, due, None, 0).await, 1);
    let worn = tx
        .schedule_set_outcome(&ScheduleSetOutcome {
            id: s.id,
            retry_count: 2,
            status: None,
            now: due,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(worn.last_run_at.is_some() && worn.retry_count == 2);
    worn
}

async fn stored_schedule(store: &Arc<dyn Store>, env: EnvId, id: ScheduleId) -> Schedule {
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.schedule_get(id).await.unwrap().unwrap()
}

pub(super) async fn stored_job(store: &Arc<dyn Store>, env: EnvId, id: JobId) -> Job {
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.job_get(id).await.unwrap().unwrap()
}

/// Commits one transition and checks that the returned row is what is stored.
async fn commit_schedule(
    store: &Arc<dyn Store>,
    env: EnvId,
    returned: Schedule,
    tx: Box<dyn TenantTx>,
) -> Schedule {
    tx.commit().await.unwrap();
    let stored = stored_schedule(store, env, returned.id).await;
    assert_eq!(stored, returned, "the transition returns the row as stored");
    stored
}

pub async fn schedule_set_definition_writes_the_definition_status_and_next_fire(
    store: Arc<dyn Store>,
) {
    let env = EnvId::new();
    let before = worn_schedule(&store, env).await;
    let definition = ScheduleDefinition {
        schedule_type: "renamed".into(),
        timing: Timing::Once {
            run_at: later(86_400),
        },
        target: Target::from_stored(json!({"baseUrl": "http://127.0.0.1:9/other"})),
        payload: json!({"new": [1, 2]}),
        max_retries: 9,
        policies: Default::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
    };
    let mut tx = store.tenant_begin(env).await.unwrap();
    let returned = tx
        .schedule_set_definition(&ScheduleSetDefinition {
            id: before.id,
            definition: definition.clone(),
            status: ScheduleStatus::Paused,
            next_run_at: Some(later(86_400)),
            actor: "patcher".into(),
            now: later(7),
        })
        .await
        .unwrap();
    let after = commit_schedule(&store, env, returned, tx).await;
    let expected = Schedule {
        schedule_type: definition.schedule_type,
        timing: definition.timing,
        target: definition.target,
        payload: definition.payload,
        max_retries: definition.max_retries,
        status: ScheduleStatus::Paused,
        next_run_at: Some(later(86_400)),
        updated_at: later(7),
        updated_by: "patcher".into(),
        // Unchanged: id, env, domain, last_run_at, retry_count, created_*.
        ..before.clone()
    };
    assert_eq!(after, expected);
    assert_eq!(
        ScheduleDefinition::of(&after),
        ScheduleDefinition::of(&expected)
    );
}

pub async fn schedule_set_status_writes_status_and_updated_at_only(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let before = worn_schedule(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let returned = tx
        .schedule_set_status(&ScheduleSetStatus {
            id: before.id,
            status: ScheduleStatus::Paused,
            now: later(7),
        })
        .await
        .unwrap();
    let after = commit_schedule(&store, env, returned, tx).await;
    assert_eq!(
        after,
        Schedule {
            status: ScheduleStatus::Paused,
            updated_at: later(7),
            // The engine's change keeps the last human author.
            ..before
        }
    );
}

pub async fn schedule_set_deleted_clears_the_next_fire_and_retry_count(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let before = worn_schedule(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let returned = tx
        .schedule_set_deleted(&ScheduleSetDeleted {
            id: before.id,
            actor: "deleter".into(),
            now: later(7),
        })
        .await
        .unwrap();
    let after = commit_schedule(&store, env, returned, tx).await;
    assert_eq!(
        after,
        Schedule {
            status: ScheduleStatus::Deleted,
            next_run_at: None,
            retry_count: 0,
            updated_at: later(7),
            updated_by: "deleter".into(),
            ..before
        }
    );
    // An id of no row is an error, not a silent no-op.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let err = tx
        .schedule_set_deleted(&ScheduleSetDeleted {
            id: ScheduleId::new(),
            actor: "deleter".into(),
            now: later(8),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotFound {
                what: "schedule",
                ..
            }
        ),
        "got {err:?}"
    );
}

pub async fn schedule_set_outcome_writes_retry_count_and_completes_on_request(
    store: Arc<dyn Store>,
) {
    let env = EnvId::new();
    let before = worn_schedule(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let returned = tx
        .schedule_set_outcome(&ScheduleSetOutcome {
            id: before.id,
            retry_count: 3,
            status: None,
            now: later(7),
        })
        .await
        .unwrap();
    let retried = commit_schedule(&store, env, returned, tx).await;
    assert_eq!(
        retried,
        Schedule {
            retry_count: 3,
            updated_at: later(7),
            ..before.clone()
        }
    );

    let mut tx = store.tenant_begin(env).await.unwrap();
    let returned = tx
        .schedule_set_outcome(&ScheduleSetOutcome {
            id: before.id,
            retry_count: 0,
            status: Some(ScheduleStatus::Completed),
            now: later(8),
        })
        .await
        .unwrap();
    let completed = commit_schedule(&store, env, returned, tx).await;
    assert_eq!(
        completed,
        Schedule {
            retry_count: 0,
            status: ScheduleStatus::Completed,
            next_run_at: None,
            updated_at: later(8),
            ..before
        }
    );
}

/// A running job on its second attempt.
/// A call of `schedule` that started at `started`, recorded as a success a second later: a
/// running job inserted and finished, as this instance's own attempt or, with
/// `lease_expired_by`, one recovered from another; its outcome is for the job's attempt plus
/// `attempt_off`. How many jobs the record wrote.
pub(super) async fn call_recorded(
    tx: &mut dyn TenantTx,
    schedule: ScheduleId,
    started: DateTime<Utc>,
    lease_expired_by: Option<DateTime<Utc>>,
    attempt_off: i32,
) -> usize {
    let job = tx
        .job_insert(&new_job(schedule, JobStatus::Running))
        .await
        .unwrap();
    let finish = JobFinish {
        id: job.id,
        attempt: job.attempt + attempt_off,
        epoch: job.lease_epoch,
        outcome: JobOutcome::Succeeded { result: json!({}) },
        now: started + Duration::seconds(1),
        detail: AttemptDetail {
            started_at: Some(started),
            ..AttemptDetail::default()
        },
        lease_expired_by,
    };
    tx.job_finish_many(&[finish]).await.unwrap().len()
}

pub(super) async fn running_job(store: &Arc<dyn Store>, env: EnvId) -> Job {
    let schedule_type = format!("jobs-{}", ScheduleId::new());
    let s = insert_schedule(store, env, new_schedule(&schedule_type, "billing")).await;
    let mut new = new_job(s.id, JobStatus::Running);
    new.attempt = 2;
    new.error = Some("first attempt failed".into());
    let mut tx = store.tenant_begin(env).await.unwrap();
    let job = tx.job_insert(&new).await.unwrap();
    tx.commit().await.unwrap();
    job
}

pub async fn schedule_set_next_run_writes_next_fire_and_updated_at_only(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let before = worn_schedule(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let returned = tx
        .schedule_set_next_run(&ScheduleSetNextRun {
            id: before.id,
            next_run_at: later(3_600),
            now: later(7),
        })
        .await
        .unwrap()
        .unwrap();
    let after = commit_schedule(&store, env, returned, tx).await;
    assert_eq!(
        after,
        Schedule {
            next_run_at: Some(later(3_600)),
            updated_at: later(7),
            // A recomputed fire keeps the last human author.
            ..before.clone()
        }
    );
    // Only active schedules move; another tenant's id names nothing.
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.schedule_set_status(&ScheduleSetStatus {
        id: before.id,
        status: ScheduleStatus::Paused,
        now: later(8),
    })
    .await
    .unwrap();
    let change = ScheduleSetNextRun {
        id: before.id,
        next_run_at: later(7_200),
        now: later(9),
    };
    assert_eq!(tx.schedule_set_next_run(&change).await.unwrap(), None);
    tx.commit().await.unwrap();
    let mut other = store.tenant_begin(EnvId::new()).await.unwrap();
    assert_eq!(other.schedule_set_next_run(&change).await.unwrap(), None);
}

/// A buffered job waits outside the one-open-job rule and is released only while its
/// schedule has no exclusive open job; a concurrent job bypasses the rule; dropping touches
/// only buffered jobs; the listing puts regular occurrences before backfilled ones.
pub async fn buffered_and_concurrent_jobs_keep_the_open_job_rule(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("buffered", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let open = tx
        .job_insert(&new_job(s.id, JobStatus::Running))
        .await
        .unwrap();
    let waiting = |minutes: i64, backfill: bool| NewJob {
        status: JobStatus::Buffered,
        attempt: 0,
        started_at: None,
        scheduled_for: t0() - Duration::minutes(minutes),
        backfill,
        ..new_job(s.id, JobStatus::Running)
    };
    let backfilled = tx.job_insert(&waiting(30, true)).await.unwrap();
    let regular = tx.job_insert(&waiting(5, false)).await.unwrap();
    let listed: Vec<JobId> = tx
        .jobs_of_schedule(s.id, &[JobStatus::Buffered])
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(listed, [regular.id, backfilled.id], "regular first");
    // Not while the running job excludes it.
    let release = |id| JobRelease { id, now: later(1) };
    assert_eq!(
        tx.job_release_buffered(&release(regular.id)).await.unwrap(),
        None
    );
    // A concurrent job runs beside the open one.
    let beside = tx
        .job_insert(&NewJob {
            concurrent: true,
            ..new_job(s.id, JobStatus::Running)
        })
        .await
        .unwrap();
    assert!(beside.concurrent);
    assert_eq!(
        tx.jobs_of_schedule(s.id, &[JobStatus::Running])
            .await
            .unwrap()
            .len(),
        2
    );
    // Once the exclusive job ended, the buffered one is released, due now.
    tx.job_finish_many(&[JobFinish {
        id: open.id,
        attempt: open.attempt,
        epoch: open.lease_epoch,
        outcome: JobOutcome::Succeeded { result: json!({}) },
        now: later(1),
        lease_expired_by: None,
        detail: AttemptDetail::default(),
    }])
    .await
    .unwrap();
    let released = tx
        .job_release_buffered(&release(regular.id))
        .await
        .unwrap()
        .expect("released");
    assert_eq!(
        (released.status, released.next_attempt_at),
        (JobStatus::Pending, Some(later(1)))
    );
    // Dropping applies to buffered jobs only.
    let drop = |id| JobCancel {
        id,
        error: "skipped: the schedule was deleted".into(),
        now: later(2),
    };
    assert_eq!(tx.job_drop_buffered(&drop(regular.id)).await.unwrap(), None);
    let dropped = tx
        .job_drop_buffered(&drop(backfilled.id))
        .await
        .unwrap()
        .expect("dropped");
    assert_eq!(dropped.status, JobStatus::Skipped);
    assert!(dropped.backfill);
    assert_eq!(
        tx.schedules_with_buffered(&[s.id]).await.unwrap(),
        Vec::<ScheduleId>::new()
    );
}
