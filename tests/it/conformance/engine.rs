//! What the engine relies on: due selection, counts, locks, signals, batches and the schema.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::*;
use crate::support::t0;

pub async fn due_selection_is_ordered_and_limited(store: Arc<dyn Store>) {
    let now = t0() + Duration::hours(1);
    let mut expected = Vec::new();
    // Due schedules in three environments, inserted out of order.
    for (minutes_ago, env) in [
        (5, EnvId::new()),
        (30, EnvId::new()),
        (1, EnvId::new()),
        (0, EnvId::new()),
    ] {
        let mut new = new_schedule("due", "billing");
        new.next_run_at = Some(now - Duration::minutes(minutes_ago));
        let s = insert_schedule(&store, env, new).await;
        expected.push((now - Duration::minutes(minutes_ago), s.id, env));
    }
    expected.sort();
    // Not due: in the future, paused, deleted, completed.
    let env = EnvId::new();
    let mut future = new_schedule("future", "billing");
    future.next_run_at = Some(now + Duration::seconds(1));
    insert_schedule(&store, env, future).await;
    for status in [
        ScheduleStatus::Paused,
        ScheduleStatus::Deleted,
        ScheduleStatus::Completed,
    ] {
        let mut new = new_schedule(status.as_str(), "billing");
        new.status = status;
        new.next_run_at = Some(now - Duration::hours(1));
        insert_schedule(&store, env, new).await;
    }

    let due = store.schedules_due(now, 50, 0, None).await.unwrap();
    let got: Vec<_> = due
        .iter()
        .map(|d| (d.next_run_at, d.id, d.env_id))
        .collect();
    assert_eq!(got, expected);
    let limited = store.schedules_due(now, 2, 0, None).await.unwrap();
    assert_eq!(
        limited.iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![expected[0].1, expected[1].1]
    );

    assert_eq!(
        store.wakeup_next().await.unwrap(),
        Some(expected[0].0),
        "the earliest next_run_at wakes the ticker"
    );
    // What falls due by an instant, counted up to a cap: active schedules only.
    assert_eq!(store.schedules_due_count(now, 100).await.unwrap(), 4);
    assert_eq!(
        store
            .schedules_due_count(now + Duration::seconds(1), 100)
            .await
            .unwrap(),
        5
    );
    assert_eq!(store.schedules_due_count(now, 2).await.unwrap(), 2);
    assert_eq!(
        store
            .schedules_due_count(now - Duration::hours(2), 100)
            .await
            .unwrap(),
        0
    );
}

pub async fn due_jobs_cover_retries_and_stale_attempts(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let now = t0() + Duration::hours(1);
    let mut tx = store.tenant_begin(env).await.unwrap();
    let make = |name: &str| {
        let new = new_schedule(name, "billing");
        (new.id, new)
    };
    let (a, new_a) = make("a");
    let (b, new_b) = make("b");
    let (c, new_c) = make("c");
    let (d, new_d) = make("d");
    for new in [new_a, new_b, new_c, new_d] {
        tx.schedule_insert(&new).await.unwrap();
    }
    let mut retry_due = new_job(a, JobStatus::Pending);
    retry_due.next_attempt_at = Some(now - Duration::minutes(1));
    let retry_due = tx.job_insert(&retry_due).await.unwrap();
    let mut retry_later = new_job(b, JobStatus::Pending);
    retry_later.next_attempt_at = Some(now + Duration::minutes(1));
    let retry_later = tx.job_insert(&retry_later).await.unwrap();
    let mut stale = new_job(c, JobStatus::Running);
    stale.started_at = Some(now - Duration::minutes(10));
    let stale = tx.job_insert(&stale).await.unwrap();
    let mut fresh = new_job(d, JobStatus::Running);
    fresh.started_at = Some(now - Duration::seconds(5));
    tx.job_insert(&fresh).await.unwrap();
    tx.commit().await.unwrap();

    let due = store
        .jobs_due(now, now - Duration::minutes(2), 50)
        .await
        .unwrap();
    let got: Vec<_> = due
        .iter()
        .map(|j| (j.id, j.status, j.schedule_id, j.env_id))
        .collect();
    assert_eq!(
        got,
        vec![
            (stale.id, JobStatus::Running, c, env),
            (retry_due.id, JobStatus::Pending, a, env),
        ],
        "earliest first: the stale attempt started 10 minutes ago, the retry was due 1 minute ago"
    );
    assert_eq!(
        store
            .jobs_due(now, now - Duration::minutes(2), 1)
            .await
            .unwrap()
            .len(),
        1
    );
    // The wake-up time considers pending retries too.
    let wake = store.wakeup_next().await.unwrap().unwrap();
    assert!(wake <= retry_later.next_attempt_at.unwrap());
}

pub async fn due_selection_is_round_robin_across_environments(store: Arc<dyn Store>) {
    let now = t0() + Duration::hours(1);
    // A backlog of ten in one environment, due earlier than the one schedule of each other.
    let busy = EnvId::new();
    for n in 0..10 {
        let mut new = new_schedule(&format!("busy-{n}"), "billing");
        new.next_run_at = Some(now - Duration::minutes(30) + Duration::seconds(n));
        insert_schedule(&store, busy, new).await;
    }
    let (quiet, other) = (EnvId::new(), EnvId::new());
    for (n, env) in [quiet, other].into_iter().enumerate() {
        let mut new = new_schedule(&format!("single-{n}"), "billing");
        new.next_run_at = Some(now - Duration::minutes(1));
        insert_schedule(&store, env, new).await;
    }
    let due = store.schedules_due(now, 4, 7, None).await.unwrap();
    let envs: Vec<EnvId> = due.iter().map(|d| d.env_id).collect();
    assert_eq!(envs.len(), 4);
    // The first turn takes every environment's earliest; the backlog's earliest comes first
    // (it is due first), and the other environments are not pushed behind the backlog.
    assert_eq!(envs[0], busy);
    assert!(
        envs[1..3].contains(&quiet) && envs[1..3].contains(&other),
        "{envs:?}"
    );
    assert_eq!(envs[3], busy);
    // Within an environment, earliest first.
    let backlog: Vec<_> = store
        .schedules_due(now, 50, 7, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|d| d.env_id == busy)
        .map(|d| d.next_run_at)
        .collect();
    assert!(backlog.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(backlog.len(), 10);
}

pub async fn same_instant_ties_are_ordered_by_seed(store: Arc<dyn Store>) {
    let now = t0() + Duration::hours(1);
    let env = EnvId::new();
    for n in 0..40 {
        let mut new = new_schedule(&format!("tie-{n}"), "billing");
        new.next_run_at = Some(now - Duration::minutes(1));
        insert_schedule(&store, env, new).await;
    }
    let first = |seed| {
        let store = store.clone();
        async move {
            store
                .schedules_due(now, 10, seed, None)
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.id)
                .collect::<Vec<_>>()
        }
    };
    // The same seed gives the same order; instances with other seeds start elsewhere.
    assert_eq!(first(1).await, first(1).await);
    let mut differs = false;
    for seed in 2..6 {
        differs |= first(seed).await != first(1).await;
    }
    assert!(differs, "different seeds never changed the order");
}

pub async fn batch_operations_match_their_single_forms(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let a = insert_schedule(&store, env, new_schedule("a", "billing")).await;
    let b = insert_schedule(&store, env, new_schedule("b", "billing")).await;
    let c = insert_schedule(&store, env, new_schedule("c", "billing")).await;
    let elsewhere = insert_schedule(&store, EnvId::new(), new_schedule("x", "billing")).await;

    // Lock sets: what is free is taken, what is held elsewhere is not.
    let first = store.schedule_locks_try(&[a.id, b.id]).await.unwrap();
    assert_eq!(first.held(), [a.id, b.id]);
    let second = store.schedule_locks_try(&[b.id, c.id]).await.unwrap();
    assert_eq!(second.held(), [c.id], "b is held by the first set");
    assert!(first.release().await.unwrap());
    assert!(second.release().await.unwrap());
    let again = store.schedule_locks_try(&[a.id, b.id, c.id]).await.unwrap();
    assert_eq!(again.held().len(), 3, "released locks are free again");
    assert!(again.release().await.unwrap());

    let mut tx = store.tenant_begin(env).await.unwrap();
    // Reads: id order, this environment only.
    let got = tx
        .schedule_get_many(&[c.id, a.id, elsewhere.id, b.id], true)
        .await
        .unwrap();
    let mut expected = vec![a.id, b.id, c.id];
    expected.sort();
    assert_eq!(got.iter().map(|s| s.id).collect::<Vec<_>>(), expected);

    // Claims: only those still due at the expected instant.
    let due = a.next_run_at.unwrap();
    let claim = |id, expected| ScheduleClaim {
        id,
        expected_next_run_at: expected,
        next_run_at: Some(due + Duration::minutes(5)),
        remaining_runs: None,
        now: due,
    };
    let claimed = tx
        .schedule_claim_many(&[
            claim(a.id, due),
            claim(b.id, due - Duration::minutes(1)),
            claim(c.id, due),
            claim(elsewhere.id, due),
        ])
        .await
        .unwrap();
    let mut claimed_ids: Vec<_> = claimed.iter().map(|s| s.id).collect();
    claimed_ids.sort();
    let mut want = vec![a.id, c.id];
    want.sort();
    assert_eq!(claimed_ids, want);
    assert!(
        claimed
            .iter()
            .all(|s| s.next_run_at == Some(due + Duration::minutes(5)))
    );
    assert!(claimed.iter().all(|s| s.last_run_at.is_none()));

    // Opening jobs leaves out a schedule that already has an open job, without an error.
    let pending = tx
        .job_insert(&new_job(b.id, JobStatus::Pending))
        .await
        .unwrap();
    let opened = tx
        .job_open_many(&[
            new_job(a.id, JobStatus::Running),
            new_job(b.id, JobStatus::Running),
            new_job(c.id, JobStatus::Running),
        ])
        .await
        .unwrap();
    let mut opened_for: Vec<_> = opened.iter().map(|j| j.schedule_id).collect();
    opened_for.sort();
    assert_eq!(opened_for, want);
    assert!(
        opened
            .iter()
            .all(|j| j.status == JobStatus::Running && j.attempt == 1)
    );
    assert_eq!(
        tx.job_get_open(b.id).await.unwrap().map(|j| j.id),
        Some(pending.id),
        "the existing open job stays"
    );

    // Finishing writes only attempts that are still running as given.
    let done = JobFinish {
        id: opened[0].id,
        attempt: opened[0].attempt,
        epoch: opened[0].lease_epoch,
        outcome: JobOutcome::Succeeded {
            result: json!({"ok": true}),
        },
        now: due + Duration::seconds(1),
        detail: AttemptDetail::default(),
        lease_expired_by: None,
    };
    let stale = JobFinish {
        id: opened[1].id,
        attempt: 7,
        epoch: 0,
        outcome: JobOutcome::Failed {
            error: "late".into(),
        },
        now: due + Duration::seconds(1),
        detail: AttemptDetail::default(),
        lease_expired_by: None,
    };
    let finished = tx.job_finish_many(&[done.clone(), stale]).await.unwrap();
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].id, done.id);
    assert_eq!(finished[0].status, JobStatus::Succeeded);
    assert_eq!(finished[0].result, Some(json!({"ok": true})));
    assert_eq!(
        tx.job_get(opened[1].id).await.unwrap().unwrap().status,
        JobStatus::Running,
        "a mismatched attempt is not written"
    );
    assert!(
        tx.job_finish_many(&[done]).await.unwrap().is_empty(),
        "only running jobs finish"
    );

    // Events keep the order given.
    let events: Vec<NewEvent> = (0..3)
        .map(|i| NewEvent {
            id: EventId::new(),
            schedule_id: Some(a.id),
            event_type: format!("e{i}"),
            payload: json!({"i": i}),
            now: due,
        })
        .collect();
    tx.outbox_insert_many(&events).await.unwrap();
    tx.outbox_insert_many(&[]).await.unwrap();
    let listed = tx.outbox_list(0, 100).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|e| e.event_type.as_str())
            .collect::<Vec<_>>(),
        ["e0", "e1", "e2"]
    );
    tx.commit().await.unwrap();
}

pub async fn schema_is_current_after_migration(store: Arc<dyn Store>) {
    let status = store.schema_status().await.unwrap();
    assert!(!status.applied.is_empty());
    assert!(status.pending().is_empty());
    status.ensure_current().unwrap();
}

/// Answers written ahead of their records: taken only by an attempt still running under the
/// same number, in its job's own environment whatever the caller holds, read back in that
/// environment alone, and deleted by the record.
pub async fn answers_written_ahead_belong_to_running_attempts(store: Arc<dyn Store>) {
    let (env, other_env) = (EnvId::new(), EnvId::new());
    let at = t0() + Duration::seconds(3);
    let mut tx = store.tenant_begin(env).await.unwrap();
    let (running, finished) = (
        new_schedule("running", "billing"),
        new_schedule("done", "billing"),
    );
    tx.schedule_insert(&running).await.unwrap();
    tx.schedule_insert(&finished).await.unwrap();
    let running_job = tx
        .job_insert(&new_job(running.id, JobStatus::Running))
        .await
        .unwrap();
    let finished_job = tx
        .job_insert(&new_job(finished.id, JobStatus::Succeeded))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let answer = |job: JobId, attempt: i32, answer: serde_json::Value| JobAnswer {
        job_id: job,
        attempt,
        answered_at: at,
        answer,
    };
    let written = store
        .job_answers_put(&[
            answer(running_job.id, 1, json!({"succeeded": {"n": 1}})),
            // Not running, a stale attempt number, a job that does not exist: not taken.
            answer(finished_job.id, 1, json!({"succeeded": {}})),
            answer(running_job.id, 2, json!({"succeeded": {}})),
            answer(JobId::new(), 1, json!({"succeeded": {}})),
        ])
        .await
        .unwrap();
    assert_eq!(written, 1);
    assert_eq!(store.job_answers_put(&[]).await.unwrap(), 0);

    // Another environment sees nothing of it.
    let mut tx = store.tenant_begin(other_env).await.unwrap();
    assert_eq!(tx.job_answer_get(running_job.id, 1).await.unwrap(), None);
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(
        tx.job_answer_get(running_job.id, 1).await.unwrap(),
        Some(answer(running_job.id, 1, json!({"succeeded": {"n": 1}})))
    );
    assert_eq!(tx.job_answer_get(running_job.id, 2).await.unwrap(), None);
    assert_eq!(tx.job_answer_get(finished_job.id, 1).await.unwrap(), None);
    tx.commit().await.unwrap();

    // The record of the attempt holds the answer from then on: it is forgotten with it.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let finish = JobFinish {
        id: running_job.id,
        attempt: 1,
        epoch: running_job.lease_epoch,
        outcome: JobOutcome::Succeeded {
            result: json!({"n": 1}),
        },
        now: at,
        detail: AttemptDetail::default(),
        lease_expired_by: None,
    };
    assert_eq!(tx.job_finish_many(&[finish]).await.unwrap().len(), 1);
    assert_eq!(tx.job_answer_get(running_job.id, 1).await.unwrap(), None);
    tx.commit().await.unwrap();
}
