//! What health and metrics report about the store, kept in memory: the store-wide counts are
//! computed in the background (see [`StatsSnapshot::run`]) and a reachability probe is cached
//! for a second, so unauthenticated requests never run a cross-tenant query each and a flood of
//! them cannot slow the API down.

use std::sync::RwLock;
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

/// The last counts and the last probe, shared by the refresher and the handlers.
#[derive(Debug)]
pub struct StatsSnapshot {
    refresh_every: Duration,
    counts: RwLock<Option<Counts>>,
    probe: tokio::sync::Mutex<Option<Probe>>,
}

/// Store-wide counts as of an instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    pub stats: StoreStats,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy)]
struct Probe {
    reachable: bool,
    at: DateTime<Utc>,
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
            probe: tokio::sync::Mutex::new(None),
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

    /// Whether the store answers a cheap query within [`PROBE_TIMEOUT`]; an answer is reused
    /// for [`PROBE_TTL`], and concurrent callers share one probe.
    pub async fn reachable(&self, store: &dyn Store, clock: &dyn Clock) -> bool {
        let mut probe = self.probe.lock().await;
        let now = clock.now();
        let ttl = chrono::Duration::from_std(PROBE_TTL).unwrap_or_default();
        if let Some(last) = *probe
            && now >= last.at
            && now - last.at < ttl
        {
            return last.reachable;
        }
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
        *probe = Some(Probe {
            reachable,
            at: clock.now(),
        });
        reachable
    }
}
