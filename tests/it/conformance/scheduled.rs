//! Fires claimed ahead (`scheduled` jobs): the hand-off, a change's withdrawal and the release
//! of a lapsed claim each take a fire at most once, and the store itself holds what the status
//! means.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::transitions::{later, running_job, stored_job};
use super::{insert_schedule, new_schedule};
use crate::support::t0;

/// A fire claimed ahead for `at`, `scheduled` with a claim lease two seconds past it.
async fn scheduled_job(store: &Arc<dyn Store>, env: EnvId, name: &str) -> (Schedule, Job) {
    let s = insert_schedule(store, env, new_schedule(name, "billing")).await;
    let new = NewJob::scheduled(s.id, later(10), later(12), t0());
    let mut tx = store.tenant_begin(env).await.unwrap();
    let job = tx.job_insert(&new).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        (job.status, job.attempt, job.started_at),
        (JobStatus::Scheduled, 1, None)
    );
    (s, job)
}

/// A fire claimed ahead (`scheduled`): exactly one of the hand-off and a change's withdrawal
/// takes it, whichever comes first; the engine may still withdraw a fire it handed off itself.
pub async fn hand_off_and_withdrawal_take_a_held_fire_once(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let mut held = Vec::new();
    for name in ["handed", "withdrawn", "engine"] {
        held.push(scheduled_job(&store, env, name).await);
    }
    let (handed, withdrawn, engine) = (&held[0], &held[1], &held[2]);
    // A started attempt (claimed at its instant) is never handed off, nor one of another try.
    let started = running_job(&store, env).await;

    let withdraw = |id: JobId, handed_off: bool| JobWithdraw {
        id,
        reason: "skipped: the schedule became paused before this fire's instant".into(),
        now: later(5),
        handed_off,
    };
    let mut tx = store.tenant_begin(env).await.unwrap();
    let record = tx
        .job_withdraw(&withdraw(withdrawn.1.id, false))
        .await
        .unwrap()
        .expect("a held fire is withdrawn");
    tx.commit().await.unwrap();
    assert_eq!(record.status, JobStatus::Skipped);
    assert_eq!(record.started_at, None);
    assert_eq!(record.finished_at, Some(later(5)));
    assert_eq!(record.error, Some(withdraw(record.id, false).reason));

    let ids = [handed.1.id, withdrawn.1.id, engine.1.id, started.id];
    let call_lease = Duration::seconds(35);
    let mut got = store
        .jobs_hand_off(&ids, call_lease, later(5))
        .await
        .unwrap();
    got.sort_by_key(|h| h.job_id);
    let mut want: Vec<HandedOff> = [handed, engine]
        .iter()
        .map(|(s, j)| HandedOff {
            job_id: j.id,
            schedule_updated_at: s.updated_at,
        })
        .collect();
    want.sort_by_key(|h| h.job_id);
    assert_eq!(
        got, want,
        "the withdrawn and the started attempt are not handed off"
    );
    let stored = stored_job(&store, env, handed.1.id).await;
    assert_eq!(
        stored.started_at,
        Some(later(10)),
        "it starts at its instant"
    );
    assert_eq!(stored.status, JobStatus::Running);
    assert_eq!(
        stored.updated_at, handed.1.updated_at,
        "the hand-off leaves the last change alone"
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    let renewed = tx
        .job_get(handed.1.id)
        .await
        .unwrap()
        .expect("the handed-off job");
    drop(tx);
    assert_eq!(renewed, stored);
    // Its call lease runs from its instant: it is not due for recovery before then.
    let due: Vec<JobId> = store
        .jobs_due(later(10) + call_lease - Duration::seconds(1), t0(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert!(!due.contains(&handed.1.id), "{due:?}");
    // Tried again (the first answer was lost on its way): the hand-off takes back what it
    // handed off, and still neither the withdrawn nor the started attempt.
    let mut again = store
        .jobs_hand_off(&ids, call_lease, later(6))
        .await
        .unwrap();
    again.sort_by_key(|h| h.job_id);
    assert_eq!(again, want, "a retried hand-off takes back its own");
    assert_eq!(
        stored_job(&store, env, handed.1.id).await.started_at,
        Some(later(10))
    );
    // A change can no longer withdraw a fire handed off.
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(
        tx.job_withdraw(&withdraw(handed.1.id, false))
            .await
            .unwrap(),
        None
    );
    // The engine withdraws one it handed off itself (a change that bypassed the operations).
    let mine = tx
        .job_withdraw(&withdraw(engine.1.id, true))
        .await
        .unwrap()
        .expect("the engine withdraws its own hand-off");
    assert_eq!(mine.status, JobStatus::Skipped);
    assert_eq!(
        tx.job_withdraw(&withdraw(started.id, true)).await.unwrap(),
        None
    );
    tx.commit().await.unwrap();
    assert_eq!(stored_job(&store, env, started.id).await, started);
    // The hand-off left the withdrawn record as it was.
    assert_eq!(stored_job(&store, env, withdrawn.1.id).await, record);

    // Handed off fifty seconds late (the database was away): its call lease runs from the
    // hand-off, not from its long-past instant, so no instance recovers it before its call.
    let (_, late) = scheduled_job(&store, env, "late").await;
    let handed_at = later(60);
    let handed = store
        .jobs_hand_off(&[late.id], call_lease, handed_at)
        .await
        .unwrap();
    assert_eq!(handed.len(), 1);
    let due_at = |at| {
        let store = store.clone();
        async move {
            store
                .jobs_due(at, t0(), 100)
                .await
                .unwrap()
                .iter()
                .any(|d| d.id == late.id)
        }
    };
    assert!(!due_at(handed_at + call_lease - Duration::seconds(1)).await);
    assert!(due_at(handed_at + call_lease + Duration::seconds(1)).await);
}

/// A fire claimed ahead whose instance stopped: once its claim lease ran out it is due, and
/// the release takes it once (`scheduled` to `pending`, its first attempt still to come, due
/// at once); a hand-off after the release takes nothing, and nothing else is released.
pub async fn a_lapsed_claim_is_released_once(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let (_, fire) = scheduled_job(&store, env, "released").await;
    let started = running_job(&store, env).await;
    let due_ids = |at| {
        let store = store.clone();
        async move {
            store
                .jobs_due(at, t0(), 100)
                .await
                .unwrap()
                .into_iter()
                .map(|d| (d.id, d.status))
                .collect::<Vec<_>>()
        }
    };
    assert!(
        !due_ids(later(12))
            .await
            .contains(&(fire.id, JobStatus::Scheduled))
    );
    assert!(
        due_ids(later(13))
            .await
            .contains(&(fire.id, JobStatus::Scheduled))
    );
    assert_eq!(store.wakeup_next().await.unwrap(), Some(later(12)));

    let release = |id| JobRelease { id, now: later(13) };
    let mut tx = store.tenant_begin(env).await.unwrap();
    let released = tx
        .job_release(&release(fire.id))
        .await
        .unwrap()
        .expect("a lapsed claim is released");
    assert_eq!(released.status, JobStatus::Pending);
    assert_eq!(released.attempt, 0);
    assert_eq!(released.next_attempt_at, Some(later(13)));
    assert_eq!((released.started_at, released.finished_at), (None, None));
    assert_eq!(tx.job_release(&release(fire.id)).await.unwrap(), None);
    assert_eq!(tx.job_release(&release(started.id)).await.unwrap(), None);
    tx.commit().await.unwrap();
    assert!(
        store
            .jobs_hand_off(&[fire.id], Duration::seconds(35), later(14))
            .await
            .unwrap()
            .is_empty(),
        "released first: not handed off"
    );
    assert_eq!(stored_job(&store, env, fire.id).await, released);
    assert_eq!(stored_job(&store, env, started.id).await, started);
}

/// The job states hold their meaning in the store itself: a scheduled job has not started, is
/// a first attempt and holds a claim lease, and it is open (one per schedule).
pub async fn a_scheduled_job_is_an_unstarted_open_first_attempt(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let (s, fire) = scheduled_job(&store, env, "checked").await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(tx.job_get_open(s.id).await.unwrap(), Some(fire.clone()));
    // A second open job of the schedule is refused by the open-job index.
    let second = NewJob::scheduled(s.id, later(70), later(72), t0());
    assert!(tx.job_open_many(&[second]).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    let other = insert_schedule(&store, env, new_schedule("checked-2", "billing")).await;
    let broken = [
        NewJob {
            started_at: Some(later(10)),
            ..NewJob::scheduled(other.id, later(10), later(12), t0())
        },
        NewJob {
            attempt: 2,
            ..NewJob::scheduled(other.id, later(10), later(12), t0())
        },
        NewJob {
            lease_until: None,
            ..NewJob::scheduled(other.id, later(10), later(12), t0())
        },
    ];
    for new in broken {
        let mut tx = store.tenant_begin(env).await.unwrap();
        assert!(tx.job_insert(&new).await.is_err(), "{new:?}");
    }
}
