//! Exclusions: an occurrence a schedule's own spec or a calendar it names covers (read on the
//! schedule's wall clock) is recorded as skipped, naming what excluded it, and counts no run;
//! a calendar's new entries apply from the next claim; a calendar a schedule names is kept.

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use sentin8_cron::core::calendar::{CalendarDraft, CalendarEntryText};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::engine::PlannedAction;
use sentin8_cron::core::model::*;
use sentin8_cron::core::ops::{CreateSchedule, OpsError};
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use serde_json::json;

use super::overlap::called_for;
use super::{Harness, cron};

fn draft(entries: &[(&str, &str)]) -> CalendarDraft {
    CalendarDraft {
        description: "public holidays".into(),
        entries: entries
            .iter()
            .map(|(spec, note)| CalendarEntryText {
                spec: (*spec).into(),
                note: Some((*note).into()),
            })
            .collect(),
    }
}

/// 20:00 in New York on January `day`, 2030 (01:00 UTC the next day; day 0 is 31 December
/// 2029, the first evening after the harness's start).
fn evening(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, day + 1, 1, 0, 0).unwrap()
}

fn weekday_evenings(calendar: &str) -> ScheduleDecl {
    ScheduleDecl {
        timezone: Some("America/New_York".into()),
        remaining_runs: Some(4),
        exclude: Some(vec![calendar.into(), "* * * * SAT,SUN".into()]),
        ..cron("0 20 * * *", 0)
    }
}

/// Evenings at 20:00 in New York, except a holiday calendar and weekends, four runs: the
/// holiday (2 January on New York's clock, already 3 January in UTC) and the weekend are
/// skipped records naming what excluded them, a date added to the calendar later applies at
/// the next claim, and the four runs are the four evenings not excluded.
pub async fn excluded_occurrences_are_skipped_naming_what_excluded_them(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    h.ops
        .calendar_put(
            h.env,
            "holidays",
            &draft(&[("2030-01-02", "Founders' Day")]),
            &h.actor(),
        )
        .await
        .unwrap();
    let s = h.create(weekday_evenings("holidays")).await;
    let mut shape = Vec::new();
    for day in 0..=9 {
        if day == 4 {
            // Friday the 4th becomes a holiday after the schedule was created (a range from
            // the 3rd, which has run already).
            h.ops
                .calendar_put(
                    h.env,
                    "holidays",
                    &draft(&[
                        ("2030-01-02", "Founders' Day"),
                        ("2030-01-03..2030-01-04", "Bridge days"),
                    ]),
                    &h.actor(),
                )
                .await
                .unwrap();
        }
        if day == 2 {
            // The dry run says so, naming the calendar and its entry.
            h.clock.set(evening(day));
            let planned = h.engine.plan().await.unwrap();
            assert_eq!(planned.len(), 1);
            assert_eq!(planned[0].action, PlannedAction::Excluded);
            assert!(planned[0].would_skip);
            assert_eq!(
                planned[0].excluded_by.as_deref(),
                Some("holidays: 2030-01-02 (Founders' Day)")
            );
        }
        let summary = h.tick_at(evening(day)).await;
        shape.push((day, summary.fired, summary.skipped));
    }
    assert_eq!(
        shape,
        [
            (0, 1, 0),
            (1, 1, 0),
            (2, 0, 1),
            (3, 1, 0),
            (4, 0, 1),
            (5, 0, 1),
            (6, 0, 1),
            (7, 1, 0),
            // Four runs made: completed on the 7th, nothing after.
            (8, 0, 0),
            (9, 0, 0),
        ]
    );
    assert_eq!(
        called_for(&h),
        [
            "2030-01-01T01:00:00Z",
            "2030-01-02T01:00:00Z",
            "2030-01-04T01:00:00Z",
            "2030-01-08T01:00:00Z"
        ]
    );
    let schedule = h.schedule(s.id).await;
    assert_eq!(schedule.status, ScheduleStatus::Completed);
    let jobs = h.jobs(s.id).await;
    let reason_of = |day: u32| {
        let job = jobs
            .iter()
            .find(|j| j.scheduled_for == evening(day))
            .unwrap_or_else(|| panic!("a record for the {day}th"));
        assert_eq!(job.status, JobStatus::Skipped);
        job.error.clone().unwrap()
    };
    assert_eq!(
        reason_of(2),
        "skipped: excluded by calendar holidays (2030-01-02, Founders' Day)"
    );
    assert_eq!(
        reason_of(4),
        "skipped: excluded by calendar holidays (2030-01-03..2030-01-04, Bridge days)"
    );
    assert_eq!(
        reason_of(5),
        "skipped: excluded by the schedule's exclude * * * * SAT,SUN"
    );
    // Each skipped record has its event.
    let mut tx = h.store.tenant_begin(h.env).await.unwrap();
    let events = tx.outbox_list(0, 1_000).await.unwrap();
    tx.commit().await.unwrap();
    let skipped_events = events
        .iter()
        .filter(|e| e.event_type == "io.sentin8.cron.job.skipped.v1")
        .count();
    assert_eq!(skipped_events, 4);
}

/// A schedule cannot name a calendar its environment does not have (another environment's
/// does not count), and a calendar a live schedule names is not removed; once the schedule is
/// deleted, it is.
pub async fn a_calendar_must_exist_to_be_named_and_stays_while_named(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let elsewhere = EnvId::new();
    h.ops
        .calendar_put(
            elsewhere,
            "holidays",
            &draft(&[("2030-01-02", "x")]),
            &h.actor(),
        )
        .await
        .unwrap();
    let spec = weekday_evenings("holidays").validate(h.now()).unwrap();
    let create = CreateSchedule {
        domain: "billing".into(),
        spec,
        target: Target::validate(&json!({"baseUrl": format!("{}/billing", h.target.url())}))
            .unwrap(),
    };
    match h
        .ops
        .schedule_create(h.env, create.clone(), &h.actor())
        .await
    {
        Err(OpsError::Invalid(errors)) => {
            assert_eq!(errors[0].field, "exclude");
            assert!(
                errors[0].message.contains("no calendar named \"holidays\""),
                "{errors:?}"
            );
        }
        other => panic!("refused for the missing calendar, got {other:?}"),
    }
    h.ops
        .calendar_put(
            h.env,
            "holidays",
            &draft(&[("2030-01-02", "x")]),
            &h.actor(),
        )
        .await
        .unwrap();
    let s = h
        .ops
        .schedule_create(h.env, create, &h.actor())
        .await
        .unwrap();
    match h.ops.calendar_delete(h.env, "holidays", &h.actor()).await {
        Err(OpsError::Conflict(detail)) => {
            assert!(detail.contains(&s.id.to_string()), "{detail}")
        }
        other => panic!("refused while named, got {other:?}"),
    }
    h.ops
        .schedule_delete(h.env, s.id, &h.actor())
        .await
        .unwrap();
    h.ops
        .calendar_delete(h.env, "holidays", &h.actor())
        .await
        .unwrap();
    assert!(matches!(
        h.ops.calendar_get(h.env, "holidays").await,
        Err(OpsError::NotFound("calendar"))
    ));
    // The other environment's calendar is its own.
    assert_eq!(h.ops.calendar_list(elsewhere).await.unwrap().len(), 1);
    let audit = h
        .ops
        .audit_list(
            h.env,
            &AuditQuery {
                limit: 50,
                ..AuditQuery::default()
            },
        )
        .await
        .unwrap();
    let actions: Vec<&str> = audit
        .iter()
        .filter(|a| a.resource_type == "calendar")
        .map(|a| a.action.as_str())
        .collect();
    assert_eq!(actions, ["calendar.delete", "calendar.create"]);
}
