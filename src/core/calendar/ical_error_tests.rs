//! The files `parse_ical` refuses, each with the line and the reason it names.

use super::tests::{cal, err};
use super::{MAX_EVENTS, parse_ical};

#[test]
fn error_missing_dtstart() {
    let text = cal(&["BEGIN:VEVENT", "SUMMARY:Boxing Day", "END:VEVENT"]);
    assert_eq!(
        err(&text),
        "line 3 (event \"Boxing Day\"): the event has no DTSTART"
    );
}

#[test]
fn error_dtend_before_dtstart() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "UID:abc-123",
        "DTSTART;VALUE=DATE:20261226",
        "DTEND;VALUE=DATE:20261225",
        "END:VEVENT",
    ]);
    assert_eq!(
        err(&text),
        "line 6 (event \"abc-123\"): DTEND 20261225 is before DTSTART 20261226"
    );
}

#[test]
fn error_weekly_rrule() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "SUMMARY:Boxing Day",
        "DTSTART;VALUE=DATE:20261226",
        "RRULE:FREQ=WEEKLY",
        "END:VEVENT",
    ]);
    assert_eq!(
        err(&text),
        "line 6 (event \"Boxing Day\"): RRULE FREQ=WEEKLY is not supported; only yearly rules are"
    );
}

#[test]
fn error_exdate_and_rdate() {
    for name in ["EXDATE", "RDATE"] {
        let line = format!("{name};VALUE=DATE:20271226");
        let text = cal(&[
            "BEGIN:VEVENT",
            "DTSTART;VALUE=DATE:20261226",
            "RRULE:FREQ=YEARLY",
            &line,
            "SUMMARY:Boxing Day",
            "END:VEVENT",
        ]);
        assert_eq!(
            err(&text),
            format!(
                "line 6 (event \"Boxing Day\"): {name} is not supported; list each date as its own event"
            )
        );
    }
}

#[test]
fn error_unbalanced_begin_end() {
    let mismatched = cal(&[
        "BEGIN:VEVENT",
        "SUMMARY:Boxing Day",
        "DTSTART;VALUE=DATE:20261226",
        "BEGIN:VALARM",
        "END:VEVENT",
    ]);
    assert_eq!(
        err(&mismatched),
        "line 7 (event \"Boxing Day\"): END:VEVENT does not match BEGIN:VALARM on line 6"
    );
    let unclosed = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260101T000000\n";
    assert_eq!(
        err(unclosed),
        "line 2: BEGIN:VEVENT is never closed (the file ends at line 3)"
    );
    let no_end = "BEGIN:VCALENDAR\nVERSION:2.0\n";
    assert_eq!(
        err(no_end),
        "line 1: BEGIN:VCALENDAR is never closed (the file ends at line 2)"
    );
    let extra_end = "BEGIN:VCALENDAR\nEND:VCALENDAR\nEND:VCALENDAR\n";
    assert_eq!(
        err(extra_end),
        "line 3: END:VCALENDAR has no matching BEGIN"
    );
}

#[test]
fn error_missing_vcalendar() {
    let text = "BEGIN:VEVENT\nDTSTART;VALUE=DATE:20261225\nEND:VEVENT\n";
    assert_eq!(
        err(text),
        "line 1: expected BEGIN:VCALENDAR, found BEGIN:VEVENT"
    );
    assert_eq!(
        err("\n\nVERSION:2.0\n"),
        "line 3: expected BEGIN:VCALENDAR, found VERSION"
    );
    assert_eq!(
        err("\u{feff}"),
        "line 1: the file is empty; expected BEGIN:VCALENDAR"
    );
}

#[test]
fn error_bad_date() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "SUMMARY:Boxing Day",
        "DTSTART;VALUE=DATE:20261345",
        "END:VEVENT",
    ]);
    assert_eq!(
        err(&text),
        "line 5 (event \"Boxing Day\"): '20261345' is not a valid date (expected YYYYMMDD or YYYYMMDDTHHMMSS)"
    );
}

#[test]
fn error_too_many_events() {
    let event = "BEGIN:VEVENT\nDTSTART;VALUE=DATE:20260101\nEND:VEVENT\n";
    let file = |n: usize| format!("BEGIN:VCALENDAR\n{}END:VCALENDAR\n", event.repeat(n));
    assert_eq!(
        parse_ical(&file(MAX_EVENTS)).map(|v| v.len()),
        Ok(MAX_EVENTS)
    );
    // Event number 1001 begins at line 2 + 3 * 1000.
    assert_eq!(
        err(&file(MAX_EVENTS + 1)),
        "line 3002: the file holds more than 1000 events"
    );
}

#[test]
fn error_unsupported_rules_and_values() {
    let cases = [
        (
            "RRULE:FREQ=YEARLY;INTERVAL=2",
            "RRULE INTERVAL=2 is not supported; only every year (INTERVAL=1) is",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=11,12",
            "RRULE BYMONTH=11,12 is not supported; only a single value is",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=12;BYDAY=MO",
            "RRULE BYDAY=MO is not supported; only one weekday with an ordinal 1 to 5 or -1 is, such as 4TH or -1MO",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=12;BYDAY=-2MO",
            "RRULE BYDAY=-2MO is not supported; only one weekday with an ordinal 1 to 5 or -1 is, such as 4TH or -1MO",
        ),
        (
            "RRULE:FREQ=YEARLY;BYDAY=4TH",
            "a yearly RRULE with BYMONTHDAY or BYDAY but no BYMONTH is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTHDAY=25",
            "a yearly RRULE with BYMONTHDAY or BYDAY but no BYMONTH is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYSETPOS=1",
            "RRULE part BYSETPOS is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYYEARDAY=1",
            "RRULE part BYYEARDAY is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;BYWEEKNO=1",
            "RRULE part BYWEEKNO is not supported",
        ),
        (
            "RRULE:FREQ=YEARLY;COUNT=2;UNTIL=20300101",
            "RRULE may have COUNT or UNTIL, not both",
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
            "RRULE day 30 never occurs in month 2",
        ),
        (
            "DURATION:PT1H",
            "DURATION PT1H is not supported; only whole days (PnD) or weeks (PnW) are",
        ),
    ];
    for (line, reason) in cases {
        let text = cal(&[
            "BEGIN:VEVENT",
            "UID:u1",
            "DTSTART;VALUE=DATE:20261225",
            line,
            "END:VEVENT",
        ]);
        assert_eq!(err(&text), format!("line 6 (event \"u1\"): {reason}"));
    }
    let multi_day = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20261224",
        "DURATION:P2D",
        "RRULE:FREQ=YEARLY",
        "END:VEVENT",
    ]);
    assert_eq!(
        err(&multi_day),
        "line 6: RRULE on an event spanning several days is not supported"
    );
}

#[test]
fn error_invalid_values() {
    let cases = [
        (
            "DTSTART;VALUE=DATE:20261225T000000",
            "'20261225T000000' is not a DATE",
        ),
        (
            "DTSTART;VALUE=PERIOD:20261225",
            "DTSTART with VALUE=PERIOD is not supported",
        ),
        (
            "DTSTART:2026-12-25",
            "'2026-12-25' is not a valid date (expected YYYYMMDD or YYYYMMDDTHHMMSS)",
        ),
        (
            "DTSTART:20261225T250000Z",
            "'20261225T250000Z' is not a valid date (expected YYYYMMDD or YYYYMMDDTHHMMSS)",
        ),
        (
            "DTSTART;TZID:20261225",
            "DTSTART has a malformed parameter 'TZID'",
        ),
        ("DTSTART 20261225", "expected NAME:VALUE but found no ':'"),
        ("X_BAD:1", "'X_BAD' is not a valid property name"),
    ];
    for (line, reason) in cases {
        let text = cal(&["BEGIN:VEVENT", "SUMMARY:Boxing Day", line, "END:VEVENT"]);
        assert_eq!(
            err(&text),
            format!("line 5 (event \"Boxing Day\"): {reason}")
        );
    }
    let twice = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20261226",
        "DTSTART;VALUE=DATE:20261227",
        "END:VEVENT",
    ]);
    assert_eq!(err(&twice), "line 5: DTSTART appears twice");
    let both = cal(&[
        "BEGIN:VEVENT",
        "UID:x",
        "DTSTART;VALUE=DATE:20261226",
        "DTEND;VALUE=DATE:20261228",
        "DURATION:P2D",
        "END:VEVENT",
    ]);
    assert_eq!(
        err(&both),
        "line 7 (event \"x\"): DURATION conflicts with DTEND"
    );
}
