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
        now: t0(),
    }
}

pub async fn insert_schedule(store: &Arc<dyn Store>, env: EnvId, new: NewSchedule) -> Schedule {
    let mut tx = store.tenant_begin(env).await.unwrap();
    let schedule = tx.schedule_insert(&new).await.unwrap();
    tx.commit().await.unwrap();
    schedule
}

pub async fn schedule_round_trips(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let new = new_schedule("nightly-report", "billing");
    let inserted = insert_schedule(&store, env, new.clone()).await;
    assert_eq!(inserted.id, new.id);
    assert_eq!(inserted.env_id, env);
    assert_eq!(inserted.domain, "billing");
    assert_eq!(inserted.kind(), ScheduleKind::Cron);
    assert_eq!(inserted.timing.cron_expression(), Some("*/5 * * * *"));
    assert_eq!(inserted.timing.timezone(), Some("Europe/London"));
    assert_eq!(inserted.timing.on_dst_gap(), Some(OnDstGap::Skip));
    assert_eq!(inserted.timing.on_dst_repeat(), Some(OnDstRepeat::Twice));
    assert_eq!(inserted.timing, new.timing);
    assert_eq!(inserted.payload, new.payload);
    assert_eq!(inserted.target.config(), new.target.config());
    assert_eq!(inserted.target, new.target);
    assert_eq!(inserted.next_run_at, new.next_run_at);
    assert_eq!(inserted.retry_count, 0);
    assert_eq!(inserted.max_retries, 4);
    assert_eq!(inserted.created_at, t0());
    assert_eq!(inserted.created_by, "tester");
    assert_eq!(inserted.updated_by, "tester");

    let mut tx = store.tenant_begin(env).await.unwrap();
    let fetched = tx
        .schedule_get(new.id)
        .await
        .unwrap()
        .expect("schedule exists");
    assert_eq!(fetched, inserted);
    let by_type = tx
        .schedule_get_by_type("billing", "nightly-report")
        .await
        .unwrap();
    assert_eq!(by_type.as_ref(), Some(&inserted));

    let mut changed = fetched.clone();
    changed.status = ScheduleStatus::Paused;
    changed.retry_count = 2;
    changed.payload = json!({"changed": true});
    changed.updated_at = t0() + Duration::seconds(1);
    changed.updated_by = "someone-else".into();
    let updated = tx.schedule_update(&changed).await.unwrap();
    assert_eq!(updated, changed);
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(tx.schedule_get(new.id).await.unwrap(), Some(changed));
}

pub async fn one_shot_schedule_round_trips(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let mut new = new_schedule("once", "billing");
    new.timing = Timing::Once {
        run_at: t0() + Duration::days(3),
    };
    new.next_run_at = new.timing.run_at();
    let inserted = insert_schedule(&store, env, new.clone()).await;
    assert_eq!(inserted.kind(), ScheduleKind::Once);
    assert_eq!(inserted.timing.run_at(), new.timing.run_at());
    assert_eq!(inserted.timing.cron_expression(), None);
}

pub async fn inconsistent_schedules_are_refused(store: Arc<dyn Store>) {
    let env = EnvId::new();
    // (A cron schedule without an expression, which the kind/timing check refuses, cannot be
    // expressed: a typed timing always has its expression.)
    // An active schedule must know its next run.
    let mut broken = new_schedule("broken", "billing");
    broken.next_run_at = None;
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert!(tx.schedule_insert(&broken).await.is_err());
    drop(tx);
    // A payload must be a JSON object.
    let mut broken = new_schedule("broken", "billing");
    broken.payload = json!([1, 2]);
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert!(tx.schedule_insert(&broken).await.is_err());
}

pub async fn schedule_type_is_unique_per_domain_among_live_schedules(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let first = insert_schedule(&store, env, new_schedule("sync", "billing")).await;

    let mut tx = store.tenant_begin(env).await.unwrap();
    let err = tx
        .schedule_insert(&new_schedule("sync", "billing"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(Conflict::ScheduleTypeTaken)),
        "got {err:?}"
    );
    drop(tx);

    // Other domains and other environments are independent.
    insert_schedule(&store, env, new_schedule("sync", "reports")).await;
    insert_schedule(&store, EnvId::new(), new_schedule("sync", "billing")).await;

    // A soft-deleted schedule frees its type.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut deleted = first.clone();
    deleted.status = ScheduleStatus::Deleted;
    tx.schedule_update(&deleted).await.unwrap();
    tx.schedule_insert(&new_schedule("sync", "billing"))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // The deleted row is retained (so references resolve), but no longer found by type.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let kept = tx.schedule_get(first.id).await.unwrap().unwrap();
    assert_eq!(kept.status, ScheduleStatus::Deleted);
    let live = tx
        .schedule_get_by_type("billing", "sync")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(live.id, first.id);
}

pub async fn schedule_listing_filters_and_pages(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let mut ids = Vec::new();
    for (i, domain) in ["billing", "billing", "reports", "billing", "reports"]
        .iter()
        .enumerate()
    {
        let s = insert_schedule(&store, env, new_schedule(&format!("t{i}"), domain)).await;
        ids.push(s.id);
    }
    // Someone else's schedule never shows up.
    insert_schedule(&store, EnvId::new(), new_schedule("t0", "billing")).await;

    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut paused = tx.schedule_get(ids[1]).await.unwrap().unwrap();
    paused.status = ScheduleStatus::Paused;
    tx.schedule_update(&paused).await.unwrap();
    let mut deleted = tx.schedule_get(ids[3]).await.unwrap().unwrap();
    deleted.status = ScheduleStatus::Deleted;
    tx.schedule_update(&deleted).await.unwrap();

    let all = tx
        .schedule_list(&ScheduleQuery {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let listed: Vec<_> = all.iter().map(|s| s.id).collect();
    assert_eq!(
        listed,
        vec![ids[0], ids[1], ids[2], ids[4]],
        "by id, deleted left out"
    );

    let with_deleted = tx
        .schedule_list(&ScheduleQuery {
            include_deleted: true,
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(with_deleted.len(), 5);

    let billing = tx
        .schedule_list(&ScheduleQuery {
            domain: Some("billing".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        billing.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![ids[0], ids[1]]
    );

    let only_paused = tx
        .schedule_list(&ScheduleQuery {
            status: Some(ScheduleStatus::Paused),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        only_paused.iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![ids[1]]
    );

    // Keyset pages of two cover everything exactly once.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = tx
            .schedule_list(&ScheduleQuery {
                after,
                limit: 2,
                ..Default::default()
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2);
        after = page.last().map(|s| s.id);
        seen.extend(page.into_iter().map(|s| s.id));
    }
    assert_eq!(seen, listed);
}

pub async fn tenants_never_see_each_other(store: Arc<dyn Store>) {
    let env_a = EnvId::new();
    let env_b = EnvId::new();
    let a = insert_schedule(&store, env_a, new_schedule("a", "billing")).await;

    let mut tx = store.tenant_begin(env_a).await.unwrap();
    let job = tx
        .job_insert(&new_job(a.id, JobStatus::Running))
        .await
        .unwrap();
    tx.outbox_insert(&NewEvent {
        id: EventId::new(),
        schedule_id: Some(a.id),
        event_type: "sentin8:cron:schedule:created".into(),
        payload: json!({}),
        now: t0(),
    })
    .await
    .unwrap();
    tx.audit_insert(&NewAudit {
        actor: "a".into(),
        action: "create".into(),
        resource_type: "schedule".into(),
        resource_id: a.id.to_string(),
        before: None,
        after: None,
        correlation_id: None,
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env_b).await.unwrap();
    assert_eq!(tx.env_id(), env_b);
    assert_eq!(tx.schedule_get(a.id).await.unwrap(), None);
    assert_eq!(tx.schedule_get_by_type("billing", "a").await.unwrap(), None);
    let listed = tx
        .schedule_list(&ScheduleQuery {
            include_deleted: true,
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(listed.is_empty());
    assert_eq!(tx.job_get(job.id).await.unwrap(), None);
    assert_eq!(tx.job_get_open(a.id).await.unwrap(), None);
    assert!(tx.outbox_list(0, 100).await.unwrap().is_empty());
    assert!(tx.audit_list(100).await.unwrap().is_empty());
    // Writing through another tenant's id changes nothing.
    let mut hijack = a.clone();
    hijack.status = ScheduleStatus::Deleted;
    let err = tx.schedule_update(&hijack).await.unwrap_err();
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
    drop(tx);
    // A job pointing at another tenant's schedule is refused.
    let mut tx = store.tenant_begin(env_b).await.unwrap();
    assert!(
        tx.job_insert(&new_job(a.id, JobStatus::Pending))
            .await
            .is_err()
    );
    drop(tx);

    let mut tx = store.tenant_begin(env_a).await.unwrap();
    let still = tx.schedule_get(a.id).await.unwrap().unwrap();
    assert_eq!(still.status, ScheduleStatus::Active);
}

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
    assert_eq!(tx.job_update(&done).await.unwrap(), done);
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
    assert_eq!(claimed.last_run_at, Some(due));
    // The same claim a second time (another ticker that saw the old next_run_at) loses.
    assert_eq!(tx.schedule_claim(&claim).await.unwrap(), None);

    // Paused schedules are never claimed.
    let mut paused = claimed.clone();
    paused.status = ScheduleStatus::Paused;
    tx.schedule_update(&paused).await.unwrap();
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
    for s in [&a, &b, &a] {
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

pub async fn a_failed_event_write_aborts_the_domain_write(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let existing_event = EventId::new();
    let mut tx = store.tenant_begin(env).await.unwrap();
    let seed = tx
        .schedule_insert(&new_schedule("seed", "billing"))
        .await
        .unwrap();
    tx.outbox_insert(&NewEvent {
        id: existing_event,
        schedule_id: Some(seed.id),
        event_type: "sentin8:cron:schedule:created".into(),
        payload: json!({"schedule_id": seed.id}),
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();

    // The domain change and its event share one transaction: when the event cannot be written
    // (here: a duplicate event id), the transaction is abandoned and the change is gone too.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let doomed = tx
        .schedule_insert(&new_schedule("doomed", "billing"))
        .await
        .unwrap();
    let err = tx
        .outbox_insert(&NewEvent {
            id: existing_event,
            schedule_id: Some(doomed.id),
            event_type: "sentin8:cron:schedule:created".into(),
            payload: json!({}),
            now: t0(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(Conflict::DuplicateId)),
        "got {err:?}"
    );
    drop(tx);

    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(tx.schedule_get(doomed.id).await.unwrap(), None);
    let events = tx.outbox_list(0, 100).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].id, existing_event);
}

pub async fn outbox_and_audit_keep_order_and_content(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut ids = Vec::new();
    for (i, kind) in ["created", "paused", "resumed"].iter().enumerate() {
        let id = EventId::new();
        ids.push(id);
        tx.outbox_insert(&NewEvent {
            id,
            schedule_id: Some(s.id),
            event_type: format!("sentin8:cron:schedule:{kind}"),
            payload: json!({"n": i, "schedule_id": s.id}),
            now: t0() + Duration::seconds(i as i64),
        })
        .await
        .unwrap();
        tx.audit_insert(&NewAudit {
            actor: "operator@example.com".into(),
            action: (*kind).into(),
            resource_type: "schedule".into(),
            resource_id: s.id.to_string(),
            before: (i > 0).then(|| json!({"status": "active"})),
            after: Some(json!({"status": kind})),
            correlation_id: Some("req-1".into()),
            now: t0() + Duration::seconds(i as i64),
        })
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    let events = tx.outbox_list(0, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), ids);
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(events[1].event_type, "sentin8:cron:schedule:paused");
    assert_eq!(events[1].payload, json!({"n": 1, "schedule_id": s.id}));
    assert_eq!(events[1].schedule_id, Some(s.id));
    assert_eq!(events[1].relayed_at, None);
    let later = tx.outbox_list(events[0].seq, 100).await.unwrap();
    assert_eq!(later.len(), 2);

    let audit = tx.audit_list(100).await.unwrap();
    assert_eq!(audit.len(), 3);
    assert_eq!(audit[0].before, None);
    assert_eq!(audit[2].action, "resumed");
    assert_eq!(audit[2].after, Some(json!({"status": "resumed"})));
    assert_eq!(audit[2].correlation_id.as_deref(), Some("req-1"));
    assert_eq!(audit[2].actor, "operator@example.com");
}

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

    let due = store.schedules_due(now, 50).await.unwrap();
    let got: Vec<_> = due
        .iter()
        .map(|d| (d.next_run_at, d.id, d.env_id))
        .collect();
    assert_eq!(got, expected);
    let limited = store.schedules_due(now, 2).await.unwrap();
    assert_eq!(
        limited.iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![expected[0].1, expected[1].1]
    );

    assert_eq!(
        store.wakeup_next().await.unwrap(),
        Some(expected[0].0),
        "the earliest next_run_at wakes the ticker"
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
    for status in [JobStatus::Succeeded, JobStatus::Failed, JobStatus::Failed] {
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
            jobs_pending: 1,
            jobs_running: 0,
            jobs_succeeded: 1,
            jobs_failed: 3,
            jobs_skipped: 0,
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
    assert!(claimed.iter().all(|s| s.last_run_at == Some(due)));

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
    let mut done = opened[0].clone();
    done.status = JobStatus::Succeeded;
    done.finished_at = Some(due + Duration::seconds(1));
    done.result = Some(json!({"ok": true}));
    done.updated_at = due + Duration::seconds(1);
    let mut stale = opened[1].clone();
    stale.attempt = 7;
    stale.status = JobStatus::Failed;
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
        event_type: "sentin8:cron:schedule:updated".into(),
        payload: json!({"label": label}),
        now: t0(),
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    id
}

fn claim(relay: &str, at: chrono::DateTime<chrono::Utc>, limit: u32) -> OutboxClaim {
    OutboxClaim {
        relay_id: relay.into(),
        now: at,
        lease_until: at + Duration::seconds(30),
        limit,
    }
}

fn ids(events: &[OutboxEvent]) -> Vec<EventId> {
    events.iter().map(|e| e.id).collect()
}

fn failure(event: &OutboxEvent, error: &str, parkable: bool) -> OutboxFailure {
    OutboxFailure {
        seq: event.seq,
        error: error.into(),
        parkable,
    }
}

fn failed(
    relay: &str,
    failures: Vec<OutboxFailure>,
    at: chrono::DateTime<chrono::Utc>,
) -> OutboxFailed {
    OutboxFailed {
        relay_id: relay.into(),
        failures,
        now: at,
        retry_at: at + Duration::seconds(2),
        max_attempts: 3,
    }
}

pub async fn outbox_claims_follow_seq_and_schedule_order(store: Arc<dyn Store>) {
    let (env_a, env_b) = (EnvId::new(), EnvId::new());
    let (s1, s2) = (ScheduleId::new(), ScheduleId::new());
    let a1 = insert_event(&store, env_a, Some(s1), "a1").await;
    let b1 = insert_event(&store, env_a, Some(s2), "b1").await;
    let a2 = insert_event(&store, env_a, Some(s1), "a2").await;
    let n1 = insert_event(&store, env_b, None, "n1").await;
    let n2 = insert_event(&store, env_b, None, "n2").await;
    let a3 = insert_event(&store, env_a, Some(s1), "a3").await;

    // Across tenants, in seq order, and only the oldest pending event of each schedule.
    let first = store.outbox_claim(&claim("r1", t0(), 2)).await.unwrap();
    assert_eq!(ids(&first), [a1, b1]);
    let rest = store.outbox_claim(&claim("r1", t0(), 100)).await.unwrap();
    assert_eq!(ids(&rest), [n1, n2], "a2 and a3 wait for a1");
    assert!(first.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(first[0].env_id, env_a);
    assert_eq!(first[0].schedule_id, Some(s1));
    assert_eq!(first[0].payload, json!({"label": "a1"}));
    assert_eq!(first[0].event_type, "sentin8:cron:schedule:updated");
    assert_eq!(first[0].attempts, 0);
    assert_eq!(rest[0].env_id, env_b);
    assert_eq!(rest[0].schedule_id, None);

    // Whoever holds a1, nobody gets a2 before a1 is relayed.
    assert!(
        store
            .outbox_claim(&claim("r2", t0(), 100))
            .await
            .unwrap()
            .is_empty()
    );
    let relayed = store
        .outbox_mark_relayed(&OutboxRelayed {
            seqs: vec![first[0].seq],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(relayed, 1);
    assert_eq!(
        ids(&store.outbox_claim(&claim("r2", t0(), 100)).await.unwrap()),
        [a2]
    );
    assert!(
        store
            .outbox_claim(&claim("r3", t0(), 100))
            .await
            .unwrap()
            .is_empty()
    );
    let mut tx = store.tenant_begin(env_a).await.unwrap();
    let listed = tx.outbox_list(0, 100).await.unwrap();
    assert_eq!(ids(&listed), [a1, b1, a2, a3]);
    assert_eq!(listed[0].relayed_at, Some(t0()));
    assert_eq!(listed[1].relayed_at, None);
}

pub async fn outbox_leases_expire(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = ScheduleId::new();
    let first = insert_event(&store, env, Some(s), "first").await;
    let second = insert_event(&store, env, Some(s), "second").await;

    let held = store.outbox_claim(&claim("r1", t0(), 10)).await.unwrap();
    assert_eq!(ids(&held), [first]);
    // While the lease runs, another relay gets neither the event nor its successor.
    let during = t0() + Duration::seconds(29);
    assert!(
        store
            .outbox_claim(&claim("r2", during, 10))
            .await
            .unwrap()
            .is_empty()
    );
    // Once it expired (r1 died), r2 takes the event over.
    let after = t0() + Duration::seconds(30);
    let taken = store.outbox_claim(&claim("r2", after, 10)).await.unwrap();
    assert_eq!(ids(&taken), [first]);

    // r1 coming back to report a failure changes nothing: the event is r2's now.
    let recorded = store
        .outbox_mark_failed(&failed("r1", vec![failure(&held[0], "late", true)], after))
        .await
        .unwrap();
    assert!(recorded.is_empty());
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert_eq!(tx.outbox_list(0, 10).await.unwrap()[0].attempts, 0);
    drop(tx);

    // Marking relayed is idempotent, whoever reports it.
    let seqs = vec![taken[0].seq];
    let mark = OutboxRelayed { seqs, now: after };
    assert_eq!(store.outbox_mark_relayed(&mark).await.unwrap(), 1);
    assert_eq!(store.outbox_mark_relayed(&mark).await.unwrap(), 0);
    let next = store.outbox_claim(&claim("r1", after, 10)).await.unwrap();
    assert_eq!(ids(&next), [second]);
}

pub async fn outbox_failures_back_off_and_park(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = ScheduleId::new();
    let e1 = insert_event(&store, env, Some(s), "e1").await;
    let e2 = insert_event(&store, env, Some(s), "e2").await;
    let loose = insert_event(&store, env, None, "loose").await;
    let before = store.stats_get().await.unwrap();

    let mut at = t0();
    let mut claimed = store.outbox_claim(&claim("r1", at, 10)).await.unwrap();
    assert_eq!(ids(&claimed), [e1, loose]);
    for attempt in 1..=3 {
        let head = claimed
            .iter()
            .find(|e| e.id == e1)
            .expect("e1 claimed")
            .clone();
        assert_eq!(head.attempts, attempt - 1);
        let recorded = store
            .outbox_mark_failed(&failed(
                "r1",
                vec![
                    failure(&head, &format!("refused #{attempt}"), true),
                    // An unreachable bus never parks anything.
                    failure(
                        claimed.iter().find(|e| e.id == loose).unwrap(),
                        "down",
                        false,
                    ),
                ],
                at,
            ))
            .await
            .unwrap();
        assert_eq!(recorded.len(), 2);
        let r1 = recorded.iter().find(|r| r.seq == head.seq).unwrap();
        assert_eq!(r1.attempts, attempt);
        assert_eq!(r1.parked, attempt == 3, "parked at max_attempts only");
        assert!(recorded.iter().all(|r| r.seq == head.seq || !r.parked));
        // In its backoff, the event is not claimable, and it still holds back e2.
        if attempt < 3 {
            let early = claim("r2", at + Duration::seconds(1), 10);
            assert!(store.outbox_claim(&early).await.unwrap().is_empty());
        }
        at += Duration::seconds(2);
        claimed = store.outbox_claim(&claim("r1", at, 10)).await.unwrap();
        if attempt < 3 {
            assert_eq!(
                ids(&claimed),
                [e1, loose],
                "claimable again after the backoff"
            );
            assert_eq!(
                claimed[0].last_error.as_deref(),
                Some(format!("refused #{attempt}").as_str())
            );
        }
    }
    // Parked: e1 is out of the way, so e2 proceeds; the loose event never parked.
    assert_eq!(ids(&claimed), [e2, loose]);
    assert_eq!(claimed[1].attempts, 3);
    assert_eq!(claimed[1].parked_at, None);

    let after = store.stats_get().await.unwrap();
    assert_eq!(after.outbox_parked, before.outbox_parked + 1);
    assert_eq!(after.outbox_unrelayed, before.outbox_unrelayed);
    let mut tx = store.tenant_begin(env).await.unwrap();
    let listed = tx.outbox_list(0, 10).await.unwrap();
    assert_eq!(listed[0].id, e1);
    assert_eq!(listed[0].attempts, 3);
    assert_eq!(listed[0].parked_at, Some(t0() + Duration::seconds(4)));
    assert_eq!(listed[0].relayed_at, None);
    assert_eq!(listed[0].last_error.as_deref(), Some("refused #3"));
    drop(tx);

    // A parked event is never claimed again, even much later.
    let later = at + Duration::days(1);
    let mark = OutboxRelayed {
        seqs: claimed.iter().map(|e| e.seq).collect(),
        now: at,
    };
    assert_eq!(store.outbox_mark_relayed(&mark).await.unwrap(), 2);
    assert!(
        store
            .outbox_claim(&claim("r1", later, 10))
            .await
            .unwrap()
            .is_empty()
    );

    // Errors are kept to a bounded length.
    let long = insert_event(&store, env, None, "long").await;
    let held = store.outbox_claim(&claim("r1", later, 10)).await.unwrap();
    assert_eq!(ids(&held), [long]);
    store
        .outbox_mark_failed(&failed(
            "r1",
            vec![failure(&held[0], &"x".repeat(5000), true)],
            later,
        ))
        .await
        .unwrap();
    let mut tx = store.tenant_begin(env).await.unwrap();
    let listed = tx.outbox_list(0, 10).await.unwrap();
    let stored = listed.iter().find(|e| e.id == long).unwrap();
    assert_eq!(stored.last_error.as_ref().map(String::len), Some(2000));
}

pub async fn outbox_releases_free_claims_at_once(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let s = ScheduleId::new();
    let first = insert_event(&store, env, Some(s), "first").await;
    insert_event(&store, env, Some(s), "second").await;
    let loose = insert_event(&store, env, None, "loose").await;
    let held = store.outbox_claim(&claim("r1", t0(), 10)).await.unwrap();
    assert_eq!(ids(&held), [first, loose]);
    let seqs: Vec<i64> = held.iter().map(|e| e.seq).collect();

    // Only the holder can release.
    let by_other = OutboxRelease {
        relay_id: "r2".into(),
        seqs: seqs.clone(),
    };
    assert_eq!(store.outbox_release(&by_other).await.unwrap(), 0);
    assert!(
        store
            .outbox_claim(&claim("r2", t0(), 10))
            .await
            .unwrap()
            .is_empty()
    );
    let by_holder = OutboxRelease {
        relay_id: "r1".into(),
        seqs,
    };
    assert_eq!(store.outbox_release(&by_holder).await.unwrap(), 2);
    // Released events are claimable at once, untouched: no attempt counted.
    let taken = store.outbox_claim(&claim("r2", t0(), 10)).await.unwrap();
    assert_eq!(ids(&taken), [first, loose]);
    assert!(
        taken
            .iter()
            .all(|e| e.attempts == 0 && e.last_error.is_none())
    );
}

pub async fn outbox_purge_keeps_pending_and_parked_events(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let mut events = Vec::new();
    for i in 0..6 {
        events.push(insert_event(&store, env, None, &format!("e{i}")).await);
    }
    let claimed = store.outbox_claim(&claim("r1", t0(), 10)).await.unwrap();
    assert_eq!(claimed.len(), 6);
    let seq = |i: usize| claimed[i].seq;
    // Three relayed at t0, one a day later, one parked, one left pending.
    store
        .outbox_mark_relayed(&OutboxRelayed {
            seqs: vec![seq(0), seq(1), seq(2)],
            now: t0(),
        })
        .await
        .unwrap();
    store
        .outbox_mark_relayed(&OutboxRelayed {
            seqs: vec![seq(3)],
            now: t0() + Duration::days(1),
        })
        .await
        .unwrap();
    let mut park = failed("r1", vec![failure(&claimed[4], "refused", true)], t0());
    park.max_attempts = 1;
    let recorded = store.outbox_mark_failed(&park).await.unwrap();
    assert!(recorded[0].parked);

    let purge = |before, limit| OutboxPurge {
        relayed_before: before,
        limit,
    };
    let cutoff = t0() + Duration::hours(1);
    assert_eq!(store.outbox_purge(&purge(cutoff, 2)).await.unwrap(), 2);
    assert_eq!(store.outbox_purge(&purge(cutoff, 2)).await.unwrap(), 1);
    assert_eq!(store.outbox_purge(&purge(cutoff, 2)).await.unwrap(), 0);
    let far = t0() + Duration::days(30);
    assert_eq!(store.outbox_purge(&purge(far, 100)).await.unwrap(), 1);

    let mut tx = store.tenant_begin(env).await.unwrap();
    let left = tx.outbox_list(0, 10).await.unwrap();
    assert_eq!(
        ids(&left),
        [events[4], events[5]],
        "parked and pending stay"
    );
    assert!(left[0].parked_at.is_some());
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
                stats_count_across_tenants,
                env_counts_and_upcoming_stay_in_their_tenant,
                schedule_locks_exclude_each_other,
                commits_ring_signals_and_rollbacks_do_not,
                schema_is_current_after_migration,
                batch_operations_match_their_single_forms,
                outbox_claims_follow_seq_and_schedule_order,
                outbox_leases_expire,
                outbox_failures_back_off_and_park,
                outbox_releases_free_claims_at_once,
                outbox_purge_keeps_pending_and_parked_events,
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
