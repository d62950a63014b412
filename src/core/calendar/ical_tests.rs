use super::*;

/// Wraps event lines in a calendar; the first event line is line 3.
pub(super) fn cal(lines: &[&str]) -> String {
    let mut all = vec!["BEGIN:VCALENDAR", "VERSION:2.0"];
    all.extend_from_slice(lines);
    all.push("END:VCALENDAR");
    all.join("\n")
}

fn specs(text: &str) -> Vec<String> {
    match parse_ical(text) {
        Ok(entries) => entries.into_iter().map(|e| e.spec).collect(),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

pub(super) fn err(text: &str) -> String {
    match parse_ical(text) {
        Ok(entries) => panic!("expected an error, got {entries:?}"),
        Err(e) => e.to_string(),
    }
}

fn entry(spec: &str, note: &str) -> IcalEntry {
    IcalEntry {
        spec: spec.into(),
        note: Some(note.into()),
    }
}

const HOLIDAYS: &[&str] = &[
    "BEGIN:VCALENDAR",
    "VERSION:2.0",
    "PRODID:-//Example Corp//Holidays//EN",
    "X-WR-CALNAME:Company holidays",
    "BEGIN:VTIMEZONE",
    "TZID:Europe/Berlin",
    "BEGIN:STANDARD",
    "DTSTART:19701025T030000",
    "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU",
    "TZOFFSETFROM:+0200",
    "TZOFFSETTO:+0100",
    "END:STANDARD",
    "END:VTIMEZONE",
    "BEGIN:VEVENT",
    "UID:newyear@example.com",
    "DTSTART;VALUE=DATE:20260101",
    "DTEND;VALUE=DATE:20260102",
    "RRULE:FREQ=YEARLY",
    "SUMMARY:New Year's Day",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "UID:thanksgiving@example.com",
    "DTSTART;VALUE=DATE:20261126",
    "RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=4TH",
    "SUMMARY:Thanksgiving",
    "END:VEVENT",
    "begin:vevent",
    "summary:Memorial Day",
    "dtstart;value=date:20260525",
    "rrule:freq=yearly;byday=-1MO;bymonth=5",
    "end:vevent",
    "BEGIN:VEVENT",
    "SUMMARY:Winter break",
    "DTSTART;VALUE=DATE:20261224",
    "DTEND;VALUE=DATE:20261227",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "SUMMARY:Offsite",
    "DTSTART;VALUE=DATE:20260812",
    "DURATION:P3D",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "SUMMARY:Summer party",
    "DTSTART;TZID=\"Europe/Berlin:odd;name\":20260703T000000",
    "DTEND;TZID=Europe/Berlin:20260704T000000",
    "BEGIN:VALARM",
    "ACTION:DISPLAY",
    "TRIGGER:-PT15M",
    "DURATION:PT5M",
    "REPEAT:2",
    "DESCRIPTION:Reminder",
    "END:VALARM",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "SUMMARY:Cancelled picnic",
    "STATUS:CANCELLED",
    "DTSTART;VALUE=DATE:20260601",
    "END:VEVENT",
    "BEGIN:VEVENT",
    "DTSTART:20261231T180000Z",
    "DTEND:20270101T020000Z",
    "SUMMARY:Year-end\\, early close\\; offices shut\\nsee memo \\\\",
    "  HR for d",
    "\tetails",
    "END:VEVENT",
    "END:VCALENDAR",
    "",
];

#[test]
fn realistic_holiday_file() {
    let text = format!("\u{feff}{}", HOLIDAYS.join("\r\n"));
    assert_eq!(
        parse_ical(&text),
        Ok(vec![
            entry("* * 1 1 *", "New Year's Day"),
            entry("* * * 11 THU#4", "Thanksgiving"),
            entry("* * * 5 MONL", "Memorial Day"),
            entry("2026-12-24..2026-12-26", "Winter break"),
            entry("2026-08-12..2026-08-14", "Offsite"),
            entry("2026-07-03", "Summer party"),
            entry(
                "2026-12-31..2027-01-01",
                "Year-end, early close; offices shut see memo \\ HR for details"
            ),
        ])
    );
}

#[test]
fn count_expansion_across_feb_29() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "SUMMARY:Leap day",
        "DTSTART;VALUE=DATE:20240229",
        "RRULE:FREQ=YEARLY;COUNT=3",
        "END:VEVENT",
    ]);
    assert_eq!(
        parse_ical(&text),
        Ok(vec![
            entry("2024-02-29", "Leap day"),
            entry("2028-02-29", "Leap day"),
            entry("2032-02-29", "Leap day"),
        ])
    );
}

#[test]
fn until_expansion_fourth_thursday() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "SUMMARY:Thanksgiving",
        "DTSTART;VALUE=DATE:20261126",
        "RRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=+4TH;UNTIL=20291122T000000Z",
        "END:VEVENT",
    ]);
    assert_eq!(
        specs(&text),
        ["2026-11-26", "2027-11-25", "2028-11-23", "2029-11-22"]
    );
}

#[test]
fn count_expansion_last_monday_and_fifth_weekday() {
    let last_monday = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260525",
        "RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO;COUNT=3",
        "END:VEVENT",
    ]);
    assert_eq!(
        specs(&last_monday),
        ["2026-05-25", "2027-05-31", "2028-05-29"]
    );
    // March has a fifth Sunday in 2026, 2030 and 2031 only; COUNT skips the years between.
    let fifth_sunday = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260329",
        "RRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=5SU;COUNT=3",
        "END:VEVENT",
    ]);
    assert_eq!(
        specs(&fifth_sunday),
        ["2026-03-29", "2030-03-31", "2031-03-30"]
    );
}

#[test]
fn until_is_inclusive_and_bymonthday_overrides_dtstart() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20261225",
        "RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=26;UNTIL=20281226",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260704",
        "RRULE:FREQ=YEARLY;INTERVAL=1;BYMONTH=7;WKST=SU",
        "END:VEVENT",
    ]);
    assert_eq!(
        specs(&text),
        ["2026-12-26", "2027-12-26", "2028-12-26", "* * 4 7 *"]
    );
}

#[test]
fn bounded_expansion_is_capped() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260101",
        "RRULE:FREQ=YEARLY;COUNT=100000",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:99980101",
        "RRULE:FREQ=YEARLY;COUNT=5",
        "END:VEVENT",
    ]);
    let out = specs(&text);
    assert_eq!(out.len(), 202);
    assert_eq!(out.get(199).map(String::as_str), Some("2225-01-01"));
    assert_eq!(
        out.get(200..),
        Some(&["9998-01-01".to_string(), "9999-01-01".to_string()][..])
    );
}

#[test]
fn date_time_end_rules() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "DTSTART:20260703T090000",
        "DTEND:20260703T170000",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART:20260703T000000",
        "DTEND:20260705T000000",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART:20260703T220000Z",
        "DTEND:20260703T220000Z",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260703",
        "DTEND;VALUE=DATE:20260703",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260703",
        "DURATION:P1W",
        "END:VEVENT",
    ]);
    assert_eq!(
        specs(&text),
        [
            "2026-07-03",
            "2026-07-03..2026-07-04",
            "2026-07-03",
            "2026-07-03",
            "2026-07-03..2026-07-09"
        ]
    );
}

#[test]
fn notes_are_unescaped_trimmed_and_truncated() {
    let long = "é".repeat(250);
    let text = cal(&[
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260101",
        &format!("SUMMARY:  {long}"),
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20260102",
        "SUMMARY:   ",
        "END:VEVENT",
    ]);
    let out = parse_ical(&text).unwrap_or_default();
    assert_eq!(out.len(), 2);
    assert_eq!(
        out.first().and_then(|e| e.note.clone()),
        Some("é".repeat(200))
    );
    assert_eq!(out.get(1).map(|e| e.note.clone()), Some(None));
}

#[test]
fn zero_events_is_ok() {
    assert_eq!(parse_ical(&cal(&[])), Ok(vec![]));
    assert_eq!(
        parse_ical("BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n"),
        Ok(vec![])
    );
}

#[test]
fn cancelled_events_are_skipped_unread() {
    let text = cal(&[
        "BEGIN:VEVENT",
        "STATUS:cancelled",
        "DTSTART;VALUE=DATE:20261226",
        "RRULE:FREQ=WEEKLY",
        "END:VEVENT",
        "BEGIN:VEVENT",
        "DTSTART;VALUE=DATE:20261227",
        "STATUS:CONFIRMED",
        "END:VEVENT",
    ]);
    assert_eq!(specs(&text), ["2026-12-27"]);
}

#[test]
fn garbage_and_truncated_input_never_panics() {
    let full = HOLIDAYS.join("\r\n");
    let mut inputs: Vec<String> = [
        "",
        ":",
        ";;;:",
        "\"",
        "BEGIN",
        "BEGIN:",
        "END:",
        " \t\n\r\n\r",
        "\u{feff}\u{feff}BEGIN:VCALENDAR",
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:2026é12\nEND:VEVENT\nEND:VCALENDAR",
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:99991231\nDURATION:P4294967295W\nEND:VEVENT\nEND:VCALENDAR",
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART:20260101TéééééZ\nRRULE:=;=;BYDAY=é\nEND:VEVENT\nEND:VCALENDAR",
        "BEGIN:VCALENDAR\nBEGIN:VEVENT\nDTSTART;X=\"a:b\nRRULE:FREQ=YEARLY;BYDAY=99999999999TH\nEND:VCALENDAR",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    inputs.extend(
        full.char_indices()
            .map(|(i, _)| full.get(..i).unwrap_or("").to_string()),
    );
    // A fixed pseudo-random generator keeps the garbage reproducible.
    let pool: Vec<char> = "BEGIN:VCALENDAREVT;=\"\r\n \t,\\-+0123456789éZTDWPL#"
        .chars()
        .collect();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..300 {
        let mut s = String::new();
        for _ in 0..(seed % 120) {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let idx = usize::try_from(seed >> 33).unwrap_or(0) % pool.len();
            s.push(pool.get(idx).copied().unwrap_or('?'));
        }
        inputs.push(format!("BEGIN:VCALENDAR\nBEGIN:VEVENT\n{s}"));
        inputs.push(s);
    }
    for input in &inputs {
        if let Err(e) = parse_ical(input) {
            assert!(e.to_string().starts_with("line "), "{e}");
        }
    }
}
