//! What every part of the engine shares: its configuration, its dependencies ([`Parts`]), what
//! a tick did and how an attempt ended. The claim, the producer and the recorder build on
//! these; none of them reaches back into the `Engine` that runs them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::core::breaker::BreakerConfig;
use crate::core::clock::Clock;
use crate::core::dispatch::Dispatcher;
use crate::core::metrics::{Metrics, inc};
use crate::core::retry::RetryPolicy;
use crate::core::store::*;
use crate::core::trace::SpanSink;

use super::lease::ATTEMPT_LEASE;

/// The actor recorded for the engine's own changes.
pub const ENGINE_ACTOR: &str = "sentin8-cron:engine";

/// Tuning of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Due schedules fetched per claim round; rounds repeat while slots are free.
    pub batch_size: u32,
    /// Due retries fetched per drain round.
    pub drain_size: u32,
    /// Proxy-back calls in flight at once (the global slots).
    pub concurrency: usize,
    /// Calls in flight at once for one environment.
    pub env_concurrency: usize,
    /// Calls in flight at once to one target origin.
    pub origin_concurrency: usize,
    /// The per-origin circuit breaker.
    pub breaker: BreakerConfig,
    /// The bound on one proxy-back call; a timeout is a failed attempt.
    pub job_timeout: Duration,
    pub retry: RetryPolicy,
    /// How long a running attempt's lease lasts ([`ATTEMPT_LEASE`] by default); its instance
    /// renews it a few times per lease while it holds the attempt. An attempt whose lease ran
    /// out is taken over by any instance, so a dead instance's attempts are taken over this
    /// long after it last renewed them.
    pub lease: Duration,
    /// Orders schedules due at the same instant differently for each instance, so instances
    /// do not all contend for the same earliest batch.
    pub claim_seed: u32,
    /// How far ahead of their instant the continuous loop claims due schedules: the claim's
    /// database work is done before the instant, and the call leaves at it. Used up to half a
    /// lease; zero claims at the instant. `tick` always claims at the instant.
    pub claim_ahead: Duration,
    /// The safety poll: the loop wakes at least this often.
    pub tick_interval: Duration,
    /// Upper bound on claim rounds per tick, so one tick cannot run forever under a flood.
    pub max_batches_per_tick: u32,
    /// How many regular occurrences of one `buffer_all` schedule may wait behind its open job;
    /// a further one is skipped, on the record.
    pub max_buffered: u32,
}

/// The default of [`EngineConfig::max_buffered`].
pub const DEFAULT_MAX_BUFFERED: u32 = 100;

/// How long past the job timeout shutdown waits for a call's outcome to be recorded.
pub const RECORD_MARGIN: Duration = Duration::from_secs(5);

/// How long past its instant a fire claimed ahead (`scheduled`) stays claimed by its instance
/// without a hand-off. Its instance hands it off before the instant; when the instance stopped,
/// any instance releases the fire to run once this lapses, so it is called a few seconds late,
/// not a whole call lease late. An instance never releases a fire it holds itself.
pub const CLAIM_LEASE_PAST_INSTANT: Duration = Duration::from_secs(2);

impl Default for EngineConfig {
    fn default() -> Self {
        let job_timeout = Duration::from_secs(30);
        // `serve` and `tick` take these as their flags' defaults (a test in `cmd::args` holds
        // them equal).
        Self {
            batch_size: 500,
            drain_size: 500,
            concurrency: 256,
            env_concurrency: 64,
            origin_concurrency: 32,
            breaker: BreakerConfig::default(),
            job_timeout,
            retry: RetryPolicy::default(),
            lease: ATTEMPT_LEASE,
            claim_seed: rand_seed(),
            claim_ahead: Duration::from_secs(10),
            tick_interval: Duration::from_secs(60),
            max_batches_per_tick: 200,
            max_buffered: DEFAULT_MAX_BUFFERED,
        }
    }
}

/// A per-process seed (different instances order same-instant work differently).
fn rand_seed() -> u32 {
    let id = uuid::Uuid::new_v4();
    let bytes = id.as_bytes();
    u32::from_le_bytes([bytes[0], bytes[5], bytes[10], bytes[15]])
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TickSummary {
    /// Due schedules seen.
    pub due: u64,
    /// Jobs started from a due schedule.
    pub fired: u64,
    /// Retries (and triggered or republished jobs) started from the drain.
    pub retried_attempts: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Failed attempts that will be retried.
    pub retried: u64,
    pub dead_lettered: u64,
    pub skipped: u64,
    /// Fires that wait for their schedule's open job (overlap `buffer_one`, `buffer_all`).
    pub buffered: u64,
    /// Open jobs cancelled for a newer occurrence (overlap `cancel_other`).
    pub cancelled: u64,
    /// Due work another ticker took first.
    pub lost: u64,
    /// Per-schedule errors (logged; the batch went on).
    pub errors: u64,
}

impl TickSummary {
    /// Adds what a claim round counted.
    pub(super) fn merge(&mut self, other: &TickSummary) {
        self.due += other.due;
        self.fired += other.fired;
        self.retried_attempts += other.retried_attempts;
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.retried += other.retried;
        self.dead_lettered += other.dead_lettered;
        self.skipped += other.skipped;
        self.buffered += other.buffered;
        self.cancelled += other.cancelled;
        self.lost += other.lost;
        self.errors += other.errors;
    }

    pub(super) fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Attempted { result, .. } => match result {
                AttemptResult::Succeeded => self.succeeded += 1,
                AttemptResult::Retry => {
                    self.failed += 1;
                    self.retried += 1;
                }
                AttemptResult::DeadLettered | AttemptResult::Failed => {
                    self.failed += 1;
                    if *result == AttemptResult::DeadLettered {
                        self.dead_lettered += 1;
                    }
                }
                AttemptResult::Superseded => self.lost += 1,
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AttemptResult {
    Succeeded,
    Retry,
    DeadLettered,
    /// Failed without a retry or a DLQ entry (the schedule was deleted meanwhile).
    Failed,
    /// The attempt was recorded by someone else first (it went stale and was reclaimed).
    Superseded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    Attempted { result: AttemptResult },
}

/// An engine error: only the due-selection queries can fail a whole tick.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A task of the engine's, aborted when its handle is dropped: the engine's future owns its
/// tasks, so dropping it (a process dying, as the simulator models it) leaves none running.
pub(super) struct Task<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The engine's dependencies, cloned into each of its parts and tasks: the store, the way to
/// the owning services, the clock, the configuration and the metrics.
#[derive(Clone)]
pub(super) struct Parts {
    pub store: Arc<dyn Store>,
    pub dispatcher: Arc<dyn Dispatcher>,
    pub clock: Arc<dyn Clock>,
    pub config: EngineConfig,
    pub metrics: Arc<Metrics>,
    /// Where the attempts' spans go (none by default).
    pub spans: Arc<dyn SpanSink>,
}

impl Parts {
    /// Metrics of one round of claims.
    pub fn observe_round(&self, started: Instant, failed: Option<&StoreError>) {
        self.metrics.tick_duration.observe(started.elapsed());
        match failed {
            None => {
                inc(&self.metrics.ticks);
                self.metrics
                    .last_tick_unix
                    .store(self.clock.now().timestamp(), Ordering::Relaxed);
            }
            Some(err) => {
                inc(&self.metrics.tick_errors);
                tracing::error!(error = %err, "tick failed");
            }
        }
    }
}

pub(super) fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}
