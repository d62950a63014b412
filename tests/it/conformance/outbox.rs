//! The outbox: event writes inside domain transactions, and the relay's claims, marks,
//! releases and purges.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use serde_json::json;

use super::*;
use crate::support::t0;

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
        event_type: "io.sentin8.cron.schedule.created.v1".into(),
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
            event_type: "io.sentin8.cron.schedule.created.v1".into(),
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
            event_type: format!("io.sentin8.cron.schedule.{kind}.v1"),
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
            schedule_id: None,
        })
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    let events = tx.outbox_list(0, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.id).collect::<Vec<_>>(), ids);
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(events[1].event_type, "io.sentin8.cron.schedule.paused.v1");
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
    assert_eq!(first[0].event_type, "io.sentin8.cron.schedule.updated.v1");
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
    // The relay's gauge asks for the parked count alone: the same figure.
    assert_eq!(
        store.outbox_parked_count().await.unwrap(),
        after.outbox_parked
    );
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
    // Only the parked event is left unrelayed: it is no backlog (it would never age out).
    let stats = store.stats_get().await.unwrap();
    assert_eq!(stats.outbox_oldest_unrelayed_at, None, "{stats:?}");
    assert_eq!(stats.outbox_parked, before.outbox_parked + 1);
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
