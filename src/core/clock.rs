//! The clock is injected so that retries, backoff and DST can be tested without sleeping, and
//! so that the engine's timers run on it: with a [`ManualClock`] a test moves time and the
//! timers that are due fire, with no wall-clock wait.

use std::future::Future;
use std::pin::Pin;

use chrono::{DateTime, Duration, DurationRound, Utc};
use tokio::sync::watch;

/// A timer of a clock: resolves once the clock has reached its instant.
pub type Sleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A source of the current instant, and timers on it.
pub trait Clock: Send + Sync + 'static {
    /// The current instant, truncated to microseconds (the precision both stores keep, so a
    /// value read back equals the value written).
    fn now(&self) -> DateTime<Utc>;

    /// Resolves once [`Clock::now`] has reached `at` (at once when it has).
    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_>;

    /// Time elapsed on a monotonic clock since an arbitrary origin fixed for the clock's life:
    /// it never goes back and does not follow steps of the wall clock, and it goes on while
    /// the process is stopped. An instance measures its leases on it: what it knows of a lease
    /// is when it sent the write that set it, on this clock.
    fn monotonic(&self) -> std::time::Duration;
}

/// Waits `wait` on `clock`, or the same wait in wall-clock time, whichever ends first. On the
/// system clock the two are one; a test clock that is moved ends the wait at once, and one that
/// stands still does not stall it (a call's timeout, a pause between rounds).
pub async fn wait_on(clock: &dyn Clock, wait: std::time::Duration) {
    let at = clock.now() + Duration::from_std(wait).unwrap_or(Duration::MAX);
    tokio::select! {
        () = clock.sleep_until(at) => {}
        () = tokio::time::sleep(wait) => {}
    }
}

/// An instant some wait from now on both an injected clock and the wall clock, passed once
/// either reaches it ([`wait_on`]'s rule for a wait that must also end). The engine's pauses
/// (between records, before a retry of a failed write) are these: a test or a simulation that
/// moves its clock past them ends them at once, and a clock that stands still does not stall
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Deadline {
    pub at: DateTime<Utc>,
    pub real: tokio::time::Instant,
}

impl Deadline {
    /// `wait` from now on `clock` and on the wall clock.
    pub fn after(clock: &dyn Clock, wait: std::time::Duration) -> Self {
        Self {
            at: clock.now() + Duration::from_std(wait).unwrap_or(Duration::MAX),
            real: tokio::time::Instant::now() + wait,
        }
    }

    /// Whether either clock has reached it.
    pub fn passed(&self, clock: &dyn Clock) -> bool {
        self.at <= clock.now() || self.real <= tokio::time::Instant::now()
    }

    /// The earliest of `deadlines` on each clock: waiting until that passes wakes for the first
    /// of them to pass.
    pub fn earliest(deadlines: impl IntoIterator<Item = Self>) -> Option<Self> {
        deadlines.into_iter().reduce(|a, b| Self {
            at: a.at.min(b.at),
            real: a.real.min(b.real),
        })
    }

    /// Resolves once either clock reaches it.
    pub async fn wait(&self, clock: &dyn Clock) {
        tokio::select! {
            () = clock.sleep_until(self.at) => {}
            () = tokio::time::sleep_until(self.real) => {}
        }
    }
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

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_> {
        let wait = (at - Utc::now()).to_std().unwrap_or_default();
        Box::pin(tokio::time::sleep(wait))
    }

    fn monotonic(&self) -> std::time::Duration {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(std::time::Instant::now).elapsed()
    }
}

/// A clock that only moves when told to. For tests and simulations: its timers fire when it is
/// moved past their instants, never by themselves.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<DateTime<Utc>>,
    /// The monotonic reading: every move forward of the wall clock, and none back.
    monotonic: std::sync::Mutex<std::time::Duration>,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: watch::Sender::new(to_micros(start)),
            monotonic: std::sync::Mutex::new(std::time::Duration::ZERO),
        }
    }

    /// Moves the clock to `t`: the monotonic reading follows a move forward, not one back.
    pub fn set(&self, t: DateTime<Utc>) {
        let t = to_micros(t);
        let before = self.now.send_replace(t);
        self.elapse(t - before);
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.now.send_modify(|now| *now += by);
        self.elapse(by);
    }

    /// Steps the wall clock by `by` (either way) without time passing: the monotonic reading
    /// stays (an operator or NTP setting the system clock).
    pub fn step_wall(&self, by: Duration) {
        self.now.send_modify(|now| *now += by);
    }

    fn elapse(&self, by: Duration) {
        if let Ok(by) = by.to_std() {
            *self.monotonic.lock().unwrap_or_else(|p| p.into_inner()) += by;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    fn monotonic(&self) -> std::time::Duration {
        *self.monotonic.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sleep_until(&self, at: DateTime<Utc>) -> Sleep<'_> {
        let mut moved = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as the clock, which the borrow keeps alive.
            let _ = moved.wait_for(|now| *now >= at).await;
        })
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
    fn a_manual_clock_s_monotonic_reading_follows_time_passing_not_steps() {
        let start = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        clock.advance(Duration::seconds(5));
        clock.set(start + Duration::seconds(8));
        assert_eq!(clock.monotonic(), std::time::Duration::from_secs(8));
        // A step back of the wall clock, or forward, is not time passing.
        clock.set(start);
        clock.step_wall(Duration::seconds(60));
        assert_eq!(clock.monotonic(), std::time::Duration::from_secs(8));
        assert_eq!(clock.now(), start + Duration::seconds(60));
    }

    #[tokio::test]
    async fn a_manual_clock_s_timer_fires_when_the_clock_is_moved_past_it() {
        use std::task::Context;

        let start = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        let mut timer = clock.sleep_until(start + Duration::seconds(10));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::seconds(9));
        assert!(timer.as_mut().poll(&mut cx).is_pending(), "not there yet");
        clock.advance(Duration::seconds(1));
        assert!(timer.as_mut().poll(&mut cx).is_ready());
        // An instant already reached fires at once.
        assert!(clock.sleep_until(start).as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn a_wait_on_a_manual_clock_ends_when_the_clock_is_moved_past_it() {
        use std::task::Context;

        let start = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        let mut wait = Box::pin(wait_on(&clock, std::time::Duration::from_secs(3600)));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::seconds(3599));
        assert!(wait.as_mut().poll(&mut cx).is_pending(), "not there yet");
        clock.advance(Duration::seconds(1));
        assert!(wait.as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn a_wait_on_a_clock_that_stands_still_ends_in_wall_clock_time() {
        let clock = ManualClock::new(Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap());
        let waited = std::time::Instant::now();
        wait_on(&clock, std::time::Duration::from_millis(20)).await;
        assert!(waited.elapsed() >= std::time::Duration::from_millis(20));
    }

    #[test]
    fn system_clock_keeps_microseconds_only() {
        let now = SystemClock.now();
        assert_eq!(now.timestamp_subsec_nanos() % 1_000, 0);
    }
}
