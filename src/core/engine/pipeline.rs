//! The dispatch pipeline: claiming, calling and recording run side by side.
//!
//! Claiming keeps going while calls are in flight, bounded by slots: one global limit
//! (`concurrency`) and caps per environment and per target origin, so a slow or hanging
//! target holds its own slots, never the next claim. Each call runs on its own task, so its
//! timeout measures the call alone, never the engine's database work. Finished attempts go
//! through a channel to the recorder, which writes whatever is ready in one tenant
//! transaction per environment. Running attempts hold a lease the pipeline renews while they
//! are in flight or waiting to be recorded.
//!
//! The continuous loop claims ahead of the instant (`ahead.rs`): claimed fires wait in memory
//! and are called when their instant comes, as slots allow.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use super::ahead::Held;
use super::claim::{Admit, RetryClaim};
use super::outcome::{Attempt, Failure, call_alone};
use super::recorder::Recorder;
use super::share::ShareCell;
use super::{Engine, EngineError, TickSummary};
use crate::core::breaker::{Admission, CIRCUIT_OPEN, CallHealth};
use crate::core::metrics::inc;
use crate::core::model::*;
use crate::core::store::*;

/// Environment groups claimed (or retries drained) at once.
pub(super) const CLAIMS_AT_ONCE: usize = 4;

/// Finished attempts that may wait to be recorded, per global slot: calls go on while records
/// lag (a burst, a slow database), within this bound.
const RECORD_BACKLOG_PER_SLOT: usize = 64;

/// What is in flight: counts per environment and origin, and the jobs whose leases to renew.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    state: Mutex<Counts>,
    /// Rung whenever a slot is freed.
    pub freed: Notify,
    /// Rung whenever a slot is freed, for the launcher of held fires alone (a waiter of its
    /// own, so the claim loop never takes its wake-up).
    pub launch_freed: Notify,
}

#[derive(Debug, Default)]
struct Counts {
    envs: HashMap<EnvId, usize>,
    origins: HashMap<String, usize>,
    jobs: HashSet<JobId>,
    /// Abandoned attempts sent to the recorder and not recorded yet: the drain sees them as
    /// running with an expired lease until the record commits, and must not send them again
    /// (kept apart from `jobs`, whose leases are renewed).
    recovering: HashSet<JobId>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The running attempts not recorded yet.
    pub(super) fn jobs(&self) -> Vec<JobId> {
        self.lock().jobs.iter().copied().collect()
    }

    /// `job`'s outcome is recorded. A recovered (abandoned) attempt was never this instance's
    /// to renew; any other outcome ends the attempt this instance launched.
    pub(super) fn recorded(&self, job: JobId) {
        let mut counts = self.lock();
        if !counts.recovering.remove(&job) {
            counts.jobs.remove(&job);
        }
    }
}

/// One reserved slot: a global call permit, a place under its environment's and origin's caps,
/// and a place in the record backlog. The call permit and the places are given back when the
/// call ends, the backlog place once its outcome is recorded.
pub(super) struct Slot {
    _call: OwnedSemaphorePermit,
    permit: Option<OwnedSemaphorePermit>,
    inflight: Arc<InFlight>,
    env: EnvId,
    origin: Option<String>,
}

impl Slot {
    pub(super) fn origin(&self) -> Option<&str> {
        self.origin.as_deref()
    }

    /// The backlog place, to hold until the outcome is recorded.
    fn keep_until_recorded(&mut self) -> Option<Arc<RecordPermit>> {
        self.permit.take().map(|permit| {
            Arc::new(RecordPermit {
                _permit: permit,
                inflight: self.inflight.clone(),
            })
        })
    }
}

/// A backlog place held by an outcome waiting to be recorded; freed (and claiming woken) when
/// the record is done.
pub(super) struct RecordPermit {
    _permit: OwnedSemaphorePermit,
    inflight: Arc<InFlight>,
}

impl Drop for RecordPermit {
    fn drop(&mut self) {
        self.inflight.freed.notify_one();
        self.inflight.launch_freed.notify_one();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.inflight.lock();
        decrement(&mut counts.envs, &self.env);
        if let Some(origin) = &self.origin {
            decrement(&mut counts.origins, origin);
        }
        drop(counts);
        self.inflight.freed.notify_one();
        self.inflight.launch_freed.notify_one();
    }
}

fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: &K) {
    if let Some(n) = map.get_mut(key) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            map.remove(key);
        }
    }
}

/// The unit of the per-origin cap and of the circuit breaker: the schedule's environment and
/// its target origin (scheme, host and port). Keyed per environment, so one tenant's hanging
/// or refusing endpoint neither opens the circuit for another tenant's calls to the same
/// origin nor takes their slots.
pub(super) fn origin_of(schedule: &Schedule) -> Option<String> {
    let base = schedule.target.base_url().ok()?;
    Some(format!(
        "{} {}",
        schedule.env_id,
        base.as_url().origin().ascii_serialization()
    ))
}

/// The origin part of an [`origin_of`] key, for messages.
fn origin_shown(key: &str) -> &str {
    key.split_once(' ').map_or(key, |(_, origin)| origin)
}

/// The claiming side of the pipeline. Dropping it (with the calls it started finishing)
/// closes the recorder's channel.
pub(super) struct Pipeline<'e> {
    pub engine: &'e Engine,
    /// Calls in flight (the global limit).
    slots: Arc<Semaphore>,
    /// Finished attempts waiting to be recorded.
    records: Arc<Semaphore>,
    /// How far ahead due schedules are claimed and held for their instant; `None` claims at
    /// the instant, into free slots only (`tick`).
    pub ahead: Option<Duration>,
    /// Fires claimed ahead, waiting for their instant or a slot.
    pub held: Arc<Held>,
    /// This instance's share of the fires claimed ahead (`serve` beats to keep it).
    pub share: Arc<ShareCell>,
    pub inflight: Arc<InFlight>,
    done: mpsc::UnboundedSender<Attempt>,
    pub summary: Arc<Mutex<TickSummary>>,
}

/// What one claim round did.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Round {
    /// Something was fired, retried or recorded as skipped.
    pub progress: bool,
    /// The selection came back full: more may be due.
    pub full: bool,
    /// Due work left for later because no slot was free for it.
    pub deferred: bool,
}

impl Round {
    fn and(self, other: Round) -> Round {
        Round {
            progress: self.progress || other.progress,
            full: self.full || other.full,
            deferred: self.deferred || other.deferred,
        }
    }
}

impl Engine {
    /// A new pipeline and its recorder; `ahead` as in [`Pipeline::ahead`].
    pub(super) fn pipeline(&self, ahead: Option<Duration>) -> (Pipeline<'_>, Recorder<'_>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let inflight = Arc::new(InFlight::default());
        let records = Arc::new(Semaphore::new(self.record_backlog()));
        let held = Arc::new(Held::default());
        let summary = Arc::new(Mutex::new(TickSummary::default()));
        (
            Pipeline {
                engine: self,
                slots: Arc::new(Semaphore::new(self.config.concurrency.max(1))),
                records: records.clone(),
                ahead,
                held: held.clone(),
                share: Arc::default(),
                inflight: inflight.clone(),
                done: tx,
                summary: summary.clone(),
            },
            Recorder {
                engine: self,
                done: rx,
                inflight,
                summary,
                held: held.clone(),
                records: records.clone(),
            },
        )
    }
}

impl Engine {
    pub(super) fn record_backlog(&self) -> usize {
        self.config
            .concurrency
            .max(1)
            .saturating_mul(RECORD_BACKLOG_PER_SLOT)
    }
}

impl Pipeline<'_> {
    pub(super) fn account(&self, f: impl FnOnce(&mut TickSummary)) {
        f(&mut self.summary.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// Calls that may start now (free global slots with room in the record backlog).
    pub(super) fn room(&self) -> usize {
        self.slots
            .available_permits()
            .min(self.records.available_permits())
    }

    /// Due schedules a claim round may take now: free slots, or when claiming ahead, room
    /// among the held fires.
    pub(super) fn claim_room(&self) -> usize {
        match self.ahead {
            None => self.room(),
            // Occurrences already due still take free slots when the held fires are full.
            Some(_) => self.held.room().max(self.room()),
        }
    }

    /// True while some call holds a slot or some outcome waits to be recorded (so one will be
    /// freed).
    pub(super) fn busy(&self) -> bool {
        self.slots.available_permits() < self.engine.config.concurrency.max(1)
            || self.records.available_permits() < self.engine.record_backlog()
    }

    /// Reserves a slot for a call to `schedule`'s target, within the global limit and the
    /// environment's and origin's caps; `None` when any is full.
    pub(super) fn reserve(&self, schedule: &Schedule) -> Option<Slot> {
        self.reserve_in(schedule.env_id, origin_of(schedule))
    }

    /// Reserves a slot for a retry of `env` before claiming it, within the global limit and
    /// the environment's cap; `None` when either is full (the retry waits for a slot). Its
    /// origin is known once claimed ([`Pipeline::count_origin`]).
    fn reserve_env(&self, env: EnvId) -> Option<Slot> {
        self.reserve_in(env, None)
    }

    /// A slot under the global limit, the record backlog, `env`'s cap and, when given, the
    /// origin's cap.
    fn reserve_in(&self, env: EnvId, origin: Option<String>) -> Option<Slot> {
        let config = &self.engine.config;
        let mut counts = self.inflight.lock();
        if counts.envs.get(&env).copied().unwrap_or(0) >= config.env_concurrency {
            return None;
        }
        if let Some(origin) = &origin
            && counts.origins.get(origin).copied().unwrap_or(0) >= config.origin_concurrency
        {
            return None;
        }
        let call = self.slots.clone().try_acquire_owned().ok()?;
        let permit = self.records.clone().try_acquire_owned().ok()?;
        *counts.envs.entry(env).or_default() += 1;
        if let Some(origin) = &origin {
            *counts.origins.entry(origin.clone()).or_default() += 1;
        }
        Some(Slot {
            _call: call,
            permit: Some(permit),
            inflight: self.inflight.clone(),
            env,
            origin,
        })
    }

    /// Counts a claimed retry's call under its origin (the claim is made: it runs even if the
    /// origin's cap is full, which only slows the next claims).
    fn count_origin(&self, slot: &mut Slot, schedule: &Schedule) {
        let origin = origin_of(schedule);
        if let Some(origin) = &origin {
            *self
                .inflight
                .lock()
                .origins
                .entry(origin.clone())
                .or_default() += 1;
        }
        slot.origin = origin;
    }

    /// Starts an attempt: its call on a task of its own (or, while its origin's circuit is
    /// open, a fast failure), the result sent to the recorder.
    pub(super) fn launch(&self, schedule: Schedule, job: Job, slot: Slot) {
        let engine = self.engine;
        self.inflight.lock().jobs.insert(job.id);
        let now = engine.clock.now();
        let admission = slot.origin().map(|origin| {
            engine
                .breakers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .admit(origin, now)
        });
        let mut slot = slot;
        if let Some(Admission::Reject { until }) = admission {
            let origin = origin_shown(slot.origin().unwrap_or_default()).to_owned();
            let permit = slot.keep_until_recorded();
            drop(slot);
            inc(&engine.metrics.failures);
            let failure = Failure::circuit_open(format!(
                "{CIRCUIT_OPEN}: {origin} kept timing out or refusing; calls fail fast until {}",
                until.to_rfc3339()
            ));
            tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, origin = %origin, "circuit open: failing fast");
            let _ = self.done.send(Attempt {
                schedule,
                job,
                result: Err(failure),
                ended_at: Some(now),
                _permit: permit,
            });
            return;
        }
        let dispatcher = engine.dispatcher.clone();
        let metrics = engine.metrics.clone();
        let breakers = engine.breakers.clone();
        let clock = engine.clock.clone();
        let timeout = engine.config.job_timeout;
        let done = self.done.clone();
        tokio::spawn(async move {
            // A call that panics still ends in an outcome: otherwise its job would stay
            // running (its lease renewed) for the life of the process and every later fire
            // of its schedule be skipped.
            let called =
                AssertUnwindSafe(call_alone(&*dispatcher, &metrics, timeout, &schedule, &job))
                    .catch_unwind()
                    .await;
            let (result, health) = called.unwrap_or_else(|_| {
                inc(&metrics.failures);
                tracing::error!(schedule_id = %schedule.id, job_id = %job.id, "the call panicked; recorded as a failed attempt");
                (Err(Failure::panicked()), CallHealth::Neutral)
            });
            let ended_at = clock.now();
            if let Some(origin) = slot.origin() {
                breakers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .record(origin, health, ended_at);
            }
            let permit = slot.keep_until_recorded();
            drop(slot);
            let _ = done.send(Attempt {
                schedule,
                job,
                result,
                ended_at: Some(ended_at),
                _permit: permit,
            });
        });
    }

    /// One round: a batch of due schedules, then a batch of due retries and expired leases.
    pub(super) async fn round(&self) -> Result<Round, EngineError> {
        let fired = self.claim_due().await?;
        let drained = self.drain_due().await?;
        Ok(fired.and(drained))
    }

    /// Claims a batch of due schedules, round-robin across environments, as far as slots
    /// allow, and starts their calls; or, claiming ahead, the schedules due up to the lead
    /// ahead, held for their instants.
    pub(super) async fn claim_due(&self) -> Result<Round, EngineError> {
        let engine = self.engine;
        let room = self.claim_room();
        if room == 0 {
            return Ok(Round {
                deferred: true,
                ..Round::default()
            });
        }
        let limit = engine
            .config
            .batch_size
            .min(u32::try_from(room).unwrap_or(u32::MAX));
        let now = engine.clock.now();
        let horizon = now + super::chrono_duration(self.ahead.unwrap_or_default());
        // Claiming ahead, several instances share what falls due by a hash of the schedule.
        let share = self.ahead.and_then(|_| self.share.get(now));
        let due = engine
            .store
            .schedules_due(horizon, limit, engine.config.claim_seed, share)
            .await?;
        let full = due.len() as u64 >= u64::from(limit);
        self.account(|s| s.due += due.len() as u64);
        let mut groups: BTreeMap<EnvId, Vec<DueSchedule>> = BTreeMap::new();
        for d in due {
            groups.entry(d.env_id).or_default().push(d);
        }
        let claimed: Vec<(EnvId, usize, StoreResult<super::claim::ClaimedGroup>)> =
            stream::iter(groups)
                .map(|(env, group)| async move {
                    // Only an occurrence still to come is held; one already due takes a free
                    // slot, or waits unclaimed (a backlog is not claimed beyond the slots).
                    let mut admit = |s: &Schedule| match self.ahead {
                        Some(_) if s.next_run_at.is_some_and(|at| at > now) => {
                            if self.held.admits(s.env_id) {
                                Admit::Hold
                            } else {
                                Admit::Refuse
                            }
                        }
                        _ => self.reserve(s).map_or(Admit::Refuse, Admit::Slot),
                    };
                    let claimed = engine.claim_group(env, &group, &mut admit).await;
                    (env, group.len(), claimed)
                })
                .buffer_unordered(CLAIMS_AT_ONCE)
                .collect()
                .await;
        let mut round = Round {
            full,
            ..Round::default()
        };
        for (env, count, claimed) in claimed {
            let claimed = match claimed {
                Ok(claimed) => claimed,
                Err(err) => {
                    tracing::error!(env_id = %env, schedules = count, error = %err, "claiming due schedules failed");
                    self.account(|s| s.errors += count as u64);
                    continue;
                }
            };
            round.progress |= !claimed.runs.is_empty() || claimed.skipped + claimed.missed > 0;
            round.deferred |= claimed.deferred > 0;
            for _ in 0..claimed.lost {
                inc(&engine.metrics.lost_claims);
            }
            self.account(|s| {
                s.fired += claimed.runs.len() as u64;
                s.skipped += (claimed.skipped + claimed.missed) as u64;
                s.lost += claimed.lost as u64;
            });
            for (schedule, job, slot) in claimed.runs {
                match slot {
                    Some(slot) => {
                        self.fire(schedule, job, slot);
                    }
                    None => {
                        // Claimed ahead: its lease runs from its instant, so it needs no
                        // renewal until it is handed off for its call (just before it).
                        self.held.hold(schedule, job);
                    }
                }
            }
        }
        Ok(round)
    }

    /// Tracks a held fire handed off for its call: its lease is renewed from now on, and the
    /// drain leaves it alone.
    pub(super) fn inflight_track(&self, job: JobId) {
        self.inflight.lock().jobs.insert(job);
    }

    /// Forgets a held fire that was withdrawn (its lease is no longer renewed).
    pub(super) fn inflight_forget(&self, job: JobId) {
        self.inflight.lock().jobs.remove(&job);
    }

    /// Starts the call of a fire (not a retry): counted, and its lateness observed.
    pub(super) fn fire(&self, schedule: Schedule, mut job: Job, slot: Slot) {
        let engine = self.engine;
        inc(&engine.metrics.fires);
        let now = engine.clock.now();
        // The attempt ledger records when the call really started (a fire claimed ahead may
        // have waited for a slot past its hand-off).
        job.started_at = Some(now);
        let late = now - job.scheduled_for;
        engine
            .metrics
            .lateness
            .observe(late.to_std().unwrap_or_default());
        self.launch(schedule, job, slot);
    }

    /// Claims a batch of due retries (and triggered or republished runs) and starts them;
    /// running attempts whose lease ran out are recorded as failed attempts, retried at once.
    pub(super) async fn drain_due(&self) -> Result<Round, EngineError> {
        let engine = self.engine;
        let room = self.room();
        if room == 0 {
            return Ok(Round {
                deferred: true,
                ..Round::default()
            });
        }
        let now = engine.clock.now();
        let limit = engine
            .config
            .drain_size
            .min(u32::try_from(room).unwrap_or(u32::MAX));
        // Attempts without a lease (written before leases existed) expire a lease after start.
        let stale_before = now - super::chrono_duration(engine.config.lease);
        let due = engine.store.jobs_due(now, stale_before, limit).await?;
        let full = due.len() as u64 >= u64::from(limit);
        let outcomes: Vec<Drained> = stream::iter(due)
            .map(|job| self.drain_one(job))
            .buffer_unordered(CLAIMS_AT_ONCE)
            .collect()
            .await;
        Ok(Round {
            progress: outcomes.contains(&Drained::Progress),
            full,
            deferred: outcomes.contains(&Drained::Deferred),
        })
    }

    async fn drain_one(&self, due: DueJob) -> Drained {
        let engine = self.engine;
        match due.status {
            JobStatus::Pending => {
                // A retry takes a slot under its environment's cap like a fire, before it is
                // claimed; without one it waits.
                let Some(mut slot) = self.reserve_env(due.env_id) else {
                    return Drained::Deferred;
                };
                match engine.claim_retry(due).await {
                    Ok(RetryClaim::Claimed(claimed)) => {
                        let (schedule, job) = *claimed;
                        self.account(|s| s.retried_attempts += 1);
                        self.count_origin(&mut slot, &schedule);
                        self.launch(schedule, job, slot);
                        Drained::Progress
                    }
                    Ok(RetryClaim::Busy) => Drained::Nothing,
                    Ok(RetryClaim::Lost) => {
                        inc(&engine.metrics.lost_claims);
                        self.account(|s| s.lost += 1);
                        Drained::Nothing
                    }
                    Err(err) => {
                        tracing::error!(job_id = %due.id, error = %err, "claiming a due retry failed");
                        self.account(|s| s.errors += 1);
                        Drained::Nothing
                    }
                }
            }
            // The instance that ran this attempt stopped renewing its lease (it died): record
            // it as a failed attempt, so the retry rules (and, for a job that keeps killing
            // its process, the DLQ) apply. Its retry is due at once.
            // This instance's own attempt (its lease renewal is late) is still in flight.
            JobStatus::Running if self.inflight.lock().jobs.contains(&due.id) => Drained::Nothing,
            // Already on its way to the recorder.
            JobStatus::Running if !self.inflight.lock().recovering.insert(due.id) => {
                Drained::Nothing
            }
            // A fire this instance claimed ahead and has still to hand off: its own.
            JobStatus::Scheduled if self.held.holds_scheduled(due.id) => Drained::Nothing,
            // Claimed ahead by an instance that stopped before handing it off (its claim lease
            // ran out): never called, so released to run, not a failed attempt. The hand-off
            // and the release are guarded alike (`scheduled`), so only one takes it.
            JobStatus::Scheduled => match engine.release_unstarted(due.env_id, due.id).await {
                Ok(true) => {
                    tracing::warn!(job_id = %due.id, "a fire claimed ahead by a stopped instance was released to run");
                    Drained::Progress
                }
                Ok(false) => Drained::Nothing,
                Err(err) => {
                    tracing::error!(job_id = %due.id, error = %err, "releasing an abandoned claim failed");
                    self.account(|s| s.errors += 1);
                    Drained::Nothing
                }
            },
            JobStatus::Running => {
                match engine.load_for_stale(due).await {
                    Ok(Some((schedule, job))) => {
                        // Counted as a failure once its record lands (several instances may
                        // find the same lapsed lease; one record wins).
                        self.account(|s| s.retried_attempts += 1);
                        let message = "attempt abandoned: its lease ran out (the instance running it stopped)".to_owned();
                        let _ = self.done.send(Attempt {
                            schedule,
                            job,
                            result: Err(Failure::abandoned(message)),
                            ended_at: None,
                            _permit: None,
                        });
                        Drained::Progress
                    }
                    Ok(None) => {
                        self.inflight.lock().recovering.remove(&due.id);
                        Drained::Nothing
                    }
                    Err(err) => {
                        self.inflight.lock().recovering.remove(&due.id);
                        tracing::error!(job_id = %due.id, error = %err, "loading an abandoned attempt failed");
                        self.account(|s| s.errors += 1);
                        Drained::Nothing
                    }
                }
            }
            _ => Drained::Nothing,
        }
    }
}

/// What draining one due job did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    Progress,
    /// No slot under its environment's cap: left for a later round.
    Deferred,
    Nothing,
}
