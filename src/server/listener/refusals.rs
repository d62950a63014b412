//! Connections the listener closed at its full cap (new ones refused, waiting ones that gave
//! way), told in one line per interval, not one per connection: a flood would otherwise write a
//! warning for every connection it opens (tens of thousands of lines a minute), burying
//! everything else in the log.

use std::time::{Duration, Instant};

/// At most one line per this long.
pub(super) const REFUSALS_TOLD_EVERY: Duration = Duration::from_secs(10);

/// What happened to a connection at the full cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AtCap {
    /// A new connection was closed: every slot was busy.
    Refused,
    /// A waiting connection was closed to admit a new one.
    GaveWay,
}

/// Closes not yet told, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Untold {
    pub refused: u64,
    pub gave_way: u64,
}

/// The closes since the last line.
#[derive(Debug, Default)]
pub(super) struct RefusalTally {
    /// When the last line was written.
    told_at: Option<Instant>,
    untold: Untold,
}

impl RefusalTally {
    /// Counts a close at `now`. Returns the closes to tell (this one included) when a line is
    /// due: at the first close, and at the first after each interval.
    pub(super) fn count(&mut self, what: AtCap, now: Instant) -> Option<Untold> {
        match what {
            AtCap::Refused => self.untold.refused += 1,
            AtCap::GaveWay => self.untold.gave_way += 1,
        }
        let due = self
            .told_at
            .is_none_or(|at| now.saturating_duration_since(at) >= REFUSALS_TOLD_EVERY);
        if !due {
            return None;
        }
        self.told_at = Some(now);
        Some(std::mem::take(&mut self.untold))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told(refused: u64, gave_way: u64) -> Option<Untold> {
        Some(Untold { refused, gave_way })
    }

    #[test]
    fn a_flood_of_closes_is_one_line_per_interval_counting_them_all() {
        let start = Instant::now();
        let mut tally = RefusalTally::default();
        assert_eq!(
            tally.count(AtCap::Refused, start),
            told(1, 0),
            "the first is told at once"
        );
        let quiet: Vec<_> = (1..=999)
            .map(|ms| {
                let what = if ms % 3 == 0 {
                    AtCap::GaveWay
                } else {
                    AtCap::Refused
                };
                tally.count(what, start + Duration::from_millis(ms * 9))
            })
            .collect();
        assert!(
            quiet.iter().all(Option::is_none),
            "within the interval: counted, not told"
        );
        // The first after the interval tells every one since the last line.
        assert_eq!(
            tally.count(AtCap::GaveWay, start + REFUSALS_TOLD_EVERY),
            told(666, 334)
        );
        assert_eq!(
            tally.count(
                AtCap::Refused,
                start + REFUSALS_TOLD_EVERY + Duration::from_secs(1)
            ),
            None
        );
        assert_eq!(
            tally.count(AtCap::GaveWay, start + REFUSALS_TOLD_EVERY * 5),
            told(1, 1),
            "a later close after a quiet while"
        );
    }
}
