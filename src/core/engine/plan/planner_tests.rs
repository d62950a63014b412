//! The planner for every policy and state: which schedules fire, are held, deferred or left
//! busy, what they missed, how runs count down and when a schedule completes.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, TimeZone, Utc};
use proptest::prelude::*;

use super::*;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::policies::Policies;
use crate::core::timing::{CronTiming, Timing};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}

fn schedule(expr: &str, next: DateTime<Utc>) -> Schedule {
    let env = EnvId::new();
    Schedule {
        id: ScheduleId::new(),
        env_id: env,
        domain: "billing".into(),
        schedule_type: "invoice".into(),
        timing: Timing::Cron(CronTiming::from_stored(
            expr,
            "UTC",
            OnDstGap::Skip,
            OnDstRepeat::Once,
        )),
        target: crate::core::target::Target::from_stored(
            serde_json::json!({ "baseUrl": "http://127.0.0.1:9" }),
        ),
        payload: serde_json::Value::Null,
        status: ScheduleStatus::Active,
        next_run_at: Some(next),
        last_run_at: None,
        retry_count: 0,
        max_retries: 3,
        policies: Policies::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
        created_at: t0(),
        updated_at: t0(),
        created_by: "test".into(),
        updated_by: "test".into(),
    }
}

fn due_of(s: &Schedule) -> DueSchedule {
    DueSchedule {
        id: s.id,
        env_id: s.env_id,
        next_run_at: s.next_run_at.unwrap(),
    }
}

fn plan_one(s: &Schedule, seen: &Seen, now: DateTime<Utc>, admit: Admit) -> Plan {
    let schedules = HashMap::from([(s.id, s.clone())]);
    let mut answer = Some(admit);
    plan(&[due_of(s)], &schedules, seen, now, &mut |_| {
        answer.take().unwrap_or(Admit::Refuse)
    })
}

#[test]
fn a_due_schedule_fires_its_occurrence_and_moves_to_the_next_call() {
    let s = schedule("* * * * *", t0());
    let p = plan_one(&s, &Seen::default(), t0(), Admit::Now);
    assert_eq!(p.deferred, 0);
    let d = &p.decisions[0];
    assert_eq!(
        d.fire,
        Some(Fire {
            at: t0(),
            held: false
        })
    );
    assert_eq!(d.claim.expected_next_run_at, t0());
    assert_eq!(d.claim.next_run_at, Some(t0() + Duration::minutes(1)));
    assert_eq!((d.missed.is_some(), d.completes), (false, false));
}

#[test]
fn a_fire_ahead_is_held_and_its_next_call_follows_the_occurrence() {
    let at = t0() + Duration::seconds(5);
    let s = schedule("* * * * *", t0() + Duration::minutes(1));
    let p = plan_one(&s, &Seen::default(), at, Admit::Hold);
    let d = &p.decisions[0];
    assert_eq!(
        d.fire,
        Some(Fire {
            at: t0() + Duration::minutes(1),
            held: true
        })
    );
    assert_eq!(d.claim.next_run_at, Some(t0() + Duration::minutes(2)));
}

#[test]
fn a_schedule_with_an_open_job_is_not_claimed_ahead_unless_it_allows_all() {
    let at = t0() + Duration::seconds(5);
    let mut s = schedule("* * * * *", t0() + Duration::minutes(1));
    let seen = Seen {
        busy: HashSet::from([s.id]),
        ..Seen::default()
    };
    assert!(plan_one(&s, &seen, at, Admit::Hold).decisions.is_empty());
    // Under `allow_all` the claim asks instead whether it holds a fire ahead already (a
    // schedule that repeats within the lead is held one occurrence at a time).
    let schedules = HashMap::from([(s.id, s.clone())]);
    let look = to_look_at(&[due_of(&s)], &schedules, at);
    assert_eq!((look.ahead, look.ahead_side_by_side), (vec![s.id], vec![]));
    s.policies.overlap = Overlap::AllowAll;
    let schedules = HashMap::from([(s.id, s.clone())]);
    let look = to_look_at(&[due_of(&s)], &schedules, at);
    assert_eq!((look.ahead, look.ahead_side_by_side), (vec![], vec![s.id]));
}

#[test]
fn a_refused_admission_defers_without_a_claim() {
    let s = schedule("* * * * *", t0());
    let p = plan_one(&s, &Seen::default(), t0(), Admit::Refuse);
    assert_eq!((p.deferred, p.decisions.len()), (1, 0));
}

#[test]
fn after_an_outage_the_latest_fires_and_the_rest_is_one_missed_run() {
    let s = schedule("* * * * *", t0());
    let now = t0() + Duration::minutes(10) + Duration::seconds(3);
    let p = plan_one(&s, &Seen::default(), now, Admit::Now);
    let d = &p.decisions[0];
    assert_eq!(d.fire.unwrap().at, t0() + Duration::minutes(10));
    let missed = d.missed.as_ref().unwrap();
    assert_eq!(
        (missed.first, missed.last, missed.count),
        (t0(), t0() + Duration::minutes(9), 10)
    );
    assert_eq!(d.claim.next_run_at, Some(t0() + Duration::minutes(11)));
}

#[test]
fn a_latest_occurrence_older_than_the_catch_up_window_joins_the_run_and_nothing_fires() {
    let mut s = schedule("0 * * * *", t0());
    s.policies.catchup_window = std::time::Duration::from_secs(60);
    let now = t0() + Duration::hours(3) + Duration::minutes(5);
    let mut asked = false;
    let schedules = HashMap::from([(s.id, s.clone())]);
    let p = plan(
        &[due_of(&s)],
        &schedules,
        &Seen::default(),
        now,
        &mut |_| {
            asked = true;
            Admit::Now
        },
    );
    assert!(!asked, "nothing fires, so no slot is asked for");
    let d = &p.decisions[0];
    assert_eq!(d.fire, None);
    let missed = d.missed.as_ref().unwrap();
    assert_eq!((missed.count, missed.last), (4, t0() + Duration::hours(3)));
    assert_eq!(d.claim.next_run_at, Some(t0() + Duration::hours(4)));
}

#[test]
fn runs_count_down_only_for_an_occurrence_that_will_run_and_the_last_completes() {
    let mut s = schedule("* * * * *", t0());
    s.remaining_runs = Some(2);
    let p = plan_one(&s, &Seen::default(), t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(1));
    assert!(!p.decisions[0].completes);
    // An open job under `skip`: the occurrence is skipped and counts nothing.
    let open = Seen {
        open_now: HashSet::from([s.id]),
        ..Seen::default()
    };
    let p = plan_one(&s, &open, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(2));
    // Under `buffer_one` it counts unless an occurrence already waits.
    s.policies.overlap = Overlap::BufferOne;
    let p = plan_one(&s, &open, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(1));
    let waiting = Seen {
        buffered_now: HashMap::from([(s.id, 1)]),
        max_buffered: 2,
        ..open.clone()
    };
    let p = plan_one(&s, &waiting, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(2));
    // Under `buffer_all` it counts while the bound leaves room for it to wait.
    s.policies.overlap = Overlap::BufferAll;
    let p = plan_one(&s, &waiting, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(1));
    let full = Seen {
        buffered_now: HashMap::from([(s.id, 2)]),
        ..waiting.clone()
    };
    let p = plan_one(&s, &full, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(2));
    // Under `cancel_other` it always runs (the open job is cancelled for it).
    s.policies.overlap = Overlap::CancelOther;
    let p = plan_one(&s, &full, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(1));
    // Under `allow_all` it always runs.
    s.policies.overlap = Overlap::AllowAll;
    let p = plan_one(&s, &waiting, t0(), Admit::Now);
    assert_eq!(p.decisions[0].claim.remaining_runs, Some(1));
    // The last run: fired, and the schedule completes.
    s.remaining_runs = Some(1);
    let p = plan_one(&s, &Seen::default(), t0(), Admit::Now);
    let d = &p.decisions[0];
    assert_eq!(d.claim.remaining_runs, Some(0));
    assert!(d.fire.is_some() && d.completes);
}

#[test]
fn a_last_run_claimed_ahead_completes_its_schedule_at_its_instant() {
    let mut s = schedule("* * * * *", t0());
    s.remaining_runs = Some(1);
    let ahead = t0() - Duration::seconds(5);
    let p = plan_one(&s, &Seen::default(), ahead, Admit::Hold);
    let d = &p.decisions[0];
    assert_eq!(
        d.fire,
        Some(Fire {
            at: t0(),
            held: true
        })
    );
    assert_eq!(d.claim.remaining_runs, Some(0));
    assert!(!d.completes, "not while its last run is still to come");
    assert_eq!(d.claim.next_run_at, Some(t0()), "due again at the instant");
    // Until the instant the schedule is left alone (its last run is its open job).
    s.remaining_runs = Some(0);
    s.next_run_at = Some(t0());
    let busy = Seen {
        busy: HashSet::from([s.id]),
        ..Seen::default()
    };
    assert!(plan_one(&s, &busy, ahead, Admit::Hold).decisions.is_empty());
    assert!(
        plan_one(&s, &Seen::default(), ahead, Admit::Hold)
            .decisions
            .is_empty()
    );
    // At the instant, as the call is made, it completes, firing nothing more.
    let open = Seen {
        open_now: HashSet::from([s.id]),
        ..Seen::default()
    };
    let p = plan_one(&s, &open, t0(), Admit::Now);
    let d = &p.decisions[0];
    assert_eq!(
        (d.fire, d.missed.is_none(), d.completes),
        (None, true, true)
    );
    assert_eq!(d.claim.remaining_runs, Some(0));
}

#[test]
fn a_last_occurrence_claimed_ahead_completes_its_schedule_at_its_instant() {
    let mut s = schedule("* * * * *", t0());
    s.policies.end_at = Some(t0() + Duration::seconds(30));
    let ahead = t0() - Duration::seconds(5);
    let p = plan_one(&s, &Seen::default(), ahead, Admit::Hold);
    let d = &p.decisions[0];
    assert_eq!(
        d.fire,
        Some(Fire {
            at: t0(),
            held: true
        })
    );
    assert!(
        !d.completes,
        "not while its last occurrence is still to come"
    );
    assert_eq!(d.claim.next_run_at, Some(t0()), "due again at the instant");
    // The claim found it at its last occurrence, and that occurrence's job there: left alone
    // until the instant (whatever its overlap), completed at it, firing nothing more.
    let look = to_look_at(&[due_of(&s)], &HashMap::from([(s.id, s.clone())]), ahead);
    assert_eq!(look.at_last, [s.id]);
    let claimed = Seen {
        last_claimed: HashSet::from([s.id]),
        ..Seen::default()
    };
    s.policies.overlap = Overlap::AllowAll;
    assert!(
        plan_one(&s, &claimed, ahead, Admit::Hold)
            .decisions
            .is_empty()
    );
    let d = &plan_one(&s, &claimed, t0(), Admit::Now).decisions[0];
    assert_eq!((d.fire, d.completes), (None, true));
    // Its fire withdrawn (no job for it any more), the occurrence fires when it comes.
    let d = &plan_one(&s, &Seen::default(), t0(), Admit::Now).decisions[0];
    assert_eq!((d.fire.map(|f| f.at), d.completes), (Some(t0()), true));
}

#[test]
fn a_schedule_past_its_end_completes_with_its_last_occurrence() {
    let mut s = schedule("* * * * *", t0());
    s.policies.end_at = Some(t0() + Duration::seconds(30));
    let p = plan_one(&s, &Seen::default(), t0(), Admit::Now);
    let d = &p.decisions[0];
    assert!(d.fire.is_some());
    assert!(d.completes);
    assert_eq!(
        d.claim.next_run_at,
        Some(t0()),
        "kept for the completed schedule"
    );
}

#[test]
fn a_one_shot_completes_when_its_job_ends_or_at_once_when_it_fires_nothing() {
    let mut s = schedule("* * * * *", t0());
    s.timing = Timing::Once { run_at: t0() };
    let p = plan_one(&s, &Seen::default(), t0(), Admit::Now);
    let d = &p.decisions[0];
    assert_eq!((d.claim.next_run_at, d.completes), (None, false));
    s.policies.catchup_window = std::time::Duration::from_secs(60);
    let p = plan_one(&s, &Seen::default(), t0() + Duration::hours(2), Admit::Now);
    let d = &p.decisions[0];
    assert_eq!((d.fire, d.completes), (None, true));
}

proptest! {
    /// Whatever is due and whenever the claim runs: a fire is never before its occurrence's
    /// stored call when claimed at or after it, and never at an instant past `now` unless held;
    /// the next call is strictly after the fired occurrence and after now (or the schedule
    /// completes, or its last run is held, which completes it at that run's instant); runs never go below zero and fall by at most one; a deferred schedule has
    /// no decision.
    #[test]
    fn a_plan_keeps_the_claim_rules(
        minutes_late in -3i64..600,
        seconds in 0i64..60,
        runs in proptest::option::of(0i32..4),
        open in any::<bool>(),
        buffered in 0u32..3,
        overlap in 0usize..5,
        refuse in any::<bool>(),
    ) {
        let mut s = schedule("*/5 * * * *", t0());
        s.remaining_runs = runs;
        s.policies.overlap = Overlap::ALL[overlap];
        let now = t0() + Duration::minutes(minutes_late) + Duration::seconds(seconds);
        let seen = Seen {
            open_now: if open { HashSet::from([s.id]) } else { HashSet::new() },
            buffered_now: HashMap::from([(s.id, buffered)]),
            max_buffered: 2,
            ..Seen::default()
        };
        let admit = if refuse {
            Admit::Refuse
        } else if now < t0() {
            Admit::Hold
        } else {
            Admit::Now
        };
        let p = plan_one(&s, &seen, now, admit);
        if p.decisions.is_empty() {
            // Refused, or out of runs before the instant of its last (which completes it).
            if runs == Some(0) {
                prop_assert!(now < t0());
            } else {
                prop_assert!(refuse);
                prop_assert_eq!(p.deferred, 1);
            }
            return Ok(());
        }
        let d = &p.decisions[0];
        if let Some(fire) = d.fire {
            prop_assert!(fire.at <= now.max(t0()));
            prop_assert_eq!(fire.held, now < t0());
            if !d.completes {
                let next = d.claim.next_run_at.unwrap();
                if d.claim.remaining_runs == Some(0) && fire.held {
                    // Its last run, claimed ahead: the schedule completes at that run's
                    // instant, as it is called, so that instant stays its next.
                    prop_assert_eq!(next, fire.at);
                } else {
                    prop_assert!(next > fire.at && next > now);
                }
            }
        }
        if let (Some(before), Some(after)) = (runs, d.claim.remaining_runs) {
            prop_assert!(after >= 0 && after <= before && before - after <= 1);
        }
        // Out of runs, it completes, unless its last run is held for its instant (it
        // completes then).
        if d.claim.remaining_runs == Some(0) && !d.fire.is_some_and(|f| f.held) {
            prop_assert!(d.completes);
        }
    }
}

fn excluding(mut s: Schedule, texts: &[&str]) -> Schedule {
    let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
    s.exclude = crate::core::calendar::Exclude::validate("exclude", &texts).unwrap();
    s
}

fn no_slot(_: &Schedule) -> Admit {
    panic!("an excluded occurrence asks for no slot")
}

#[test]
fn an_excluded_occurrence_is_recorded_asks_no_slot_and_counts_no_run() {
    let at = t0() + Duration::hours(9);
    let mut s = excluding(schedule("0 9 * * *", at), &["2030-01-01"]);
    s.remaining_runs = Some(2);
    let schedules = HashMap::from([(s.id, s.clone())]);
    // Due now, and due ahead (a claim before the instant decides it as well).
    for now in [at, at - Duration::seconds(5)] {
        let p = plan(
            &[due_of(&s)],
            &schedules,
            &Seen::default(),
            now,
            &mut no_slot,
        );
        let d = &p.decisions[0];
        assert_eq!(d.fire, None);
        let excluded = d.excluded.as_ref().expect("excluded");
        assert_eq!((excluded.at, excluded.by.spec.as_str()), (at, "2030-01-01"));
        assert_eq!(d.claim.remaining_runs, Some(2), "no run counted");
        assert_eq!(d.claim.next_run_at, Some(at + Duration::days(1)));
        assert!(!d.completes);
    }
}

#[test]
fn an_excluded_last_occurrence_completes_its_schedule() {
    let at = t0() + Duration::hours(9);
    let mut s = excluding(schedule("0 9 * * *", at), &["* * * * TUE"]);
    s.policies.end_at = Some(at + Duration::hours(1));
    let schedules = HashMap::from([(s.id, s.clone())]);
    let p = plan(
        &[due_of(&s)],
        &schedules,
        &Seen::default(),
        at,
        &mut no_slot,
    );
    let d = &p.decisions[0];
    assert!(d.excluded.is_some() && d.fire.is_none() && d.completes);
}

#[test]
fn exclusions_are_read_on_the_wall_clock_through_the_calendars_seen() {
    // 20:00 in New York on 1 January is 01:00 UTC on the 2nd.
    let at = Utc.with_ymd_and_hms(2030, 1, 2, 1, 0, 0).unwrap();
    let mut s = excluding(schedule("0 20 * * *", at), &["holidays"]);
    s.timing = Timing::Cron(CronTiming::from_stored(
        "0 20 * * *",
        "America/New_York",
        OnDstGap::Shift,
        OnDstRepeat::Once,
    ));
    let schedules = HashMap::from([(s.id, s.clone())]);
    let calendar = |day: &str| {
        let draft = crate::core::calendar::CalendarDraft {
            description: String::new(),
            entries: vec![crate::core::calendar::CalendarEntryText {
                spec: day.into(),
                note: Some("holiday".into()),
            }],
        };
        crate::core::calendar::Calendar::new(
            "holidays".into(),
            String::new(),
            draft.validate().unwrap(),
            "test",
            t0(),
        )
    };
    let seen_with = |day: &str| Seen {
        calendars: HashMap::from([("holidays".to_owned(), calendar(day))]),
        ..Seen::default()
    };
    let p = plan(
        &[due_of(&s)],
        &schedules,
        &seen_with("2030-01-01"),
        at,
        &mut no_slot,
    );
    let by = &p.decisions[0].excluded.as_ref().unwrap().by;
    assert_eq!(by.calendar.as_deref(), Some("holidays"));
    // The UTC date of the instant is not the schedule's day.
    let p = plan_one(&s, &seen_with("2030-01-02"), at, Admit::Now);
    assert!(p.decisions[0].excluded.is_none());
    assert!(p.decisions[0].fire.is_some());
    // A calendar the claim did not find excludes nothing.
    let p = plan_one(&s, &Seen::default(), at, Admit::Now);
    assert!(p.decisions[0].fire.is_some());
}
