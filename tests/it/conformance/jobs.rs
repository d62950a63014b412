//! Jobs and dead letters: the open-job rule, listing, claims and the DLQ.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::*;
use crate::support::t0;

pub async fn one_open_job_per_schedule(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let running = tx
        .job_insert(&new_job(s.id, JobStatus::Running))
        .await
        .unwrap();
    assert_eq!(
        running.idempotency_key,
        Job::idempotency_key_for(s.id, running.id)
    );
    tx.commit().await.unwrap();
    for status in [JobStatus::Pending, JobStatus::Running] {
        // A failed statement ends the transaction's usefulness (PostgreSQL aborts it), so
        // each attempt gets its own.
        let mut tx = store.tenant_begin(env).await.unwrap();
        let err = tx.job_insert(&new_job(s.id, status)).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Conflict(Conflict::OpenJobExists)),
            "got {err:?}"
        );
    }

    let mut tx = store.tenant_begin(env).await.unwrap();
    // Closed jobs do not count: skipped records can pile up beside the open one.
    tx.job_insert(&new_job(s.id, JobStatus::Skipped))
        .await
        .unwrap();
    tx.job_insert(&new_job(s.id, JobStatus::Skipped))
        .await
        .unwrap();
    assert_eq!(
        tx.job_get_open(s.id).await.unwrap().map(|j| j.id),
        Some(running.id)
    );

    let mut done = running.clone();
    done.status = JobStatus::Succeeded;
    done.finished_at = Some(t0() + Duration::seconds(2));
    done.result = Some(json!({"ok": true}));
    done.updated_at = t0() + Duration::seconds(2);
    let finished = tx
        .job_finish_many(&[JobFinish {
            id: running.id,
            attempt: running.attempt,
            epoch: running.lease_epoch,
            outcome: JobOutcome::Succeeded {
                result: json!({"ok": true}),
            },
            now: t0() + Duration::seconds(2),
            detail: AttemptDetail::default(),
            lease_expired_by: None,
        }])
        .await
        .unwrap();
    assert_eq!(finished, vec![done]);
    assert_eq!(tx.job_get_open(s.id).await.unwrap(), None);
    let next = tx
        .job_insert(&new_job(s.id, JobStatus::Pending))
        .await
        .unwrap();
    assert_eq!(
        tx.job_get_open(s.id).await.unwrap().map(|j| j.id),
        Some(next.id)
    );
    tx.commit().await.unwrap();
}

pub async fn job_listing_is_newest_first_with_filters(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let a = insert_schedule(&store, env, new_schedule("a", "billing")).await;
    let b = insert_schedule(&store, env, new_schedule("b", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut ids = Vec::new();
    for schedule in [a.id, b.id, a.id, b.id] {
        ids.push(
            tx.job_insert(&new_job(schedule, JobStatus::Skipped))
                .await
                .unwrap()
                .id,
        );
    }
    let open = tx
        .job_insert(&new_job(a.id, JobStatus::Pending))
        .await
        .unwrap();
    ids.push(open.id);

    let all = tx
        .job_list(&JobQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(all.iter().map(|j| j.id).collect::<Vec<_>>(), newest_first);

    let of_a = tx
        .job_list(&JobQuery {
            schedule_id: Some(a.id),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        of_a.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![ids[4], ids[2], ids[0]]
    );

    let pending = tx
        .job_list(&JobQuery {
            status: Some(JobStatus::Pending),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        pending.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![open.id]
    );

    let page = tx
        .job_list(&JobQuery {
            before: Some(ids[3]),
            limit: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        page.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![ids[2], ids[1]]
    );
}

pub async fn claims_are_conditional(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;
    let due = s.next_run_at.unwrap();
    let mut tx = store.tenant_begin(env).await.unwrap();
    let stale_view = ScheduleClaim {
        id: s.id,
        expected_next_run_at: due - Duration::minutes(5),
        next_run_at: Some(due + Duration::minutes(5)),
        remaining_runs: None,
        now: due,
    };
    assert_eq!(tx.schedule_claim(&stale_view).await.unwrap(), None);
    let claim = ScheduleClaim {
        expected_next_run_at: due,
        ..stale_view
    };
    let claimed = tx
        .schedule_claim(&claim)
        .await
        .unwrap()
        .expect("claim succeeds");
    assert_eq!(claimed.next_run_at, Some(due + Duration::minutes(5)));
    assert_eq!(
        claimed.last_run_at, None,
        "a claim is not a run: the record of its call says when it ran"
    );
    // The same claim a second time (another ticker that saw the old next_run_at) loses.
    assert_eq!(tx.schedule_claim(&claim).await.unwrap(), None);

    // Paused schedules are never claimed.
    tx.schedule_set_status(&status_at(claimed.id, ScheduleStatus::Paused))
        .await
        .unwrap();
    let again = ScheduleClaim {
        expected_next_run_at: due + Duration::minutes(5),
        ..claim
    };
    assert_eq!(tx.schedule_claim(&again).await.unwrap(), None);

    // Jobs: a pending job is claimed once it is due, and only once.
    let mut pending = new_job(s.id, JobStatus::Pending);
    pending.next_attempt_at = Some(t0() + Duration::minutes(1));
    let pending = tx.job_insert(&pending).await.unwrap();
    let early = JobClaim {
        id: pending.id,
        now: t0(),
        lease_until: t0() + Duration::seconds(35),
    };
    assert_eq!(tx.job_claim(&early).await.unwrap(), None, "not due yet");
    let on_time = JobClaim {
        now: t0() + Duration::minutes(1),
        ..early
    };
    let running = tx
        .job_claim(&on_time)
        .await
        .unwrap()
        .expect("due job is claimed");
    assert_eq!(running.status, JobStatus::Running);
    assert_eq!(running.attempt, pending.attempt + 1);
    assert_eq!(running.started_at, Some(t0() + Duration::minutes(1)));
    assert_eq!(running.next_attempt_at, None);
    assert_eq!(
        tx.job_claim(&on_time).await.unwrap(),
        None,
        "claimed only once"
    );
}

pub async fn dlq_round_trips_and_lists(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let a = insert_schedule(&store, env, new_schedule("a", "billing")).await;
    let b = insert_schedule(&store, env, new_schedule("b", "reports")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut entries = Vec::new();
    for (i, s) in [&a, &b, &a].into_iter().enumerate() {
        let mut job = new_job(s.id, JobStatus::Failed);
        job.finished_at = Some(t0());
        let job = tx.job_insert(&job).await.unwrap();
        let entry = tx
            .dlq_insert(&NewDlqEntry {
                id: DlqId::new(),
                schedule_id: s.id,
                job_id: job.id,
                domain: s.domain.clone(),
                schedule_type: s.schedule_type.clone(),
                payload: s.payload.clone(),
                attempts: 4,
                last_error: "proxy-back status 503".into(),
                scheduled_for: t0(),
                // The second one's job ran a backfilled occurrence.
                backfill: i == 1,
                now: t0() + Duration::minutes(30),
            })
            .await
            .unwrap();
        entries.push(entry);
    }
    assert_eq!(entries[0].last_error, "proxy-back status 503");
    assert_eq!(entries[0].payload, a.payload);
    assert_eq!(
        tx.dlq_get(entries[1].id).await.unwrap(),
        Some(entries[1].clone())
    );
    assert_eq!(
        entries.iter().map(|e| e.backfill).collect::<Vec<_>>(),
        [false, true, false]
    );

    let all = tx
        .dlq_list(&DlqQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![entries[2].id, entries[1].id, entries[0].id]
    );
    let billing = tx
        .dlq_list(&DlqQuery {
            domain: Some("billing".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(billing.len(), 2);
    let of_b = tx
        .dlq_list(&DlqQuery {
            schedule_id: Some(b.id),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        of_b.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![entries[1].id]
    );
    let of_job = tx
        .dlq_list(&DlqQuery {
            job_id: Some(entries[2].job_id),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        of_job.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![entries[2].id]
    );

    assert!(tx.dlq_delete(entries[1].id).await.unwrap());
    assert!(
        !tx.dlq_delete(entries[1].id).await.unwrap(),
        "second delete finds nothing"
    );
    tx.commit().await.unwrap();

    assert_eq!(
        store.dlq_envs().await.unwrap(),
        vec![env],
        "only environments with entries"
    );
    let mut other = store.tenant_begin(EnvId::new()).await.unwrap();
    assert_eq!(other.dlq_get(entries[0].id).await.unwrap(), None);
    assert!(!other.dlq_delete(entries[0].id).await.unwrap());
}

/// Many jobs inserted at once come back in the order given, as each would alone; the first
/// buffered ones of a schedule are read regular before backfilled, oldest first, by their
/// `concurrent` flag, and no more than asked.
pub async fn jobs_insert_many_and_the_first_buffered_ones(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;
    let buffered = |minutes: i64, backfill: bool, concurrent: bool| NewJob {
        scheduled_for: t0() + Duration::minutes(minutes),
        backfill,
        concurrent,
        ..new_job(s.id, JobStatus::Buffered)
    };
    // More than one statement's worth, out of order in time.
    let mut news: Vec<NewJob> = (0..450)
        .map(|i| buffered((i * 7) % 450, true, true))
        .collect();
    news.push(buffered(1_000, false, false));
    news.push(buffered(500, true, false));
    let mut tx = store.tenant_begin(env).await.unwrap();
    let inserted = tx.job_insert_many(&news).await.unwrap();
    assert_eq!(
        inserted.iter().map(|j| j.id).collect::<Vec<_>>(),
        news.iter().map(|n| n.id).collect::<Vec<_>>(),
        "in the order given"
    );
    let one = &inserted[3];
    assert_eq!(tx.job_get(one.id).await.unwrap().as_ref(), Some(one));
    assert_eq!(one.scheduled_for, news[3].scheduled_for);
    assert!(one.backfill && one.concurrent && one.status == JobStatus::Buffered);

    let first = tx.jobs_buffered_first(s.id, true, 3).await.unwrap();
    let minutes: Vec<i64> = first
        .iter()
        .map(|j| (j.scheduled_for - t0()).num_minutes())
        .collect();
    assert_eq!(minutes, [0, 1, 2], "oldest first, three of 450");
    let exclusive = tx.jobs_buffered_first(s.id, false, 5).await.unwrap();
    assert_eq!(
        exclusive.iter().map(|j| j.id).collect::<Vec<_>>(),
        [news[450].id, news[451].id],
        "the regular occurrence before the backfilled one, though later"
    );
    assert!(
        tx.jobs_buffered_first(s.id, true, 0)
            .await
            .unwrap()
            .is_empty()
    );
    tx.commit().await.unwrap();

    // Another environment sees none of them.
    let mut other = store.tenant_begin(EnvId::new()).await.unwrap();
    assert!(
        other
            .jobs_buffered_first(s.id, true, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Counting an environment's waiting jobs holds it until the transaction ends: a second
/// transaction's count of that environment waits (so two backfills cannot both pass the cap on
/// a count taken before either added), and goes on once the first ends.
pub async fn waiting_counts_of_one_environment_follow_each_other(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;
    let mut first = store.tenant_begin(env).await.unwrap();
    assert_eq!(first.jobs_waiting_count().await.unwrap(), 0);
    let second = tokio::spawn({
        let store = store.clone();
        async move {
            let mut tx = store.tenant_begin(env).await.unwrap();
            let counted = tx.jobs_waiting_count().await.unwrap();
            tx.commit().await.unwrap();
            counted
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second count did not wait");
    first
        .job_insert(&new_job(s.id, JobStatus::Buffered))
        .await
        .unwrap();
    first.commit().await.unwrap();
    let counted = tokio::time::timeout(std::time::Duration::from_secs(10), second)
        .await
        .expect("the second count goes on once the first ends")
        .unwrap();
    assert_eq!(counted, 1, "it counts what the first added");
}
