//! What the engine relies on beyond selection: counts across and within tenants, schedule
//! locks, and the signals a commit rings.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::*;
use crate::support::t0;

pub async fn stats_count_across_tenants(store: Arc<dyn Store>) {
    let before = store.stats_get().await.unwrap();
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("a", "billing")).await;
    let mut paused = new_schedule("b", "billing");
    paused.status = ScheduleStatus::Paused;
    insert_schedule(&store, EnvId::new(), paused).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.job_insert(&new_job(s.id, JobStatus::Pending))
        .await
        .unwrap();
    // An occurrence waiting for that job to end.
    tx.job_insert(&new_job(s.id, JobStatus::Buffered))
        .await
        .unwrap();
    tx.outbox_insert(&NewEvent {
        id: EventId::new(),
        schedule_id: Some(s.id),
        event_type: "x".into(),
        payload: json!({}),
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let after = store.stats_get().await.unwrap();
    assert_eq!(after.schedules_active, before.schedules_active + 1);
    assert_eq!(after.schedules_paused, before.schedules_paused + 1);
    assert_eq!(after.jobs_pending, before.jobs_pending + 1);
    assert_eq!(after.jobs_buffered, before.jobs_buffered + 1);
    assert_eq!(after.outbox_unrelayed, before.outbox_unrelayed + 1);
}

pub async fn env_counts_and_upcoming_stay_in_their_tenant(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let other = EnvId::new();
    let mut later = new_schedule("later", "billing");
    later.next_run_at = Some(t0() + Duration::hours(2));
    let later = insert_schedule(&store, env, later).await;
    let mut sooner = new_schedule("sooner", "billing");
    sooner.next_run_at = Some(t0() + Duration::minutes(1));
    let sooner = insert_schedule(&store, env, sooner).await;
    let mut paused = new_schedule("paused", "billing");
    paused.status = ScheduleStatus::Paused;
    insert_schedule(&store, env, paused).await;
    let mut done = new_schedule("done", "billing");
    done.status = ScheduleStatus::Completed;
    done.next_run_at = None;
    insert_schedule(&store, env, done).await;
    let mut gone = new_schedule("gone", "billing");
    gone.status = ScheduleStatus::Deleted;
    gone.next_run_at = None;
    insert_schedule(&store, env, gone).await;
    // Another tenant's rows never count.
    let theirs = insert_schedule(&store, other, new_schedule("theirs", "billing")).await;

    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.job_insert(&new_job(sooner.id, JobStatus::Pending))
        .await
        .unwrap();
    tx.job_insert(&new_job(sooner.id, JobStatus::Buffered))
        .await
        .unwrap();
    for status in [
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Failed,
        JobStatus::Superseded,
    ] {
        tx.job_insert(&new_job(later.id, status)).await.unwrap();
    }
    let failed = new_job(later.id, JobStatus::Failed);
    tx.job_insert(&failed).await.unwrap();
    tx.dlq_insert(&NewDlqEntry {
        id: DlqId::new(),
        schedule_id: later.id,
        job_id: failed.id,
        domain: "billing".into(),
        schedule_type: "later".into(),
        payload: json!({}),
        attempts: 1,
        last_error: "boom".into(),
        scheduled_for: t0(),
        backfill: false,
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.tenant_begin(other).await.unwrap();
    tx.job_insert(&new_job(theirs.id, JobStatus::Running))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(
        tx.env_counts().await.unwrap(),
        EnvCounts {
            schedules_active: 2,
            schedules_paused: 1,
            schedules_completed: 1,
            jobs_scheduled: 0,
            jobs_pending: 1,
            jobs_running: 0,
            jobs_buffered: 1,
            jobs_succeeded: 1,
            jobs_failed: 3,
            jobs_skipped: 0,
            jobs_superseded: 1,
            dlq_entries: 1,
        }
    );
    let upcoming: Vec<ScheduleId> = tx
        .schedule_list_upcoming(10)
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        upcoming,
        [sooner.id, later.id],
        "active only, soonest first"
    );
    assert_eq!(tx.schedule_list_upcoming(1).await.unwrap().len(), 1);
    drop(tx);
    let mut tx = store.tenant_begin(EnvId::new()).await.unwrap();
    assert_eq!(tx.env_counts().await.unwrap(), EnvCounts::default());
    assert!(tx.schedule_list_upcoming(10).await.unwrap().is_empty());
}

pub async fn schedule_locks_exclude_each_other(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("locked", "billing")).await;
    let mut lock = store
        .schedule_lock_try(s.id)
        .await
        .unwrap()
        .expect("free lock is taken");
    assert!(
        store.schedule_lock_try(s.id).await.unwrap().is_none(),
        "held lock is refused"
    );
    // Another schedule's lock is independent.
    let other = store
        .schedule_lock_try(ScheduleId::new())
        .await
        .unwrap()
        .expect("independent");
    assert!(other.release().await.unwrap());

    // Work under the lock runs in a tenant transaction on the lock's connection.
    {
        let mut tx = lock.tenant_begin(env).await.unwrap();
        tx.job_insert(&new_job(s.id, JobStatus::Running))
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    assert!(
        lock.release().await.unwrap(),
        "release reports the lock was held"
    );
    let again = store
        .schedule_lock_try(s.id)
        .await
        .unwrap()
        .expect("released lock is free");
    drop(again);
    // Dropping without release frees it too (for PostgreSQL by closing the session).
    let mut retake = None;
    for _ in 0..50 {
        retake = store.schedule_lock_try(s.id).await.unwrap();
        if retake.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(retake.is_some(), "a dropped lock is freed");
}

pub async fn commits_ring_signals_and_rollbacks_do_not(store: Arc<dyn Store>) {
    let signals = store.signals();
    let within = std::time::Duration::from_secs(2);
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;

    // A rolled-back transaction rings nothing.
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.notify_on_commit(Channel::Schedules);
    tx.outbox_insert(&NewEvent {
        id: EventId::new(),
        schedule_id: Some(s.id),
        event_type: "x".into(),
        payload: json!({}),
        now: t0(),
    })
    .await
    .unwrap();
    drop(tx);
    let short = std::time::Duration::from_millis(50);
    assert!(
        tokio::time::timeout(short, signals.schedules.notified())
            .await
            .is_err()
    );
    assert!(
        tokio::time::timeout(short, signals.outbox.notified())
            .await
            .is_err()
    );

    // A commit rings what it asked for, and the outbox by itself.
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.notify_on_commit(Channel::Schedules);
    tx.outbox_insert(&NewEvent {
        id: EventId::new(),
        schedule_id: Some(s.id),
        event_type: "x".into(),
        payload: json!({}),
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    tokio::time::timeout(within, signals.schedules.notified())
        .await
        .expect("schedules rung");
    tokio::time::timeout(within, signals.outbox.notified())
        .await
        .expect("outbox rung");
}

/// Which schedules' stored next call already has its regular job: a skipped record (a
/// withdrawn fire) and a backfilled occurrence do not count, nor a job for another instant.
pub async fn a_job_for_the_next_call_is_found_unless_skipped_or_backfilled(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let mut at_next = new_schedule("at-next", "billing");
    at_next.next_run_at = Some(t0());
    let at_next = insert_schedule(&store, env, at_next).await;
    let mut elsewhere = new_schedule("elsewhere", "billing");
    elsewhere.next_run_at = Some(t0() + Duration::minutes(5));
    let elsewhere = insert_schedule(&store, env, elsewhere).await;
    let ids = [at_next.id, elsewhere.id];
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.job_insert(&new_job(at_next.id, JobStatus::Skipped))
        .await
        .unwrap();
    tx.job_insert(&NewJob {
        backfill: true,
        ..new_job(at_next.id, JobStatus::Succeeded)
    })
    .await
    .unwrap();
    // A job of the other schedule, for an instant that is not its next call.
    tx.job_insert(&new_job(elsewhere.id, JobStatus::Succeeded))
        .await
        .unwrap();
    assert!(
        tx.schedules_with_job_for_next_call(&ids)
            .await
            .unwrap()
            .is_empty()
    );
    // Its fire claimed ahead: a first attempt with its claim lease.
    tx.job_insert(&NewJob {
        attempt: 1,
        lease_until: Some(t0() + Duration::seconds(2)),
        ..new_job(at_next.id, JobStatus::Scheduled)
    })
    .await
    .unwrap();
    assert_eq!(
        tx.schedules_with_job_for_next_call(&ids).await.unwrap(),
        [at_next.id]
    );
    tx.commit().await.unwrap();
}

/// A schedule's jobs counted for `describe`: its occurrences since an instant by outcome (a
/// missed run counted by its occurrences, skipped records apart from it, backfilled ones
/// among them), its open jobs whenever their occurrence, and nothing of another schedule.
pub async fn a_schedules_jobs_are_counted_since_an_instant(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("counted", "billing")).await;
    let other = insert_schedule(&store, env, new_schedule("other", "billing")).await;
    let since = t0() - Duration::days(7);
    let mut tx = store.tenant_begin(env).await.unwrap();
    for status in [
        JobStatus::Succeeded,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Skipped,
        JobStatus::Pending,
        JobStatus::Buffered,
    ] {
        tx.job_insert(&new_job(s.id, status)).await.unwrap();
    }
    tx.job_insert(&NewJob {
        backfill: true,
        ..new_job(s.id, JobStatus::Succeeded)
    })
    .await
    .unwrap();
    tx.job_insert(&NewJob {
        missed: Some(MissedOccurrences {
            first: t0() - Duration::minutes(4),
            last: t0() - Duration::minutes(1),
            count: 4,
        }),
        ..new_job(s.id, JobStatus::Skipped)
    })
    .await
    .unwrap();
    // Before the window: not counted, unless it is open.
    tx.job_insert(&NewJob {
        scheduled_for: since - Duration::hours(1),
        ..new_job(s.id, JobStatus::Failed)
    })
    .await
    .unwrap();
    tx.job_insert(&new_job(other.id, JobStatus::Succeeded))
        .await
        .unwrap();
    let counts = tx.schedule_job_counts(s.id, since).await.unwrap();
    assert_eq!(
        counts,
        ScheduleJobCounts {
            succeeded: 3,
            failed: 1,
            skipped: 1,
            missed: 4,
            backfilled: 1,
            scheduled: 0,
            pending: 1,
            running: 0,
            buffered: 1,
        }
    );
    tx.commit().await.unwrap();
}
