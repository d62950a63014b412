//! Six-field expressions (a second first) against the definition: the fires are the five-field
//! expression's fires (found by the independent oracles, DST policies included), each at every
//! second the seconds field allows, in order.

use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use sentin8_cron::core::cron::{CronExpr, DstAdjustment, OnDstGap, OnDstRepeat};

use super::{
    ExprCase, FieldCase, Kind, OracleZone, field_strategy, frequent_expr_strategy,
    instant_strategy, oracle_next_utc, oracle_next_zoned, zoned_instant_strategy,
};

fn six_fields(second: &FieldCase, case: &ExprCase) -> String {
    format!("{} {}", second.text, case.text())
}

/// The first fire strictly after `t`, from the minute fires `next_minute` gives (the first
/// minute fire strictly after an instant) and the allowed seconds.
fn oracle<F>(
    second: &FieldCase,
    t: DateTime<Utc>,
    mut next_minute: F,
) -> Option<(DateTime<Utc>, Option<DstAdjustment>)>
where
    F: FnMut(DateTime<Utc>) -> Option<(DateTime<Utc>, Option<DstAdjustment>)>,
{
    // A minute fire that began within the minute before `t` may still have seconds to come.
    let mut minute = next_minute(t - Duration::seconds(60))?;
    loop {
        for &s in &second.values {
            let at = minute.0 + Duration::seconds(i64::from(s));
            if at > t {
                return Some((at, minute.1));
            }
        }
        minute = next_minute(minute.0)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_seconds_field_fires_at_each_allowed_second_of_each_matching_minute(
        second in field_strategy(Kind::Second, true),
        case in frequent_expr_strategy(),
        t in instant_strategy(),
    ) {
        let text = six_fields(&second, &case);
        let expr = CronExpr::parse(&text).map_err(|err| TestCaseError::fail(format!("{text}: {err}")))?;
        let expected = oracle(&second, t, |after| {
            oracle_next_utc(&case, after, 16).map(|wall| (wall.and_utc(), None))
        });
        let ours = expr.next_after(t);
        match expected {
            Some((at, _)) => prop_assert_eq!(ours, Some(at), "{} after {}", text, t),
            // Beyond the oracle's horizon (a monthly `#n` or `L` weekday).
            None => prop_assert!(ours.is_none_or(|at| at > t + Duration::days(15)), "{}", text),
        }
        // The normalised text means the same, and keeps its seconds.
        let shown = expr.to_string();
        prop_assert_eq!(shown.split_whitespace().count(), 6, "{}", shown);
        prop_assert_eq!(CronExpr::parse(&shown).unwrap(), expr);
    }

    #[test]
    fn a_seconds_field_keeps_the_dst_policies_of_its_minutes(
        second in field_strategy(Kind::Second, true),
        case in frequent_expr_strategy(),
        (zone, t) in zoned_instant_strategy(),
        offset in 0i64..60,
        gap in prop_oneof![Just(OnDstGap::Shift), Just(OnDstGap::Skip)],
        repeat in prop_oneof![Just(OnDstRepeat::Once), Just(OnDstRepeat::Twice)],
    ) {
        let t = t + Duration::seconds(offset);
        let text = six_fields(&second, &case);
        let schedule = zone.schedule(CronExpr::parse(&text).unwrap(), gap, repeat);
        let expected = oracle(&second, t, |after| {
            oracle_next_zoned(&case, &zone, gap, repeat, after, 16 * 1_440)
        });
        let ours = schedule.next_fire_after(t).map(|fire| (fire.at, fire.dst));
        match expected {
            Some(expected) => {
                prop_assert_eq!(ours, Some(expected), "{} in {} after {}", text, zone_name(&zone), t)
            }
            None => prop_assert!(ours.is_none_or(|(at, _)| at > t + Duration::days(15)), "{}", text),
        }
    }
}

fn zone_name(zone: &OracleZone) -> &'static str {
    zone.name
}

#[test]
fn five_fields_still_fire_at_second_zero_and_six_fields_read_in_words() {
    let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
    let every_15s = CronExpr::parse("*/15 * * * * *").unwrap();
    assert_eq!(
        every_15s.next_after(at("2030-01-01T00:00:14Z")),
        Some(at("2030-01-01T00:00:15Z"))
    );
    assert_eq!(
        every_15s.next_after(at("2030-01-01T00:00:45Z")),
        Some(at("2030-01-01T00:01:00Z"))
    );
    assert_eq!(every_15s.to_string(), "*/15 * * * * *");
    assert_eq!(every_15s.describe(), "Every 15 seconds");
    let weekdays = CronExpr::parse("30 0 9 * * MON-FRI").unwrap();
    assert_eq!(weekdays.describe(), "At 09:00:30, Monday through Friday");
    assert_eq!(
        weekdays.next_after(at("2030-01-07T09:00:00Z")),
        Some(at("2030-01-07T09:00:30Z"))
    );
    assert_eq!(
        CronExpr::parse("0,30 */5 * * * *").unwrap().describe(),
        "Every 30 seconds, every 5 minutes"
    );
    assert_eq!(
        CronExpr::parse("* * * * * *").unwrap().describe(),
        "Every second"
    );
    // Written with a zero second, it is the five-field schedule, shown with its six fields.
    let zero = CronExpr::parse("0 */5 * * * *").unwrap();
    assert_eq!(zero.to_string(), "0 */5 * * * *");
    assert_eq!(
        zero.describe(),
        CronExpr::parse("*/5 * * * *").unwrap().describe()
    );
    let err = CronExpr::parse("60 * * * * *").unwrap_err().to_string();
    assert!(err.starts_with("second: "), "{err}");
    let err = CronExpr::parse("* * * * * * *").unwrap_err().to_string();
    assert!(err.contains("or 6 with a second first, got 7"), "{err}");
}
