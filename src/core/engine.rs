//! The execution engine: finds what is due, fires each occurrence at most once, records what
//! happened (including the occurrences it could not fire) and schedules retries. `serve` runs
//! it continuously ([`Engine::run`]); `tick --once` runs one complete tick ([`Engine::tick`]).
//!
//! One task, the producer (`producer.rs`), owns the state of every claimed attempt and the
//! slots; everything else answers it through channels:
//!
//! 1. **Claim** (`round.rs`, `claim.rs`): due schedules are selected round-robin across
//!    environments and claimed per environment under their schedule locks, in one tenant
//!    transaction on the locks' connection, within a budget of free slots (a global limit, and
//!    caps per environment and per target origin). The claim-conditional UPDATE advances each
//!    `next_run_at` to the next fire strictly after now, and a job is opened for each:
//!    `running` with a lease, or `scheduled` with a short claim lease for a fire claimed
//!    ahead. Every other due occurrence is recorded as a skipped job with its reason, the
//!    `job:skipped` event and the metric: a fire overlapping an open job, and after an
//!    outage the occurrences missed before the latest one, which fires (one record per run,
//!    with the first, the last and the count). The unique open-job index is the backstop:
//!    whatever races, a schedule has at most one open job. The continuous loop claims ahead
//!    of the instant, far enough for the coming burst (`wake.rs`; several instances share what
//!    falls due, `share.rs`): fires are held (`held.rs`), handed off (`scheduled` to `running`)
//!    before their instant and called at it.
//! 2. **Call** the owning service, each call on its own task, bounded by the job timeout
//!    alone. While a target origin's circuit is open (`core::breaker`), its calls fail fast
//!    onto the retry path, recorded as `circuit open`.
//! 3. **Record** (`recorder.rs`, `outcome.rs`) the outcomes as they complete, in tenant
//!    transactions per environment with their outbox events: success; a retry after backoff;
//!    or, when retries are exhausted, a dead-letter entry. An attempt recorded elsewhere first
//!    (its lease ran out and it was recovered) is left alone.
//!
//! The retry drain claims pending jobs whose backoff has elapsed into the same rounds. A
//! running attempt's lease is renewed by its instance while the call is in flight or waits to
//! be recorded; an attempt whose lease ran out (its instance died) is recorded as a failed
//! attempt whose retry is due at once, so the retry rules apply to it too.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::core::breaker::Breakers;
use crate::core::clock::Clock;
use crate::core::dispatch::Dispatcher;
use crate::core::metrics::Metrics;
use crate::core::model::*;
use crate::core::policies::Overlap;
use crate::core::store::*;
use crate::core::trace::{NoSpans, SpanSink};

mod after_completion;
mod burst;
mod claim;
mod fire;
mod held;
mod lease;
mod outcome;
mod overlap;
mod parts;
mod plan;
mod producer;
mod recorder;
mod round;
mod share;
mod slots;
mod traced;
mod wake;

pub use lease::{ATTEMPT_LEASE, CALL_MARGIN};
pub use outcome::run_request;
pub use parts::{
    CLAIM_LEASE_PAST_INSTANT, DEFAULT_MAX_BUFFERED, ENGINE_ACTOR, EngineConfig, EngineError,
    RECORD_MARGIN, TickSummary,
};
use parts::{Parts, Task};
pub use plan::MISSED_COUNT_CAP;
pub use share::{BEAT_EVERY, STALE_AFTER};

impl EngineConfig {
    /// How far ahead the continuous loop claims: `claim_ahead`, at most a minute. A fire
    /// claimed ahead holds a claim lease of its own, from its instant
    /// ([`CLAIM_LEASE_PAST_INSTANT`]), so the lead does not depend on the attempt lease.
    pub fn lead(&self) -> Duration {
        self.claim_ahead.min(wake::LEAD_MAX)
    }
}

/// One due schedule as `tick --dry-run` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlannedFire {
    pub schedule_id: ScheduleId,
    pub env_id: EnvId,
    pub domain: String,
    pub schedule_type: String,
    pub due_at: DateTime<Utc>,
    /// A regular fire is skipped while the schedule has an open job (and, under
    /// `buffer_one`, one occurrence already waits).
    pub would_skip: bool,
    /// What the tick would do with it, by the schedule's exclusions and overlap policy.
    pub action: PlannedAction,
    /// What excludes the occurrence, when it is excluded (`holidays: 2030-12-25 (Christmas)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded_by: Option<String>,
}

/// What a tick would do with a due schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlannedAction {
    /// Call it.
    Fire,
    /// Record the occurrence as skipped: an open job overlaps it.
    Skip,
    /// Keep the occurrence as the one `buffered` job until the open job ends (`buffer_one`).
    Buffer,
    /// Call it beside the open job (`allow_all`).
    Concurrent,
    /// Cancel the open job (its call aborted) and call this one instead (`cancel_other`).
    Replace,
    /// Record the occurrence as skipped: the schedule's exclusions cover it.
    Excluded,
}

impl PlannedAction {
    /// The rule of the claim's overlap decision, for a due schedule with `overlap`, given
    /// whether it has an open job and how many of its regular occurrences already wait
    /// (`buffered`), of the `max_buffered` a `buffer_all` schedule may have waiting.
    pub fn of(overlap: Overlap, open: bool, waiting: u32, max_buffered: u32) -> Self {
        match (overlap, open) {
            (_, false) => PlannedAction::Fire,
            (Overlap::AllowAll, true) => PlannedAction::Concurrent,
            (Overlap::CancelOther, true) => PlannedAction::Replace,
            (Overlap::BufferOne, true) if waiting == 0 => PlannedAction::Buffer,
            (Overlap::BufferAll, true) if waiting < max_buffered => PlannedAction::Buffer,
            (Overlap::Skip | Overlap::BufferOne | Overlap::BufferAll, true) => PlannedAction::Skip,
        }
    }

    /// Whether the occurrence runs, now or after waiting (it is not skipped).
    pub fn runs(self) -> bool {
        !matches!(self, PlannedAction::Skip | PlannedAction::Excluded)
    }

    /// How `tick --dry-run` names it.
    pub fn shown(self) -> &'static str {
        match self {
            PlannedAction::Fire => "fire",
            PlannedAction::Skip => "skip (job open)",
            PlannedAction::Buffer => "buffer (job open)",
            PlannedAction::Concurrent => "fire beside the open job",
            PlannedAction::Replace => "cancel the open job and fire",
            PlannedAction::Excluded => "skip (excluded)",
        }
    }
}

/// The engine, shared by the loop, `tick --once` and tests. Cheap to clone: the tasks of its
/// database work each hold a clone.
#[derive(Clone)]
pub struct Engine {
    parts: Parts,
    /// The breakers between producers (a producer owns them while it runs), kept across
    /// ticks: an origin's failures count whichever tick saw them.
    breakers: Arc<Mutex<Option<Breakers>>>,
    /// This instance among the instances sharing the store (see `share.rs`).
    instance: uuid::Uuid,
    /// Its place among them as its last heartbeat found it: (index, number of instances).
    share: Arc<tokio::sync::watch::Sender<(u32, u32)>>,
    /// What the running producer says of itself ([`Engine::settled`]).
    probe: Arc<producer::Probe>,
}

impl Engine {
    pub fn new(
        store: Arc<dyn Store>,
        dispatcher: Arc<dyn Dispatcher>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            breakers: Arc::new(Mutex::new(Some(Breakers::new(config.breaker)))),
            instance: uuid::Uuid::new_v4(),
            share: Arc::new(tokio::sync::watch::channel((0, 1)).0),
            probe: Arc::default(),
            parts: Parts {
                store,
                dispatcher,
                clock,
                config,
                metrics,
                spans: Arc::new(NoSpans),
            },
        }
    }

    /// The engine with its attempts' spans sent to `spans` (see [`crate::core::trace`]).
    pub fn with_spans(mut self, spans: Arc<dyn SpanSink>) -> Self {
        self.parts.spans = spans;
        self
    }

    pub fn config(&self) -> &EngineConfig {
        &self.parts.config
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.parts.metrics
    }

    /// Runs one tick: due schedules in batches, then the retry drain. A failure of one
    /// schedule is logged and counted; only a failing due-selection query fails the tick.
    /// Returns when every attempt it started is recorded.
    pub async fn tick(&self) -> Result<TickSummary, EngineError> {
        let (summary, error) = self
            .dispatch(producer::Mode::Tick, std::future::pending())
            .await;
        match error {
            Some(err) => Err(err),
            None => Ok(summary),
        }
    }

    /// Runs the producer in `mode` beside its recorder until the producer is done, then the
    /// recorder once it has recorded everything.
    async fn dispatch(
        &self,
        mode: producer::Mode,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> (TickSummary, Option<EngineError>) {
        let share = self.share.clone();
        let share_rx = share.subscribe();
        let (to_recorder, done) = tokio::sync::mpsc::unbounded_channel();
        let (recorded_tx, recorded) = tokio::sync::mpsc::unbounded_channel();
        let (pressing, pressing_rx) = tokio::sync::watch::channel(0);
        let recorder = recorder::Recorder {
            parts: &self.parts,
            done,
            recorded: recorded_tx,
            pressing: pressing_rx,
            gathers: matches!(mode, producer::Mode::Serve { .. }),
        };
        let producer = producer::Producer::new(
            self.parts.clone(),
            self.probe.clone(),
            self.take_breakers(),
            mode,
            producer::Links {
                to_recorder,
                recorded,
                pressing,
                share: share_rx,
            },
        );
        if !matches!(mode, producer::Mode::Serve { .. }) {
            let ((summary, error, breakers), ()) =
                tokio::join!(producer.run(shutdown), recorder.run());
            self.give_back_breakers(breakers);
            return (summary, error);
        }
        // The first round already claims this instance's share only.
        let Parts { store, clock, .. } = &self.parts;
        share::beat(&**store, &**clock, self.instance, &share).await;
        let (stop_beats, beats_stopped) = tokio::sync::watch::channel(false);
        let mut beating = Task(tokio::spawn(share::keep_share(
            store.clone(),
            clock.clone(),
            self.instance,
            share,
            beats_stopped,
        )));
        let producing = async {
            let result = producer.run(shutdown).await;
            // No more claims: the others take this instance's share.
            let _ = stop_beats.send(true);
            result
        };
        let ((summary, error, breakers), ()) = tokio::join!(producing, recorder.run());
        self.give_back_breakers(breakers);
        if let Err(err) = (&mut beating.0).await {
            tracing::error!(error = %err, "the heartbeat stopped");
        }
        (summary, error)
    }

    /// Runs the engine continuously until `shutdown` resolves. Claiming stops at once; fires
    /// already claimed ahead are still called at their instants, calls in flight finish (each
    /// bounded by the job timeout), and every outcome is recorded before this returns.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        let lead = self.parts.config.lead();
        let _ = self
            .dispatch(producer::Mode::Serve { lead }, shutdown)
            .await;
    }

    /// How many instances share the store, as this one's last heartbeat found them (1 until
    /// it has beaten, and when it runs alone).
    pub fn instances_sharing(&self) -> u32 {
        self.share.borrow().1
    }

    /// Resolves once the running engine ([`Engine::run`]) has nothing to do at its clock's
    /// instant: no database work, call or record in progress, and nothing due. For tests that
    /// move the clock and then look at what the engine did, without waiting on the wall clock.
    pub async fn settled(&self) {
        self.probe.quiet(producer::Quiet::Settled).await;
    }

    /// Like [`Engine::settled`], but resolves while calls are still in flight: the engine
    /// (in [`Engine::run`] or [`Engine::tick`]) has nothing to do but wait for them. For tests
    /// that show what the engine does not start beside a call.
    pub async fn settled_beside_calls(&self) {
        self.probe.quiet(producer::Quiet::CallsOut).await;
    }

    /// The circuit breakers for a producer to own while it runs (a fresh set when another
    /// producer holds them).
    fn take_breakers(&self) -> Breakers {
        let mut kept = self.breakers.lock().unwrap_or_else(|p| p.into_inner());
        kept.take()
            .unwrap_or_else(|| Breakers::new(self.parts.config.breaker))
    }

    /// Keeps a producer's breakers for the next one (the next `tick`).
    fn give_back_breakers(&self, breakers: Breakers) {
        *self.breakers.lock().unwrap_or_else(|p| p.into_inner()) = Some(breakers);
    }

    /// What a tick would fire now, without firing anything.
    pub async fn plan(&self) -> Result<Vec<PlannedFire>, EngineError> {
        let Parts {
            store,
            clock,
            config,
            ..
        } = &self.parts;
        let now = clock.now();
        let due = store
            .schedules_due(now, config.batch_size, config.claim_seed, None)
            .await?;
        let mut planned = Vec::with_capacity(due.len());
        for d in due {
            let mut tx = store.tenant_begin(d.env_id).await?;
            let Some(schedule) = tx.schedule_get(d.id).await? else {
                continue;
            };
            let open = tx.job_get_open(d.id).await?.is_some();
            // Only an open job makes the occurrences waiting behind it matter.
            let waiting = if open {
                tx.buffered_occurrence_counts(&[d.id])
                    .await?
                    .first()
                    .map_or(0, |(_, count)| *count)
            } else {
                0
            };
            let names: Vec<String> = schedule
                .exclude
                .calendar_names()
                .map(str::to_owned)
                .collect();
            let calendars = tx
                .calendars_named(&names, false)
                .await?
                .into_iter()
                .map(|c| (c.name.clone(), c))
                .collect();
            let occurrence = schedule.occurrences().occurrence_of(d.next_run_at);
            let excluded_by = schedule.exclusion_of(occurrence, &calendars);
            let action = match &excluded_by {
                Some(_) => PlannedAction::Excluded,
                None => PlannedAction::of(
                    schedule.policies.overlap,
                    open,
                    waiting,
                    config.max_buffered,
                ),
            };
            planned.push(PlannedFire {
                schedule_id: d.id,
                env_id: d.env_id,
                domain: schedule.domain,
                schedule_type: schedule.schedule_type,
                due_at: d.next_run_at,
                would_skip: !action.runs(),
                action,
                excluded_by: excluded_by.map(|e| e.to_string()),
            });
        }
        Ok(planned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dry_run_names_what_each_overlap_policy_does_with_an_open_job() {
        use PlannedAction::*;
        for overlap in Overlap::ALL {
            assert_eq!(PlannedAction::of(*overlap, false, 3, 3), Fire);
        }
        assert_eq!(PlannedAction::of(Overlap::Skip, true, 0, 3), Skip);
        assert_eq!(PlannedAction::of(Overlap::BufferOne, true, 0, 3), Buffer);
        assert_eq!(PlannedAction::of(Overlap::BufferOne, true, 1, 3), Skip);
        assert_eq!(PlannedAction::of(Overlap::AllowAll, true, 1, 3), Concurrent);
        // `buffer_all` keeps every occurrence up to the bound, then skips.
        assert_eq!(PlannedAction::of(Overlap::BufferAll, true, 0, 3), Buffer);
        assert_eq!(PlannedAction::of(Overlap::BufferAll, true, 2, 3), Buffer);
        assert_eq!(PlannedAction::of(Overlap::BufferAll, true, 3, 3), Skip);
        // `cancel_other` always runs the new one.
        assert_eq!(PlannedAction::of(Overlap::CancelOther, true, 5, 3), Replace);
        assert!(!Skip.runs() && Buffer.runs() && Replace.runs() && Concurrent.runs());
    }
}
