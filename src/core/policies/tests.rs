use chrono::TimeZone;
use proptest::prelude::*;
use uuid::Uuid;

use super::*;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::timing::CronTiming;

fn cron(expr: &str, zone: &str, repeat: OnDstRepeat) -> Timing {
    Timing::Cron(CronTiming::from_stored(expr, zone, OnDstGap::Shift, repeat))
}

fn at(d: u32, h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, d, h, m, 0).unwrap()
}

fn with_jitter(max: Duration) -> Policies {
    Policies {
        max_jitter: max,
        ..Policies::default()
    }
}

#[test]
fn the_same_occurrence_always_gets_the_same_offset_below_the_bound() {
    let seed = ScheduleId(Uuid::from_u128(7));
    let max = Duration::from_secs(30);
    for minute in 0..500 {
        let occurrence = at(1, 0, 0) + chrono::Duration::minutes(minute);
        let offset = jitter_offset(seed, occurrence, max);
        assert_eq!(offset, jitter_offset(seed, occurrence, max));
        assert!(offset >= chrono::Duration::zero() && offset < chrono::Duration::seconds(30));
        assert_eq!(
            offset.num_milliseconds() % 100,
            0,
            "whole tenths of a second"
        );
    }
    assert_eq!(
        jitter_offset(seed, at(1, 0, 0), Duration::ZERO),
        chrono::Duration::zero()
    );
}

#[test]
fn a_jitter_under_a_second_keeps_whole_milliseconds() {
    let max = Duration::from_millis(250);
    let offsets: std::collections::HashSet<i64> = (0..2_000u128)
        .map(|n| {
            let offset = jitter_offset(ScheduleId(Uuid::from_u128(n + 1)), at(1, 0, 0), max);
            assert!(
                offset >= chrono::Duration::zero() && offset < chrono::Duration::milliseconds(250)
            );
            offset.num_milliseconds()
        })
        .collect();
    assert!(offsets.len() > 200, "{} distinct offsets", offsets.len());
    assert!(offsets.iter().any(|ms| ms % 100 != 0));
}

#[test]
fn a_crowd_shares_three_hundred_instants_over_thirty_seconds_of_jitter() {
    // 5,000 schedules at one instant, 30 s of jitter: 300 instants, about 17 calls each.
    let mut per_instant = std::collections::HashMap::<i64, u32>::new();
    for n in 0..5_000u128 {
        let seed = ScheduleId(Uuid::from_u128(n.wrapping_mul(0x9E37_79B9) + 1));
        let offset = jitter_offset(seed, at(1, 10, 0), Duration::from_secs(30));
        *per_instant.entry(offset.num_milliseconds()).or_default() += 1;
    }
    assert_eq!(per_instant.len(), 300);
    assert!(
        per_instant.values().all(|n| (3..=40).contains(n)),
        "{per_instant:?}"
    );
}

#[test]
fn a_crowd_at_one_instant_spreads_evenly_over_the_window() {
    // 5,000 schedules at the top of the hour, 30 s of jitter: about 167 a second.
    let mut per_second = [0u32; 30];
    for n in 0..5_000u128 {
        let seed = ScheduleId(Uuid::from_u128(n.wrapping_mul(0x9E37_79B9) + 1));
        let offset = jitter_offset(seed, at(1, 10, 0), Duration::from_secs(30));
        per_second[usize::try_from(offset.num_seconds()).unwrap()] += 1;
    }
    for (second, count) in per_second.iter().enumerate() {
        assert!((110..=225).contains(count), "second {second}: {count}");
    }
}

#[test]
fn start_and_end_bound_the_occurrences() {
    let hourly = cron("0 * * * *", "UTC", OnDstRepeat::Once);
    let policies = Policies {
        start_at: Some(at(1, 5, 0)),
        end_at: Some(at(1, 7, 0)),
        ..Policies::default()
    };
    let occurrences = Occurrences {
        timing: &hourly,
        policies: &policies,
        seed: ScheduleId(Uuid::nil()),
    };
    assert_eq!(
        occurrences.next_after(at(1, 0, 0)).unwrap(),
        Some(at(1, 5, 0))
    );
    assert_eq!(
        occurrences.next_after(at(1, 5, 0)).unwrap(),
        Some(at(1, 6, 0))
    );
    assert_eq!(
        occurrences.next_after(at(1, 6, 0)).unwrap(),
        Some(at(1, 7, 0))
    );
    assert_eq!(occurrences.next_after(at(1, 7, 0)).unwrap(), None);
}

#[test]
fn an_occurrence_outside_the_catchup_window_may_not_run() {
    let policies = Policies {
        catchup_window: Duration::from_secs(300),
        ..Policies::default()
    };
    assert!(policies.in_catchup_window(at(1, 0, 0), at(1, 0, 5)));
    assert!(!policies.in_catchup_window(at(1, 0, 0), at(1, 0, 6)));
    assert_eq!(Policies::default().catchup_window, DEFAULT_CATCHUP_WINDOW);
}

#[test]
fn the_shortest_interval_meets_a_fold_that_runs_twice() {
    let daily = cron("30 2 * * *", "Europe/Berlin", OnDstRepeat::Twice);
    let from = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
    // 02:30 on the last Sunday of October runs in both offsets, an hour apart.
    assert_eq!(
        shortest_interval(
            &daily,
            from,
            Duration::from_secs(7200),
            &IntervalMemo::default()
        ),
        Some(chrono::Duration::hours(1))
    );
    let once = cron("30 2 * * *", "Europe/Berlin", OnDstRepeat::Once);
    assert!(
        shortest_interval(
            &once,
            from,
            Duration::from_secs(7200),
            &IntervalMemo::default()
        )
        .unwrap()
            >= chrono::Duration::hours(23)
    );
    let every_minute = cron("* * * * *", "UTC", OnDstRepeat::Once);
    assert_eq!(
        shortest_interval(
            &every_minute,
            from,
            Duration::from_secs(30),
            &IntervalMemo::default()
        ),
        Some(chrono::Duration::minutes(1))
    );
}

#[test]
fn the_interval_memo_keeps_whole_scans_for_whoever_holds_it() {
    let every_minute = cron("* * * * *", "UTC", OnDstRepeat::Once);
    let from = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
    // A scan that stopped early (a gap shorter than asked for) is not whole: not kept.
    let memo = IntervalMemo::default();
    shortest_interval(&every_minute, from, Duration::from_secs(120), &memo);
    assert!(memo.is_empty());
    // A whole scan is kept, and the next check of the expression that day reads it.
    shortest_interval(&every_minute, from, Duration::from_secs(30), &memo);
    assert_eq!(memo.len(), 1);
    memo.remember(
        "* * * * *|UTC|shift|once|2030-01-01".to_owned(),
        Some(chrono::Duration::hours(7)),
    );
    assert_eq!(
        shortest_interval(&every_minute, from, Duration::from_secs(30), &memo),
        Some(chrono::Duration::hours(7)),
        "read from the memo"
    );
    // Another holder's memo knows nothing of it.
    assert_eq!(
        shortest_interval(
            &every_minute,
            from,
            Duration::from_secs(30),
            &IntervalMemo::default()
        ),
        Some(chrono::Duration::minutes(1))
    );
}

#[test]
fn durations_are_written_in_the_units_that_say_them_exactly() {
    assert_eq!(format_duration(Duration::ZERO), "0s");
    assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
    assert_eq!(
        format_duration(Duration::from_secs(86_400 * 2 + 60)),
        "2d1m"
    );
}

#[test]
fn overlap_names_round_trip() {
    for overlap in Overlap::ALL {
        assert_eq!(overlap.as_str().parse::<Overlap>().unwrap(), *overlap);
    }
    let err = "queue".parse::<Overlap>().unwrap_err();
    assert!(
        err.to_string().contains("skip buffer_one allow_all"),
        "{err}"
    );
}

const EXPRESSIONS: &[&str] = &[
    "* * * * *",
    "*/5 * * * *",
    "0 * * * *",
    "15 9 * * 1-5",
    "0 0 1 * *",
];

proptest! {
    /// With any jitter up to the interval, call instants keep their occurrences' order, each
    /// lies in `[occurrence, occurrence + max_jitter)`, and the stored call gives back its
    /// occurrence, so the next call is found from it alone.
    #[test]
    fn calls_follow_their_occurrences_in_order(
        seed in any::<u128>(),
        expr in 0..EXPRESSIONS.len(),
        fraction in 0.0f64..=1.0,
        start_minutes in 0i64..100_000,
    ) {
        let timing = cron(EXPRESSIONS[expr], "UTC", OnDstRepeat::Once);
        let from = at(1, 0, 0) + chrono::Duration::minutes(start_minutes);
        let interval = shortest_interval(&timing, from, Duration::ZERO, &IntervalMemo::default()).unwrap();
        let max_ms = (interval.num_milliseconds() as f64 * fraction) as u64;
        let policies = with_jitter(Duration::from_millis(max_ms));
        let occurrences = Occurrences { timing: &timing, policies: &policies, seed: ScheduleId(Uuid::from_u128(seed)) };
        let mut after = from;
        let mut previous_occurrence = from;
        for _ in 0..20 {
            let (occurrence, call) = occurrences.next_with_occurrence(after).unwrap().unwrap();
            prop_assert!(call > after);
            if after != from {
                // No occurrence is passed over.
                prop_assert_eq!(Some(occurrence), timing.next_after(previous_occurrence).unwrap());
            }
            prop_assert!(call >= occurrence && call - occurrence < chrono::Duration::milliseconds(max_ms.max(1) as i64));
            prop_assert_eq!(occurrences.occurrence_of(call), occurrence);
            previous_occurrence = occurrence;
            after = call;
        }
    }
}

#[test]
fn only_jitter_and_bounds_move_calls() {
    let before = Policies::default();
    for changed in [
        Policies {
            overlap: Overlap::AllowAll,
            ..before
        },
        Policies {
            catchup_window: Duration::from_secs(60),
            ..before
        },
        Policies {
            pause_on_failure: true,
            ..before
        },
    ] {
        assert!(!changed.moves_calls_from(&before), "{changed:?}");
    }
    for changed in [
        Policies {
            max_jitter: Duration::from_secs(5),
            ..before
        },
        Policies {
            start_at: Some(at(2, 0, 0)),
            ..before
        },
        Policies {
            end_at: Some(at(2, 0, 0)),
            ..before
        },
    ] {
        assert!(changed.moves_calls_from(&before), "{changed:?}");
    }
}

#[test]
fn a_new_schedule_starts_at_the_first_occurrence_after_now_not_at_a_pending_call() {
    let hourly = cron("0 * * * *", "UTC", OnDstRepeat::Once);
    let policies = with_jitter(Duration::from_secs(1800));
    let calls = Occurrences {
        timing: &hourly,
        policies: &policies,
        seed: ScheduleId(Uuid::from_u128(3)),
    };
    // At 10:00:00.5 the 10:00 occurrence's call may still be ahead; a schedule created now
    // starts with 11:00's.
    let now = at(1, 10, 0) + chrono::Duration::milliseconds(500);
    let first = calls.first_after(now).unwrap().unwrap();
    assert_eq!(calls.occurrence_of(first), at(1, 11, 0));
    assert!(calls.next_after(now).unwrap().unwrap() <= first);
}
