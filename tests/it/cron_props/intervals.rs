//! Intervals (`@every`) against arithmetic on Unix seconds and jiff's offsets, in the zones
//! and around the clock changes the cron properties use.

use chrono::Duration;
use proptest::prelude::*;
use sentin8_cron::core::cron::{CronExpr, OnDstGap, OnDstRepeat};

use super::{offset, zoned_instant_strategy};

/// An `@every` expression's text with its period and phase, in the spellings people use.
fn interval_strategy() -> impl Strategy<Value = (String, i64, i64)> {
    let periods = prop_oneof![
        1i64..120,
        Just(900),
        Just(3_600),
        Just(5_400),
        Just(86_400),
        Just(7 * 3_600),
        1i64..3 * 86_400,
    ];
    periods
        .prop_flat_map(|period| (Just(period), 0..period, any::<bool>()))
        .prop_map(|(period, phase, seconds_only)| {
            let write = |s: i64| {
                if seconds_only {
                    format!("{s}s")
                } else {
                    let (d, h, m, sec) = (s / 86_400, s / 3_600 % 24, s / 60 % 60, s % 60);
                    let mut text = String::new();
                    for (n, unit) in [(d, "d"), (h, "h"), (m, "m"), (sec, "s")] {
                        if n > 0 {
                            text.push_str(&format!("{n}{unit}"));
                        }
                    }
                    if text.is_empty() {
                        "0s".to_owned()
                    } else {
                        text
                    }
                }
            };
            let text = if phase == 0 && seconds_only {
                format!("@every {}", write(period))
            } else {
                format!("@every {} phase {}", write(period), write(phase))
            };
            (text, period, phase)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Intervals keep to elapsed time: in any zone, across its clock changes, the fires are
    /// the epoch plus the phase plus whole periods, and each shows the zone's offset at that
    /// instant (both found here by arithmetic and by jiff, not by the evaluator).
    #[test]
    fn interval_fires_are_whole_periods_past_the_phase_in_every_zone(
        (text, period, phase) in interval_strategy(),
        (zone, t) in zoned_instant_strategy(),
        millis in 0i64..1_000,
        gap in prop_oneof![Just(OnDstGap::Shift), Just(OnDstGap::Skip)],
        repeat in prop_oneof![Just(OnDstRepeat::Once), Just(OnDstRepeat::Twice)],
    ) {
        let expr = CronExpr::parse(&text).unwrap();
        prop_assert!(!expr.is_fixed_time());
        let from = t + Duration::milliseconds(millis);
        let schedule = zone.schedule(expr, gap, repeat);
        let mut expected = ((from.timestamp() - phase).div_euclid(period) + 1) * period + phase;
        for fire in schedule.fires_after(from).take(4) {
            prop_assert_eq!(fire.at.timestamp(), expected, "{} in {} after {}", text, zone.name, from);
            prop_assert_eq!(i64::from(fire.local.offset().local_minus_utc()), offset(&zone, fire.at));
            prop_assert_eq!(fire.dst, None);
            expected += period;
        }
        // It prints back to an expression with the same instants.
        let again = CronExpr::parse(&expr.to_string()).unwrap();
        prop_assert_eq!(again, expr);
    }
}
