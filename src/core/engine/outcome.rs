//! Steps 2 and 3 of a fire: the proxy-back call and the recording of its outcome (success, a
//! retry after backoff, or a dead-letter entry), in one tenant transaction per batch with the
//! outcome events.
//!
//! A configuration failure (a bad or missing target, no credential) cannot be cured by
//! retrying: it goes to the DLQ on the first attempt, recorded as `configuration: ...`.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

mod attempt;

use attempt::attempt_detail;
pub(super) use attempt::{Attempt, Failure, answered};

use super::after_completion::delete_when_done;
use super::parts::{AttemptResult, ENGINE_ACTOR, Outcome, Parts, chrono_duration};
use crate::core::breaker::CallHealth;
use crate::core::buffered::release_buffered;
use crate::core::clock::{Clock, wait_on};
use crate::core::dispatch::{DispatchError, Dispatcher, FailureClass, RunRequest};
use crate::core::events::{self, EventPayload};
use crate::core::metrics::{CallClass, EnvCounter, Metrics, inc};
use crate::core::model::*;
use crate::core::ops::Actor;
use crate::core::retry::RetryDecision;
use crate::core::store::*;
use crate::core::trace;

/// Step 2: one proxy-back call, bounded by the job timeout alone (it runs on its own task; the
/// timeout is kept on the injected clock), with what it says about the target origin's health.
/// `request` is the call's envelope ([`run_request`]) with its fence and the call made ready
/// ahead, if any. `None` when the request never left because its fence did not hold: not an
/// attempt.
pub(super) async fn call_alone(
    dispatcher: &dyn Dispatcher,
    clock: &dyn Clock,
    metrics: &Metrics,
    job_timeout: Duration,
    schedule: &Schedule,
    job: &Job,
    request: RunRequest,
) -> Option<(Result<Value, Failure>, CallHealth)> {
    // A task may start long after it was spawned (a stalled or starved process): the lease
    // is looked at again here, and once more by the dispatcher just before the request goes.
    if request.fence.as_ref().is_some_and(|fence| !fence.holds()) {
        return None;
    }
    let started = clock.monotonic();
    let took = || clock.monotonic().saturating_sub(started);
    let err = tokio::select! {
        answer = dispatcher.run(&request) => match answer {
            Ok(answer) => {
                metrics.count(schedule.env_id, EnvCounter::Successes);
                metrics.calls.observe(CallClass::Status2xx, took());
                return Some((Ok(answer), CallHealth::Answered));
            }
            Err(DispatchError::LeaseUnsure) => return None,
            Err(err) => err,
        },
        () = wait_on(clock, job_timeout) => DispatchError::Timeout(job_timeout),
    };
    metrics.count(schedule.env_id, EnvCounter::Failures);
    metrics.calls.observe(CallClass::of_error(&err), took());
    let health = match &err {
        DispatchError::Timeout(_) | DispatchError::Transport(_) => CallHealth::Unreachable,
        DispatchError::Status(..) | DispatchError::Decode(_) => CallHealth::Answered,
        _ => CallHealth::Neutral,
    };
    let failure = Failure::of(&err);
    tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, attempt = job.attempt, error = %failure.message, "proxy-back failed");
    Some((Err(failure), health))
}

/// How long recording waits for a schedule row another transaction holds (an operator's open
/// transaction): the record then fails, to be tried again, rather than pin its connection.
const RECORD_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

impl Parts {
    /// Step 3 for attempts of one environment: their outcomes in one transaction.
    pub(super) async fn record(
        &self,
        env: EnvId,
        attempts: Vec<Attempt>,
    ) -> Result<Vec<(JobId, Outcome)>, (StoreError, Vec<Attempt>)> {
        // Kept until the transaction committed: a failed record is tried again.
        let kept = attempts.clone();
        // (job, recovered from a stopped instance): such a failure is counted here, once its
        // record lands, since every instance that finds the lapsed lease sends one.
        let ids: Vec<(JobId, bool)> = attempts
            .iter()
            .map(|a| {
                (
                    a.job.id,
                    a.result.as_ref().is_err_and(Failure::is_abandoned),
                )
            })
            .collect();
        let began = self.clock.now();
        match self.record_outcomes(env, attempts).await {
            Ok(results) => {
                self.trace_records(&kept, &results, began);
                Ok(ids
                    .into_iter()
                    .zip(results)
                    .map(|((id, abandoned), result)| {
                        if abandoned && result != AttemptResult::Superseded {
                            self.metrics.count(env, EnvCounter::Failures);
                        }
                        match result {
                            AttemptResult::Retry => inc(&self.metrics.retries),
                            AttemptResult::DeadLettered => {
                                self.metrics.count(env, EnvCounter::DlqLandings);
                            }
                            _ => {}
                        }
                        (id, Outcome::Attempted { result })
                    })
                    .collect())
            }
            Err(err) => Err((err, kept)),
        }
    }

    /// Writes the answers of these answered calls ahead of their records, across
    /// environments in one statement. The attempts go on to their records either way: a
    /// failed write loses only the early durability.
    pub(super) async fn write_ahead(&self, mut attempts: Vec<Attempt>) -> Vec<Attempt> {
        let answers: Vec<JobAnswer> = attempts.iter().filter_map(Attempt::answer).collect();
        match self.store.job_answers_put(&answers).await {
            Ok(_) => {
                let answered: Vec<_> = answers.iter().map(|a| a.answered_at).collect();
                self.observe_durable(&answered);
                for attempt in &mut attempts {
                    attempt.written_ahead = true;
                }
            }
            Err(err) => {
                tracing::warn!(answers = answers.len(), error = %err, "writing answers ahead of their records failed; they wait for their records");
            }
        }
        attempts
    }

    /// Observes, for each answered call just made durable, how long that took (the
    /// `outcome_durable` histogram).
    pub(super) fn observe_durable(&self, answered: &[DateTime<Utc>]) {
        let now = self.clock.now();
        for at in answered {
            let waited = (now - *at).to_std().unwrap_or_default();
            self.metrics.outcome_durable.observe(waited);
        }
    }

    /// One transaction for the jobs (with their ledger rows, their schedules' last calls and
    /// the answers written ahead forgotten: `job_finish_many`), the schedules' retry state, a
    /// DLQ entry where retries are exhausted, and the outcome events. A job whose attempt was
    /// recorded elsewhere first (it went stale and was recovered) is left alone and reported
    /// as superseded.
    async fn record_outcomes(
        &self,
        env: EnvId,
        attempts: Vec<Attempt>,
    ) -> StoreResult<Vec<AttemptResult>> {
        let mut tx = self
            .store
            .tenant_begin_bounded(env, RECORD_LOCK_TIMEOUT)
            .await?;
        let mut ids: Vec<ScheduleId> = attempts.iter().map(|a| a.schedule.id).collect();
        ids.sort();
        ids.dedup();
        // The row locks order these outcomes' events after any concurrent change's event.
        let mut schedules: HashMap<ScheduleId, Schedule> = tx
            .schedule_get_many(&ids, true)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let now = self.clock.now();
        let mut decided = Vec::with_capacity(attempts.len());
        for attempt in attempts {
            let Some(schedule) = schedules.get(&attempt.schedule.id) else {
                decided.push(None);
                continue;
            };
            let (finish, result) = self.decide(
                schedule,
                &attempt.job,
                attempt.result,
                attempt.ended_at,
                now,
            );
            decided.push(Some((finish, attempt.job.schedule_id, result)));
        }
        let finishes: Vec<JobFinish> = decided
            .iter()
            .flatten()
            .map(|(finish, _, _)| finish.clone())
            .collect();
        let written: HashMap<JobId, Job> = tx
            .job_finish_many(&finishes)
            .await?
            .into_iter()
            .map(|j| (j.id, j))
            .collect();

        let mut results = Vec::with_capacity(decided.len());
        let mut outbox = Vec::with_capacity(decided.len());
        let mut retry_pending = false;
        // Schedules whose job ended: an occurrence buffered behind it may run now.
        let mut ended: Vec<ScheduleId> = Vec::new();
        for decision in decided {
            let Some((finish, schedule_id, result)) = decision else {
                results.push(AttemptResult::Superseded);
                continue;
            };
            let (Some(job), Some(schedule)) =
                (written.get(&finish.id), schedules.get_mut(&schedule_id))
            else {
                tracing::warn!(job_id = %finish.id, "outcome arrived after the attempt was recorded elsewhere; dropped");
                results.push(AttemptResult::Superseded);
                continue;
            };
            let changed = self
                .schedule_after_outcome(&mut *tx, schedule, job, result, now)
                .await?;
            outbox.extend(changed.before_outcome);
            outbox.push(
                self.outcome_event(&mut *tx, schedule, job, result, now)
                    .await?,
            );
            outbox.extend(changed.after_outcome);
            retry_pending |= result == AttemptResult::Retry;
            if result != AttemptResult::Retry {
                ended.push(schedule.id);
            }
            results.push(result);
        }
        retry_pending |= release_after_ended(&mut *tx, &ended, &schedules, now).await?;
        outbox.extend(delete_after_ended(&mut *tx, ended, &mut schedules, now).await?);
        tx.outbox_insert_many(&outbox).await?;
        if retry_pending {
            // A retry is due in the future, or a released occurrence now: the loop
            // recomputes when to wake.
            tx.notify_on_commit(Channel::Schedules);
        }
        tx.commit().await?;
        Ok(results)
    }

    /// What a recorded outcome does to its schedule: its retry count, a one-shot completed (its
    /// event goes out after the outcome's own), a schedule that pauses on failure paused (with
    /// its audit entry; the event goes out before the outcome's). Written only when something
    /// changed.
    async fn schedule_after_outcome(
        &self,
        tx: &mut dyn TenantTx,
        schedule: &mut Schedule,
        job: &Job,
        result: AttemptResult,
        now: DateTime<Utc>,
    ) -> StoreResult<ScheduleEvents> {
        let before = (schedule.status, schedule.retry_count);
        match result {
            AttemptResult::Retry => schedule.retry_count += 1,
            AttemptResult::Succeeded | AttemptResult::DeadLettered | AttemptResult::Failed => {
                schedule.retry_count = 0;
            }
            AttemptResult::Superseded => {}
        }
        if matches!(
            result,
            AttemptResult::Succeeded | AttemptResult::DeadLettered
        ) {
            complete_one_shot(schedule);
        }
        // A dead letter pauses a schedule that asks for it (a completed one stays so).
        let paused_by_failure = result == AttemptResult::DeadLettered
            && schedule.policies.pause_on_failure
            && schedule.status == ScheduleStatus::Active;
        if paused_by_failure {
            schedule.status = ScheduleStatus::Paused;
        }
        if (schedule.status, schedule.retry_count) == before {
            return Ok(ScheduleEvents::default());
        }
        let before_change = schedule.clone();
        *schedule = tx
            .schedule_set_outcome(&ScheduleSetOutcome {
                id: schedule.id,
                retry_count: schedule.retry_count,
                // Completing a one-shot, or pausing on failure.
                status: (schedule.status != before.0).then_some(schedule.status),
                now,
            })
            .await?;
        if schedule.status == ScheduleStatus::Completed && before.0 != ScheduleStatus::Completed {
            // A one-shot whose job ended: the schedule is done.
            let completed = EventPayload::completed(schedule, Some(job), now).by(ENGINE_ACTOR);
            return Ok(ScheduleEvents {
                before_outcome: None,
                after_outcome: Some(completed.into_event(schedule)),
            });
        }
        if !paused_by_failure {
            return Ok(ScheduleEvents::default());
        }
        let reason = format!(
            "paused on failure: job {} landed in the dead-letter queue ({})",
            job.id,
            job.error.as_deref().unwrap_or("failed")
        );
        tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, "schedule paused on failure");
        tx.audit_insert(&engine_audit(
            "schedule.pause",
            &before_change,
            schedule,
            &reason,
            now,
        ))
        .await?;
        let paused = EventPayload::for_schedule(events::SCHEDULE_PAUSED, schedule, now)
            .with_job(job)
            .with_reason(&reason)
            .by(ENGINE_ACTOR);
        Ok(ScheduleEvents {
            before_outcome: Some(paused.into_event(schedule)),
            after_outcome: None,
        })
    }

    /// The event of a recorded outcome; a dead letter's entry is written with it.
    async fn outcome_event(
        &self,
        tx: &mut dyn TenantTx,
        schedule: &Schedule,
        job: &Job,
        result: AttemptResult,
        now: DateTime<Utc>,
    ) -> StoreResult<NewEvent> {
        let payload = match result {
            AttemptResult::Succeeded => {
                EventPayload::for_schedule(events::JOB_SUCCEEDED, schedule, now).with_job(job)
            }
            AttemptResult::Retry => {
                EventPayload::for_schedule(events::JOB_RETRIED, schedule, now).with_job(job)
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
                        backfill: job.backfill,
                        now,
                    })
                    .await?;
                EventPayload::for_schedule(events::JOB_FAILED, schedule, now)
                    .with_job(job)
                    .with_dlq(&entry)
            }
            AttemptResult::Failed | AttemptResult::Superseded => {
                EventPayload::for_schedule(events::JOB_FAILED, schedule, now).with_job(job)
            }
        };
        Ok(payload.by(ENGINE_ACTOR).into_event(schedule))
    }

    /// What an attempt's outcome does to its job, given the schedule's current retry state.
    fn decide(
        &self,
        schedule: &Schedule,
        job: &Job,
        result: Result<Value, Failure>,
        ended_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> (JobFinish, AttemptResult) {
        let detail = attempt_detail(job, &result, ended_at);
        // A recovered attempt is written only if its lease really ran out: had its instance
        // renewed it meanwhile, that instance is alive and records the call's real outcome.
        let lease_expired_by = match &result {
            Err(failure) if failure.is_abandoned() => Some(now),
            _ => None,
        };
        let (outcome, result) = match result {
            Ok(answer) => (
                JobOutcome::Succeeded { result: answer },
                AttemptResult::Succeeded,
            ),
            Err(failure) => {
                let error = failure.message;
                // The retry budget is the job's own: its attempts so far (an attempt released
                // before its call started is not one). Under `allow_all` several jobs of one
                // schedule retry side by side, and none spends another's budget.
                let decision = self
                    .config
                    .retry
                    .decide((job.attempt - 1).max(0), schedule.max_retries);
                match decision {
                    // A deleted schedule's failed job is not retried.
                    _ if schedule.status == ScheduleStatus::Deleted => {
                        (JobOutcome::Failed { error }, AttemptResult::Failed)
                    }
                    // Retrying cannot cure a misconfiguration: dead-letter it now.
                    _ if failure.class == FailureClass::Configuration => {
                        (JobOutcome::Failed { error }, AttemptResult::DeadLettered)
                    }
                    RetryDecision::Retry { delay, .. } => (
                        JobOutcome::RetryPending {
                            // An attempt lost with its instance never reached a verdict: it is
                            // tried again at once. A schedule paused while this attempt ran:
                            // the retry waits for the resume (the due selection skips it) and
                            // is due as soon as it comes.
                            next_attempt_at: if failure.retry_now
                                || schedule.status == ScheduleStatus::Paused
                            {
                                now
                            } else {
                                now + chrono_duration(delay)
                            },
                            error,
                        },
                        AttemptResult::Retry,
                    ),
                    RetryDecision::Exhausted => {
                        (JobOutcome::Failed { error }, AttemptResult::DeadLettered)
                    }
                }
            }
        };
        let finish = JobFinish {
            id: job.id,
            attempt: job.attempt,
            epoch: job.lease_epoch,
            outcome,
            now,
            detail,
            lease_expired_by,
        };
        (finish, result)
    }
}

/// The engine's audit entry for its own change of a schedule (`action`, from `before` to
/// `after`), with why in the snapshot after it.
pub(super) fn engine_audit(
    action: &str,
    before: &Schedule,
    after: &Schedule,
    reason: &str,
    now: DateTime<Utc>,
) -> NewAudit {
    let mut after_snapshot = serde_json::to_value(after).ok();
    if let Some(Value::Object(fields)) = &mut after_snapshot {
        fields.insert("reason".to_owned(), Value::String(reason.to_owned()));
    }
    let engine = Actor {
        name: ENGINE_ACTOR.to_owned(),
        correlation_id: Some(after.id.to_string()),
        now,
    };
    engine.audit(
        action,
        "schedule",
        after.id.to_string(),
        serde_json::to_value(before).ok(),
        after_snapshot,
    )
}

/// Releases what was buffered behind the schedules whose job ended; true when something was.
async fn release_after_ended(
    tx: &mut dyn TenantTx,
    ended: &[ScheduleId],
    schedules: &HashMap<ScheduleId, Schedule>,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    if ended.is_empty() {
        return Ok(false);
    }
    let mut released_any = false;
    for id in tx.schedules_with_buffered(ended).await? {
        let Some(schedule) = schedules.get(&id) else {
            continue;
        };
        let released = release_buffered(&mut *tx, schedule, now).await?;
        if !released.is_empty() {
            tracing::info!(schedule_id = %id, released = released.len(), "buffered occurrences released after the open job ended");
            released_any = true;
        }
    }
    Ok(released_any)
}

/// Deletes the completed schedules among those whose job just ended that ask for it
/// (`after_completion: delete`); their events.
async fn delete_after_ended(
    tx: &mut dyn TenantTx,
    mut ended: Vec<ScheduleId>,
    schedules: &mut HashMap<ScheduleId, Schedule>,
    now: DateTime<Utc>,
) -> StoreResult<Vec<NewEvent>> {
    ended.sort();
    ended.dedup();
    let mut events = Vec::new();
    for id in ended {
        if let Some(schedule) = schedules.get_mut(&id) {
            events.extend(delete_when_done(tx, schedule, now).await?);
        }
    }
    Ok(events)
}

/// The events of what an outcome did to its schedule, around the outcome's own event: a pause
/// on failure goes out before it, a completion after it.
#[derive(Debug, Default)]
struct ScheduleEvents {
    before_outcome: Option<NewEvent>,
    after_outcome: Option<NewEvent>,
}

fn complete_one_shot(schedule: &mut Schedule) {
    if schedule.kind() == ScheduleKind::Once && schedule.status == ScheduleStatus::Active {
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
        base_url: schedule.target.base_url().cloned().map_err(Clone::clone),
        fence: None,
        trace: Some((
            trace::traceparent(job.id, job.attempt),
            trace::tracestate(job.attempt),
        )),
        prepared: None,
    }
}
