//! Leases across tenants: attempts whose lease ran out are due, renewals are fenced by the
//! epoch each lease is held under and mark calls started, and an attempt whose call never
//! started is released to run again under a new epoch.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::*;
use crate::support::t0;

pub async fn leased_attempts_are_due_when_the_lease_runs_out(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let now = t0() + Duration::hours(1);
    let a = insert_schedule(&store, env, new_schedule("a", "billing")).await;
    let b = insert_schedule(&store, env, new_schedule("b", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    // Both started long ago; one lease ran out a second ago, the other lasts.
    let mut expired = new_job(a.id, JobStatus::Running);
    expired.started_at = Some(now - Duration::minutes(10));
    expired.lease_until = Some(now - Duration::seconds(1));
    let expired = tx.job_insert(&expired).await.unwrap();
    let mut leased = new_job(b.id, JobStatus::Running);
    leased.started_at = Some(now - Duration::minutes(10));
    leased.lease_until = Some(now + Duration::seconds(20));
    let leased = tx.job_insert(&leased).await.unwrap();
    tx.commit().await.unwrap();

    let due = store
        .jobs_due(now, now - Duration::minutes(2), 50)
        .await
        .unwrap();
    assert_eq!(
        due.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![expired.id]
    );
    // The lease expiry wakes the ticker.
    let wake = store.wakeup_next().await.unwrap().unwrap();
    assert!(wake <= now + Duration::seconds(20), "{wake}");

    // Renewing extends running attempts only, across tenants, by id and under the epoch
    // each is held by: the answer names the ones renewed.
    let held = |id: JobId, epoch: i32, called: bool| HeldLease { id, epoch, called };
    let renewal = |leases: Vec<HeldLease>| LeaseRenewal {
        leases,
        until: now + Duration::minutes(1),
        now,
    };
    let stale_epoch = store
        .jobs_lease_renew(&renewal(vec![held(expired.id, 1, false)]))
        .await
        .unwrap();
    assert!(stale_epoch.is_empty(), "another epoch renews nothing");
    let mut renewed = store
        .jobs_lease_renew(&renewal(vec![
            held(expired.id, 0, true),
            held(leased.id, 0, false),
            held(JobId::new(), 0, false),
        ]))
        .await
        .unwrap();
    renewed.sort_by_key(|id| id.0);
    let mut both = vec![expired.id, leased.id];
    both.sort_by_key(|id| id.0);
    assert_eq!(renewed, both);
    // The renewal that said so marked the call started, once.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let marked = tx.job_get(expired.id).await.unwrap().unwrap();
    let unmarked = tx.job_get(leased.id).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    assert_eq!(marked.called_at, Some(now));
    assert_eq!(unmarked.called_at, None);
    let due = store
        .jobs_due(now, now - Duration::minutes(2), 50)
        .await
        .unwrap();
    assert!(due.is_empty(), "{due:?}");
    let later = now + Duration::minutes(1) + Duration::seconds(1);
    assert_eq!(store.jobs_due(later, now, 50).await.unwrap().len(), 2);

    // Lapsed, the one whose call never started is released, its attempt still to come, only
    // under its epoch and once its lease ran out; the one whose call started is not.
    let release = |id: JobId, epoch: i32, now| UncalledRelease { id, epoch, now };
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert!(
        tx.job_release_uncalled(&release(leased.id, 0, now))
            .await
            .unwrap()
            .is_none(),
        "its lease still holds"
    );
    assert!(
        tx.job_release_uncalled(&release(leased.id, 1, later))
            .await
            .unwrap()
            .is_none(),
        "another epoch"
    );
    assert!(
        tx.job_release_uncalled(&release(expired.id, 0, later))
            .await
            .unwrap()
            .is_none(),
        "its call started"
    );
    let released = tx
        .job_release_uncalled(&release(leased.id, 0, later))
        .await
        .unwrap()
        .expect("released");
    assert_eq!(released.status, JobStatus::Pending);
    assert_eq!(released.attempt, leased.attempt - 1);
    assert_eq!(released.next_attempt_at, Some(later));
    // Claimed again, it is the same attempt under a new epoch: the old holder's record and
    // renewal no longer match it.
    let again = tx
        .job_claim(&JobClaim {
            id: leased.id,
            now: later,
            lease_until: later + Duration::seconds(4),
        })
        .await
        .unwrap()
        .expect("claimed");
    assert_eq!((again.attempt, again.lease_epoch), (leased.attempt, 1));
    assert_eq!(again.called_at, None);
    tx.commit().await.unwrap();
    let old_holder = store
        .jobs_lease_renew(&LeaseRenewal {
            leases: vec![held(leased.id, 0, true)],
            until: later + Duration::minutes(1),
            now: later,
        })
        .await
        .unwrap();
    assert!(old_holder.is_empty(), "the old holder's renewal is refused");
    let mut tx = store.tenant_begin(env).await.unwrap();
    let stale_record = tx
        .job_finish_many(&[JobFinish {
            id: leased.id,
            attempt: leased.attempt,
            epoch: 0,
            outcome: JobOutcome::Succeeded {
                result: serde_json::json!({"stale": true}),
            },
            now: later,
            detail: AttemptDetail::default(),
            lease_expired_by: None,
        }])
        .await
        .unwrap();
    assert!(
        stale_record.is_empty(),
        "the old holder's record is refused"
    );
    tx.commit().await.unwrap();
}
