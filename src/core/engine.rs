//! The execution engine: one tick finds what is due, fires it exactly once, records what
//! happened and schedules retries. `serve` loops it ([`Engine::run`]); `tick --once` calls
//! [`Engine::tick`] once.
//!
//! A fire goes through three steps, and never holds a transaction across the network call:
//!
//! 1. **Claim**, under the schedule's lock and in one tenant transaction on the lock's
//!    connection: the claim-conditional UPDATE advances `next_run_at` to the next fire strictly
//!    after now (missed fires are skipped, never replayed), and a running job is inserted (or,
//!    if the previous job is still open, a skipped one). The unique open-job index is the
//!    backstop: whatever races, a schedule has at most one open job.
//! 2. **Call** the owning service, bounded by the job timeout.
//! 3. **Record** the outcome in one tenant transaction with its outbox event: success; a retry
//!    after backoff; or, when retries are exhausted, a dead-letter entry.
//!
//! The retry drain runs pending jobs whose backoff has elapsed through the same call and record
//! steps, after a claim-conditional UPDATE. Attempts whose process died mid-call are noticed
//! when they go stale and recorded as failed attempts, so the retry rules apply to them too.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use futures_util::stream;
use serde::Serialize;
use serde_json::Value;

use crate::core::clock::Clock;
use crate::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use crate::core::events::{self, EventPayload};
use crate::core::metrics::{Metrics, inc};
use crate::core::model::*;
use crate::core::retry::{RetryDecision, RetryPolicy};
use crate::core::store::*;
use crate::core::timing;

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
            let more = self
                .run_batch(
                    due,
                    self.config.batch_size,
                    |d| self.fire(d),
                    summary,
                    |s| s.fired += 1,
                )
                .await;
            if !more {
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
            let more = self
                .run_batch(
                    due,
                    self.config.drain_size,
                    |j| self.drain_one(j),
                    summary,
                    |s| s.retried_attempts += 1,
                )
                .await;
            if !more {
                break;
            }
        }
        Ok(())
    }

    /// Works through one batch with bounded concurrency and adds the outcomes to the summary
    /// (`started` counts an attempt made). True when another batch should follow: this one was
    /// full, so more may be due, and it made progress; a batch that made none (all taken by
    /// another ticker, or all failing) would only spin.
    async fn run_batch<T, F>(
        &self,
        batch: Vec<T>,
        size: u32,
        work: impl Fn(T) -> F,
        summary: &mut TickSummary,
        started: fn(&mut TickSummary),
    ) -> bool
    where
        F: std::future::Future<Output = Outcome>,
    {
        let full = batch.len() as u64 >= u64::from(size);
        let outcomes: Vec<Outcome> = stream::iter(batch)
            .map(work)
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        let progressed = outcomes
            .iter()
            .any(|o| !matches!(o, Outcome::Lost | Outcome::Error));
        for outcome in &outcomes {
            if matches!(outcome, Outcome::Attempted { .. }) {
                started(summary);
            }
            summary.add(outcome);
        }
        full && progressed
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

    /// Fires one due schedule: claim, call, record.
    async fn fire(&self, due: DueSchedule) -> Outcome {
        let claimed = match self.claim(due).await {
            Ok(Some(claimed)) => claimed,
            Ok(None) => {
                inc(&self.metrics.lost_claims);
                return Outcome::Lost;
            }
            Err(err) => {
                tracing::error!(schedule_id = %due.id, env_id = %due.env_id, error = %err, "claiming a due schedule failed");
                return Outcome::Error;
            }
        };
        let (schedule, job) = match claimed {
            Claimed::Run(claimed) => *claimed,
            Claimed::Skipped => {
                inc(&self.metrics.skipped);
                return Outcome::Skipped;
            }
        };
        inc(&self.metrics.fires);
        self.attempt(&schedule, job).await
    }

    /// Step 1 under the schedule's lock: advance the schedule and open its job.
    async fn claim(&self, due: DueSchedule) -> StoreResult<Option<Claimed>> {
        let Some(mut lock) = self.store.schedule_lock_try(due.id).await? else {
            return Ok(None);
        };
        let claimed = self.claim_locked(&mut *lock, due).await;
        match lock.release().await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(schedule_id = %due.id, "schedule lock was not held at release")
            }
            Err(err) => {
                tracing::warn!(schedule_id = %due.id, error = %err, "releasing a schedule lock failed")
            }
        }
        claimed
    }

    async fn claim_locked(
        &self,
        lock: &mut dyn ScheduleLock,
        due: DueSchedule,
    ) -> StoreResult<Option<Claimed>> {
        let mut tx = lock.tenant_begin(due.env_id).await?;
        let Some(schedule) = tx.schedule_get(due.id).await? else {
            return Ok(None);
        };
        let now = self.clock.now();
        let next_run_at = match schedule.kind {
            // A one-shot schedule has no next fire; it completes when its job finishes.
            ScheduleKind::Once => None,
            ScheduleKind::Cron => match timing::next_fire_after(&schedule, now) {
                Ok(Some(next)) => Some(next),
                Ok(None) => {
                    // Nothing left to fire: run this one and stop.
                    tracing::warn!(schedule_id = %schedule.id, "cron expression has no further fire; pausing after this run");
                    None
                }
                Err(err) => {
                    // Never hot-loop on a bad stored expression: look again in an hour.
                    tracing::error!(schedule_id = %schedule.id, error = %err, "stored cron expression does not parse; retrying in 1h");
                    Some(now + chrono::Duration::hours(1))
                }
            },
        };
        let claim = ScheduleClaim {
            id: due.id,
            expected_next_run_at: due.next_run_at,
            next_run_at: next_run_at.or(match schedule.kind {
                ScheduleKind::Once => None,
                // An exhausted cron schedule keeps a next_run_at far away and is paused below.
                ScheduleKind::Cron => Some(due.next_run_at),
            }),
            now,
        };
        let Some(mut claimed) = tx.schedule_claim(&claim).await? else {
            return Ok(None);
        };
        if claimed.kind == ScheduleKind::Cron && next_run_at.is_none() {
            claimed.status = ScheduleStatus::Paused;
            claimed.updated_at = now;
            claimed = tx.schedule_update(&claimed).await?;
        }
        self.metrics
            .lateness
            .observe((now - due.next_run_at).to_std().unwrap_or_default());

        if let Some(open) = tx.job_get_open(due.id).await? {
            let skipped = tx
                .job_insert(&NewJob {
                    id: JobId::new(),
                    schedule_id: due.id,
                    status: JobStatus::Skipped,
                    attempt: 0,
                    scheduled_for: due.next_run_at,
                    next_attempt_at: None,
                    started_at: None,
                    finished_at: Some(now),
                    error: Some(format!(
                        "skipped: job {} of this schedule is still {}",
                        open.id, open.status
                    )),
                    now,
                })
                .await?;
            let event = EventPayload::for_schedule(events::JOB_SKIPPED, &claimed, now)
                .with_job(&skipped)
                .by(ENGINE_ACTOR);
            tx.outbox_insert(&event.into_event(&claimed)).await?;
            tx.commit().await?;
            tracing::info!(schedule_id = %due.id, open_job = %open.id, "fire skipped: previous job still open");
            return Ok(Some(Claimed::Skipped));
        }

        let job = tx
            .job_insert(&NewJob {
                id: JobId::new(),
                schedule_id: due.id,
                status: JobStatus::Running,
                attempt: 1,
                scheduled_for: due.next_run_at,
                next_attempt_at: None,
                started_at: Some(now),
                finished_at: None,
                error: None,
                now,
            })
            .await?;
        tx.commit().await?;
        Ok(Some(Claimed::Run(Box::new((claimed, job)))))
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
                    self.record(&schedule, &job, Err(message)).await
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
            let Some(job) = tx.job_claim(&JobClaim { id: due.id, now }).await? else {
                return Ok(None);
            };
            let Some(schedule) = tx.schedule_get(due.schedule_id).await? else {
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

    /// Steps 2 and 3: call the owning service, then record the outcome.
    async fn attempt(&self, schedule: &Schedule, job: Job) -> Outcome {
        let request = run_request(schedule, &job);
        let called =
            tokio::time::timeout(self.config.job_timeout, self.dispatcher.run(&request)).await;
        let result = match called {
            Ok(Ok(answer)) => {
                inc(&self.metrics.successes);
                Ok(answer)
            }
            Ok(Err(err)) => {
                inc(&self.metrics.failures);
                tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, attempt = job.attempt, error = %err, "proxy-back failed");
                Err(err.to_string())
            }
            Err(_) => {
                inc(&self.metrics.failures);
                let err = DispatchError::Timeout(self.config.job_timeout);
                tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, attempt = job.attempt, error = %err, "proxy-back failed");
                Err(err.to_string())
            }
        };
        self.record(schedule, &job, result).await
    }

    async fn record(
        &self,
        schedule: &Schedule,
        attempt: &Job,
        result: Result<Value, String>,
    ) -> Outcome {
        match self
            .record_outcome(schedule.env_id, schedule.id, attempt, result)
            .await
        {
            Ok(result) => {
                match result {
                    AttemptResult::Retry => inc(&self.metrics.retries),
                    AttemptResult::DeadLettered => inc(&self.metrics.dlq_landings),
                    _ => {}
                }
                Outcome::Attempted { result }
            }
            Err(err) => {
                tracing::error!(schedule_id = %schedule.id, job_id = %attempt.id, error = %err, "recording a job outcome failed; the attempt will be recovered when it goes stale");
                Outcome::Error
            }
        }
    }

    /// Step 3: one transaction for the job, the schedule's retry state, a DLQ entry when retries
    /// are exhausted, and the outcome event.
    async fn record_outcome(
        &self,
        env_id: EnvId,
        schedule_id: ScheduleId,
        attempt: &Job,
        result: Result<Value, String>,
    ) -> StoreResult<AttemptResult> {
        let mut tx = self.store.tenant_begin(env_id).await?;
        // The row lock orders this outcome's event after any concurrent change's event.
        let Some(mut schedule) = tx.schedule_get_for_update(schedule_id).await? else {
            return Ok(AttemptResult::Superseded);
        };
        let Some(mut job) = tx.job_get(attempt.id).await? else {
            return Ok(AttemptResult::Superseded);
        };
        if job.status != JobStatus::Running || job.attempt != attempt.attempt {
            tracing::warn!(job_id = %job.id, "outcome arrived after the attempt was recorded elsewhere; dropped");
            return Ok(AttemptResult::Superseded);
        }
        let now = self.clock.now();
        let before = (schedule.status, schedule.retry_count);
        job.updated_at = now;
        let outcome = match result {
            Ok(answer) => {
                job.status = JobStatus::Succeeded;
                job.finished_at = Some(now);
                job.result = Some(answer);
                job.error = None;
                schedule.retry_count = 0;
                complete_one_shot(&mut schedule);
                AttemptResult::Succeeded
            }
            Err(error) => {
                job.error = Some(error);
                if schedule.status == ScheduleStatus::Deleted {
                    job.status = JobStatus::Failed;
                    job.finished_at = Some(now);
                    schedule.retry_count = 0;
                    AttemptResult::Failed
                } else {
                    match self
                        .config
                        .retry
                        .decide(schedule.retry_count, schedule.max_retries)
                    {
                        RetryDecision::Retry { delay, retry_count } => {
                            job.status = JobStatus::Pending;
                            job.next_attempt_at = Some(now + chrono_duration(delay));
                            schedule.retry_count = retry_count;
                            AttemptResult::Retry
                        }
                        RetryDecision::Exhausted => {
                            job.status = JobStatus::Failed;
                            job.finished_at = Some(now);
                            schedule.retry_count = 0;
                            complete_one_shot(&mut schedule);
                            AttemptResult::DeadLettered
                        }
                    }
                }
            }
        };
        let job = tx.job_update(&job).await?;
        if (schedule.status, schedule.retry_count) != before {
            schedule.updated_at = now;
            schedule = tx.schedule_update(&schedule).await?;
        }
        let event = match outcome {
            AttemptResult::Succeeded => {
                EventPayload::for_schedule(events::SCHEDULE_COMPLETED, &schedule, now)
                    .with_job(&job)
            }
            AttemptResult::Retry => {
                EventPayload::for_schedule(events::JOB_RETRIED, &schedule, now).with_job(&job)
            }
            AttemptResult::DeadLettered => {
                let entry = tx
                    .dlq_insert(&NewDlqEntry {
                        id: DlqId::new(),
                        schedule_id: schedule.id,
                        job_id: job.id,
                        domain: schedule.domain.clone(),
                        schedule_type: schedule.schedule_type.clone(),
                        payload: schedule.payload.clone(),
                        attempts: job.attempt,
                        last_error: job.error.clone().unwrap_or_default(),
                        scheduled_for: job.scheduled_for,
                        now,
                    })
                    .await?;
                EventPayload::for_schedule(events::SCHEDULE_FAILED, &schedule, now)
                    .with_job(&job)
                    .with_dlq(&entry)
            }
            AttemptResult::Failed | AttemptResult::Superseded => {
                EventPayload::for_schedule(events::SCHEDULE_FAILED, &schedule, now).with_job(&job)
            }
        };
        tx.outbox_insert(&event.by(ENGINE_ACTOR).into_event(&schedule))
            .await?;
        if outcome == AttemptResult::Retry {
            // The retry is due in the future: the loop recomputes when to wake.
            tx.notify_on_commit(Channel::Schedules);
        }
        tx.commit().await?;
        Ok(outcome)
    }

    /// Loops ticks until `shutdown` resolves: waking at the earliest due instant, on a change
    /// signal, or at the safety interval, whichever comes first. An in-flight tick finishes
    /// before the loop returns.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let signals = self.store.signals();
        loop {
            let summary = self.tick().await;
            let made_progress = summary
                .as_ref()
                .is_ok_and(|s| s.fired + s.retried_attempts + s.skipped > 0);
            let wait = match self.store.wakeup_next().await {
                Ok(Some(at)) => {
                    let until = (at - self.clock.now()).to_std().unwrap_or_default();
                    // Work that is already due but could not be taken (another ticker holds it)
                    // must not spin this loop.
                    let floor = if made_progress {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(100)
                    };
                    until.max(floor).min(self.config.tick_interval)
                }
                Ok(None) => self.config.tick_interval,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot compute the next wake-up; polling");
                    Duration::from_secs(1).min(self.config.tick_interval)
                }
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = signals.schedules.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

enum Claimed {
    Run(Box<(Schedule, Job)>),
    Skipped,
}

fn complete_one_shot(schedule: &mut Schedule) {
    if schedule.kind == ScheduleKind::Once && schedule.status == ScheduleStatus::Active {
        schedule.status = ScheduleStatus::Completed;
        schedule.next_run_at = None;
    }
}

/// The proxy-back envelope for one attempt.
pub fn run_request(schedule: &Schedule, job: &Job) -> RunRequest {
    RunRequest {
        schedule_id: schedule.id,
        job_id: job.id,
        domain: schedule.domain.clone(),
        schedule_type: schedule.schedule_type.clone(),
        env_id: schedule.env_id,
        payload: schedule.payload.clone(),
        attempt: job.attempt,
        scheduled_for: job.scheduled_for,
        correlation_id: schedule.id.to_string(),
        idempotency_key: job.idempotency_key.clone(),
        base_url: schedule
            .target_config
            .get("baseUrl")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}
