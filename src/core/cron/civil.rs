//! Proleptic Gregorian calendar arithmetic on plain integers.
//!
//! The evaluator works on minute counts and civil dates directly instead of going through
//! chrono types on every step: these conversions are a handful of integer operations each.

/// Minutes in a civil day (no leap seconds in wall-clock time).
pub(crate) const MINUTES_PER_DAY: i64 = 1_440;

/// Days in one full Gregorian cycle; the calendar (weekdays included) repeats after it.
pub(crate) const DAYS_PER_CYCLE: i64 = 146_097;

/// Days since 1970-01-01 of the civil date `year-month-day`.
///
/// `month` is 1..=12 and `day` 1..=31; the year is unbounded.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Count years from March so that the leap day is the last day of the counted year.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * DAYS_PER_CYCLE + day_of_era - 719_468
}

/// The civil date (year, month 1..=12, day 1..=31) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(DAYS_PER_CYCLE);
    let day_of_era = shifted - era * DAYS_PER_CYCLE;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    // Both values are small and non-negative by construction.
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Day of the week of a day count since 1970-01-01: 0 = Sunday .. 6 = Saturday.
pub(crate) fn weekday(days: i64) -> u32 {
    // 1970-01-01 was a Thursday.
    (days + 4).rem_euclid(7) as u32
}

pub(crate) fn is_leap_year(year: i64) -> bool {
    // `%` may be negative for negative years, but only its comparison with zero matters.
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Number of days in `month` (1..=12) of `year`.
pub(crate) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate};

    #[test]
    fn civil_round_trip_matches_chrono() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            let expected = epoch + chrono::Duration::days(days);
            assert_eq!(
                (y, m, d),
                (i64::from(expected.year()), expected.month(), expected.day())
            );
            assert_eq!(days_from_civil(y, m, d), days);
            assert_eq!(
                weekday(days),
                expected.weekday().num_days_from_sunday(),
                "{expected}"
            );
            assert_eq!(days_in_month(y, m), {
                let next = if m == 12 {
                    NaiveDate::from_ymd_opt(expected.year() + 1, 1, 1)
                } else {
                    NaiveDate::from_ymd_opt(expected.year(), m + 1, 1)
                }
                .unwrap();
                let first = NaiveDate::from_ymd_opt(expected.year(), m, 1).unwrap();
                (next - first).num_days() as u32
            });
        }
    }

    #[test]
    fn leap_years_follow_the_gregorian_rule() {
        assert!(is_leap_year(2000));
        assert!(is_leap_year(2096));
        assert!(!is_leap_year(2100));
        assert!(!is_leap_year(1900));
        assert!(is_leap_year(2024));
        assert!(!is_leap_year(2025));
    }
}
