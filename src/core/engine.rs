//! The execution engine: one tick finds what is due, fires it exactly once, records what
//! happened and schedules retries. `serve` loops it ([`Engine::run`]); `tick --once` calls
//! [`Engine::tick`] once.
//!
//! A fire goes through three steps, and never holds a transaction across the network call.
//! Due schedules are handled in batches, one group per environment:
//!
//! 1. **Claim**, under the group's schedule locks and in one tenant transaction on the locks'
//!    connection: the claim-conditional UPDATE advances each `next_run_at` to the next fire
//!    strictly after now (missed fires are skipped, never replayed), and a running job is
//!    opened for each (or, if a schedule's previous job is still open, a skipped one is
//!    recorded). The unique open-job index is the backstop: whatever races, a schedule has at
//!    most one open job.
//! 2. **Call** the owning services concurrently, each call bounded by the job timeout.
//! 3. **Record** the outcomes that are ready together in one tenant transaction with their
//!    outbox events: success; a retry after backoff; or, when retries are exhausted, a
//!    dead-letter entry. An attempt recorded elsewhere first (it went stale) is left alone.
//!
//! The retry drain runs pending jobs whose backoff has elapsed through the same call and record
//! steps, after a claim-conditional UPDATE. Attempts whose process died mid-call are noticed
//! when they go stale and recorded as failed attempts, so the retry rules apply to them too.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream;
use serde::Serialize;

use crate::core::clock::Clock;
use crate::core::dispatch::Dispatcher;
use crate::core::events::{self, EventPayload};
use crate::core::metrics::{Metrics, inc};
use crate::core::model::*;
use crate::core::retry::RetryPolicy;
use crate::core::store::*;
use crate::core::timing::Timing;

mod outcome;
mod wake;

use outcome::Attempt;
pub use outcome::run_request;

/// The actor recorded for the engine's own changes.
pub const ENGINE_ACTOR: &str = "sentin8-cron:engine";

/// Tuning of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Due schedules fetched per batch; batches repeat while they come back full.
    pub batch_size: u32,
    /// Due retries fetched per drain batch.
    pub drain_size: u32,
    /// Proxy-back calls in flight at once.
    pub concurrency: usize,
    /// The bound on one proxy-back call; a timeout is a failed attempt.
    pub job_timeout: Duration,
    pub retry: RetryPolicy,
    /// A running attempt with no outcome after this long is treated as failed (its process
    /// died). Longer than the job timeout, so a live attempt always records first.
    pub stale_after: Duration,
    /// The safety poll: the loop wakes at least this often.
    pub tick_interval: Duration,
    /// Upper bound on batches per tick, so one tick cannot run forever under a flood.
    pub max_batches_per_tick: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let job_timeout = Duration::from_secs(30);
        Self {
            batch_size: 50,
            drain_size: 50,
            concurrency: 32,
            job_timeout,
            retry: RetryPolicy::default(),
            stale_after: job_timeout * 2 + Duration::from_secs(60),
            tick_interval: Duration::from_secs(60),
            max_batches_per_tick: 200,
        }
    }
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
    /// Due work another ticker took first.
    pub lost: u64,
    /// Per-schedule errors (logged; the batch went on).
    pub errors: u64,
}

impl TickSummary {
    fn add(&mut self, outcome: &Outcome) {
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
            Outcome::Skipped => self.skipped += 1,
            Outcome::Lost => self.lost += 1,
            Outcome::Error => self.errors += 1,
        }
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
    /// A regular fire is skipped while the schedule has an open job.
    pub would_skip: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttemptResult {
    Succeeded,
    Retry,
    DeadLettered,
    /// Failed without a retry or a DLQ entry (the schedule was deleted meanwhile).
    Failed,
    /// The attempt was recorded by someone else first (it went stale and was reclaimed).
    Superseded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Attempted { result: AttemptResult },
    Skipped,
    Lost,
    Error,
}

/// An engine error: only the due-selection queries can fail a whole tick.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The engine, shared by the loop, `tick --once` and tests.
pub struct Engine {
    store: Arc<dyn Store>,
    dispatcher: Arc<dyn Dispatcher>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    metrics: Arc<Metrics>,
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
            store,
            dispatcher,
            clock,
            config,
            metrics,
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Runs one tick: due schedules in batches, then the retry drain. A failure of one
    /// schedule is logged and counted; only a failing due-selection query fails the tick.
    pub async fn tick(&self) -> Result<TickSummary, EngineError> {
        let started = Instant::now();
        let mut summary = TickSummary::default();
        let result = self.tick_inner(&mut summary).await;
        self.metrics.tick_duration.observe(started.elapsed());
        match &result {
            Ok(()) => {
                inc(&self.metrics.ticks);
                self.metrics
                    .last_tick_unix
                    .store(self.clock.now().timestamp(), Ordering::Relaxed);
            }
            Err(err) => {
                inc(&self.metrics.tick_errors);
                tracing::error!(error = %err, "tick failed");
            }
        }
        result.map(|()| summary)
    }

    async fn tick_inner(&self, summary: &mut TickSummary) -> Result<(), EngineError> {
        for _ in 0..self.config.max_batches_per_tick {
            let due = self
                .store
                .schedules_due(self.clock.now(), self.config.batch_size)
                .await?;
            summary.due += due.len() as u64;
            let full = due.len() as u64 >= u64::from(self.config.batch_size);
            let outcomes = self.fire_batch(due).await;
            if !(account(summary, &outcomes, |s| s.fired += 1) && full) {
                break;
            }
        }
        for _ in 0..self.config.max_batches_per_tick {
            let now = self.clock.now();
            let stale_before = now - chrono_duration(self.config.stale_after);
            let due = self
                .store
                .jobs_due(now, stale_before, self.config.drain_size)
                .await?;
            let full = due.len() as u64 >= u64::from(self.config.drain_size);
            let outcomes: Vec<Outcome> = stream::iter(due)
                .map(|job| self.drain_one(job))
                .buffer_unordered(self.config.concurrency.max(1))
                .collect()
                .await;
            if !(account(summary, &outcomes, |s| s.retried_attempts += 1) && full) {
                break;
            }
        }
        Ok(())
    }

    /// What a tick would fire now, without firing anything.
    pub async fn plan(&self) -> Result<Vec<PlannedFire>, EngineError> {
        let now = self.clock.now();
        let due = self
            .store
            .schedules_due(now, self.config.batch_size)
            .await?;
        let mut planned = Vec::with_capacity(due.len());
        for d in due {
            let mut tx = self.store.tenant_begin(d.env_id).await?;
            let Some(schedule) = tx.schedule_get(d.id).await? else {
                continue;
            };
            let would_skip = tx.job_get_open(d.id).await?.is_some();
            planned.push(PlannedFire {
                schedule_id: d.id,
                env_id: d.env_id,
                domain: schedule.domain,
                schedule_type: schedule.schedule_type,
                due_at: d.next_run_at,
                would_skip,
            });
        }
        Ok(planned)
    }

    /// Fires a batch of due schedules. The batch is split by environment; each group is
    /// claimed in one transaction under one set of locks, called concurrently, and recorded in
    /// transactions of whatever outcomes are ready together.
    async fn fire_batch(&self, due: Vec<DueSchedule>) -> Vec<Outcome> {
        let mut groups: BTreeMap<EnvId, Vec<DueSchedule>> = BTreeMap::new();
        for d in due {
            groups.entry(d.env_id).or_default().push(d);
        }
        let per_group: Vec<Vec<Outcome>> = stream::iter(groups)
            .map(|(env, group)| self.fire_group(env, group))
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        per_group.into_iter().flatten().collect()
    }

    async fn fire_group(&self, env: EnvId, due: Vec<DueSchedule>) -> Vec<Outcome> {
        let count = due.len();
        let claimed = match self.claim_group(env, &due).await {
            Ok(claimed) => claimed,
            Err(err) => {
                tracing::error!(env_id = %env, schedules = count, error = %err, "claiming due schedules failed");
                return vec![Outcome::Error; count];
            }
        };
        let mut outcomes = Vec::with_capacity(count);
        for _ in 0..claimed.skipped {
            inc(&self.metrics.skipped);
            outcomes.push(Outcome::Skipped);
        }
        for _ in 0..claimed.lost {
            inc(&self.metrics.lost_claims);
            outcomes.push(Outcome::Lost);
        }
        for _ in &claimed.runs {
            inc(&self.metrics.fires);
        }
        let mut calls = stream::iter(claimed.runs)
            .map(|(schedule, job)| async move {
                let result = self.call(&schedule, &job).await;
                Attempt {
                    schedule,
                    job,
                    result,
                }
            })
            .buffer_unordered(self.config.concurrency.max(1))
            .ready_chunks(self.config.batch_size.max(1) as usize);
        while let Some(ready) = calls.next().await {
            outcomes.extend(self.record(env, ready).await);
        }
        outcomes
    }

    /// Step 1 under the schedules' locks: advance them and open their jobs.
    async fn claim_group(&self, env: EnvId, due: &[DueSchedule]) -> StoreResult<ClaimedGroup> {
        let ids: Vec<ScheduleId> = due.iter().map(|d| d.id).collect();
        let mut locks = self.store.schedule_locks_try(&ids).await?;
        let claimed = self.claim_locked(&mut *locks, env, due).await;
        match locks.release().await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(env_id = %env, "a schedule lock was not held at release"),
            Err(err) => {
                tracing::warn!(env_id = %env, error = %err, "releasing schedule locks failed")
            }
        }
        claimed
    }

    async fn claim_locked(
        &self,
        locks: &mut dyn ScheduleLock,
        env: EnvId,
        due: &[DueSchedule],
    ) -> StoreResult<ClaimedGroup> {
        let held: Vec<ScheduleId> = locks.held().to_vec();
        if held.is_empty() {
            return Ok(ClaimedGroup::lost(due.len()));
        }
        let mut tx = locks.tenant_begin(env).await?;
        let schedules: HashMap<ScheduleId, Schedule> = tx
            .schedule_get_many(&held, false)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let now = self.clock.now();
        let mut claims = Vec::with_capacity(schedules.len());
        let mut exhausted = Vec::new();
        for d in due.iter().filter(|d| held.contains(&d.id)) {
            let Some(schedule) = schedules.get(&d.id) else {
                continue;
            };
            let next_run_at = match self.next_fire(schedule, now) {
                Some(next) => Some(next),
                // A cron schedule with nothing left to fire runs this once and is paused.
                None if schedule.kind() == ScheduleKind::Cron => {
                    exhausted.push(d.id);
                    Some(d.next_run_at)
                }
                // A one-shot schedule has no next fire; it completes when its job finishes.
                None => None,
            };
            claims.push(ScheduleClaim {
                id: d.id,
                expected_next_run_at: d.next_run_at,
                next_run_at,
                now,
            });
        }
        let mut claimed = tx.schedule_claim_many(&claims).await?;
        for schedule in claimed.iter_mut().filter(|s| exhausted.contains(&s.id)) {
            *schedule = tx
                .schedule_set_status(&ScheduleSetStatus {
                    id: schedule.id,
                    status: ScheduleStatus::Paused,
                    now,
                })
                .await?;
        }
        let due_at: HashMap<ScheduleId, DateTime<Utc>> =
            due.iter().map(|d| (d.id, d.next_run_at)).collect();
        let new_jobs: Vec<NewJob> = claimed
            .iter()
            .map(|s| {
                let scheduled_for = due_at.get(&s.id).copied().unwrap_or(now);
                self.metrics
                    .lateness
                    .observe((now - scheduled_for).to_std().unwrap_or_default());
                NewJob {
                    id: JobId::new(),
                    schedule_id: s.id,
                    status: JobStatus::Running,
                    attempt: 1,
                    scheduled_for,
                    next_attempt_at: None,
                    started_at: Some(now),
                    finished_at: None,
                    error: None,
                    now,
                }
            })
            .collect();
        let mut opened: HashMap<ScheduleId, Job> = tx
            .job_open_many(&new_jobs)
            .await?
            .into_iter()
            .map(|j| (j.schedule_id, j))
            .collect();

        // A schedule whose previous job is still open (a pending retry) skips this fire, on
        // the record.
        let mut runs = Vec::with_capacity(opened.len());
        let mut skipped = 0;
        let mut skip_events = Vec::new();
        for (schedule, new) in claimed.into_iter().zip(&new_jobs) {
            if let Some(job) = opened.remove(&schedule.id) {
                runs.push((schedule, job));
                continue;
            }
            let open = tx.job_get_open(schedule.id).await?;
            let record = tx
                .job_insert(&NewJob {
                    status: JobStatus::Skipped,
                    attempt: 0,
                    started_at: None,
                    finished_at: Some(now),
                    error: Some(match open {
                        Some(open) => format!(
                            "skipped: job {} of this schedule is still {}",
                            open.id, open.status
                        ),
                        None => "skipped: another job of this schedule was open".to_owned(),
                    }),
                    ..new.clone()
                })
                .await?;
            tracing::info!(schedule_id = %schedule.id, "fire skipped: previous job still open");
            let event = EventPayload::for_schedule(events::JOB_SKIPPED, &schedule, now)
                .with_job(&record)
                .by(ENGINE_ACTOR);
            skip_events.push(event.into_event(&schedule));
            skipped += 1;
        }
        tx.outbox_insert_many(&skip_events).await?;
        tx.commit().await?;
        Ok(ClaimedGroup {
            lost: due.len() - runs.len() - skipped,
            runs,
            skipped,
        })
    }

    /// The next fire of a schedule strictly after now. An expression that no longer parses is
    /// never hot-looped: it is looked at again in an hour.
    fn next_fire(&self, schedule: &Schedule, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let Timing::Cron(cron) = &schedule.timing else {
            return None;
        };
        if cron.zone_fell_back_to_utc() {
            tracing::warn!(schedule_id = %schedule.id, timezone = %cron.timezone, "stored time zone is unknown; evaluating in UTC");
        }
        match schedule.timing.next_after(now) {
            Ok(Some(next)) => Some(next),
            Ok(None) => {
                tracing::warn!(schedule_id = %schedule.id, "cron expression has no further fire; pausing after this run");
                None
            }
            Err(err) => {
                tracing::error!(schedule_id = %schedule.id, error = %err, "stored cron expression does not parse; retrying in 1h");
                Some(now + chrono::Duration::hours(1))
            }
        }
    }

    /// A due retry (or a stale attempt).
    async fn drain_one(&self, due: DueJob) -> Outcome {
        match due.status {
            JobStatus::Pending => match self.claim_retry(due).await {
                Ok(Some((schedule, job))) => self.attempt(&schedule, job).await,
                Ok(None) => {
                    inc(&self.metrics.lost_claims);
                    Outcome::Lost
                }
                Err(err) => {
                    tracing::error!(job_id = %due.id, error = %err, "claiming a due retry failed");
                    Outcome::Error
                }
            },
            // The process that ran this attempt is gone: record it as a failed attempt, so the
            // retry rules (and, for a job that keeps killing its process, the DLQ) apply.
            JobStatus::Running => match self.load_for_stale(due).await {
                Ok(Some((schedule, job))) => {
                    inc(&self.metrics.failures);
                    let message = format!(
                        "attempt abandoned: no outcome within {}s (the process running it stopped)",
                        self.config.stale_after.as_secs()
                    );
                    self.record_one(&schedule, job, Err(outcome::Failure::retryable(message)))
                        .await
                }
                Ok(None) => Outcome::Lost,
                Err(err) => {
                    tracing::error!(job_id = %due.id, error = %err, "loading a stale attempt failed");
                    Outcome::Error
                }
            },
            _ => Outcome::Lost,
        }
    }

    async fn claim_retry(&self, due: DueJob) -> StoreResult<Option<(Schedule, Job)>> {
        let Some(mut lock) = self.store.schedule_lock_try(due.schedule_id).await? else {
            return Ok(None);
        };
        let claimed = async {
            let mut tx = lock.tenant_begin(due.env_id).await?;
            let now = self.clock.now();
            let Some(schedule) = tx.schedule_get(due.schedule_id).await? else {
                return Ok(None);
            };
            // A paused schedule's retries wait for its resume (paused after selection).
            if schedule.status == ScheduleStatus::Paused {
                return Ok(None);
            }
            let Some(job) = tx.job_claim(&JobClaim { id: due.id, now }).await? else {
                return Ok(None);
            };
            tx.commit().await?;
            Ok(Some((schedule, job)))
        }
        .await;
        if let Err(err) = lock.release().await {
            tracing::warn!(schedule_id = %due.schedule_id, error = %err, "releasing a schedule lock failed");
        }
        claimed
    }

    async fn load_for_stale(&self, due: DueJob) -> StoreResult<Option<(Schedule, Job)>> {
        let mut tx = self.store.tenant_begin(due.env_id).await?;
        let Some(job) = tx.job_get(due.id).await? else {
            return Ok(None);
        };
        let Some(schedule) = tx.schedule_get(due.schedule_id).await? else {
            return Ok(None);
        };
        Ok(Some((schedule, job)))
    }
}

/// What claiming a group of due schedules gave.
struct ClaimedGroup {
    /// Jobs opened, to call now.
    runs: Vec<(Schedule, Job)>,
    /// Fires recorded as skipped (the previous job was still open).
    skipped: usize,
    /// Due schedules another ticker took first (or that changed meanwhile).
    lost: usize,
}

impl ClaimedGroup {
    fn lost(count: usize) -> Self {
        Self {
            runs: Vec::new(),
            skipped: 0,
            lost: count,
        }
    }
}

/// Adds a batch's outcomes to the summary (`started` counts an attempt made). True when the
/// batch made progress; a batch that made none (all taken by another ticker, or all failing)
/// must not be repeated at once, or the loop would only spin.
fn account(summary: &mut TickSummary, outcomes: &[Outcome], started: fn(&mut TickSummary)) -> bool {
    for outcome in outcomes {
        if matches!(outcome, Outcome::Attempted { .. }) {
            started(summary);
        }
        summary.add(outcome);
    }
    outcomes
        .iter()
        .any(|o| !matches!(o, Outcome::Lost | Outcome::Error))
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}
