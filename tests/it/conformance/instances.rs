//! Instances: their heartbeats, and the share of the fires each claims ahead.

use std::sync::Arc;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use uuid::Uuid;

use super::{insert_schedule, new_schedule};
use crate::support::t0;

/// Instances' heartbeats: each beat records its instance and returns the instances alive in
/// one order; one not heard from since the stale bound is forgotten, and one that leaves is
/// gone at once.
pub async fn instances_beat_and_are_forgotten_when_stale(store: Arc<dyn Store>) {
    let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let beat = |id, at: i64| {
        let store = store.clone();
        async move {
            store
                .instance_beat(
                    id,
                    t0() + Duration::seconds(at),
                    t0() + Duration::seconds(at - 10),
                )
                .await
                .unwrap()
        }
    };
    assert_eq!(beat(a, 0).await, [a]);
    let mut both = vec![a, b];
    both.sort();
    assert_eq!(beat(b, 1).await, both);
    assert_eq!(beat(a, 5).await, both, "the same list whoever beats");
    // Eleven seconds on, b (last seen at 1) is forgotten; a (seen at 5) is not.
    let mut two = vec![a, c];
    two.sort();
    assert_eq!(beat(c, 12).await, two);
    store.instance_leave(a).await.unwrap();
    assert_eq!(beat(c, 13).await, [c]);
}

/// The share: of the schedules claimed ahead (due after `ahead_after`), each of two instances
/// gets its own half, together all of them and none twice; what is already due is everyone's.
pub async fn instances_share_what_is_claimed_ahead(store: Arc<dyn Store>) {
    let now = t0() + Duration::hours(1);
    let env = EnvId::new();
    let mut ahead = Vec::new();
    for n in 0..40 {
        let mut new = new_schedule(&format!("ahead-{n}"), "billing");
        new.next_run_at = Some(now + Duration::seconds(5));
        ahead.push(insert_schedule(&store, env, new).await.id);
    }
    let mut new = new_schedule("overdue", "billing");
    new.next_run_at = Some(now - Duration::seconds(1));
    let overdue = insert_schedule(&store, env, new).await.id;
    let horizon = now + Duration::seconds(10);
    let share = |index| {
        let store = store.clone();
        async move {
            let share = Share {
                index,
                of: 2,
                ahead_after: now,
            };
            store
                .schedules_due(horizon, 100, 0, Some(share))
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.id)
                .collect::<Vec<_>>()
        }
    };
    let (first, second) = (share(0).await, share(1).await);
    assert!(first.contains(&overdue) && second.contains(&overdue));
    let mut together: Vec<ScheduleId> = first
        .iter()
        .chain(&second)
        .copied()
        .filter(|id| *id != overdue)
        .collect();
    together.sort();
    let mut all = ahead.clone();
    all.sort();
    assert_eq!(
        together, all,
        "every schedule once, in one share or the other"
    );
    // Forty schedules split into two non-empty halves (a hash: not exactly even).
    assert!(
        first.len() > 1 && second.len() > 1,
        "{} / {}",
        first.len(),
        second.len()
    );
    // The same schedules each time, and all of them without a share.
    assert_eq!(share(0).await, first);
    assert_eq!(
        store
            .schedules_due(horizon, 100, 0, None)
            .await
            .unwrap()
            .len(),
        41
    );
}
