//! One test per named transition of a job (finish, recovery, retry, supersede, cancel): each
//! asserts exactly which columns the transition changed and that every other column kept its
//! value.

use std::sync::Arc;

use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::transitions::{call_recorded, later, running_job, stored_job};
use super::{insert_schedule, new_job, new_schedule};

async fn finish(store: &Arc<dyn Store>, env: EnvId, finish: JobFinish) -> Vec<Job> {
    let mut tx = store.tenant_begin(env).await.unwrap();
    let written = tx.job_finish_many(&[finish]).await.unwrap();
    tx.commit().await.unwrap();
    written
}

/// The record of a call moves its schedule's last run to when the call started: never back
/// (an older attempt's record), and not for an attempt recovered from a stopped instance (its
/// call may never have left) or an outcome that was not written.
pub async fn a_finish_moves_the_last_run_forward_only(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("last-run", "billing")).await;
    let last_run = |store: Arc<dyn Store>| async move {
        let mut tx = store.tenant_begin(env).await.unwrap();
        let s = tx.schedule_get(s.id).await.unwrap().unwrap();
        tx.commit().await.unwrap();
        s.last_run_at
    };
    // One running job at a time (the open-job rule): each finished as it comes, unless its
    // attempt is off by `attempt_off`.
    let run = |started: i64, recovered: bool, attempt_off: i32| {
        let store = store.clone();
        async move {
            let mut tx = store.tenant_begin(env).await.unwrap();
            let recovered = recovered.then(|| later(started + 1));
            let written =
                call_recorded(&mut *tx, s.id, later(started), recovered, attempt_off).await;
            tx.commit().await.unwrap();
            written
        }
    };
    assert_eq!(last_run(store.clone()).await, None);
    assert_eq!(run(30, false, 0).await, 1);
    assert_eq!(last_run(store.clone()).await, Some(later(30)));
    assert_eq!(run(10, false, 0).await, 1, "an older call's record");
    assert_eq!(
        last_run(store.clone()).await,
        Some(later(30)),
        "not moved back"
    );
    assert_eq!(run(50, true, 0).await, 1, "a recovered attempt's record");
    assert_eq!(
        last_run(store.clone()).await,
        Some(later(30)),
        "not moved by it"
    );
    assert_eq!(run(70, false, 0).await, 1);
    assert_eq!(last_run(store.clone()).await, Some(later(70)));
    // Last, as its job stays running: an outcome for another attempt is not written.
    assert_eq!(run(90, false, 1).await, 0);
    assert_eq!(last_run(store).await, Some(later(70)));
}

pub async fn job_finish_writes_each_outcome_if_the_attempt_still_runs(store: Arc<dyn Store>) {
    let env = EnvId::new();

    let before = running_job(&store, env).await;
    let written = finish(
        &store,
        env,
        JobFinish {
            id: before.id,
            attempt: before.attempt,
            epoch: before.lease_epoch,
            outcome: JobOutcome::Succeeded {
                result: json!({"rows": 3}),
            },
            now: later(5),
            detail: AttemptDetail::default(),
            lease_expired_by: None,
        },
    )
    .await;
    let succeeded = Job {
        status: JobStatus::Succeeded,
        finished_at: Some(later(5)),
        result: Some(json!({"rows": 3})),
        error: None,
        updated_at: later(5),
        ..before
    };
    assert_eq!(written, vec![succeeded.clone()]);
    assert_eq!(stored_job(&store, env, succeeded.id).await, succeeded);

    let before = running_job(&store, env).await;
    let written = finish(
        &store,
        env,
        JobFinish {
            id: before.id,
            attempt: before.attempt,
            epoch: before.lease_epoch,
            outcome: JobOutcome::RetryPending {
                next_attempt_at: later(60),
                error: "HTTP 503".into(),
            },
            now: later(5),
            detail: AttemptDetail::default(),
            lease_expired_by: None,
        },
    )
    .await;
    let pending = Job {
        status: JobStatus::Pending,
        next_attempt_at: Some(later(60)),
        error: Some("HTTP 503".into()),
        updated_at: later(5),
        // finished_at and result stay as they were (unset).
        ..before
    };
    assert_eq!(written, vec![pending.clone()]);
    assert_eq!(stored_job(&store, env, pending.id).await, pending);

    let before = running_job(&store, env).await;
    let written = finish(
        &store,
        env,
        JobFinish {
            id: before.id,
            attempt: before.attempt,
            epoch: before.lease_epoch,
            outcome: JobOutcome::Failed {
                error: "HTTP 400".into(),
            },
            now: later(5),
            lease_expired_by: None,
            detail: AttemptDetail::default(),
        },
    )
    .await;
    let failed = Job {
        status: JobStatus::Failed,
        finished_at: Some(later(5)),
        error: Some("HTTP 400".into()),
        updated_at: later(5),
        ..before
    };
    assert_eq!(written, vec![failed.clone()]);
    assert_eq!(stored_job(&store, env, failed.id).await, failed);

    // Another attempt's outcome, or a job no longer running, changes nothing.
    let before = running_job(&store, env).await;
    let outcome = JobOutcome::Failed {
        error: "late".into(),
    };
    let stale = JobFinish {
        id: before.id,
        attempt: before.attempt - 1,
        epoch: before.lease_epoch,
        outcome: outcome.clone(),
        now: later(5),
        detail: AttemptDetail::default(),
        lease_expired_by: None,
    };
    assert!(finish(&store, env, stale).await.is_empty());
    let again = JobFinish {
        id: failed.id,
        attempt: failed.attempt,
        epoch: failed.lease_epoch,
        outcome,
        now: later(6),
        detail: AttemptDetail::default(),
        lease_expired_by: None,
    };
    assert!(finish(&store, env, again).await.is_empty());
    assert_eq!(stored_job(&store, env, before.id).await, before);
    assert_eq!(stored_job(&store, env, failed.id).await, failed);
}

/// Recovery writes an abandoned attempt only if its lease ran out; one whose instance renewed
/// it (alive after all) is left to that instance.
pub async fn a_recovered_finish_needs_the_lease_to_have_run_out(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let schedule_type = format!("jobs-{}", ScheduleId::new());
    let s = insert_schedule(&store, env, new_schedule(&schedule_type, "billing")).await;
    let mut new = new_job(s.id, JobStatus::Running);
    new.attempt = 1;
    new.lease_until = Some(later(10));
    let mut tx = store.tenant_begin(env).await.unwrap();
    let leased = tx.job_insert(&new).await.unwrap();
    tx.commit().await.unwrap();
    let recovered = |at| JobFinish {
        id: leased.id,
        attempt: leased.attempt,
        epoch: leased.lease_epoch,
        outcome: JobOutcome::RetryPending {
            next_attempt_at: at,
            error: "attempt abandoned".into(),
        },
        now: at,
        detail: AttemptDetail::default(),
        lease_expired_by: Some(at),
    };
    // The lease was renewed to later(10): at later(9) the attempt is alive.
    assert!(finish(&store, env, recovered(later(9))).await.is_empty());
    assert_eq!(stored_job(&store, env, leased.id).await, leased);
    // Past it, recovery writes.
    let written = finish(&store, env, recovered(later(11))).await;
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].status, JobStatus::Pending);
}

pub async fn job_set_pending_retries_only_failed_jobs(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let running = running_job(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let change = JobSetPending {
        id: running.id,
        next_attempt_at: later(10),
        now: later(10),
    };
    assert_eq!(tx.job_set_pending(&change).await.unwrap(), None, "running");
    let failed = tx
        .job_finish_many(&[JobFinish {
            id: running.id,
            attempt: running.attempt,
            epoch: running.lease_epoch,
            outcome: JobOutcome::Failed {
                error: "HTTP 400".into(),
            },
            now: later(5),
            lease_expired_by: None,
            detail: AttemptDetail::default(),
        }])
        .await
        .unwrap()
        .remove(0);
    let returned = tx.job_set_pending(&change).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    let expected = Job {
        status: JobStatus::Pending,
        next_attempt_at: Some(later(10)),
        finished_at: None,
        updated_at: later(10),
        // attempt, error and result are kept.
        ..failed
    };
    assert_eq!(returned, expected);
    assert_eq!(stored_job(&store, env, expected.id).await, expected);
}

pub async fn job_set_superseded_ends_only_failed_jobs(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let running = running_job(&store, env).await;
    let successor = JobId::new();
    let mut tx = store.tenant_begin(env).await.unwrap();
    let change = JobSetSuperseded {
        id: running.id,
        superseded_by: Some(successor),
        now: later(10),
    };
    assert_eq!(
        tx.job_set_superseded(&change).await.unwrap(),
        None,
        "running"
    );
    let failed = tx
        .job_finish_many(&[JobFinish {
            id: running.id,
            attempt: running.attempt,
            epoch: running.lease_epoch,
            outcome: JobOutcome::Failed {
                error: "HTTP 400".into(),
            },
            now: later(5),
            lease_expired_by: None,
            detail: AttemptDetail::default(),
        }])
        .await
        .unwrap()
        .remove(0);
    let returned = tx.job_set_superseded(&change).await.unwrap().unwrap();
    let expected = Job {
        status: JobStatus::Superseded,
        superseded_by: Some(successor),
        updated_at: later(10),
        // attempt, error, finished_at and result are kept.
        ..failed
    };
    assert_eq!(returned, expected);
    // Terminal: neither superseded again (by another or by none) nor retried.
    let again = JobSetSuperseded {
        superseded_by: None,
        now: later(20),
        ..change
    };
    assert_eq!(tx.job_set_superseded(&again).await.unwrap(), None);
    let retry = JobSetPending {
        id: running.id,
        next_attempt_at: later(20),
        now: later(20),
    };
    assert_eq!(tx.job_set_pending(&retry).await.unwrap(), None);
    tx.commit().await.unwrap();
    assert_eq!(stored_job(&store, env, running.id).await, expected);

    // A succeeded job is never superseded; a failed one may be, with no successor (discarded).
    let done = running_job(&store, env).await;
    let lost = running_job(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    for (job, outcome) in [
        (&done, JobOutcome::Succeeded { result: json!({}) }),
        (
            &lost,
            JobOutcome::Failed {
                error: "gone".into(),
            },
        ),
    ] {
        tx.job_finish_many(&[JobFinish {
            id: job.id,
            attempt: job.attempt,
            epoch: job.lease_epoch,
            outcome,
            now: later(5),
            detail: AttemptDetail::default(),
            lease_expired_by: None,
        }])
        .await
        .unwrap();
    }
    let discard = |id| JobSetSuperseded {
        id,
        superseded_by: None,
        now: later(30),
    };
    assert_eq!(
        tx.job_set_superseded(&discard(done.id)).await.unwrap(),
        None
    );
    let discarded = tx
        .job_set_superseded(&discard(lost.id))
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(discarded.status, JobStatus::Superseded);
    assert_eq!(discarded.superseded_by, None);
    assert_eq!(stored_job(&store, env, lost.id).await, discarded);
    assert_eq!(
        stored_job(&store, env, done.id).await.status,
        JobStatus::Succeeded
    );
}

pub async fn job_cancel_fails_only_pending_jobs(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("cancel", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let pending = tx
        .job_insert(&new_job(s.id, JobStatus::Pending))
        .await
        .unwrap();
    let returned = tx
        .job_cancel(&JobCancel {
            id: pending.id,
            error: "cancelled".into(),
            now: later(3),
        })
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    let expected = Job {
        status: JobStatus::Failed,
        finished_at: Some(later(3)),
        error: Some("cancelled".into()),
        updated_at: later(3),
        // attempt and next_attempt_at are kept.
        ..pending
    };
    assert_eq!(returned, expected);
    assert_eq!(stored_job(&store, env, expected.id).await, expected);

    let running = running_job(&store, env).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    for id in [running.id, expected.id] {
        let change = JobCancel {
            id,
            error: "cancelled".into(),
            now: later(4),
        };
        assert_eq!(tx.job_cancel(&change).await.unwrap(), None);
    }
    tx.commit().await.unwrap();
    assert_eq!(stored_job(&store, env, running.id).await, running);
    assert_eq!(stored_job(&store, env, expected.id).await, expected);
}
