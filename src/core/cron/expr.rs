//! The compiled expression and its evaluation on naive (wall-clock) minutes.
//!
//! Every field is a bitset, so "the next allowed hour at or after h" is one mask and one
//! `trailing_zeros`. Days are evaluated a month at a time: the matching days of a month form a
//! 32-bit mask built from the day-of-month set, the weekday set rotated to the month's first
//! weekday, and the `#n` / `L` extras.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike, Utc};

use super::civil::{
    DAYS_PER_CYCLE, MINUTES_PER_DAY, civil_from_days, days_from_civil, days_in_month, weekday,
};
use super::error::CronError;
use super::every::Every;

pub(crate) const MINUTE_STAR: u8 = 1;
pub(crate) const HOUR_STAR: u8 = 1 << 1;
pub(crate) const DOM_STAR: u8 = 1 << 2;
pub(crate) const DOW_STAR: u8 = 1 << 3;
/// `L` in day-of-month: the last day of the month.
pub(crate) const DOM_LAST: u8 = 1 << 4;
/// At least one `DOW#n` or `DOWL` entry, so the per-weekday `nth` masks must be consulted.
pub(crate) const HAS_NTH: u8 = 1 << 5;
/// Month field starts with `*`; kept only so that `Display` prints it back as written.
pub(crate) const MONTH_STAR: u8 = 1 << 6;
/// Written with six fields, a second first: `Display` prints the seconds too.
pub(crate) const SECOND_FIELD: u8 = 1 << 7;

/// In `CronExpr::nth`, the bit for "last such weekday of the month" (`DOWL`); bits 0..=4 are
/// the first to fifth occurrence (`DOW#1`..`DOW#5`).
pub(crate) const NTH_LAST: u8 = 1 << 5;

pub(crate) const ALL_WEEKDAYS: u8 = 0x7f;

/// Any schedule that fires at all fires within one Gregorian cycle of any instant, because the
/// calendar, weekdays included, repeats every 146,097 days. Searching that far is complete.
pub(crate) const SEARCH_HORIZON_MINUTES: i64 = (DAYS_PER_CYCLE + 1) * MINUTES_PER_DAY;

/// A wall-clock time taken apart once, to be checked against many expressions (chrono decodes
/// a field on each read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallTime {
    year: i32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl WallTime {
    pub fn of(wall: NaiveDateTime) -> WallTime {
        WallTime {
            year: wall.year(),
            month: wall.month(),
            day: wall.day(),
            hour: wall.hour(),
            minute: wall.minute(),
            second: wall.second(),
        }
    }
}

/// A compiled cron expression: five fields, or six with a second first.
///
/// It is `Copy` and small: each field is a bitset. [`Display`](fmt::Display) prints a
/// normalised expression that parses back to an equal value. Matching minutes are found on the
/// wall clock as for five fields; the seconds are offsets inside each matching minute (zone
/// offsets change only at whole minutes), so a five-field expression is second 0 alone.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CronExpr {
    /// Bit n: second n (0..=59); bit 0 alone for a five-field expression.
    pub(crate) seconds: u64,
    /// Bit n: minute n (0..=59).
    pub(crate) minutes: u64,
    /// Bit n: hour n (0..=23).
    pub(crate) hours: u32,
    /// Bit n: day-of-month n (1..=31).
    pub(crate) days: u32,
    /// Bit n: month n (1..=12).
    pub(crate) months: u16,
    /// Bit n: weekday n, 0 = Sunday.
    pub(crate) weekdays: u8,
    /// `MINUTE_STAR`, `HOUR_STAR`, `DOM_STAR`, `DOW_STAR`, `DOM_LAST`, `HAS_NTH`, `MONTH_STAR`,
    /// `SECOND_FIELD`.
    pub(crate) flags: u8,
    /// Per weekday (0 = Sunday): which occurrences in the month match, see `NTH_LAST`.
    pub(crate) nth: [u8; 7],
    /// An `@every` interval: its instants replace the fields' (which are all `*`).
    pub(crate) every: Option<Every>,
}

impl CronExpr {
    /// Parses a five-field expression, an `@alias` or an `@every` interval.
    pub fn parse(text: &str) -> Result<CronExpr, CronError> {
        super::parse::parse(text)
    }

    /// The first instant strictly after `t` whose UTC wall time matches, if there is one.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if let Some(every) = self.every {
            return DateTime::from_timestamp(every.next_after_seconds(t.timestamp())?, 0);
        }
        let seconds = t.timestamp();
        let minute = seconds.div_euclid(60);
        // A later second of the minute `t` is in, if that minute matches.
        if let Some(second) = self.second_after(seconds.rem_euclid(60) as u32)
            && self.next_match(minute, minute) == Some(minute)
        {
            return DateTime::from_timestamp(minute * 60 + i64::from(second), 0);
        }
        let from = minute.checked_add(1)?;
        let minute = self.next_match(from, from.saturating_add(SEARCH_HORIZON_MINUTES))?;
        DateTime::from_timestamp(minute.checked_mul(60)? + i64::from(self.first_second()), 0)
    }

    /// The first allowed second of a matching minute.
    pub(crate) fn first_second(&self) -> u32 {
        self.seconds.trailing_zeros()
    }

    /// The first allowed second of a minute strictly after `second` (0..=59), if any.
    pub(crate) fn second_after(&self, second: u32) -> Option<u32> {
        let later = bits_from_u64(self.seconds, second + 1);
        (later != 0).then(|| later.trailing_zeros())
    }

    /// How many of a matching minute's seconds fire (1 for a five-field expression).
    pub fn seconds_per_minute(&self) -> u32 {
        self.seconds.count_ones()
    }

    /// The `@every` interval, when this is one.
    pub fn every(&self) -> Option<Every> {
        self.every
    }

    /// Whether this is a fixed-time schedule: neither the minute nor the hour field starts with
    /// `*`. Fixed-time schedules follow the DST policies; the others follow elapsed time.
    pub fn is_fixed_time(&self) -> bool {
        self.every.is_none() && self.flags & (MINUTE_STAR | HOUR_STAR) == 0
    }

    /// Whether the wall time `wall` (seconds ignored) matches all five fields.
    pub fn matches_local(&self, wall: NaiveDateTime) -> bool {
        let (month, day) = (wall.month(), wall.day());
        bit_u64(self.minutes, wall.minute())
            && bit_u32(self.hours, wall.hour())
            && self.months & (1 << month) != 0
            && bit_u32(
                self.day_mask(
                    i64::from(wall.year()),
                    month,
                    days_from_civil(i64::from(wall.year()), month, 1),
                ),
                day,
            )
    }

    /// Whether the wall time `wall` falls inside what the expression names, read as a set of
    /// times rather than of fires (an exclusion): a five-field expression takes in every second
    /// of its matching minutes, a six-field one only its seconds. The cheap fields are asked
    /// first: most expressions of a holiday calendar name one month.
    pub fn covers(&self, wall: &WallTime) -> bool {
        self.every.is_none()
            && self.months & (1 << wall.month) != 0
            && bit_u32(self.hours, wall.hour)
            && bit_u64(self.minutes, wall.minute)
            && (self.flags & SECOND_FIELD == 0 || bit_u64(self.seconds, wall.second))
            && bit_u32(
                self.day_mask(
                    i64::from(wall.year),
                    wall.month,
                    days_from_civil(i64::from(wall.year), wall.month, 1),
                ),
                wall.day,
            )
    }

    /// The first matching wall-clock minute in `from..=limit`, both counted in minutes since
    /// 1970-01-01T00:00 of the naive calendar.
    pub(crate) fn next_match(&self, from: i64, limit: i64) -> Option<i64> {
        if from > limit {
            return None;
        }
        let start_day = from.div_euclid(MINUTES_PER_DAY);
        let minute_of_day = from.rem_euclid(MINUTES_PER_DAY) as u32;
        let (mut year, mut month, start_dom) = civil_from_days(start_day);
        // Day count of the first of the month being looked at.
        let mut month_start = start_day - i64::from(start_dom - 1);

        let mut days = if self.months & (1 << month) != 0 {
            self.day_mask(year, month, month_start)
        } else {
            0
        };
        if bit_u32(days, start_dom)
            && let Some(minute) =
                self.first_time_at_or_after(minute_of_day / 60, minute_of_day % 60)
        {
            let found = start_day * MINUTES_PER_DAY + i64::from(minute);
            return (found <= limit).then_some(found);
        }
        days = bits_from_u32(days, start_dom + 1);
        let limit_day = limit.div_euclid(MINUTES_PER_DAY);
        loop {
            if days != 0 {
                let day = days.trailing_zeros();
                let found = (month_start + i64::from(day) - 1) * MINUTES_PER_DAY
                    + i64::from(self.first_minute_of_day());
                return (found <= limit).then_some(found);
            }
            (year, month) = self.next_month(year, month);
            month_start = days_from_civil(year, month, 1);
            if month_start > limit_day {
                return None;
            }
            days = self.day_mask(year, month, month_start);
        }
    }

    /// The first allowed (year, month) after the given one.
    fn next_month(&self, year: i64, month: u32) -> (i64, u32) {
        let later = self.months & u16::MAX.checked_shl(month + 1).unwrap_or(0);
        if later != 0 {
            (year, later.trailing_zeros())
        } else {
            (year + 1, self.months.trailing_zeros())
        }
    }

    /// Minute of the day of the earliest allowed time.
    fn first_minute_of_day(&self) -> u32 {
        self.hours.trailing_zeros() * 60 + self.minutes.trailing_zeros()
    }

    /// Minute of the day of the first allowed time at or after `hour:minute`, on the same day.
    fn first_time_at_or_after(&self, hour: u32, minute: u32) -> Option<u32> {
        let first_hour = bits_from_u32(self.hours, hour);
        if first_hour == 0 {
            return None;
        }
        let found_hour = first_hour.trailing_zeros();
        if found_hour == hour {
            let later_minutes = bits_from_u64(self.minutes, minute);
            if later_minutes != 0 {
                return Some(hour * 60 + later_minutes.trailing_zeros());
            }
            let later_hours = bits_from_u32(self.hours, hour + 1);
            if later_hours == 0 {
                return None;
            }
            return Some(later_hours.trailing_zeros() * 60 + self.minutes.trailing_zeros());
        }
        Some(found_hour * 60 + self.minutes.trailing_zeros())
    }

    /// The days of `month` in `year` that match, as bits 1..=31. `month_start` is the day
    /// count of the first of that month.
    pub(crate) fn day_mask(&self, year: i64, month: u32, month_start: i64) -> u32 {
        let month_len = days_in_month(year, month);
        let valid = (u32::MAX >> (31 - month_len)) & !1;
        let mut by_dom = self.days;
        if self.flags & DOM_LAST != 0 {
            by_dom |= 1 << month_len;
        }
        let by_dom = by_dom & valid;
        let by_dow = if self.weekdays == ALL_WEEKDAYS && self.flags & HAS_NTH == 0 {
            valid
        } else {
            let first_weekday = weekday(month_start);
            self.weekday_days(first_weekday, month_len) & valid
        };
        // Vixie cron: when both day fields are restricted (neither starts with `*`), a day
        // matches if either matches; otherwise both must match.
        if self.flags & (DOM_STAR | DOW_STAR) == 0 {
            by_dom | by_dow
        } else {
            by_dom & by_dow
        }
    }

    /// Days (bits 1..=31) of a month starting on `first_weekday` that match the weekday field.
    fn weekday_days(&self, first_weekday: u32, month_len: u32) -> u32 {
        let set = u32::from(self.weekdays);
        // Bit i of `rotated`: the weekday of day i + 1 is in the set.
        let rotated = ((set >> first_weekday) | (set << (7 - first_weekday))) & 0x7f;
        // Copy the 7-bit pattern into five consecutive weeks; the chunks do not overlap.
        let weeks = u64::from(rotated) * 0x1020_4081;
        let mut mask = ((weeks << 1) & 0xffff_ffff) as u32;
        if self.flags & HAS_NTH != 0 {
            for (wd, &occurrences) in (0u32..).zip(self.nth.iter()) {
                if occurrences == 0 {
                    continue;
                }
                let first = 1 + (wd + 7 - first_weekday) % 7;
                let mut nths = occurrences & !NTH_LAST;
                while nths != 0 {
                    let day = first + 7 * nths.trailing_zeros();
                    if day <= month_len {
                        mask |= 1 << day;
                    }
                    nths &= nths - 1;
                }
                if occurrences & NTH_LAST != 0 {
                    mask |= 1 << (first + 7 * ((month_len - first) / 7));
                }
            }
        }
        mask
    }
}

/// `mask` with the bits below `from` cleared (all cleared when `from` is past the width).
fn bits_from_u32(mask: u32, from: u32) -> u32 {
    mask & u32::MAX.checked_shl(from).unwrap_or(0)
}

fn bits_from_u64(mask: u64, from: u32) -> u64 {
    mask & u64::MAX.checked_shl(from).unwrap_or(0)
}

fn bit_u32(mask: u32, bit: u32) -> bool {
    bit < 32 && mask & (1 << bit) != 0
}

fn bit_u64(mask: u64, bit: u32) -> bool {
    bit < 64 && mask & (1 << bit) != 0
}

impl FromStr for CronExpr {
    type Err = CronError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronExpr::parse(s)
    }
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CronExpr({self})")
    }
}
