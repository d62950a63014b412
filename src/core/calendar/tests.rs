use chrono::{NaiveDate, NaiveDateTime, Utc};
use proptest::prelude::*;

use super::*;
use crate::core::cron::CronExpr;

fn wall(text: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").unwrap()
}

fn day(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
}

fn calendar(name: &str, entries: &[(&str, Option<&str>)]) -> Calendar {
    let draft = CalendarDraft {
        description: String::new(),
        entries: entries
            .iter()
            .map(|(spec, note)| CalendarEntryText {
                spec: (*spec).to_owned(),
                note: note.map(str::to_owned),
            })
            .collect(),
    };
    Calendar::new(
        name.to_owned(),
        String::new(),
        draft.validate().unwrap(),
        "test",
        Utc::now(),
    )
}

#[test]
fn specs_read_dates_ranges_and_cron_like_sets_and_print_back() {
    assert_eq!(
        ExcludeSpec::parse("2031-12-25").unwrap(),
        ExcludeSpec::Date(day("2031-12-25"))
    );
    assert_eq!(
        ExcludeSpec::parse(" 2031-12-24..2031-12-26 ").unwrap(),
        ExcludeSpec::Range(day("2031-12-24"), day("2031-12-26"))
    );
    for text in [
        "2031-12-25",
        "2031-12-24..2031-12-26",
        "* * * * SAT,SUN",
        "0 * 25 12 *",
    ] {
        assert_eq!(ExcludeSpec::parse(text).unwrap().to_string(), text);
    }
    assert!(matches!(
        ExcludeEntry::parse("us-holidays").unwrap(),
        ExcludeEntry::Calendar(name) if name == "us-holidays"
    ));
}

#[test]
fn bad_specs_are_refused_saying_why() {
    let cases = [
        ("2031-02-30", "neither a date"),
        ("2031-12-26..2031-12-24", "must end after it starts"),
        ("2031-12-25..2031-12-25", "must end after it starts"),
        ("2031-01-01..2032-06-01", "spans more than 366 days"),
        ("@every 1h", "an interval names no days"),
        ("* * 32 * *", "day-of-month"),
        ("12/25", "neither a date"),
    ];
    for (text, why) in cases {
        let err = ExcludeEntry::parse(text).unwrap_err();
        assert!(err.contains(why), "{text}: {err}");
    }
    let err = ExcludeEntry::parse("holidays!").unwrap_err();
    assert!(err.contains("not a calendar name"), "{err}");
    let errors = Exclude::validate("exclude", &["2031-12-25".into(), "nope!".into()]).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "exclude[1]");
}

#[test]
fn a_five_field_spec_covers_whole_minutes_and_a_six_field_one_its_seconds() {
    let weekends = ExcludeSpec::parse("* * * * SAT,SUN").unwrap();
    // 2031-01-04 is a Saturday.
    assert!(weekends.covers(wall("2031-01-04 00:00:00")));
    assert!(weekends.covers(wall("2031-01-05 23:59:59")));
    assert!(!weekends.covers(wall("2031-01-06 00:00:00")));
    let lunch = ExcludeSpec::parse("* 12 * * *").unwrap();
    assert!(lunch.covers(wall("2031-01-06 12:30:15")));
    assert!(!lunch.covers(wall("2031-01-06 13:00:00")));
    let half = ExcludeSpec::parse("0-29 * * * * *").unwrap();
    assert!(half.covers(wall("2031-01-06 13:00:29")));
    assert!(!half.covers(wall("2031-01-06 13:00:30")));
    let range = ExcludeSpec::parse("2031-12-24..2031-12-26").unwrap();
    assert!(range.covers(wall("2031-12-24 00:00:00")));
    assert!(range.covers(wall("2031-12-26 23:59:59")));
    assert!(!range.covers(wall("2031-12-27 00:00:00")));
}

#[test]
fn the_first_entry_that_covers_a_time_names_the_exclusion() {
    let holidays = calendar(
        "holidays",
        &[
            ("2031-12-24..2031-12-26", Some("Christmas break")),
            ("2031-12-25", Some("Christmas Day")),
            ("* * 1 1 *", Some("New Year's Day")),
        ],
    );
    let calendars: Calendars = [("holidays".to_owned(), holidays)].into();
    let exclude = Exclude::validate("exclude", &["2031-12-31".into(), "holidays".into()]).unwrap();
    let christmas = exclude
        .excluding(wall("2031-12-25 09:00:00"), &calendars)
        .unwrap();
    assert_eq!(christmas.calendar.as_deref(), Some("holidays"));
    assert_eq!(christmas.spec, "2031-12-24..2031-12-26");
    assert_eq!(
        christmas.reason(),
        "skipped: excluded by calendar holidays (2031-12-24..2031-12-26, Christmas break)"
    );
    let eve = exclude
        .excluding(wall("2031-12-31 09:00:00"), &calendars)
        .unwrap();
    assert_eq!(eve.calendar, None);
    assert_eq!(
        eve.reason(),
        "skipped: excluded by the schedule's exclude 2031-12-31"
    );
    let new_year = exclude
        .excluding(wall("2032-01-01 09:00:00"), &calendars)
        .unwrap();
    assert_eq!(new_year.note.as_deref(), Some("New Year's Day"));
    assert_eq!(
        exclude.excluding(wall("2031-12-27 09:00:00"), &calendars),
        None
    );
    // A calendar no longer there excludes nothing.
    assert_eq!(
        exclude.excluding(wall("2031-12-25 09:00:00"), &Calendars::new()),
        None
    );
}

#[test]
fn calendar_drafts_name_each_bad_entry() {
    let draft = CalendarDraft {
        description: "x".repeat(MAX_NOTE_LEN + 1),
        entries: vec![
            CalendarEntryText {
                spec: "2031-12-25".into(),
                note: None,
            },
            CalendarEntryText {
                spec: "tomorrow".into(),
                note: None,
            },
        ],
    };
    let fields: Vec<String> = draft
        .validate()
        .unwrap_err()
        .into_iter()
        .map(|e| e.field)
        .collect();
    assert_eq!(fields, ["description", "entries[1].spec"]);
}

fn spec_strategy() -> impl Strategy<Value = (NaiveDate, NaiveDate)> {
    (0i64..3_000, 0i64..40).prop_map(|(start, len)| {
        let first = day("2030-01-01") + chrono::Duration::days(start);
        (first, first + chrono::Duration::days(len))
    })
}

proptest! {
    /// The calendar's date index (a binary search over sorted ranges) finds exactly the
    /// entry a scan in written order finds.
    #[test]
    fn the_date_index_agrees_with_a_scan(
        ranges in proptest::collection::vec(spec_strategy(), 0..40),
        probe in 0i64..3_100,
    ) {
        let entries: Vec<CalendarEntry> = ranges
            .iter()
            .map(|&(first, last)| CalendarEntry {
                spec: if first == last {
                    ExcludeSpec::Date(first)
                } else {
                    ExcludeSpec::Range(first, last)
                },
                note: None,
            })
            .collect();
        let calendar = Calendar::new("c".into(), String::new(), entries.clone(), "t", Utc::now());
        let at = (day("2030-01-01") + chrono::Duration::days(probe)).and_hms_opt(12, 0, 0).unwrap();
        let scanned = entries.iter().find(|e| e.spec.covers(at));
        prop_assert_eq!(calendar.excluding(at), scanned);
    }
}

proptest! {
    /// A cron-like spec read through its parts taken apart once covers exactly the wall times
    /// the expression's own minute matcher matches (with the seconds rule of exclusions).
    #[test]
    fn a_cron_spec_covers_what_its_expression_matches(
        which in 0usize..8,
        minutes in 0i64..(3 * 366 * 24 * 60),
        second in 0u32..60,
    ) {
        let texts = [
            "* * 25 12 *", "* * * 11 THU#4", "* * * 5 MONL", "*/7 9-17 * * MON-FRI",
            "* * L 2 *", "0-29 * * * * *", "* * 1,15 * SUN", "30 12 * * *",
        ];
        let expr = CronExpr::parse(texts[which]).unwrap();
        let spec = ExcludeSpec::parse(texts[which]).unwrap();
        let wall = wall("2031-01-01 00:00:00") + chrono::Duration::minutes(minutes)
            + chrono::Duration::seconds(i64::from(second));
        let seconds_ok = !texts[which].starts_with("0-29") || second < 30;
        prop_assert_eq!(spec.covers(wall), expr.matches_local(wall) && seconds_ok);
    }
}
