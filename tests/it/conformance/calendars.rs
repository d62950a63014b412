//! Calendars and a schedule's exclusions are stored as given, per environment, and the
//! schedules that name a calendar are found the same way on every backend.

use std::sync::Arc;

use sentin8_cron::core::calendar::{Calendar, CalendarDraft, CalendarEntryText, Exclude};
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::{insert_schedule, new_schedule};
use crate::support::t0;

fn calendar(name: &str, specs: &[&str]) -> Calendar {
    let draft = CalendarDraft {
        description: format!("{name} days"),
        entries: specs
            .iter()
            .map(|spec| CalendarEntryText {
                spec: (*spec).to_owned(),
                note: Some(format!("note of {spec}")),
            })
            .collect(),
    };
    Calendar::new(
        name.to_owned(),
        draft.description.clone(),
        draft.validate().unwrap(),
        "tester",
        t0(),
    )
}

fn exclude(texts: &[&str]) -> Exclude {
    let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
    Exclude::validate("exclude", &texts).unwrap()
}

pub async fn calendars_and_exclusions_round_trip_per_environment(store: Arc<dyn Store>) {
    let env = EnvId::new();
    let holidays = calendar(
        "holidays",
        &["2031-12-25", "2031-12-24..2031-12-26", "* * * 11 THU#4"],
    );
    let freeze = calendar("freeze", &["2031-12-20..2032-01-02"]);
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.calendar_put(&holidays).await.unwrap();
    tx.calendar_put(&freeze).await.unwrap();
    tx.commit().await.unwrap();
    // Another environment's calendar of the same name is its own.
    let mut other = store.tenant_begin(EnvId::new()).await.unwrap();
    other
        .calendar_put(&calendar("holidays", &["2031-01-01"]))
        .await
        .unwrap();
    other.commit().await.unwrap();

    let mut tx = store.tenant_begin(env).await.unwrap();
    let listed = tx.calendar_list().await.unwrap();
    assert_eq!(
        listed,
        [freeze.clone(), holidays.clone()],
        "by name, as written"
    );
    let named = tx
        .calendars_named(&["holidays".into(), "missing".into()], true)
        .await
        .unwrap();
    assert_eq!(named, std::slice::from_ref(&holidays));
    // A put replaces the description and entries, keeping who created it and when.
    let mut replaced = calendar("holidays", &["2031-07-04"]);
    replaced.created_by = "someone else".into();
    replaced.updated_by = "editor".into();
    replaced.updated_at = t0() + chrono::Duration::hours(1);
    tx.calendar_put(&replaced).await.unwrap();
    let read = tx
        .calendars_named(&["holidays".into()], false)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(read.entries(), replaced.entries());
    assert_eq!(read.created_by, "tester");
    assert_eq!(
        (read.updated_by.as_str(), read.updated_at),
        ("editor", replaced.updated_at)
    );
    tx.commit().await.unwrap();

    // Exclusions are stored as written; the schedules naming a calendar are the live ones.
    let mut naming = Vec::new();
    for (i, texts) in [
        vec!["holidays", "* * * * SAT,SUN"],
        vec!["2031-12-25"],
        vec!["freeze", "holidays"],
        vec![],
        vec!["holidays"],
    ]
    .into_iter()
    .enumerate()
    {
        let mut new = new_schedule(&format!("t{i}"), "billing");
        new.exclude = exclude(&texts);
        let schedule = insert_schedule(&store, env, new).await;
        assert_eq!(schedule.exclude, exclude(&texts), "returned as inserted");
        naming.push(schedule);
    }
    let mut tx = store.tenant_begin(env).await.unwrap();
    tx.schedule_set_deleted(&ScheduleSetDeleted {
        id: naming[4].id,
        actor: "tester".into(),
        now: t0(),
    })
    .await
    .unwrap();
    let read = tx.schedule_get(naming[2].id).await.unwrap().unwrap();
    assert_eq!(read.exclude.texts(), ["freeze", "holidays"]);
    assert_eq!(
        tx.schedules_naming_calendar("holidays").await.unwrap(),
        [naming[0].id, naming[2].id]
    );
    assert_eq!(
        tx.schedules_naming_calendar("freeze").await.unwrap(),
        [naming[2].id]
    );
    assert!(tx.calendar_delete("freeze").await.unwrap());
    assert!(!tx.calendar_delete("freeze").await.unwrap());
    assert_eq!(tx.calendar_list().await.unwrap().len(), 1);
    tx.commit().await.unwrap();
}
