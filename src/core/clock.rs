//! The clock is injected so that retries, backoff and DST can be tested without sleeping.

use std::sync::Mutex;

use chrono::{DateTime, Duration, DurationRound, Utc};

/// A source of the current instant.
pub trait Clock: Send + Sync + 'static {
    /// The current instant, truncated to microseconds (the precision both stores keep, so a
    /// value read back equals the value written).
    fn now(&self) -> DateTime<Utc>;
}

/// Truncates an instant to the microsecond precision the stores keep.
pub fn to_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(Duration::microseconds(1)).unwrap_or(t)
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        to_micros(Utc::now())
    }
}

/// A clock that only moves when told to. For tests and simulations.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(to_micros(start)),
        }
    }

    /// Moves the clock to `t`.
    pub fn set(&self, t: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|p| p.into_inner()) = to_micros(t);
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let start = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::seconds(90));
        assert_eq!(clock.now(), start + Duration::seconds(90));
        clock.set(start);
        assert_eq!(clock.now(), start);
    }

    #[test]
    fn system_clock_keeps_microseconds_only() {
        let now = SystemClock.now();
        assert_eq!(now.timestamp_subsec_nanos() % 1_000, 0);
    }
}
