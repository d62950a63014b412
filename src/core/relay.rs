//! The outbox relay: delivers the events written to the transactional outbox to a bus, at least
//! once, in order per schedule. The bus itself is a port ([`Sink`]); NATS JetStream, webhook
//! and log sinks live outside `core`.
//!
//! One round of the relay:
//!
//! 1. **Claim** up to a batch of pending events with a short lease ([`Store::outbox_claim`]). The
//!    claim holds at most one event per schedule (that schedule's oldest pending event), so the
//!    round may publish its events concurrently without breaking per-schedule order, and two
//!    relays never hold the same event.
//! 2. **Publish** each event and wait for the bus to acknowledge it, bounded by a timeout that
//!    is shorter than the lease.
//! 3. **Record**: acknowledged events are marked relayed; failed ones get one more attempt, the
//!    error, and a backoff before anyone claims them again. A refused event (the bus answered
//!    "no") is parked after `max_attempts`; an unreachable bus never parks anything.
//!
//! Ordering: an event is only claimable once every earlier event of its schedule is relayed or
//! parked, and an event is marked relayed only after the bus acknowledged it, so the bus sees a
//! schedule's events in `seq` order. A parked event no longer holds back later events of its
//! schedule: they proceed, and the parked one is surfaced (metrics, [`StoreStats`]) for an
//! operator. A re-send after a crash or an expired lease carries the same event id, which the
//! bus uses to drop duplicates.
//!
//! Timing ([`Relay::run`]): the loop wakes when a commit rings the outbox signal, backs off
//! after a failure, and polls at a safety interval (which also picks up leases of relays that
//! died). Relayed events are deleted after a retention period, in bounded batches.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde::Serialize;

mod envelope;

pub use envelope::{
    CLOUDEVENTS_VERSION, DATA_CONTENT_TYPE, EventEnvelope, STRUCTURED_CONTENT_TYPE, event_source,
    event_subject,
};

use crate::core::clock::Clock;
use crate::core::metrics::Metrics;
use crate::core::model::OutboxEvent;
use crate::core::store::{
    OutboxClaim, OutboxFailed, OutboxFailure, OutboxPurge, OutboxRelayed, OutboxRelease, Store,
    StoreError,
};

/// What the bus said when it accepted an event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The bus already had this event id and dropped the re-send.
    pub duplicate: bool,
}

/// Why a sink could not deliver an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// The bus could not be reached or did not answer in time. Nothing is wrong with the
    /// event: it is retried, and never parked for this.
    #[error("bus unavailable: {0}")]
    Unavailable(String),
    /// The bus answered and refused this event. Counts towards parking.
    #[error("bus refused the event: {0}")]
    Rejected(String),
}

impl SinkError {
    /// True when the failure counts towards parking the event.
    pub fn parkable(&self) -> bool {
        matches!(self, SinkError::Rejected(_))
    }
}

/// Where the relay delivers events.
#[async_trait]
pub trait Sink: Send + Sync + 'static {
    /// A short name for logs and output: `nats`, `webhook`, `log`.
    fn kind(&self) -> &'static str;

    /// Delivers one event; `Ok` only once the bus acknowledged it.
    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError>;
}

/// Tuning of the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayOptions {
    /// This relay's name as a lease holder; unique per relay instance.
    pub relay_id: String,
    /// Events claimed per round (at most 1000).
    pub batch_size: u32,
    /// Publishes in flight at once within a round.
    pub concurrency: usize,
    /// How long a claim is held. A relay that dies loses its claims after this long.
    pub lease: Duration,
    /// The bound on one publish, acknowledgement included. Kept below the lease.
    pub publish_timeout: Duration,
    /// Refused publishes after which an event is parked.
    pub max_attempts: i32,
    /// After a failure: no claim of the failed event, and no new round, before this long.
    pub failure_backoff: Duration,
    /// The safety poll: the loop wakes at least this often.
    pub poll_interval: Duration,
    /// Relayed events are deleted this long after they were relayed.
    pub retention: Duration,
    /// Relayed events deleted per purge statement.
    pub purge_batch: u32,
    /// Purge statements per retention pass, so one pass is bounded.
    pub purge_max_batches: u32,
    /// How often the loop runs a retention pass.
    pub purge_interval: Duration,
    /// Rounds per drain, so one drain ends even under a steady flood.
    pub max_rounds_per_drain: u32,
}

/// Failed publishes (the bus refused the event) after which it is parked.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 10;
/// How long relayed events are kept.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

impl Default for RelayOptions {
    fn default() -> Self {
        Self {
            relay_id: format!("relay-{}", uuid::Uuid::now_v7()),
            batch_size: 500,
            concurrency: 64,
            lease: Duration::from_secs(30),
            publish_timeout: Duration::from_secs(10),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            failure_backoff: Duration::from_secs(2),
            poll_interval: Duration::from_secs(5),
            retention: DEFAULT_RETENTION,
            purge_batch: 1000,
            purge_max_batches: 100,
            purge_interval: Duration::from_secs(60),
            max_rounds_per_drain: 100,
        }
    }
}

/// What a drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RelaySummary {
    /// Claim-publish-record rounds run.
    pub rounds: u64,
    /// Events claimed.
    pub claimed: u64,
    /// Events acknowledged by the bus and marked relayed.
    pub relayed: u64,
    /// Of those, re-sends the bus recognised and dropped.
    pub duplicates: u64,
    /// Failed publishes (each recorded as an attempt).
    pub failed: u64,
    /// Of those, events parked by this failure.
    pub parked: u64,
    /// Claimed events given back untried (the bus was unavailable, or the lease ran short).
    pub released: u64,
    /// Relayed events deleted by retention.
    pub purged: u64,
    /// The drain stopped early because the bus was unreachable.
    pub bus_unavailable: bool,
    /// The drain stopped at its round limit with work left.
    pub round_limit_reached: bool,
    /// The loop's drain stopped after a round that claimed less than a batch (see
    /// [`Relay::run`]): an event behind another of its schedule's may be claimable now.
    #[serde(skip)]
    pub partial: bool,
}

impl RelaySummary {
    fn add(&mut self, round: &RelaySummary) {
        self.rounds += round.rounds;
        self.claimed += round.claimed;
        self.relayed += round.relayed;
        self.duplicates += round.duplicates;
        self.failed += round.failed;
        self.parked += round.parked;
        self.released += round.released;
        self.purged += round.purged;
        self.bus_unavailable |= round.bus_unavailable;
    }
}

/// A relay error: only the store can fail a round as a whole (a failed publish is an outcome).
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The relay, shared by the loop, `relay --once` and tests.
pub struct Relay {
    store: Arc<dyn Store>,
    sink: Arc<dyn Sink>,
    clock: Arc<dyn Clock>,
    options: RelayOptions,
    metrics: Arc<Metrics>,
}

impl Relay {
    pub fn new(
        store: Arc<dyn Store>,
        sink: Arc<dyn Sink>,
        clock: Arc<dyn Clock>,
        options: RelayOptions,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            sink,
            clock,
            options,
            metrics,
        }
    }

    pub fn options(&self) -> &RelayOptions {
        &self.options
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Relays everything deliverable now: rounds until nothing is claimable, the bus is
    /// unreachable, or the round limit; then one retention pass. Events in their failure
    /// backoff, or leased to another relay, are left for later.
    pub async fn drain_once(&self) -> Result<RelaySummary, RelayError> {
        let mut summary = self.drain(Until::Empty).await?;
        summary.purged = self.purge().await?;
        if summary.parked > 0 {
            self.refresh_parked().await;
        }
        Ok(summary)
    }

    async fn drain(&self, until: Until) -> Result<RelaySummary, RelayError> {
        let mut summary = RelaySummary::default();
        for _ in 0..self.options.max_rounds_per_drain.max(1) {
            let round = self.round().await?;
            summary.add(&round);
            if round.claimed == 0 || round.bus_unavailable {
                return Ok(summary);
            }
            if until == Until::FullRounds && round.claimed < u64::from(self.claim_limit()) {
                summary.partial = true;
                return Ok(summary);
            }
        }
        summary.round_limit_reached = true;
        Ok(summary)
    }

    /// The most events a round claims.
    fn claim_limit(&self) -> u32 {
        self.options.batch_size.clamp(1, 1000)
    }

    /// One claim-publish-record round.
    ///
    /// A publish starts only while it can finish (or time out) before the claim's lease ends,
    /// so no other relay can take an event over while this one is publishing it. Once the bus
    /// proves unreachable no further publish starts; the events not tried are released.
    async fn round(&self) -> Result<RelaySummary, RelayError> {
        let now = self.clock.now();
        let lease_until = now + chrono_duration(self.options.lease);
        let last_start = lease_until - chrono_duration(self.options.publish_timeout);
        let claimed = self
            .store
            .outbox_claim(&OutboxClaim {
                relay_id: self.options.relay_id.clone(),
                now,
                lease_until,
                limit: self.claim_limit(),
            })
            .await?;
        let mut round = RelaySummary {
            rounds: 1,
            claimed: claimed.len() as u64,
            ..RelaySummary::default()
        };
        if claimed.is_empty() {
            return Ok(round);
        }

        // At most one event per schedule is claimed, so completion order does not matter.
        let mut results = Vec::with_capacity(claimed.len());
        let mut waiting = claimed.iter().peekable();
        let mut in_flight = FuturesUnordered::new();
        let mut stop = false;
        loop {
            while !stop && in_flight.len() < self.options.concurrency.max(1) {
                if waiting.peek().is_none() {
                    break;
                }
                if self.clock.now() > last_start {
                    stop = true;
                    break;
                }
                if let Some(event) = waiting.next() {
                    in_flight.push(self.publish(event));
                }
            }
            match in_flight.next().await {
                Some((event, result)) => {
                    stop |= matches!(result, Err(SinkError::Unavailable(_)));
                    results.push((event, result));
                }
                None => break,
            }
        }
        let unstarted: Vec<i64> = waiting.map(|event| event.seq).collect();

        let mut acked = Vec::new();
        let mut failures = Vec::new();
        let mut unavailable: Option<String> = None;
        for (event, result) in results {
            match result {
                Ok(delivery) => {
                    if delivery.duplicate {
                        round.duplicates += 1;
                        tracing::debug!(event_id = %event.id, "bus dropped a re-sent event");
                    }
                    acked.push(event.seq);
                }
                Err(err) => {
                    if err.parkable() {
                        tracing::warn!(
                            event_id = %event.id,
                            event_type = %event.event_type,
                            attempt = event.attempts + 1,
                            sink = self.sink.kind(),
                            error = %err,
                            "the bus refused an outbox event; will retry"
                        );
                    } else if unavailable.is_none() {
                        unavailable = Some(err.to_string());
                    }
                    failures.push(OutboxFailure {
                        seq: event.seq,
                        error: err.to_string(),
                        parkable: err.parkable(),
                    });
                }
            }
        }
        self.note_bus_reachability(unavailable.is_some(), !acked.is_empty());
        if let Some(error) = &unavailable {
            round.bus_unavailable = true;
            tracing::warn!(
                sink = self.sink.kind(),
                error = %error,
                pending = claimed.len() - acked.len(),
                "the bus is unavailable; outbox events stay queued"
            );
        }

        let now = self.clock.now();
        if !acked.is_empty() {
            let marked = self
                .store
                .outbox_mark_relayed(&OutboxRelayed { seqs: acked, now })
                .await?;
            round.relayed = marked;
            self.metrics
                .events_relayed
                .fetch_add(marked, Ordering::Relaxed);
        }
        if !failures.is_empty() {
            round.failed = failures.len() as u64;
            self.metrics
                .relay_failures
                .fetch_add(round.failed, Ordering::Relaxed);
            let recorded = self
                .store
                .outbox_mark_failed(&OutboxFailed {
                    relay_id: self.options.relay_id.clone(),
                    failures,
                    now,
                    retry_at: now + chrono_duration(self.options.failure_backoff),
                    max_attempts: self.options.max_attempts.max(1),
                })
                .await?;
            for parked in recorded.iter().filter(|r| r.parked) {
                round.parked += 1;
                let event = claimed.iter().find(|e| e.seq == parked.seq);
                tracing::error!(
                    event_id = ?event.map(|e| e.id),
                    event_type = ?event.map(|e| e.event_type.as_str()),
                    attempts = parked.attempts,
                    "outbox event parked after repeated refusals; an operator must look at it"
                );
            }
        }
        if !unstarted.is_empty() {
            round.released = self
                .store
                .outbox_release(&OutboxRelease {
                    relay_id: self.options.relay_id.clone(),
                    seqs: unstarted,
                })
                .await?;
        }
        Ok(round)
    }

    /// Publishes one event, bounded by the publish timeout.
    async fn publish<'e>(
        &self,
        event: &'e OutboxEvent,
    ) -> (&'e OutboxEvent, Result<Delivery, SinkError>) {
        let result = match tokio::time::timeout(
            self.options.publish_timeout,
            self.sink.publish(event),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(SinkError::Unavailable(format!(
                "no acknowledgement within {:?}",
                self.options.publish_timeout
            ))),
        };
        (event, result)
    }

    /// Remembers since when the bus is unreachable (for health): set on the first round that
    /// finds it so, cleared by any acknowledged publish.
    fn note_bus_reachability(&self, unavailable: bool, acknowledged: bool) {
        let since = &self.metrics.bus_unreachable_since_unix;
        if acknowledged {
            since.store(0, std::sync::atomic::Ordering::Relaxed);
        } else if unavailable {
            let now = self.clock.now().timestamp().max(1);
            let _ = since.compare_exchange(
                0,
                now,
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }

    /// Deletes relayed events older than the retention, in bounded batches.
    async fn purge(&self) -> Result<u64, RelayError> {
        let relayed_before = self.clock.now() - chrono_duration(self.options.retention);
        let limit = self.options.purge_batch.max(1);
        let mut purged = 0;
        for _ in 0..self.options.purge_max_batches.max(1) {
            let deleted = self
                .store
                .outbox_purge(&OutboxPurge {
                    relayed_before,
                    limit,
                })
                .await?;
            purged += deleted;
            if deleted < u64::from(limit) {
                break;
            }
        }
        Ok(purged)
    }

    /// Sets the parked-events gauge from the store (parked events are shared by all relays).
    async fn refresh_parked(&self) {
        match self.store.outbox_parked_count().await {
            Ok(parked) => self.metrics.events_parked.store(parked, Ordering::Relaxed),
            Err(err) => tracing::warn!(error = %err, "cannot count parked outbox events"),
        }
    }

    /// Relays until `shutdown` resolves: a drain whenever a commit rings the outbox signal (at most
    /// every [`RELAY_STEP`]), at least every `poll_interval`, and not before `failure_backoff`
    /// after a failure (a commit does not cut that short). A drain goes on while its rounds
    /// claim full batches; after one that claimed less, the next drain begins a step after it
    /// (with what committed meanwhile), not at once with a claim that finds only the events
    /// that were behind others of their schedules. A retention pass runs every
    /// `purge_interval`. An in-flight round finishes before the loop returns.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let signals = self.store.signals();
        self.refresh_parked().await;
        let mut next_purge = self.clock.now();
        loop {
            let started = tokio::time::Instant::now();
            let drained = self.drain(Until::FullRounds).await;
            if self.clock.now() >= next_purge {
                match self.purge().await {
                    Ok(purged) if purged > 0 => {
                        tracing::debug!(purged, "deleted relayed outbox events past retention");
                    }
                    Ok(_) => {}
                    Err(err) => tracing::warn!(error = %err, "outbox retention pass failed"),
                }
                self.refresh_parked().await;
                next_purge = self.clock.now() + chrono_duration(self.options.purge_interval);
            }
            let (wait, wake_on_signal) = match &drained {
                Ok(summary) => {
                    if summary.parked > 0 {
                        self.refresh_parked().await;
                    }
                    if summary.failed > 0 {
                        (self.options.failure_backoff, false)
                    } else if summary.round_limit_reached {
                        (Duration::ZERO, false)
                    } else if summary.partial {
                        (RELAY_STEP.saturating_sub(started.elapsed()), false)
                    } else {
                        (self.options.poll_interval, true)
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "outbox relay round failed; backing off");
                    (self.options.failure_backoff, false)
                }
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = signals.outbox.notified(), if wake_on_signal => {
                    // What commits meanwhile is relayed together, a step after the last round
                    // began: a steady stream of commits is not one round each.
                    tokio::select! {
                        biased;
                        () = &mut shutdown => return,
                        () = tokio::time::sleep_until(started + RELAY_STEP) => {}
                    }
                }
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Drains woken by commits, or following a round that claimed less than a batch, begin at
/// most this often: under a steady stream of commits (a jittered minute's records, a few
/// every second) a drain relays what a step brought in one round of two statements, at the
/// cost of at most this much delay on the way to the bus.
const RELAY_STEP: Duration = Duration::from_secs(1);

/// Where a drain stops, beside an empty claim, an unreachable bus and the round limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// Only there: everything deliverable now is relayed (`relay --once`).
    Empty,
    /// Also after a round that claimed less than a batch (the loop).
    FullRounds,
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests;
