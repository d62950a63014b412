use proptest::prelude::*;

use super::super::{CronExpr, OnDstGap, OnDstRepeat};
use super::describe_zoned;

fn words(text: &str) -> String {
    CronExpr::parse(text).unwrap().describe()
}

#[test]
fn common_schedules_read_naturally() {
    for (text, expected) in [
        ("30 2 * * MON-FRI", "At 02:30, Monday through Friday"),
        ("* * * * *", "Every minute"),
        ("*/15 * * * *", "Every 15 minutes"),
        ("*/30 * * * *", "Every 30 minutes"),
        ("0 */12 * * *", "At minute 0 past the hour, every 12 hours"),
        ("@hourly", "At minute 0 past the hour"),
        ("@daily", "At 00:00"),
        ("@weekly", "At 00:00, on Sunday"),
        ("@monthly", "At 00:00, on the 1st of the month"),
        ("@yearly", "At 00:00, on the 1st of the month, in January"),
        ("0 9,17 * * *", "At 09:00 and 17:00"),
        (
            "0,30 9 * * 1,3,5",
            "At 09:00 and 09:30, on Monday, Wednesday and Friday",
        ),
        (
            "*/5 9-17 * * MON-FRI",
            "Every 5 minutes, between 09:00 and 17:59, Monday through Friday",
        ),
        ("0 */2 * * *", "At minute 0 past the hour, every 2 hours"),
        (
            "0 1-23/2 * * *",
            "At minute 0 past the hour, every 2 hours from 01:00 through 23:00",
        ),
        (
            "5-59/15 * * * *",
            "Every 15 minutes from minute 5 through 50 past the hour",
        ),
        (
            "0 22-4 * * *",
            "At minute 0 past the hour, between 22:00 and 04:59",
        ),
        ("0 0 L * *", "At 00:00, on the last day of the month"),
        (
            "0 0 1-7 * *",
            "At 00:00, on the 1st through the 7th of the month",
        ),
        (
            "0 0 1,15,L * *",
            "At 00:00, on the 1st and 15th of the month and on the last day of the month",
        ),
        (
            "0 3 * * MON#2",
            "At 03:00, on the second Monday of the month",
        ),
        ("0 18 * * FRIL", "At 18:00, on the last Friday of the month"),
        ("0 0 * * FRI-MON", "At 00:00, Friday through Monday"),
        ("0 0 * * SAT,SUN", "At 00:00, on Saturday and Sunday"),
        (
            "0 12 * JAN-MAR,DEC *",
            "At 12:00, in January through March and December",
        ),
        (
            "0 0 1 * MON",
            "At 00:00, on the 1st of the month, or on Monday",
        ),
        (
            "0 0 */2 * MON",
            "At 00:00, every 2 days from the 1st through the 31st of the month, if it is also on Monday",
        ),
    ] {
        assert_eq!(words(text), expected, "{text}");
    }
}

#[test]
fn spellings_of_one_schedule_read_alike() {
    assert_eq!(words("0 0 * * 0"), words("0 0 * * 7"));
    assert_eq!(words("0 0 * * SUN"), words("@weekly"));
    assert_eq!(words("0-59 * * * *"), words("* * * * *"));
}

#[test]
fn zones_and_dst_policies_are_described() {
    let expr = CronExpr::parse("30 2 * * MON-FRI").unwrap();
    assert_eq!(
        describe_zoned(
            &expr,
            "America/New_York",
            OnDstGap::Shift,
            OnDstRepeat::Once
        ),
        "At 02:30, Monday through Friday (America/New_York); a time skipped when clocks go \
         forward runs when the gap ends, and a time that repeats when clocks go back runs once"
    );
    assert_eq!(
        describe_zoned(&expr, "Europe/Berlin", OnDstGap::Skip, OnDstRepeat::Twice),
        "At 02:30, Monday through Friday (Europe/Berlin); a time skipped when clocks go \
         forward does not run, and a time that repeats when clocks go back runs twice"
    );
    assert_eq!(
        describe_zoned(&expr, "UTC", OnDstGap::Skip, OnDstRepeat::Twice),
        "At 02:30, Monday through Friday (UTC)"
    );
    let interval = CronExpr::parse("*/10 * * * *").unwrap();
    assert_eq!(
        describe_zoned(
            &interval,
            "Europe/Berlin",
            OnDstGap::Shift,
            OnDstRepeat::Once
        ),
        "Every 10 minutes (Europe/Berlin); across clock changes it keeps to elapsed time"
    );
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// Whether `value` is named among `names` in `text`: listed, or inside "A through B".
fn named_among(text: &str, names: &[&str], value: usize) -> bool {
    let listed = text.split([' ', ',']).any(|word| word == names[value]);
    let index = |word: &str| names.iter().position(|n| *n == word);
    let in_range = text.split(", ").chain(text.split(" and ")).any(|part| {
        let words: Vec<&str> = part.split([' ', ',']).filter(|w| !w.is_empty()).collect();
        words.windows(3).any(|w| {
            w[1] == "through"
                && matches!((index(w[0]), index(w[2])), (Some(a), Some(b))
                    if (a <= b && a <= value && value <= b) || (a > b && (value >= a || value <= b)))
        })
    });
    listed || in_range
}

/// Whether day `day` of the month is named: an ordinal listed, a range "the Ath through the
/// Bth", or a step "every N days from the Ath through the Bth".
fn day_named(text: &str, day: u32) -> bool {
    let ordinal = |w: &str| -> Option<u32> {
        let digits: String = w.chars().take_while(char::is_ascii_digit).collect();
        let suffix = &w[digits.len()..];
        matches!(suffix, "st" | "nd" | "rd" | "th")
            .then(|| digits.parse().ok())
            .flatten()
    };
    let words: Vec<&str> = text.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    if words.iter().any(|w| ordinal(w) == Some(day)) {
        return true;
    }
    words.windows(4).enumerate().any(|(i, w)| {
        let (Some(a), "through", "the", Some(b)) = (ordinal(w[0]), w[1], w[2], ordinal(w[3]))
        else {
            return false;
        };
        let step = match words.get(i.wrapping_sub(4)..i) {
            Some(["every", n, "days", "from"]) => n.parse::<u32>().ok(),
            _ => None,
        };
        match step {
            Some(step) => a <= day && day <= b && (day - a).is_multiple_of(step),
            None => a <= day && day <= b,
        }
    })
}

fn field_list(values: &[u32]) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn subset(max: u32, min: u32) -> impl Strategy<Value = Vec<u32>> {
    prop::collection::btree_set(min..=max, 1..=(max - min + 1) as usize)
        .prop_map(|set| set.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every restricted day-of-month, month and weekday value is named, whatever the lists.
    #[test]
    fn restricted_calendar_fields_name_every_value(
        days in subset(31, 1),
        months in subset(12, 1),
        weekdays in subset(6, 0),
        star_days in any::<bool>(),
    ) {
        let dom = if star_days { "*".to_owned() } else { field_list(&days) };
        let text = format!("0 12 {dom} {} {}", field_list(&months), field_list(&weekdays));
        let words = CronExpr::parse(&text).unwrap().describe();
        if months.len() < 12 {
            for &m in &months {
                prop_assert!(named_among(&words, &MONTHS, m as usize - 1), "{text}: {words}");
            }
        }
        if weekdays.len() < 7 {
            for &d in &weekdays {
                prop_assert!(named_among(&words, &WEEKDAYS, d as usize), "{text}: {words}");
            }
        }
        if !star_days && days.len() < 31 {
            for &d in &days {
                prop_assert!(day_named(&words, d), "{text}: {words}");
            }
        }
    }

    /// Every time of day a schedule allows is named: listed as HH:MM, or its minute and its
    /// hour are named by the minute and hour phrases.
    #[test]
    fn restricted_times_name_every_value(
        minutes in subset(59, 0),
        hours in subset(23, 0),
    ) {
        let text = format!("{} {} * * *", field_list(&minutes), field_list(&hours));
        let words = CronExpr::parse(&text).unwrap().describe();
        if minutes.len() * hours.len() <= 6 {
            for h in &hours {
                for m in &minutes {
                    let time = format!("{h:02}:{m:02}");
                    prop_assert!(words.contains(&time), "{text}: {words}");
                }
            }
        } else {
            let minute_names: Vec<String> = (0..60).map(|m| m.to_string()).collect();
            let minute_names: Vec<&str> = minute_names.iter().map(String::as_str).collect();
            let (minute_phrase, hour_phrase) = match words.split_once(" past the hour") {
                Some((minutes, hours)) => (minutes, hours.trim_start_matches(", ")),
                None => words.split_once(", ").unwrap_or((&words, "")),
            };
            if minutes.len() < 60 {
                for &m in &minutes {
                    let stepped = minute_phrase
                        .strip_prefix("Every ")
                        .and_then(|rest| rest.split(' ').next())
                        .and_then(|n| n.parse::<u32>().ok())
                        .is_some_and(|step| {
                            let first = minutes[0];
                            (m - first) % step == 0
                        });
                    prop_assert!(
                        stepped || named_among(minute_phrase, &minute_names, m as usize),
                        "{text}: {words}"
                    );
                }
            }
            if hours.len() < 24 {
                for &h in &hours {
                    let exact = hour_phrase.contains(&format!("{h:02}:00"));
                    let between = hour_phrase.split(" and between ").chain(hour_phrase.split(", between ")).any(|part| {
                        let part = part.trim_start_matches("between ");
                        let hours: Vec<u32> = part
                            .split([' ', ':', ','])
                            .filter_map(|w| w.parse().ok())
                            .collect();
                        matches!(hours.as_slice(), [a, 0, b, 59, ..]
                            if (a <= b && *a <= h && h <= *b) || (a > b && (h >= *a || h <= *b)))
                    });
                    let stepped = hour_phrase
                        .strip_prefix("every ")
                        .and_then(|rest| rest.split(' ').next())
                        .and_then(|n| n.parse::<u32>().ok())
                        .is_some_and(|step| (h - hours[0]) % step == 0);
                    prop_assert!(exact || between || stepped, "{text}: {words}");
                }
            }
        }
    }

    /// Every expression the engine accepts gets a description.
    #[test]
    fn every_accepted_expression_is_described(
        minute in "(\\*|[0-5]?[0-9])(/[1-9])?",
        hour in "(\\*|[01]?[0-9]|2[0-3]|2[0-3]-[0-9])(/[1-9])?",
        dom in "(\\*|[1-9]|[12][0-9]|L)(/[1-9])?",
        month in "(\\*|[1-9]|1[0-2]|JAN-MAR)",
        dow in "(\\*|[0-7]|MON-FRI|FRI-MON|[0-6]#[1-5]|[0-6]L)",
    ) {
        let text = format!("{minute} {hour} {dom} {month} {dow}");
        if let Ok(expr) = CronExpr::parse(&text) {
            let words = expr.describe();
            prop_assert!(words.len() > 5 && !words.contains("  ") && !words.ends_with(' '), "{text}: {words}");
            prop_assert!(words.chars().next().is_some_and(char::is_uppercase), "{text}: {words}");
        }
    }
}
