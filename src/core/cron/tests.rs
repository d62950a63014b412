//! Unit tests pinning the parser and the UTC evaluator.

use chrono::{DateTime, NaiveDate, Utc};

use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn expr(text: &str) -> CronExpr {
    CronExpr::parse(text).unwrap_or_else(|err| panic!("{text:?}: {err}"))
}

/// The first `count` fires of `text` after `after`, as RFC 3339 strings.
fn fires(text: &str, after: &str, count: usize) -> Vec<String> {
    let e = expr(text);
    let mut t = at(after);
    let mut out = Vec::new();
    for _ in 0..count {
        t = e.next_after(t).unwrap();
        out.push(t.format("%Y-%m-%dT%H:%M").to_string());
    }
    out
}

fn error(text: &str) -> String {
    CronExpr::parse(text).unwrap_err().to_string()
}

#[test]
fn compiled_form_is_small_and_copy() {
    fn assert_copy<T: Copy>() {}
    assert_copy::<CronExpr>();
    assert!(std::mem::size_of::<CronExpr>() <= 64);
}

#[test]
fn every_minute_is_strictly_after_and_minute_aligned() {
    assert_eq!(
        fires("* * * * *", "2025-01-01T10:00:00Z", 3),
        ["2025-01-01T10:01", "2025-01-01T10:02", "2025-01-01T10:03"]
    );
    let e = expr("* * * * *");
    assert_eq!(
        e.next_after(at("2025-01-01T10:00:59.999Z")),
        Some(at("2025-01-01T10:01:00Z"))
    );
    assert_eq!(
        e.next_after(at("2025-12-31T23:59:30Z")),
        Some(at("2026-01-01T00:00:00Z"))
    );
}

#[test]
fn monthly_jumps_to_the_first_of_the_next_month() {
    assert_eq!(
        fires("0 0 1 * *", "2025-01-01T00:00:00Z", 3),
        ["2025-02-01T00:00", "2025-03-01T00:00", "2025-04-01T00:00"]
    );
    assert_eq!(
        fires("0 0 1 * *", "2025-12-15T08:00:00Z", 1),
        ["2026-01-01T00:00"]
    );
}

#[test]
fn steps_ranges_and_lists() {
    assert_eq!(
        fires("*/15 * * * *", "2025-01-01T10:07:00Z", 3),
        ["2025-01-01T10:15", "2025-01-01T10:30", "2025-01-01T10:45"]
    );
    assert_eq!(
        fires("5-20/5 * * * *", "2025-01-01T10:00:00Z", 5),
        [
            "2025-01-01T10:05",
            "2025-01-01T10:10",
            "2025-01-01T10:15",
            "2025-01-01T10:20",
            "2025-01-01T11:05"
        ]
    );
    // `a/n` is `a-max/n`.
    assert_eq!(expr("10/20 * * * *"), expr("10,30,50 * * * *"));
    assert_eq!(expr("0 3/8 * * *"), expr("0 3,11,19 * * *"));
    assert_eq!(
        fires("0 9,17 * * *", "2025-01-01T12:00:00Z", 2),
        ["2025-01-01T17:00", "2025-01-02T09:00"]
    );
}

#[test]
fn hour_ranges_wrap_around_midnight() {
    assert_eq!(expr("0 22-2 * * *"), expr("0 22,23,0,1,2 * * *"));
    assert_eq!(expr("0 22-2/2 * * *"), expr("0 22,0,2 * * *"));
    assert_eq!(
        fires("0 22-2 * * *", "2025-01-01T21:00:00Z", 6),
        [
            "2025-01-01T22:00",
            "2025-01-01T23:00",
            "2025-01-02T00:00",
            "2025-01-02T01:00",
            "2025-01-02T02:00",
            "2025-01-02T22:00"
        ]
    );
}

#[test]
fn day_of_week_numbers_names_and_sunday_twice() {
    // 2025-01-05 is a Sunday.
    assert_eq!(
        fires("0 0 * * 0", "2025-01-01T00:00:00Z", 1),
        ["2025-01-05T00:00"]
    );
    assert_eq!(expr("0 0 * * 7"), expr("0 0 * * 0"));
    assert_eq!(expr("0 0 * * sun"), expr("0 0 * * 0"));
    assert_eq!(expr("0 0 * * MON-FRI"), expr("0 0 * * 1-5"));
    assert_eq!(expr("0 0 * * Mon,wed,FRI"), expr("0 0 * * 1,3,5"));
    assert_eq!(expr("0 0 * * 5-7"), expr("0 0 * * 0,5,6"));
    assert_eq!(expr("0 0 * * 0-7"), expr("0 0 * * 0-6"));
    // FRI-MON wraps: Friday, Saturday, Sunday, Monday.
    assert_eq!(expr("0 0 * * FRI-MON"), expr("0 0 * * 0,1,5,6"));
    assert_eq!(
        fires("0 0 * * FRI-MON", "2025-01-01T00:00:00Z", 5),
        [
            "2025-01-03T00:00",
            "2025-01-04T00:00",
            "2025-01-05T00:00",
            "2025-01-06T00:00",
            "2025-01-10T00:00"
        ]
    );
    assert_eq!(expr("0 0 * * 7-1"), expr("0 0 * * 0,1"));
}

#[test]
fn month_names() {
    assert_eq!(expr("0 0 1 jan-mar *"), expr("0 0 1 1-3 *"));
    assert_eq!(expr("0 0 1 JUN,dec *"), expr("0 0 1 6,12 *"));
    assert_eq!(
        fires("0 0 1 feb *", "2025-03-01T00:00:00Z", 1),
        ["2026-02-01T00:00"]
    );
}

#[test]
fn dom_and_dow_combine_like_vixie() {
    // Both restricted: either matches. 2025-01-13 is the first Monday after the 1st... the
    // 1st is a Wednesday; Mondays are the 6th, 13th; the 15th matches by day-of-month.
    assert_eq!(
        fires("0 0 15 * MON", "2025-01-01T00:00:00Z", 4),
        [
            "2025-01-06T00:00",
            "2025-01-13T00:00",
            "2025-01-15T00:00",
            "2025-01-20T00:00"
        ]
    );
    // Only day-of-week restricted: it decides.
    assert_eq!(
        fires("0 0 * * MON", "2025-01-01T00:00:00Z", 2),
        ["2025-01-06T00:00", "2025-01-13T00:00"]
    );
    // Only day-of-month restricted: it decides.
    assert_eq!(
        fires("0 0 15 * *", "2025-01-01T00:00:00Z", 2),
        ["2025-01-15T00:00", "2025-02-15T00:00"]
    );
    // `*/2` starts with `*`: unrestricted for the rule, so AND applies, and it still only
    // matches odd days. Odd-numbered Mondays of January 2025: none on the 6th, 13th
    // (odd!), 20th, 27th (odd).
    assert_eq!(
        fires("0 0 */2 * MON", "2025-01-01T00:00:00Z", 3),
        ["2025-01-13T00:00", "2025-01-27T00:00", "2025-02-03T00:00"]
    );
    // `1-31/2` does not start with `*`: restricted, so OR applies.
    assert_eq!(
        fires("0 0 1-31/2 * MON", "2025-01-01T00:00:00Z", 4),
        [
            "2025-01-03T00:00",
            "2025-01-05T00:00",
            "2025-01-06T00:00",
            "2025-01-07T00:00"
        ]
    );
    // `*` in day-of-week with restricted day-of-month: AND with everything.
    assert_eq!(
        fires("0 0 31 * *", "2025-01-31T00:00:00Z", 2),
        ["2025-03-31T00:00", "2025-05-31T00:00"]
    );
}

#[test]
fn aliases_expand_case_insensitively() {
    assert_eq!(expr("@yearly"), expr("0 0 1 1 *"));
    assert_eq!(expr("@ANNUALLY"), expr("0 0 1 1 *"));
    assert_eq!(expr("@monthly"), expr("0 0 1 * *"));
    assert_eq!(expr("@Weekly"), expr("0 0 * * 0"));
    assert_eq!(expr("@daily"), expr("0 0 * * *"));
    assert_eq!(expr(" @midnight "), expr("0 0 * * *"));
    assert_eq!(expr("@hourly"), expr("0 * * * *"));
    assert!(!expr("@hourly").is_fixed_time());
    for fixed in ["@daily", "@weekly", "@monthly", "@yearly"] {
        assert!(expr(fixed).is_fixed_time(), "{fixed}");
    }
}

#[test]
fn fixed_time_depends_on_the_leading_star_of_minute_and_hour() {
    assert!(expr("30 2 * * *").is_fixed_time());
    assert!(expr("0,30 9-17 * * MON-FRI").is_fixed_time());
    assert!(!expr("*/15 * * * *").is_fixed_time());
    assert!(!expr("0 * * * *").is_fixed_time());
    assert!(!expr("*/5 9 * * *").is_fixed_time());
    assert!(!expr("* 9 * * *").is_fixed_time());
    // Spelled out, every minute is still fixed-time: only the text's leading `*` counts.
    assert!(expr("0-59 0-23 * * *").is_fixed_time());
}

#[test]
fn last_day_of_month() {
    assert_eq!(
        fires("0 0 L * *", "2025-01-01T00:00:00Z", 4),
        [
            "2025-01-31T00:00",
            "2025-02-28T00:00",
            "2025-03-31T00:00",
            "2025-04-30T00:00"
        ]
    );
    assert_eq!(
        fires("0 0 L 2 *", "2024-01-01T00:00:00Z", 2),
        ["2024-02-29T00:00", "2025-02-28T00:00"]
    );
    assert_eq!(
        fires("0 0 1,L * *", "2025-01-01T00:00:00Z", 3),
        ["2025-01-31T00:00", "2025-02-01T00:00", "2025-02-28T00:00"]
    );
}

#[test]
fn nth_and_last_weekday_of_month() {
    // Second Monday: 2025-01-13, 2025-02-10, 2025-03-10.
    assert_eq!(
        fires("0 9 * * MON#2", "2025-01-01T00:00:00Z", 3),
        ["2025-01-13T09:00", "2025-02-10T09:00", "2025-03-10T09:00"]
    );
    // Last Friday: 2025-01-31, 2025-02-28, 2025-03-28.
    assert_eq!(
        fires("0 17 * * FRIL", "2025-01-01T00:00:00Z", 3),
        ["2025-01-31T17:00", "2025-02-28T17:00", "2025-03-28T17:00"]
    );
    assert_eq!(expr("0 17 * * 5L"), expr("0 17 * * FRIL"));
    assert_eq!(expr("0 17 * * 7#1"), expr("0 17 * * SUN#1"));
    // A fifth Wednesday exists only in some months: Jan, Apr, Jul, Oct 2025.
    assert_eq!(
        fires("0 0 * * WED#5", "2025-01-01T00:00:00Z", 3),
        ["2025-01-29T00:00", "2025-04-30T00:00", "2025-07-30T00:00"]
    );
    // Mixed with plain weekdays.
    assert_eq!(
        fires("0 0 * * SUN,MON#1", "2025-01-01T00:00:00Z", 3),
        ["2025-01-05T00:00", "2025-01-06T00:00", "2025-01-12T00:00"]
    );
}

#[test]
fn leap_day_across_a_non_leap_century() {
    let e = expr("0 0 29 2 *");
    assert_eq!(
        e.next_after(at("2096-03-01T00:00:00Z")),
        Some(at("2104-02-29T00:00:00Z"))
    );
    assert_eq!(
        e.next_after(at("2023-06-01T00:00:00Z")),
        Some(at("2024-02-29T00:00:00Z"))
    );
}

#[test]
fn impossible_dates_never_fire() {
    let now = at("2025-01-01T00:00:00Z");
    for text in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"] {
        let e = expr(text);
        assert_eq!(e.next_after(now), None, "{text}");
        let schedule = ZonedCron::utc(e);
        assert_eq!(
            schedule.validate(now),
            Err(CronError::NoFutureFire),
            "{text}"
        );
        assert_eq!(
            schedule.validate(now).unwrap_err().to_string(),
            "no future fire"
        );
    }
    // Possible: last day of February, Feb 29 or a Monday (both restricted: OR).
    for text in ["0 0 L 2 *", "0 0 29 2 MON#5", "0 0 29 2 *", "0 0 * 2 MON#5"] {
        assert!(ZonedCron::utc(expr(text)).validate(now).is_ok(), "{text}");
    }
    // Feb 1 being a Monday in a leap year: a fifth Monday in February (2044).
    assert_eq!(
        expr("0 0 * 2 MON#5").next_after(now),
        Some(at("2044-02-29T00:00:00Z"))
    );
}

#[test]
fn whitespace_between_and_around_fields() {
    assert_eq!(expr("  0\t0 \t 1  *   *  "), expr("0 0 1 * *"));
}

#[test]
fn matches_local_checks_every_field() {
    let e = expr("30 9 * * MON-FRI");
    let wall = |y, m, d, h, min| {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(h, min, 0)
            .unwrap()
    };
    assert!(e.matches_local(wall(2025, 1, 6, 9, 30)));
    assert!(!e.matches_local(wall(2025, 1, 5, 9, 30)));
    assert!(!e.matches_local(wall(2025, 1, 6, 9, 31)));
    assert!(!e.matches_local(wall(2025, 1, 6, 10, 30)));
    assert!(expr("0 0 L 2 *").matches_local(wall(2024, 2, 29, 0, 0)));
    assert!(!expr("0 0 L 2 *").matches_local(wall(2024, 2, 28, 0, 0)));
}

#[test]
fn display_is_normalised_and_round_trips() {
    for (text, shown) in [
        ("* * * * *", "* * * * *"),
        ("*/15 * * * *", "*/15 * * * *"),
        ("0 22-2 * * *", "0 0-2,22,23 * * *"),
        ("0 9 * * MON#2", "0 9 * * 1#2"),
        ("0 0 L * FRIL", "0 0 L * 5L"),
        ("0 0 */2 * MON", "0 0 */2 * 1"),
        ("@hourly", "0 * * * *"),
        ("0 0 1,2,3,5 JAN-MAR *", "0 0 1-3,5 1-3 *"),
        ("*/10,5 * * * *", "*/10,5 * * * *"),
        ("0-59 * * * *", "0-59 * * * *"),
    ] {
        let e = expr(text);
        assert_eq!(e.to_string(), shown, "{text}");
        assert_eq!(expr(&e.to_string()), e, "{text}");
        let parsed: CronExpr = text.parse().unwrap();
        assert_eq!(parsed, e);
    }
}

#[test]
fn field_errors_name_the_field_and_the_problem() {
    assert_eq!(error("61 * * * *"), "minute: 61 is out of range 0-59");
    assert_eq!(error("0 24 * * *"), "hour: 24 is out of range 0-23");
    assert_eq!(error("0 0 0 * *"), "day-of-month: 0 is out of range 1-31");
    assert_eq!(error("0 0 32 * *"), "day-of-month: 32 is out of range 1-31");
    assert_eq!(error("0 0 * 13 *"), "month: 13 is out of range 1-12");
    assert_eq!(error("0 0 * * 8"), "day-of-week: 8 is out of range 0-7");
    assert_eq!(
        error("0 0 * * FUNDAY"),
        r#"day-of-week: unknown name "FUNDAY""#
    );
    assert_eq!(error("0 0 * JANUARY *"), r#"month: unknown name "JANUARY""#);
    assert_eq!(error("x * * * *"), r#"minute: invalid value "x""#);
    assert_eq!(error("0 MON * * *"), r#"hour: invalid value "MON""#);
    let count = "expected 5 fields (minute hour day-of-month month day-of-week), or 6 with a \
                 second first, got";
    assert_eq!(error("0 0 *"), format!("{count} 3"));
    assert_eq!(error(""), format!("{count} 0"));
    assert_eq!(error("0 0 * * * * *"), format!("{count} 7"));
    assert_eq!(error("60 0 0 * * *"), "second: 60 is out of range 0-59");
    assert_eq!(error("0 */0 * * *"), "hour: step must be at least 1");
    assert_eq!(
        error("*/61 * * * *"),
        "minute: step 61 is out of range 1-60"
    );
    assert_eq!(error("*/x * * * *"), r#"minute: invalid step "x""#);
    assert_eq!(error("@fortnightly"), r#"unknown alias "@fortnightly""#);
    assert_eq!(
        error("@daily 5"),
        r#"alias "@daily" must stand alone, without further fields"#
    );
    assert_eq!(
        error("50-10 * * * *"),
        "minute: reversed range 50-10 (wrap-around is only allowed in hour and day-of-week)"
    );
    assert_eq!(
        error("0 0 20-10 * *"),
        "day-of-month: reversed range 20-10 (wrap-around is only allowed in hour and day-of-week)"
    );
    assert_eq!(error("1,,2 * * * *"), "minute: empty list element");
    assert_eq!(error("1, * * * *"), "minute: empty list element");
    assert_eq!(
        error("0 0 * * MON#6"),
        "day-of-week: nth occurrence 6 is out of range 1-5"
    );
    assert_eq!(
        error("0 0 * * MON-FRI#2"),
        r#"day-of-week: "MON-FRI#2" cannot be combined with a range or step"#
    );
    assert_eq!(error("0 0 L-5 * *"), r#"day-of-month: invalid value "L""#);
    assert_eq!(
        error("99999999999999999999 * * * *"),
        "minute: 99999999999999999999 is out of range 0-59"
    );
}

#[test]
fn timezone_names_are_iana() {
    assert_eq!(
        parse_timezone("Europe/London").unwrap().name(),
        "Europe/London"
    );
    assert_eq!(
        parse_timezone("Mars/Olympus").unwrap_err().to_string(),
        r#"timezone: unknown time zone "Mars/Olympus""#
    );
}

#[test]
fn extreme_instants_do_not_panic() {
    let e = expr("0 0 29 2 *");
    assert_eq!(e.next_after(DateTime::<Utc>::MAX_UTC), None);
    assert!(e.next_after(DateTime::<Utc>::MIN_UTC).is_some());
    let zoned = ZonedCron::new(
        e,
        parse_timezone("America/New_York").unwrap(),
        OnDstGap::Shift,
        OnDstRepeat::Twice,
    );
    assert_eq!(zoned.next_fire_after(DateTime::<Utc>::MAX_UTC), None);
    assert!(zoned.next_fire_after(DateTime::<Utc>::MIN_UTC).is_some());
    assert_eq!(expr("* * * * *").next_after(DateTime::<Utc>::MAX_UTC), None);
}
