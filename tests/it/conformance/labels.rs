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

pub async fn jobs_and_dead_letters_are_listed_by_their_schedules_labels(store: Arc<dyn Store>) {
    use chrono::Duration;

    use super::new_job;
    use crate::support::t0;

    let env = EnvId::new();
    let mut billing = new_schedule("a", "billing");
    billing.labels = labels(&[("team", "billing")]);
    let billing = insert_schedule(&store, env, billing).await;
    let mut ops = new_schedule("b", "billing");
    ops.labels = labels(&[("team", "ops")]);
    let ops = insert_schedule(&store, env, ops).await;
    // Another tenant's job of a schedule with the same labels is never listed.
    let mut foreign = new_schedule("a", "billing");
    foreign.labels = labels(&[("team", "billing")]);
    let foreign = insert_schedule(&store, EnvId::new(), foreign).await;
    let mut other = store.tenant_begin(foreign.env_id).await.unwrap();
    other
        .job_insert(&new_job(foreign.id, JobStatus::Failed))
        .await
        .unwrap();
    other.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut entries = Vec::new();
    for s in [&billing, &ops, &billing] {
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
                attempts: 1,
                last_error: "refused".into(),
                scheduled_for: t0(),
                backfill: false,
                now: t0() + Duration::minutes(1),
            })
            .await
            .unwrap();
        entries.push((job, entry));
    }
    let selector = |text: &str| Some(text.parse::<LabelSelector>().unwrap());
    let jobs = tx
        .job_list(&JobQuery {
            schedule_labels: selector("team=billing"),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut expected = vec![entries[2].0.id, entries[0].0.id];
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), expected);
    let dead = tx
        .dlq_list(&DlqQuery {
            schedule_labels: selector("team!=billing"),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        dead.iter().map(|e| e.id).collect::<Vec<_>>(),
        [entries[1].1.id]
    );
    let none = tx
        .job_list(&JobQuery {
            schedule_labels: selector("tier"),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty());
    // Combined with the other filters.
    expected.truncate(1);
    let page = tx
        .job_list(&JobQuery {
            schedule_labels: selector("team in (billing, ops)"),
            schedule_id: Some(billing.id),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.iter().map(|j| j.id).collect::<Vec<_>>(), expected);
}
