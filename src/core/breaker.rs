//! The per-origin circuit breaker of dispatch: after `threshold` consecutive timeouts or
//! refusals from one origin, that origin's calls fail fast (onto the retry path, recorded as
//! `circuit open`) for a cool-down; then one probe call is let through, and its success closes
//! the circuit again (its failure opens it for another cool-down).
//!
//! Pure: the caller passes the instant, so tests drive it with any clock. An origin nobody
//! called for a whole cool-down past its last failure (or its open circuit's end) is
//! forgotten, so the map holds current trouble only.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The failure class a fail-fast attempt is recorded with.
pub const CIRCUIT_OPEN: &str = "circuit open";

/// When a circuit opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive timeouts or refusals that open the circuit (0 turns the breaker off).
    pub threshold: u32,
    /// How long an open circuit fails calls fast before a probe.
    pub cooldown: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            threshold: 5,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// What a call's result says about its origin's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallHealth {
    /// The origin answered (whatever the status): it is reachable.
    Answered,
    /// A timeout or a refused or failed connection.
    Unreachable,
    /// Says nothing about the origin (a configuration failure, a token problem).
    Neutral,
}

/// Whether a call may go out now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The circuit is closed: call.
    Call,
    /// The cool-down is over: this call is the one probe.
    Probe,
    /// The circuit is open until this instant: fail fast.
    Reject { until: DateTime<Utc> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed {
        failures: u32,
        last: DateTime<Utc>,
    },
    Open {
        until: DateTime<Utc>,
    },
    /// A probe is out; until it reports (or `until`, if it never does) calls fail fast.
    Probing {
        until: DateTime<Utc>,
    },
}

/// The breakers of all origins.
#[derive(Debug, Clone, Default)]
pub struct Breakers {
    config: BreakerConfig,
    origins: HashMap<String, State>,
    /// When stale entries were last evicted.
    swept: Option<DateTime<Utc>>,
}

impl Breakers {
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            origins: HashMap::new(),
            swept: None,
        }
    }

    /// How many origins are tracked (troubled ones only).
    pub fn tracked(&self) -> usize {
        self.origins.len()
    }

    /// Forgets, at most once per cool-down, the origins whose trouble is a cool-down old.
    fn sweep(&mut self, now: DateTime<Utc>, cooldown: chrono::Duration) {
        if self.swept.is_some_and(|at| now < at + cooldown) {
            return;
        }
        self.swept = Some(now);
        self.origins.retain(|_, state| match *state {
            State::Closed { last, .. } => now < last + cooldown,
            State::Open { until } | State::Probing { until } => now < until + cooldown,
        });
    }

    /// Decides whether a call to `origin` goes out at `now`.
    pub fn admit(&mut self, origin: &str, now: DateTime<Utc>) -> Admission {
        let cooldown =
            chrono::Duration::from_std(self.config.cooldown).unwrap_or(chrono::Duration::MAX);
        let Some(state) = self.origins.get_mut(origin) else {
            return Admission::Call;
        };
        match *state {
            State::Closed { .. } => Admission::Call,
            State::Open { until } | State::Probing { until } if now < until => {
                Admission::Reject { until }
            }
            // The cool-down is over (or a probe never reported within one): probe again.
            State::Open { .. } | State::Probing { .. } => {
                *state = State::Probing {
                    until: now + cooldown,
                };
                Admission::Probe
            }
        }
    }

    /// Records what a call to `origin` found; true when this opened its circuit (the
    /// threshold reached, or a probe failed).
    pub fn record(&mut self, origin: &str, health: CallHealth, now: DateTime<Utc>) -> bool {
        if self.config.threshold == 0 {
            return false;
        }
        let cooldown =
            chrono::Duration::from_std(self.config.cooldown).unwrap_or(chrono::Duration::MAX);
        match health {
            CallHealth::Neutral => false,
            CallHealth::Answered => {
                // Closed circuits with no failures are not kept: the map holds troubled
                // origins only.
                self.origins.remove(origin);
                false
            }
            CallHealth::Unreachable => {
                self.sweep(now, cooldown);
                let state = self
                    .origins
                    .entry(origin.to_owned())
                    .or_insert(State::Closed {
                        failures: 0,
                        last: now,
                    });
                let (next, opened) = match *state {
                    State::Closed { failures, .. } if failures + 1 < self.config.threshold => (
                        State::Closed {
                            failures: failures + 1,
                            last: now,
                        },
                        false,
                    ),
                    // The threshold is reached, or the probe failed: open (again).
                    State::Closed { .. } | State::Probing { .. } => (
                        State::Open {
                            until: now + cooldown,
                        },
                        true,
                    ),
                    // A call admitted before the circuit opened reports late: still open.
                    open @ State::Open { .. } => (open, false),
                };
                *state = next;
                opened
            }
        }
    }

    /// How many origins' circuits are not closed: open, or waiting for a probe to close them.
    pub fn not_closed(&self) -> usize {
        self.origins
            .values()
            .filter(|s| matches!(s, State::Open { .. } | State::Probing { .. }))
            .count()
    }

    /// Whether the origin's circuit is open (or probing) at `now`.
    pub fn is_open(&self, origin: &str, now: DateTime<Utc>) -> bool {
        matches!(
            self.origins.get(origin),
            Some(State::Open { until } | State::Probing { until }) if now < *until
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn breakers() -> Breakers {
        Breakers::new(BreakerConfig {
            threshold: 3,
            cooldown: Duration::from_secs(30),
        })
    }

    #[test]
    fn opens_after_threshold_consecutive_failures_only() {
        let mut b = breakers();
        b.record("a", CallHealth::Unreachable, t(0));
        b.record("a", CallHealth::Unreachable, t(1));
        // An answer in between resets the count.
        b.record("a", CallHealth::Answered, t(2));
        b.record("a", CallHealth::Unreachable, t(3));
        b.record("a", CallHealth::Unreachable, t(4));
        assert_eq!(b.admit("a", t(5)), Admission::Call);
        assert_eq!(b.not_closed(), 0);
        assert!(
            b.record("a", CallHealth::Unreachable, t(5)),
            "this one opens it"
        );
        assert_eq!(b.not_closed(), 1);
        assert!(
            !b.record("a", CallHealth::Unreachable, t(5)),
            "already open"
        );
        assert_eq!(b.admit("a", t(6)), Admission::Reject { until: t(35) });
        assert!(b.is_open("a", t(6)));
        // Other origins are not affected; neutral results change nothing.
        assert_eq!(b.admit("b", t(6)), Admission::Call);
        b.record("a", CallHealth::Neutral, t(7));
        assert_eq!(b.admit("a", t(7)), Admission::Reject { until: t(35) });
    }

    #[test]
    fn one_probe_after_the_cooldown_closes_on_success() {
        let mut b = breakers();
        for i in 0..3 {
            b.record("a", CallHealth::Unreachable, t(i));
        }
        assert!(matches!(b.admit("a", t(31)), Admission::Reject { .. }));
        assert_eq!(b.admit("a", t(32)), Admission::Probe);
        // Only one probe at a time.
        assert!(matches!(b.admit("a", t(33)), Admission::Reject { .. }));
        b.record("a", CallHealth::Answered, t(34));
        assert_eq!(b.admit("a", t(34)), Admission::Call);
        assert!(!b.is_open("a", t(34)));
    }

    #[test]
    fn a_failed_probe_opens_for_another_cooldown() {
        let mut b = breakers();
        for i in 0..3 {
            b.record("a", CallHealth::Unreachable, t(i));
        }
        assert_eq!(b.admit("a", t(40)), Admission::Probe);
        b.record("a", CallHealth::Unreachable, t(41));
        assert_eq!(b.admit("a", t(42)), Admission::Reject { until: t(71) });
        // A probe that never reports does not keep the circuit shut for ever.
        assert_eq!(b.admit("a", t(71)), Admission::Probe);
        assert_eq!(b.admit("a", t(101)), Admission::Probe);
    }

    #[test]
    fn origins_long_past_their_trouble_are_forgotten() {
        let mut b = breakers();
        for i in 0..3 {
            b.record("open", CallHealth::Unreachable, t(i));
        }
        b.record("flaky", CallHealth::Unreachable, t(2));
        assert_eq!(b.tracked(), 2);
        // A cool-down past the open circuit's end (t(32)) and past the last failure: a new
        // failure elsewhere sweeps both away.
        b.record("other", CallHealth::Unreachable, t(70));
        assert_eq!(b.tracked(), 1);
        assert_eq!(b.admit("open", t(70)), Admission::Call);
        // Recent trouble is kept.
        b.record("other", CallHealth::Unreachable, t(71));
        b.record("other", CallHealth::Unreachable, t(72));
        assert!(b.is_open("other", t(73)));
    }

    #[test]
    fn threshold_zero_turns_it_off() {
        let mut b = Breakers::new(BreakerConfig {
            threshold: 0,
            cooldown: Duration::from_secs(30),
        });
        for i in 0..10 {
            b.record("a", CallHealth::Unreachable, t(i));
        }
        assert_eq!(b.admit("a", t(10)), Admission::Call);
    }
}
