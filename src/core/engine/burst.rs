//! The moment a burst's calls go out, and the database work kept out of it: pure rules the
//! producer applies. Many fires handed off for one instant leave together, and their calls
//! take every core for the tens of milliseconds they need; a hand-off or a claim ahead written
//! beside them makes them late. Work the producer can time (the hand-off of later fires, which
//! may begin up to a step early; a round that claims ahead) is moved out of that
//! moment, never past what its own fires need.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::parts::chrono_duration as chrono;

/// At least this many fires handed off for one instant make a burst.
pub const BURST_MIN: usize = 100;

/// A burst's moment begins this long before its instant (the database work moved out of it
/// has this long to end before the calls begin; a hand-off may begin a step, as long, early)
/// ...
pub const CLEAR_BEFORE: Duration = Duration::from_millis(250);

/// ... and ends this long after it, about as long as a thousand calls take to leave.
pub const CLEAR_AFTER: Duration = Duration::from_millis(150);

/// A round that claims ahead is moved past a burst only while the earliest fire it may claim
/// is at least this far beyond the moved start (claimed, handed off and called in time).
pub const ROUND_MARGIN: Duration = Duration::from_secs(3);

/// The fires handed off per instant, kept until the instant's moment has passed.
#[derive(Debug, Default)]
pub struct Bursts {
    per_instant: BTreeMap<DateTime<Utc>, usize>,
}

impl Bursts {
    /// A fire was handed off for `instant`.
    pub fn add(&mut self, instant: DateTime<Utc>) {
        *self.per_instant.entry(instant).or_default() += 1;
    }

    /// Forgets the instants whose moment ended before `now`.
    pub fn prune(&mut self, now: DateTime<Utc>) {
        self.per_instant = self.per_instant.split_off(&(now - chrono(CLEAR_AFTER)));
    }

    /// The instant of the burst whose moment holds `at` (from [`CLEAR_BEFORE`] before it,
    /// exclusive, to [`CLEAR_AFTER`] after it, inclusive), if any.
    pub fn holding(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let from = at - chrono(CLEAR_AFTER);
        let to = at + chrono(CLEAR_BEFORE);
        self.per_instant
            .range(from..to)
            .find(|(_, n)| **n >= BURST_MIN)
            .map(|(instant, _)| *instant)
    }

    /// When a hand-off due at `due` begins: at `due`, or, when that falls in a burst's moment,
    /// at `earliest` (the earliest its fires may be handed off), unless that does too.
    pub fn hand_off_at(&self, due: DateTime<Utc>, earliest: DateTime<Utc>) -> DateTime<Utc> {
        if self.holding(due).is_some() && self.holding(earliest).is_none() {
            earliest
        } else {
            due
        }
    }

    /// When a round planned for `at` that claims ahead runs: at `at`, or, when that falls in
    /// a burst's moment, just after it, as long as the earliest fire it may claim
    /// (`next_due`) is still [`ROUND_MARGIN`] beyond and the new start is clear of bursts.
    pub fn round_at(&self, at: DateTime<Utc>, next_due: DateTime<Utc>) -> DateTime<Utc> {
        let Some(instant) = self.holding(at) else {
            return at;
        };
        let moved = instant + chrono(CLEAR_AFTER) + chrono::Duration::milliseconds(1);
        if next_due >= moved + chrono(ROUND_MARGIN) && self.holding(moved).is_none() {
            moved
        } else {
            at
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_900_000_000_000 + ms).unwrap()
    }

    fn burst_at(ms: i64, n: usize) -> Bursts {
        let mut bursts = Bursts::default();
        for _ in 0..n {
            bursts.add(t(ms));
        }
        bursts
    }

    #[test]
    fn a_burst_holds_the_moment_from_before_its_instant_to_after_it() {
        let bursts = burst_at(1_000, BURST_MIN);
        assert_eq!(bursts.holding(t(750)), None, "the moment begins after this");
        assert_eq!(bursts.holding(t(751)), Some(t(1_000)));
        assert_eq!(bursts.holding(t(1_000)), Some(t(1_000)));
        assert_eq!(bursts.holding(t(1_150)), Some(t(1_000)));
        assert_eq!(bursts.holding(t(1_151)), None);
        let few = burst_at(1_000, BURST_MIN - 1);
        assert_eq!(few.holding(t(1_000)), None, "a few fires are no burst");
    }

    #[test]
    fn a_hand_off_due_in_a_burst_begins_at_its_earliest() {
        // Fires every second: the next second's hand-off falls due at this second's instant.
        let bursts = burst_at(1_000, 1_000);
        assert_eq!(bursts.hand_off_at(t(1_000), t(750)), t(750));
        assert_eq!(
            bursts.hand_off_at(t(1_100), t(850)),
            t(1_100),
            "no earlier moment is clear"
        );
        assert_eq!(
            bursts.hand_off_at(t(1_300), t(1_050)),
            t(1_300),
            "clear as it is"
        );
        assert_eq!(Bursts::default().hand_off_at(t(1_000), t(750)), t(1_000));
    }

    #[test]
    fn a_round_ahead_due_in_a_burst_waits_until_it_is_out() {
        let bursts = burst_at(1_000, 1_000);
        assert_eq!(bursts.round_at(t(900), t(12_000)), t(1_151));
        assert_eq!(bursts.round_at(t(1_200), t(12_000)), t(1_200));
        // What it may claim is too near to wait.
        assert_eq!(bursts.round_at(t(900), t(3_000)), t(900));
        // The moved start would fall in the next burst.
        let mut two = burst_at(1_000, 1_000);
        for _ in 0..1_000 {
            two.add(t(1_300));
        }
        assert_eq!(two.round_at(t(900), t(12_000)), t(900));
    }

    #[test]
    fn instants_past_their_moment_are_forgotten() {
        let mut bursts = burst_at(1_000, 1_000);
        bursts.prune(t(1_150));
        assert_eq!(bursts.holding(t(1_100)), Some(t(1_000)));
        bursts.prune(t(1_151));
        assert_eq!(bursts.holding(t(1_100)), None);
    }
}
