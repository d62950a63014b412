//! What health and metrics report about the store, kept in memory: the store-wide counts are
//! computed in the background (see [`StatsSnapshot::run`]), and so is a reachability probe
//! every second ([`StatsSnapshot::probe_every_second`]), so health answers from memory at any
//! probe rate: unauthenticated requests never run a query each, and a flood of them cannot
//! slow the API down or make the probe itself time out.

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::core::clock::Clock;
use crate::core::store::{Store, StoreStats};

/// How long a reachability probe's answer is reused.
pub const PROBE_TTL: Duration = Duration::from_secs(1);

/// How long a probe waits for the store. Shorter than any pool or connect timeout, so a
/// database that accepts connections but does not answer (or a full pool) makes health say so
/// within a second instead of leaving load-balancer probes to time out.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(800);

/// How old a background probe's answer may be and still be the answer (a probe a second, each
/// of at most [`PROBE_TIMEOUT`], with room for one late); and, with the background probe, how
/// long the store may go without answering one before health says it does not answer: one
/// slow probe (a busy embedded database) does not turn health red, an outage does within
/// this.
pub const PROBE_FRESH: Duration = Duration::from_secs(3);

/// The last counts and the last probe, shared by the refresher and the handlers.
#[derive(Debug)]
pub struct StatsSnapshot {
    refresh_every: Duration,
    counts: RwLock<Option<Counts>>,
    /// The last probe's answer, read without waiting.
    probe: RwLock<Option<Probe>>,
    /// Held while a probe runs: concurrent callers share one.
    probing: tokio::sync::Mutex<()>,
    /// Whether [`StatsSnapshot::probe_every_second`] runs (its answers are then the answer).
    probed_in_background: AtomicBool,
}

/// Store-wide counts as of an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    pub stats: StoreStats,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy)]
struct Probe {
    at: DateTime<Utc>,
    /// The last probe the store answered, this one (`at`) or an earlier one.
    answered_at: Option<DateTime<Utc>>,
}

impl Default for StatsSnapshot {
    /// Counts refreshed every 15 seconds.
    fn default() -> Self {
        Self::new(Duration::from_secs(15))
    }
}

impl StatsSnapshot {
    /// A snapshot whose counts [`run`](Self::run) refreshes every `refresh_every`.
    pub fn new(refresh_every: Duration) -> Self {
        Self {
            refresh_every,
            counts: RwLock::new(None),
            probe: RwLock::new(None),
            probing: tokio::sync::Mutex::new(()),
            probed_in_background: AtomicBool::new(false),
        }
    }

    /// The last counts, if any were computed.
    pub fn counts(&self) -> Option<Counts> {
        self.counts.read().map(|c| c.clone()).unwrap_or_default()
    }

    /// Computes the counts now (one cross-tenant query) and keeps them; on failure the
    /// previous counts stay.
    pub async fn refresh(&self, store: &dyn Store, clock: &dyn Clock) {
        match store.stats_get().await {
            Ok(stats) => {
                let counts = Counts {
                    stats,
                    at: clock.now(),
                };
                if let Ok(mut slot) = self.counts.write() {
                    *slot = Some(counts);
                }
            }
            Err(err) => tracing::warn!(error = %err, "cannot count the store's rows"),
        }
    }

    /// Refreshes the counts every `refresh_every` until `shutdown` resolves (the first refresh
    /// one period from now: the caller computes the initial counts).
    pub async fn run(
        &self,
        store: &dyn Store,
        clock: &dyn Clock,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(self.refresh_every) => self.refresh(store, clock).await,
            }
        }
    }

    /// Probes the store every [`PROBE_TTL`] until `shutdown` resolves, so that
    /// [`StatsSnapshot::reachable`] answers from memory whatever the rate of requests.
    pub async fn probe_every_second(
        &self,
        store: &dyn Store,
        clock: &dyn Clock,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        self.probed_in_background.store(true, Ordering::SeqCst);
        tokio::pin!(shutdown);
        loop {
            self.probe_now(store, clock).await;
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(PROBE_TTL) => {}
            }
        }
        self.probed_in_background.store(false, Ordering::SeqCst);
    }

    /// Whether the store answers a cheap query within [`PROBE_TIMEOUT`]. With the background
    /// probe running: whether it answered one in the last [`PROBE_FRESH`], read from memory.
    /// Otherwise, or if the background probe fell behind, a probe now, whose answer is reused
    /// for [`PROBE_TTL`] (concurrent callers share one).
    pub async fn reachable(&self, store: &dyn Store, clock: &dyn Clock) -> bool {
        if self.probed_in_background.load(Ordering::SeqCst)
            && let Some(reachable) = self.last_probe(clock, PROBE_FRESH, PROBE_FRESH)
        {
            return reachable;
        }
        if let Some(reachable) = self.last_probe(clock, PROBE_TTL, Duration::ZERO) {
            return reachable;
        }
        let _probing = self.probing.lock().await;
        // Another caller may have probed while this one waited.
        if let Some(reachable) = self.last_probe(clock, PROBE_TTL, Duration::ZERO) {
            return reachable;
        }
        self.probe_locked(store, clock).await
    }

    /// The verdict of the last probe, if it is younger than `fresh_for` (see [`verdict`]).
    fn last_probe(&self, clock: &dyn Clock, fresh_for: Duration, grace: Duration) -> Option<bool> {
        let last = (*self.probe.read().ok()?)?;
        verdict(&last, clock.now(), fresh_for, grace)
    }

    async fn probe_now(&self, store: &dyn Store, clock: &dyn Clock) -> bool {
        let _probing = self.probing.lock().await;
        self.probe_locked(store, clock).await
    }

    /// Runs one probe (the caller holds `probing`) and keeps its answer.
    async fn probe_locked(&self, store: &dyn Store, clock: &dyn Clock) -> bool {
        let reachable = match tokio::time::timeout(PROBE_TIMEOUT, store.schema_status()).await {
            Ok(Ok(_)) => true,
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "health: the store did not answer");
                false
            }
            Err(_) => {
                tracing::warn!(
                    timeout_ms = PROBE_TIMEOUT.as_millis() as u64,
                    "health: the store did not answer in time"
                );
                false
            }
        };
        if let Ok(mut slot) = self.probe.write() {
            let now = clock.now();
            let answered_at = if reachable {
                Some(now)
            } else {
                slot.and_then(|last| last.answered_at)
            };
            *slot = Some(Probe {
                at: now,
                answered_at,
            });
        }
        reachable
    }
}

/// What the last probe says at `now`: nothing if it is `fresh_for` old or older (or from a
/// clock that stepped back); that the store answers if it did at this probe or at one less
/// than `grace` before now; otherwise that it does not.
fn verdict(last: &Probe, now: DateTime<Utc>, fresh_for: Duration, grace: Duration) -> Option<bool> {
    let age = (now - last.at).to_std().ok()?;
    if age >= fresh_for {
        return None;
    }
    // This probe was answered (`at == last.at`), or one less than `grace` before now.
    let answered = last
        .answered_at
        .is_some_and(|at| at == last.at || (now - at).to_std().is_ok_and(|since| since < grace));
    Some(answered)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::milliseconds(ms)
    }

    #[test]
    fn one_slow_probe_does_not_turn_health_red_an_outage_does() {
        let answered = Probe {
            at: at(0),
            answered_at: Some(at(0)),
        };
        assert_eq!(
            verdict(&answered, at(500), PROBE_FRESH, PROBE_FRESH),
            Some(true)
        );
        // Too old to say anything: the caller probes itself.
        assert_eq!(verdict(&answered, at(3000), PROBE_FRESH, PROBE_FRESH), None);
        // A probe that timed out a second after one that was answered: still reachable...
        let slow = Probe {
            at: at(1800),
            answered_at: Some(at(0)),
        };
        assert_eq!(
            verdict(&slow, at(1900), PROBE_FRESH, PROBE_FRESH),
            Some(true)
        );
        // ...until nothing was answered for the grace period.
        let down = Probe {
            at: at(3100),
            answered_at: Some(at(0)),
        };
        assert_eq!(
            verdict(&down, at(3200), PROBE_FRESH, PROBE_FRESH),
            Some(false)
        );
        // Without a grace (a probe on demand), a failed probe is the answer.
        assert_eq!(
            verdict(&slow, at(1900), PROBE_TTL, Duration::ZERO),
            Some(false)
        );
        // Never answered at all.
        let never = Probe {
            at: at(0),
            answered_at: None,
        };
        assert_eq!(
            verdict(&never, at(10), PROBE_FRESH, PROBE_FRESH),
            Some(false)
        );
        // A clock that stepped back says nothing.
        assert_eq!(verdict(&answered, at(-10), PROBE_FRESH, PROBE_FRESH), None);
    }
}
