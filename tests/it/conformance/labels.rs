//! Labels are stored as given and a selector lists exactly the schedules the pure rule
//! (`LabelSelector::matches`) picks, on every backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use sentin8_cron::core::labels::{LabelSelector, Labels};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::{insert_schedule, new_schedule};

fn labels(pairs: &[(&str, &str)]) -> Labels {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Labels::validate("labels", map).unwrap()
}

pub async fn labels_round_trip_and_selectors_list_what_the_rule_matches(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let sets = [
        labels(&[]),
        labels(&[("team", "billing"), ("tier", "gold")]),
        labels(&[("team", "billing"), ("tier", "silver"), ("canary", "")]),
        labels(&[("team", "ops"), ("example.com/owner", "ann")]),
        labels(&[("tier", "bronze")]),
        labels(&[("team", "billing.eu"), ("tier", "gold")]),
    ];
    let mut stored = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let mut new = new_schedule(&format!("t{i}"), "billing");
        new.labels = set.clone();
        let schedule = insert_schedule(&store, env, new).await;
        assert_eq!(&schedule.labels, set, "returned as inserted");
        stored.push(schedule);
    }
    // Another tenant's schedule with the same labels is never listed.
    let mut foreign = new_schedule("t1", "billing");
    foreign.labels = sets[1].clone();
    insert_schedule(&store, EnvId::new(), foreign).await;

    let mut tx = store.tenant_begin(env).await.unwrap();
    // A definition write replaces the labels; a deleted schedule is not listed.
    let mut relabelled = stored[4].clone();
    relabelled.labels = labels(&[("tier", "bronze"), ("team", "ops")]);
    let saved = tx
        .schedule_set_definition(&ScheduleSetDefinition::to_match(
            &relabelled,
            "tester",
            relabelled.updated_at,
        ))
        .await
        .unwrap();
    assert_eq!(saved.labels, relabelled.labels);
    stored[4] = saved;
    tx.schedule_set_deleted(&ScheduleSetDeleted {
        id: stored[5].id,
        actor: "tester".into(),
        now: stored[5].updated_at,
    })
    .await
    .unwrap();
    let live: Vec<Schedule> = stored[..5].to_vec();
    let read = tx.schedule_get(stored[1].id).await.unwrap().unwrap();
    assert_eq!(read.labels, sets[1], "read back as written");

    for text in [
        "team=billing",
        "team==billing",
        "team!=billing",
        "tier in (gold, bronze)",
        "tier notin (gold)",
        "canary",
        "!canary",
        "team=billing,!canary",
        "example.com/owner=ann",
        "canary=",
        "team in (billing.eu)",
        "nothing",
        "!nothing",
    ] {
        let selector: LabelSelector = text.parse().unwrap();
        let listed: Vec<ScheduleId> = tx
            .schedule_list(&ScheduleQuery {
                labels: Some(selector.clone()),
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap()
            .iter()
            .map(|s| s.id)
            .collect();
        let expected: Vec<ScheduleId> = live
            .iter()
            .filter(|s| selector.matches(&s.labels))
            .map(|s| s.id)
            .collect();
        assert_eq!(listed, expected, "{text}");
    }
    // A selector pages like any other filter.
    let first = tx
        .schedule_list(&ScheduleQuery {
            labels: Some("team".parse().unwrap()),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    let rest = tx
        .schedule_list(&ScheduleQuery {
            labels: Some("team".parse().unwrap()),
            after: first.last().map(|s| s.id),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(first.len() + rest.len(), 4);
}
