//! Interval schedules (`every` with `phase`) in the engine: their instants are the epoch plus
//! the phase plus whole periods, computed here independently, whatever the zone's clock does;
//! jitter stays within the period; an outage is caught up as for cron.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use super::Harness;

/// The interval's instants strictly after `after`, by arithmetic on Unix seconds.
fn instants_after(
    after: DateTime<Utc>,
    period: i64,
    phase: i64,
) -> impl Iterator<Item = DateTime<Utc>> {
    let first = (after.timestamp() - phase).div_euclid(period) + 1;
    (first..).map(move |k| DateTime::from_timestamp(k * period + phase, 0).unwrap())
}

pub async fn an_interval_fires_at_its_phase_past_each_period_across_a_clock_change(
    store: Arc<dyn Store>,
) {
    let h = Harness::new(store).await;
    // Europe/Berlin springs forward at 01:00 UTC on 2030-03-31: the wall clock jumps an hour,
    // the interval does not.
    let start = Utc.with_ymd_and_hms(2030, 3, 31, 0, 58, 30).unwrap();
    h.clock.set(start);
    let s = h
        .create(ScheduleDecl {
            schedule_type: "interval.across-dst".into(),
            every: Some("40s".into()),
            phase: Some("10s".into()),
            timezone: Some("Europe/Berlin".into()),
            ..ScheduleDecl::default()
        })
        .await;
    assert_eq!(s.timing.cron_expression(), Some("@every 40s phase 10s"));
    let expected: Vec<DateTime<Utc>> = instants_after(start, 40, 10).take(6).collect();
    assert!(expected[0] < Utc.with_ymd_and_hms(2030, 3, 31, 1, 0, 0).unwrap());
    assert!(expected[5] > Utc.with_ymd_and_hms(2030, 3, 31, 1, 0, 0).unwrap());
    assert_eq!(s.next_run_at, Some(expected[0]));
    for at in &expected {
        assert_eq!(h.tick_at(*at).await.fired, 1, "at {at}");
    }
    let called: Vec<DateTime<Utc>> = h.jobs(s.id).await.iter().map(|j| j.scheduled_for).collect();
    assert_eq!(called, expected, "each instant called once, in order");
    assert_eq!(h.target.requests().len(), 6);

    // Ten periods without a tick (an outage): the latest occurrence runs, late, and the ones
    // before it are one record of missed occurrences.
    let late = expected[5] + Duration::seconds(10 * 40 + 5);
    let summary = h.tick_at(late).await;
    assert_eq!((summary.fired, summary.skipped), (1, 1), "{summary:?}");
    let latest = instants_after(expected[5], 40, 10)
        .take_while(|at| *at <= late)
        .last()
        .unwrap();
    let jobs = h.jobs(s.id).await;
    let ran = jobs
        .iter()
        .find(|j| j.scheduled_for == latest && j.status != JobStatus::Skipped)
        .expect("the latest missed occurrence ran");
    assert_eq!(ran.status, JobStatus::Succeeded);
    let missed = jobs
        .iter()
        .find(|j| j.status == JobStatus::Skipped)
        .and_then(|j| j.missed)
        .expect("the others are recorded as missed");
    assert_eq!(missed.count, 9, "{missed:?}");
    assert_eq!(
        h.schedule(s.id).await.next_run_at,
        instants_after(late, 40, 10).next()
    );
}

pub async fn an_intervals_jittered_calls_stay_inside_their_periods(store: Arc<dyn Store>) {
    let h = Harness::new(store).await;
    let s = h
        .create(ScheduleDecl {
            schedule_type: "interval.jittered".into(),
            every: Some("30s".into()),
            max_jitter: Some("30s".into()),
            ..ScheduleDecl::default()
        })
        .await;
    let occurrences = s.occurrences();
    // The first call is the first occurrence strictly after the creation's.
    let first = s.next_run_at.expect("a first call");
    assert_eq!(occurrences.occurrence_of(first).timestamp() % 30, 0);
    let mut calls = vec![first];
    let mut at = first;
    for _ in 1..8 {
        let (occurrence, call) = occurrences
            .next_with_occurrence(at)
            .unwrap()
            .expect("a next call");
        assert_eq!(occurrence.timestamp() % 30, 0, "{occurrence}");
        assert!(call >= occurrence && call < occurrence + Duration::seconds(30));
        calls.push(call);
        at = call;
    }
    // Ticks at each call instant (a fire close to the next may be claimed ahead by the tick
    // before it, and called at its own instant by the next).
    for call in &calls {
        h.tick_at(*call).await;
    }
    let jobs = h.jobs(s.id).await;
    let called: Vec<DateTime<Utc>> = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Succeeded)
        .map(|j| j.scheduled_for)
        .collect();
    assert_eq!(called, calls, "{jobs:?}");
    let started: Vec<DateTime<Utc>> = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Succeeded)
        .filter_map(|j| j.started_at)
        .collect();
    assert_eq!(
        started, calls,
        "each called at its jittered instant, not before"
    );
}

/// A serving engine, claiming ahead, moved through 30 seconds of its clock a quarter second at a
/// time: every occurrence of a two-second interval is called once, at its instant, whatever the
/// overlap policy (the calls are quick: no job is open when the next occurrence comes).
pub async fn a_served_interval_calls_every_occurrence_once_under_each_overlap(
    store: Arc<dyn Store>,
) {
    use super::ahead::{ahead_config, serve_through};
    let h = Harness::with_config(store, ahead_config()).await;
    // Two phases a second apart, so that rounds run every second and find each schedule due
    // within the lead more than once before its instant.
    let mut ids = Vec::new();
    for overlap in ["skip", "allow_all", "buffer_one"] {
        for phase in [0, 1] {
            let s = h
                .create(ScheduleDecl {
                    schedule_type: format!("interval.{overlap}.{phase}"),
                    every: Some("2s".into()),
                    phase: Some(format!("{phase}s")),
                    overlap: Some(overlap.parse().unwrap()),
                    ..ScheduleDecl::default()
                })
                .await;
            ids.push((overlap, phase, s.id));
        }
    }
    let start = h.now();
    let end = start + Duration::seconds(30);
    serve_through(&h, end, false).await;
    for (overlap, phase, id) in ids {
        let expected: Vec<DateTime<Utc>> = instants_after(start, 2, phase)
            .take_while(|at| *at <= end - Duration::seconds(1))
            .collect();
        let jobs = h.jobs(id).await;
        let called: Vec<DateTime<Utc>> = jobs
            .iter()
            .filter(|j| j.status == JobStatus::Succeeded)
            .map(|j| j.scheduled_for)
            .collect();
        assert_eq!(
            called[..expected.len()],
            expected[..],
            "{overlap}: {jobs:#?}"
        );
        let late: Vec<_> = jobs
            .iter()
            .filter(|j| j.started_at.is_some_and(|s| s != j.scheduled_for))
            .collect();
        assert!(
            late.is_empty(),
            "{overlap}: called off their instants: {late:#?}"
        );
        assert!(
            jobs.iter().all(|j| j.status != JobStatus::Skipped),
            "{overlap}: {jobs:#?}"
        );
    }
}

/// A six-field expression in the serve loop: `5,35 * * * * *` is called at seconds 5 and 35 of
/// every minute, each occurrence once and at its instant (claimed ahead, as a minute's are);
/// a jitter longer than the 30 s between them is refused, naming the field.
pub async fn a_seconds_field_is_called_at_each_of_its_seconds(store: Arc<dyn Store>) {
    use super::ahead::{ahead_config, serve_through};
    let h = Harness::with_config(store, ahead_config()).await;
    let s = h
        .create(ScheduleDecl {
            schedule_type: "seconds.field".into(),
            cron: Some("5,35 * * * * *".into()),
            ..ScheduleDecl::default()
        })
        .await;
    let start = h.now();
    let end = start + Duration::seconds(95);
    serve_through(&h, end, false).await;
    let expected: Vec<DateTime<Utc>> = instants_after(start, 60, 5)
        .flat_map(|minute| [minute, minute + Duration::seconds(30)])
        .take_while(|at| *at <= end - Duration::seconds(1))
        .collect();
    let mut jobs = h.jobs(s.id).await;
    jobs.sort_by_key(|j| j.scheduled_for);
    let called: Vec<DateTime<Utc>> = jobs
        .iter()
        .filter(|j| j.status == JobStatus::Succeeded)
        .map(|j| j.scheduled_for)
        .collect();
    assert!(expected.len() >= 3, "{expected:?}");
    assert_eq!(called[..expected.len()], expected[..], "{jobs:#?}");
    assert!(
        jobs.iter()
            .filter(|j| j.status == JobStatus::Succeeded)
            .all(|j| j.started_at == Some(j.scheduled_for)),
        "called off their instants: {jobs:#?}"
    );
    let too_long = ScheduleDecl {
        schedule_type: "seconds.jitter".into(),
        cron: Some("5,35 * * * * *".into()),
        max_jitter: Some("31s".into()),
        ..ScheduleDecl::default()
    };
    let errors = too_long.validate(h.now()).unwrap_err();
    assert_eq!(errors[0].field, "max_jitter", "{errors:?}");
}
