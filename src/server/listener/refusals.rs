//! Connections the listener closed at its limit, told in one line per interval, not one per
//! connection: a flood would otherwise write a warning for every connection it opens (tens of
//! thousands of lines a minute), burying everything else in the log.

use std::time::{Duration, Instant};

/// At most one line per this long.
pub(super) const REFUSALS_TOLD_EVERY: Duration = Duration::from_secs(10);

/// The refusals since the last line.
#[derive(Debug, Default)]
pub(super) struct RefusalTally {
    /// When the last line was written.
    told_at: Option<Instant>,
    /// Refusals not yet told.
    untold: u64,
}

impl RefusalTally {
    /// Counts a refusal at `now`. Returns how many refusals to tell (this one included) when a
    /// line is due: at the first refusal, and at the first after each interval.
    pub(super) fn refused(&mut self, now: Instant) -> Option<u64> {
        self.untold += 1;
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

    #[test]
    fn a_flood_of_refusals_is_one_line_per_interval_counting_them_all() {
        let start = Instant::now();
        let mut tally = RefusalTally::default();
        assert_eq!(tally.refused(start), Some(1), "the first is told at once");
        let quiet: Vec<_> = (1..=999)
            .map(|ms| tally.refused(start + Duration::from_millis(ms * 9)))
            .collect();
        assert!(
            quiet.iter().all(Option::is_none),
            "within the interval: counted, not told"
        );
        // The first after the interval tells every one since the last line.
        assert_eq!(tally.refused(start + REFUSALS_TOLD_EVERY), Some(1000));
        assert_eq!(
            tally.refused(start + REFUSALS_TOLD_EVERY + Duration::from_secs(1)),
            None
        );
        assert_eq!(
            tally.refused(start + REFUSALS_TOLD_EVERY * 5),
            Some(2),
            "a later refusal after a quiet while"
        );
    }
}
