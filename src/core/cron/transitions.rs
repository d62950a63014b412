//! The UTC-offset transitions of a time zone, found once per zone and cached for the process.
//!
//! chrono-tz answers "what is the offset at this instant" but does not list its transitions.
//! The DST-aware search needs them (where does the current offset end, was the clock just set
//! back), so each zone is scanned once: offsets are sampled every [`SCAN_STEP`] seconds over
//! [`SCAN_START`, `SCAN_END`] and every change is narrowed to its exact second by bisection.
//!
//! This finds every transition as long as no two offset changes of one zone lie within
//! `SCAN_STEP` of each other. In the bundled tz database the closest pair is about 7 days apart
//! and all transitions fall between 1844 and 2099; the sampling step is 2 days, and a test
//! checks the cached tables against an hourly scan.

use std::sync::OnceLock;

use chrono::{DateTime, Offset, TimeZone};
use chrono_tz::{TZ_VARIANTS, Tz};

/// 1800-01-01T00:00:00Z: before every transition in the tz database.
pub(crate) const SCAN_START: i64 = -5_364_662_400;
/// 2110-01-01T00:00:00Z: after every transition in the tz database.
pub(crate) const SCAN_END: i64 = 4_417_977_600;
/// Two days: well below the smallest distance between two offset changes of one zone.
const SCAN_STEP: i64 = 2 * 86_400;

/// The UTC offset changes at `at` (seconds since the epoch) from `before` to `after` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Transition {
    pub(crate) at: i64,
    pub(crate) before: i32,
    pub(crate) after: i32,
}

/// Bucket width for the lookup index: 2^25 s, about 388 days, so finding the segment of an
/// instant is a shift and a step or two instead of a binary search.
const BUCKET_SHIFT: u32 = 25;

/// All offset transitions of one zone, in time order.
#[derive(Debug)]
pub(crate) struct ZoneTable {
    /// Offset before the first transition.
    initial: i32,
    pub(crate) transitions: Box<[Transition]>,
    /// For bucket b: the number of transitions before `SCAN_START + (b << BUCKET_SHIFT)`.
    buckets: Box<[u32]>,
}

impl ZoneTable {
    fn build(tz: Tz) -> ZoneTable {
        let initial = offset_at(tz, SCAN_START);
        let mut transitions = Vec::new();
        // UTC never changes; skip the scan for the default zone.
        let mut sample = if tz == Tz::UTC { SCAN_END } else { SCAN_START };
        let mut previous = initial;
        while sample < SCAN_END {
            let next_sample = sample + SCAN_STEP;
            let offset = offset_at(tz, next_sample);
            if offset != previous {
                // Exactly one change lies in (sample, next_sample]: find its second.
                let (mut low, mut high) = (sample, next_sample);
                while high - low > 1 {
                    let middle = low + (high - low) / 2;
                    if offset_at(tz, middle) == previous {
                        low = middle;
                    } else {
                        high = middle;
                    }
                }
                transitions.push(Transition {
                    at: high,
                    before: previous,
                    after: offset,
                });
                previous = offset;
            }
            sample = next_sample;
        }
        let bucket_count = ((SCAN_END - SCAN_START) >> BUCKET_SHIFT) + 1;
        let buckets = (0..bucket_count)
            .map(|bucket| {
                let bucket_start = SCAN_START + (bucket << BUCKET_SHIFT);
                let before = transitions.partition_point(|transition| transition.at < bucket_start);
                u32::try_from(before).unwrap_or(u32::MAX)
            })
            .collect();
        ZoneTable {
            initial,
            transitions: transitions.into_boxed_slice(),
            buckets,
        }
    }

    /// Index of the constant-offset segment that contains the instant `t`: the number of
    /// transitions at or before `t`.
    pub(crate) fn segment_index(&self, t: i64) -> usize {
        let bucket = t.saturating_sub(SCAN_START) >> BUCKET_SHIFT;
        let Some(&first) = usize::try_from(bucket)
            .ok()
            .and_then(|bucket| self.buckets.get(bucket))
        else {
            return if t < SCAN_START {
                0
            } else {
                self.transitions.len()
            };
        };
        // A bucket holds few transitions: step over those at or before `t`.
        let mut index = first as usize;
        while self
            .transitions
            .get(index)
            .is_some_and(|transition| transition.at <= t)
        {
            index += 1;
        }
        index
    }

    /// UTC offset in seconds during segment `index`.
    pub(crate) fn segment_offset(&self, index: usize) -> i32 {
        index
            .checked_sub(1)
            .and_then(|previous| self.transitions.get(previous))
            .map_or(self.initial, |transition| transition.after)
    }

    /// The transition that starts segment `index`, if any.
    pub(crate) fn segment_start(&self, index: usize) -> Option<&Transition> {
        index
            .checked_sub(1)
            .and_then(|previous| self.transitions.get(previous))
    }

    /// UTC offset in seconds at the instant `t`.
    #[cfg(test)]
    pub(crate) fn offset_at(&self, t: i64) -> i32 {
        self.segment_offset(self.segment_index(t))
    }
}

/// UTC offset of `tz` at `t` seconds since the epoch, straight from the tz database.
fn offset_at(tz: Tz, t: i64) -> i32 {
    DateTime::from_timestamp(t, 0).map_or(0, |instant| {
        tz.offset_from_utc_datetime(&instant.naive_utc())
            .fix()
            .local_minus_utc()
    })
}

static TABLES: [OnceLock<ZoneTable>; TZ_VARIANTS.len()] =
    [const { OnceLock::new() }; TZ_VARIANTS.len()];

/// Runs `f` with the transition table of `tz`, building and caching it on first use.
pub(crate) fn with_zone_table<R>(tz: Tz, f: impl FnOnce(&ZoneTable) -> R) -> R {
    // `Tz` is a field-less enum whose variants are exactly `TZ_VARIANTS`.
    match TABLES.get(tz as usize) {
        Some(slot) => f(slot.get_or_init(|| ZoneTable::build(tz))),
        None => f(&ZoneTable::build(tz)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hourly_scan_matches_table(tz: Tz, from: i64, to: i64) {
        with_zone_table(tz, |table| {
            let mut t = from;
            while t < to {
                assert_eq!(table.offset_at(t), offset_at(tz, t), "{tz} at {t}");
                assert_eq!(
                    table.segment_index(t),
                    table
                        .transitions
                        .partition_point(|transition| transition.at <= t)
                );
                t += 3_600;
            }
            for transition in table.transitions.iter() {
                assert_eq!(offset_at(tz, transition.at - 1), transition.before);
                assert_eq!(offset_at(tz, transition.at), transition.after);
            }
        });
    }

    #[test]
    fn segment_lookup_at_the_edges() {
        with_zone_table(Tz::America__New_York, |table| {
            let count = table.transitions.len();
            for t in [
                i64::MIN,
                SCAN_START - 1,
                SCAN_START,
                SCAN_END - 1,
                SCAN_END,
                i64::MAX,
            ] {
                let expected = table
                    .transitions
                    .partition_point(|transition| transition.at <= t);
                assert_eq!(table.segment_index(t), expected, "{t}");
            }
            assert_eq!(table.segment_index(i64::MAX), count);
            for transition in table.transitions.iter() {
                let index = table.segment_index(transition.at);
                assert_eq!(table.segment_offset(index), transition.after);
                assert_eq!(table.segment_offset(index - 1), transition.before);
                assert_eq!(table.segment_index(transition.at - 1), index - 1);
            }
        });
    }

    #[test]
    fn scan_bounds_are_the_documented_dates() {
        use chrono::NaiveDate;
        let start = NaiveDate::from_ymd_opt(1800, 1, 1).unwrap();
        let end = NaiveDate::from_ymd_opt(2110, 1, 1).unwrap();
        assert_eq!(
            start.and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp(),
            SCAN_START
        );
        assert_eq!(
            end.and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp(),
            SCAN_END
        );
    }

    #[test]
    fn tables_agree_with_an_hourly_scan() {
        // 1970..2100 for zones with unusual rules: 30- and 45-minute offsets, Ramadan breaks,
        // southern-hemisphere DST, a skipped calendar day, short DST periods.
        for tz in [
            Tz::America__New_York,
            Tz::Europe__London,
            Tz::Australia__Lord_Howe,
            Tz::Pacific__Chatham,
            Tz::Africa__Casablanca,
            Tz::Asia__Gaza,
            Tz::America__Noronha,
            Tz::Pacific__Apia,
            Tz::UTC,
        ] {
            hourly_scan_matches_table(tz, 0, 4_102_444_800);
        }
    }

    #[test]
    fn nothing_changes_outside_the_scanned_range() {
        let two_centuries = 200 * 366 * 86_400;
        for &tz in TZ_VARIANTS.iter() {
            assert_eq!(
                offset_at(tz, SCAN_START - two_centuries),
                offset_at(tz, SCAN_START),
                "{tz}"
            );
            assert_eq!(
                offset_at(tz, SCAN_END),
                offset_at(tz, SCAN_END + two_centuries),
                "{tz}"
            );
        }
    }
}
