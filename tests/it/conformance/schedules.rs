//! Schedules: round trips, uniqueness, listing and tenant isolation.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::core::timing::Timing;
use serde_json::json;

use super::*;
use crate::support::t0;

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
    tx.schedule_set_outcome(&ScheduleSetOutcome {
        id: new.id,
        retry_count: 2,
        status: None,
        now: t0(),
    })
    .await
    .unwrap();
    let updated = tx
        .schedule_set_definition(&ScheduleSetDefinition::to_match(
            &changed,
            "someone-else",
            t0() + Duration::seconds(1),
        ))
        .await
        .unwrap();
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
    // (A cron schedule without an expression cannot be expressed here: a typed cron timing
    // always has one. `schema_checks` shows the database refuses such a row too.)
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
    tx.schedule_set_deleted(&deleted_by_tester(first.id))
        .await
        .unwrap();
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
    tx.schedule_set_status(&status_at(ids[1], ScheduleStatus::Paused))
        .await
        .unwrap();
    tx.schedule_set_deleted(&deleted_by_tester(ids[3]))
        .await
        .unwrap();

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
        event_type: "io.sentin8.cron.schedule.created.v1".into(),
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
        schedule_id: None,
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
    let err = tx
        .schedule_set_deleted(&deleted_by_tester(a.id))
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

/// A cron schedule of `domain` in `zone` with `status`.
fn zoned_schedule(schedule_type: &str, zone: &str, status: ScheduleStatus) -> NewSchedule {
    NewSchedule {
        timing: Timing::Cron(sentin8_cron::core::timing::CronTiming::from_stored(
            "0 9 * * *",
            zone,
            OnDstGap::Shift,
            OnDstRepeat::Once,
        )),
        status,
        ..new_schedule(schedule_type, "zones")
    }
}

pub async fn zones_in_use_are_listed_across_tenants_and_schedules_by_zone_within_one(
    store: Arc<dyn Store>,
) {
    let (a, b) = (EnvId::new(), EnvId::new());
    let berlin = insert_schedule(
        &store,
        a,
        zoned_schedule("a1", "Europe/Berlin", ScheduleStatus::Active),
    )
    .await;
    let berlin_too = insert_schedule(
        &store,
        a,
        zoned_schedule("a2", "Europe/Berlin", ScheduleStatus::Active),
    )
    .await;
    insert_schedule(
        &store,
        a,
        zoned_schedule("a3", "Asia/Tokyo", ScheduleStatus::Paused),
    )
    .await;
    let deleted = insert_schedule(
        &store,
        a,
        zoned_schedule("a4", "Asia/Tokyo", ScheduleStatus::Active),
    )
    .await;
    let mut tx = store.tenant_begin(a).await.unwrap();
    tx.schedule_set_deleted(&deleted_by_tester(deleted.id))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // A one-shot schedule carries a zone column too, but has no rules to follow.
    let once = NewSchedule {
        timing: Timing::Once {
            run_at: t0() + Duration::days(1),
        },
        ..new_schedule("a5", "zones")
    };
    insert_schedule(&store, a, once).await;
    insert_schedule(
        &store,
        b,
        zoned_schedule("b1", "Europe/Berlin", ScheduleStatus::Active),
    )
    .await;
    insert_schedule(
        &store,
        b,
        zoned_schedule("b2", "UTC", ScheduleStatus::Active),
    )
    .await;

    let mut expected = vec![
        ZoneInUse {
            env_id: a,
            timezone: "Europe/Berlin".into(),
        },
        ZoneInUse {
            env_id: b,
            timezone: "Europe/Berlin".into(),
        },
        ZoneInUse {
            env_id: b,
            timezone: "UTC".into(),
        },
    ];
    expected.sort();
    assert_eq!(store.schedule_zones_active().await.unwrap(), expected);

    let mut tx = store.tenant_begin(a).await.unwrap();
    let ids: Vec<ScheduleId> = tx
        .schedule_list_in_zone("Europe/Berlin")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    let mut both = vec![berlin.id, berlin_too.id];
    both.sort();
    assert_eq!(ids, both);
    // Paused and deleted schedules are left out; other tenants' rows are never seen.
    assert!(
        tx.schedule_list_in_zone("Asia/Tokyo")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(tx.schedule_list_in_zone("UTC").await.unwrap().is_empty());
    tx.commit().await.unwrap();
}

/// Schedules and audit entries written in batches (more than one statement's worth) read back
/// as the single forms would have written them, in the order given; a batch with a taken type
/// is refused like a single insert.
pub async fn schedules_and_audit_entries_insert_many_in_the_order_given(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let news: Vec<NewSchedule> = (0..450)
        .map(|i| {
            let mut new = new_schedule(&format!("batch-{i:03}"), "billing");
            new.payload = json!({"i": i});
            new.next_run_at = Some(t0() + Duration::minutes(i));
            new
        })
        .collect();
    let single = insert_schedule(&store, env, new_schedule("single", "billing")).await;

    let mut tx = store.tenant_begin(env).await.unwrap();
    let inserted = tx.schedule_insert_many(&news).await.unwrap();
    assert_eq!(
        inserted.iter().map(|s| s.id).collect::<Vec<_>>(),
        news.iter().map(|n| n.id).collect::<Vec<_>>(),
        "returned in the order given"
    );
    let audits: Vec<NewAudit> = news
        .iter()
        .enumerate()
        .map(|(i, new)| NewAudit {
            actor: "enroll".into(),
            action: "schedule.create".into(),
            resource_type: "schedule".into(),
            resource_id: new.id.to_string(),
            before: None,
            after: Some(json!({"i": i})),
            correlation_id: None,
            now: t0(),
            schedule_id: Some(new.id),
        })
        .collect();
    tx.audit_insert_many(&audits).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    for (new, returned) in news.iter().zip(&inserted) {
        let read = tx.schedule_get(new.id).await.unwrap().expect("written");
        assert_eq!(&read, returned);
        assert_eq!(read.schedule_type, new.schedule_type);
        assert_eq!(read.payload, new.payload);
        assert_eq!(read.next_run_at, new.next_run_at);
        assert_eq!(read.env_id, env);
        // Everything but what names the row is what a single insert writes.
        assert_eq!(
            Schedule {
                id: single.id,
                schedule_type: single.schedule_type.clone(),
                payload: single.payload.clone(),
                next_run_at: single.next_run_at,
                created_at: single.created_at,
                updated_at: single.updated_at,
                ..read
            },
            single
        );
    }
    let journal = tx.audit_list(1_000).await.unwrap();
    assert_eq!(journal.len(), 450);
    for (i, entry) in journal.iter().enumerate() {
        assert_eq!(entry.resource_id, news[i].id.to_string());
        assert_eq!(entry.after, Some(json!({"i": i})));
    }
    drop(tx);

    // A batch with a type already taken writes nothing.
    let mut tx = store.tenant_begin(env).await.unwrap();
    let err = tx
        .schedule_insert_many(&[
            new_schedule("fresh", "billing"),
            new_schedule("batch-001", "billing"),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(Conflict::ScheduleTypeTaken)),
        "got {err:?}"
    );
    drop(tx);
    let mut tx = store.tenant_begin(env).await.unwrap();
    assert!(
        tx.schedule_get_by_type("billing", "fresh")
            .await
            .unwrap()
            .is_none()
    );
}
