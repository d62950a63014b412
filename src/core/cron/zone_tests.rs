//! DST behaviour in zones with 60-, 30- and 45-minute offsets and both hemispheres.

use chrono::{DateTime, SecondsFormat, Utc};
use std::sync::LazyLock;

use super::*;

const SHIFTED: Option<DstAdjustment> = Some(DstAdjustment::Shifted);
const REPEATED: Option<DstAdjustment> = Some(DstAdjustment::Repeated);

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn schedule(text: &str, tz: Zone, gap: OnDstGap, repeat: OnDstRepeat) -> ZonedCron {
    ZonedCron::new(CronExpr::parse(text).unwrap(), tz, gap, repeat)
}

/// The first `count` fires after `after`: (UTC, local, DST mark).
fn fires(
    text: &str,
    tz: Zone,
    gap: OnDstGap,
    repeat: OnDstRepeat,
    after: &str,
    count: usize,
) -> Vec<(String, String, Option<DstAdjustment>)> {
    let schedule = schedule(text, tz, gap, repeat);
    let found: Vec<_> = schedule
        .fires_after(at(after))
        .take(count)
        .map(|fire| {
            (
                fire.at.to_rfc3339_opts(SecondsFormat::Secs, true),
                fire.local.to_rfc3339_opts(SecondsFormat::Secs, false),
                fire.dst,
            )
        })
        .collect();
    // next_after and next_fire_after agree with the iterator.
    let first = found.first().map(|fire| at(&fire.0));
    assert_eq!(schedule.next_after(at(after)), first);
    // fire_at finds each fire again from its instant alone, DST mark included.
    for fire in schedule.fires_after(at(after)).take(count) {
        assert_eq!(schedule.fire_at(fire.at), fire);
    }
    found
}

fn utc_marks(
    found: &[(String, String, Option<DstAdjustment>)],
) -> Vec<(&str, Option<DstAdjustment>)> {
    found
        .iter()
        .map(|(utc, _, dst)| (utc.as_str(), *dst))
        .collect()
}

use OnDstGap::{Shift, Skip};
use OnDstRepeat::{Once, Twice};

static NEW_YORK: LazyLock<Zone> = LazyLock::new(|| parse_timezone("America/New_York").unwrap());
static LONDON: LazyLock<Zone> = LazyLock::new(|| parse_timezone("Europe/London").unwrap());
static LORD_HOWE: LazyLock<Zone> = LazyLock::new(|| parse_timezone("Australia/Lord_Howe").unwrap());
static CHATHAM: LazyLock<Zone> = LazyLock::new(|| parse_timezone("Pacific/Chatham").unwrap());

#[test]
fn new_york_spring_gap_shift_runs_once_at_the_transition() {
    let found = fires(
        "30 2 * * *",
        *NEW_YORK,
        Shift,
        Once,
        "2025-03-08T12:00:00Z",
        2,
    );
    assert_eq!(
        found,
        [
            (
                "2025-03-09T07:00:00Z".to_owned(),
                "2025-03-09T03:00:00-04:00".to_owned(),
                SHIFTED
            ),
            (
                "2025-03-10T06:30:00Z".to_owned(),
                "2025-03-10T02:30:00-04:00".to_owned(),
                None
            ),
        ]
    );
}

#[test]
fn new_york_spring_gap_skip_drops_the_day() {
    let found = fires(
        "30 2 * * *",
        *NEW_YORK,
        Skip,
        Once,
        "2025-03-08T12:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&found),
        [
            ("2025-03-10T06:30:00Z", None),
            ("2025-03-11T06:30:00Z", None)
        ]
    );
}

#[test]
fn several_gap_matches_and_the_first_wall_after_the_gap_are_one_fire() {
    let found = fires(
        "0,30 2,3 * * *",
        *NEW_YORK,
        Shift,
        Once,
        "2025-03-09T06:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&found),
        [
            ("2025-03-09T07:00:00Z", SHIFTED),
            ("2025-03-09T07:30:00Z", None)
        ]
    );
    let skipped = fires(
        "0,30 2,3 * * *",
        *NEW_YORK,
        Skip,
        Once,
        "2025-03-09T06:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&skipped),
        [
            ("2025-03-09T07:00:00Z", None),
            ("2025-03-09T07:30:00Z", None)
        ]
    );
}

#[test]
fn new_york_fall_fold_once_and_twice() {
    let once = fires(
        "30 1 * * *",
        *NEW_YORK,
        Shift,
        Once,
        "2025-11-01T12:00:00Z",
        2,
    );
    assert_eq!(
        once,
        [
            (
                "2025-11-02T05:30:00Z".to_owned(),
                "2025-11-02T01:30:00-04:00".to_owned(),
                None
            ),
            (
                "2025-11-03T06:30:00Z".to_owned(),
                "2025-11-03T01:30:00-05:00".to_owned(),
                None
            ),
        ]
    );
    let twice = fires(
        "30 1 * * *",
        *NEW_YORK,
        Shift,
        Twice,
        "2025-11-01T12:00:00Z",
        3,
    );
    assert_eq!(
        twice,
        [
            (
                "2025-11-02T05:30:00Z".to_owned(),
                "2025-11-02T01:30:00-04:00".to_owned(),
                None
            ),
            (
                "2025-11-02T06:30:00Z".to_owned(),
                "2025-11-02T01:30:00-05:00".to_owned(),
                REPEATED
            ),
            (
                "2025-11-03T06:30:00Z".to_owned(),
                "2025-11-03T01:30:00-05:00".to_owned(),
                None
            ),
        ]
    );
    // 02:30 exists once on the fall-back day.
    let after_fold = fires(
        "30 2 * * *",
        *NEW_YORK,
        Shift,
        Twice,
        "2025-11-01T12:00:00Z",
        1,
    );
    assert_eq!(utc_marks(&after_fold), [("2025-11-02T07:30:00Z", None)]);
}

#[test]
fn interval_schedules_follow_elapsed_time_through_both_transitions() {
    for (gap, repeat) in [(Shift, Once), (Skip, Twice)] {
        let spring = fires(
            "*/15 * * * *",
            *NEW_YORK,
            gap,
            repeat,
            "2025-03-09T06:20:00Z",
            4,
        );
        assert_eq!(
            spring,
            [
                (
                    "2025-03-09T06:30:00Z".to_owned(),
                    "2025-03-09T01:30:00-05:00".to_owned(),
                    None
                ),
                (
                    "2025-03-09T06:45:00Z".to_owned(),
                    "2025-03-09T01:45:00-05:00".to_owned(),
                    None
                ),
                (
                    "2025-03-09T07:00:00Z".to_owned(),
                    "2025-03-09T03:00:00-04:00".to_owned(),
                    None
                ),
                (
                    "2025-03-09T07:15:00Z".to_owned(),
                    "2025-03-09T03:15:00-04:00".to_owned(),
                    None
                ),
            ]
        );
        let fall = fires(
            "*/15 * * * *",
            *NEW_YORK,
            gap,
            repeat,
            "2025-11-02T05:40:00Z",
            7,
        );
        assert_eq!(
            utc_marks(&fall),
            [
                ("2025-11-02T05:45:00Z", None),
                ("2025-11-02T06:00:00Z", REPEATED),
                ("2025-11-02T06:15:00Z", REPEATED),
                ("2025-11-02T06:30:00Z", REPEATED),
                ("2025-11-02T06:45:00Z", REPEATED),
                ("2025-11-02T07:00:00Z", None),
                ("2025-11-02T07:15:00Z", None),
            ]
        );
        assert_eq!(fall[1].1, "2025-11-02T01:00:00-05:00");
    }
}

#[test]
fn time_in_the_first_pass_of_a_fold_still_sees_the_second_pass() {
    // 05:50Z is 01:50 EDT; 01:05 EST (06:05Z) is still ahead.
    let interval = fires(
        "5 * * * *",
        *NEW_YORK,
        Shift,
        Once,
        "2025-11-02T05:50:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&interval),
        [
            ("2025-11-02T06:05:00Z", REPEATED),
            ("2025-11-02T07:05:00Z", None)
        ]
    );
    let twice = fires(
        "5 1 * * *",
        *NEW_YORK,
        Shift,
        Twice,
        "2025-11-02T05:50:00Z",
        1,
    );
    assert_eq!(utc_marks(&twice), [("2025-11-02T06:05:00Z", REPEATED)]);
    let once = fires(
        "5 1 * * *",
        *NEW_YORK,
        Shift,
        Once,
        "2025-11-02T05:50:00Z",
        1,
    );
    assert_eq!(utc_marks(&once), [("2025-11-03T06:05:00Z", None)]);
}

#[test]
fn time_in_the_second_pass_of_a_fold() {
    // 06:50Z is 01:50 EST; 01:55 ran at 05:55Z already.
    let once = fires(
        "55 1 * * *",
        *NEW_YORK,
        Shift,
        Once,
        "2025-11-02T06:50:00Z",
        1,
    );
    assert_eq!(utc_marks(&once), [("2025-11-03T06:55:00Z", None)]);
    let twice = fires(
        "55 1 * * *",
        *NEW_YORK,
        Shift,
        Twice,
        "2025-11-02T06:50:00Z",
        1,
    );
    assert_eq!(utc_marks(&twice), [("2025-11-02T06:55:00Z", REPEATED)]);
}

#[test]
fn london_gap_and_fold() {
    // 2025-03-30: 01:00 GMT jumps to 02:00 BST at 01:00Z.
    let shift = fires(
        "30 1 * * *",
        *LONDON,
        Shift,
        Once,
        "2025-03-29T12:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&shift),
        [
            ("2025-03-30T01:00:00Z", SHIFTED),
            ("2025-03-31T00:30:00Z", None)
        ]
    );
    assert_eq!(shift[0].1, "2025-03-30T02:00:00+01:00");
    let skip = fires("30 1 * * *", *LONDON, Skip, Once, "2025-03-29T12:00:00Z", 1);
    assert_eq!(utc_marks(&skip), [("2025-03-31T00:30:00Z", None)]);
    // 2025-10-26: 02:00 BST falls back to 01:00 GMT at 01:00Z.
    let once = fires(
        "30 1 * * *",
        *LONDON,
        Shift,
        Once,
        "2025-10-25T12:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&once),
        [
            ("2025-10-26T00:30:00Z", None),
            ("2025-10-27T01:30:00Z", None)
        ]
    );
    let twice = fires(
        "30 1 * * *",
        *LONDON,
        Shift,
        Twice,
        "2025-10-25T12:00:00Z",
        2,
    );
    assert_eq!(
        utc_marks(&twice),
        [
            ("2025-10-26T00:30:00Z", None),
            ("2025-10-26T01:30:00Z", REPEATED)
        ]
    );
    let hourly = fires("0 * * * *", *LONDON, Skip, Once, "2025-03-30T00:00:00Z", 2);
    assert_eq!(
        utc_marks(&hourly),
        [
            ("2025-03-30T01:00:00Z", None),
            ("2025-03-30T02:00:00Z", None)
        ]
    );
}

/// Zones whose offsets are not whole hours, and fires far from now.
mod odd_offsets;
