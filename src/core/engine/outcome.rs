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

use super::{AttemptResult, ENGINE_ACTOR, Engine, Outcome, chrono_duration};
use crate::core::breaker::CallHealth;
use crate::core::buffered::release_buffered;
use crate::core::clock::{Clock, wait_on};
use crate::core::dispatch::{CallFence, DispatchError, Dispatcher, FailureClass, RunRequest};
use crate::core::events::{self, EventPayload};
use crate::core::metrics::{Metrics, inc};
use crate::core::model::*;
use crate::core::ops::Actor;
use crate::core::retry::RetryDecision;
use crate::core::store::*;

/// Step 2: one proxy-back call, bounded by the job timeout alone (it runs on its own task; the
/// timeout is kept on the injected clock), with what it says about the target origin's health.
/// `None` when the request never left because `fence` did not hold: not an attempt.
pub(super) async fn call_alone(
    dispatcher: &dyn Dispatcher,
    clock: &dyn Clock,
    metrics: &Metrics,
    job_timeout: Duration,
    schedule: &Schedule,
    job: &Job,
    fence: Option<CallFence>,
) -> Option<(Result<Value, Failure>, CallHealth)> {
    // A task may start long after it was spawned (a stalled or starved process): the lease
    // is looked at again here, and once more by the dispatcher just before the request goes.
    if fence.as_ref().is_some_and(|fence| !fence.holds()) {
        return None;
    }
    let mut request = run_request(schedule, job);
    request.fence = fence;
    let err = tokio::select! {
        answer = dispatcher.run(&request) => match answer {
            Ok(answer) => {
                inc(&metrics.successes);
                return Some((Ok(answer), CallHealth::Answered));
            }
            Err(DispatchError::LeaseUnsure) => return None,
            Err(err) => err,
        },
        () = wait_on(clock, job_timeout) => DispatchError::Timeout(job_timeout),
    };
    inc(&metrics.failures);
    let health = match &err {
        DispatchError::Timeout(_) | DispatchError::Transport(_) => CallHealth::Unreachable,
        DispatchError::Status(..) | DispatchError::Decode(_) => CallHealth::Answered,
        _ => CallHealth::Neutral,
    };
    let failure = Failure::of(&err);
    tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, attempt = job.attempt, error = %failure.message, "proxy-back failed");
    Some((Err(failure), health))
}

/// How long recording waits for a schedule row another transaction holds.
const RECORD_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

impl Engine {
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
        match self.record_outcomes(env, attempts).await {
            Ok(results) => Ok(ids
                .into_iter()
                .zip(results)
                .map(|((id, abandoned), result)| {
                    if abandoned && result != AttemptResult::Superseded {
                        inc(&self.metrics.failures);
                    }
                    match result {
                        AttemptResult::Retry => inc(&self.metrics.retries),
                        AttemptResult::DeadLettered => inc(&self.metrics.dlq_landings),
                        _ => {}
                    }
                    (id, Outcome::Attempted { result })
                })
                .collect()),
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

    /// One transaction for the jobs, the schedules' retry state, a DLQ entry where retries are
    /// exhausted, and the outcome events. A job whose attempt was recorded elsewhere first (it
    /// went stale and was recovered) is left alone and reported as superseded.
    async fn record_outcomes(
        &self,
        env: EnvId,
        attempts: Vec<Attempt>,
    ) -> StoreResult<Vec<AttemptResult>> {
        let written_ahead: Vec<JobId> = attempts
            .iter()
            .filter(|a| a.written_ahead)
            .map(|a| a.job.id)
            .collect();
        let mut tx = self.store.tenant_begin(env).await?;
        // A schedule row held elsewhere (an operator's open transaction) fails this record
        // after a while, to be tried again, rather than pinning the connection for ever.
        tx.lock_timeout_set(RECORD_LOCK_TIMEOUT).await?;
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
            if (schedule.status, schedule.retry_count) != before {
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
                if paused_by_failure {
                    let reason = format!(
                        "paused on failure: job {} landed in the dead-letter queue ({})",
                        job.id,
                        job.error.as_deref().unwrap_or("failed")
                    );
                    tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, "schedule paused on failure");
                    outbox.push(
                        EventPayload::for_schedule(events::SCHEDULE_PAUSED, schedule, now)
                            .with_job(job)
                            .with_reason(&reason)
                            .by(ENGINE_ACTOR)
                            .into_event(schedule),
                    );
                    tx.audit_insert(&paused_on_failure_audit(
                        &before_change,
                        schedule,
                        &reason,
                        now,
                    ))
                    .await?;
                }
            }
            let payload = match result {
                AttemptResult::Succeeded => {
                    EventPayload::for_schedule(events::SCHEDULE_COMPLETED, schedule, now)
                        .with_job(job)
                }
                AttemptResult::Retry => {
                    retry_pending = true;
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
                            now,
                        })
                        .await?;
                    EventPayload::for_schedule(events::SCHEDULE_FAILED, schedule, now)
                        .with_job(job)
                        .with_dlq(&entry)
                }
                AttemptResult::Failed | AttemptResult::Superseded => {
                    EventPayload::for_schedule(events::SCHEDULE_FAILED, schedule, now).with_job(job)
                }
            };
            outbox.push(payload.by(ENGINE_ACTOR).into_event(schedule));
            if result != AttemptResult::Retry {
                ended.push(schedule.id);
            }
            results.push(result);
        }
        if !ended.is_empty() {
            for id in tx.schedules_with_buffered(&ended).await? {
                let Some(schedule) = schedules.get(&id) else {
                    continue;
                };
                let released = release_buffered(&mut *tx, schedule, now).await?;
                if !released.is_empty() {
                    tracing::info!(schedule_id = %id, released = released.len(), "buffered occurrences released after the open job ended");
                    retry_pending = true;
                }
            }
        }
        tx.outbox_insert_many(&outbox).await?;
        if !written_ahead.is_empty() {
            tx.job_answers_forget(&written_ahead).await?;
        }
        if retry_pending {
            // A retry is due in the future, or a released occurrence now: the loop
            // recomputes when to wake.
            tx.notify_on_commit(Channel::Schedules);
        }
        tx.commit().await?;
        Ok(results)
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

/// What the attempt ledger records of a call beyond its outcome: when it started, the status
/// and an excerpt of the answer (the stored result on success), and the failure's kind.
fn attempt_detail(
    job: &Job,
    result: &Result<Value, Failure>,
    ended_at: Option<DateTime<Utc>>,
) -> AttemptDetail {
    match result {
        Ok(answer) => AttemptDetail {
            started_at: job.started_at,
            ended_at,
            http_status: None,
            error_class: None,
            response_excerpt: match answer {
                Value::Null => None,
                other => AttemptDetail::excerpt(&other.to_string()),
            },
        },
        Err(failure) => AttemptDetail {
            started_at: job.started_at,
            ended_at,
            http_status: failure.http_status,
            error_class: Some(failure.kind.to_owned()),
            response_excerpt: failure.excerpt.as_deref().and_then(AttemptDetail::excerpt),
        },
    }
}

/// A failed attempt: its class decides between retrying and dead-lettering at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Failure {
    pub class: FailureClass,
    /// What the job and a DLQ entry record; a configuration failure starts with
    /// `configuration: `.
    pub message: String,
    /// Retry at once rather than after the backoff (the attempt was lost, not refused).
    pub retry_now: bool,
    /// The attempt ledger's error class (see [`DispatchError::kind`]).
    pub kind: &'static str,
    /// The status the service answered with, if it answered.
    pub http_status: Option<u16>,
    /// The start of the answer's body, if it answered with one.
    pub excerpt: Option<String>,
}

impl Failure {
    fn of(err: &DispatchError) -> Failure {
        let class = err.class();
        let message = match class {
            FailureClass::Configuration => format!("{}: {err}", FailureClass::CONFIGURATION),
            FailureClass::Retryable => err.to_string(),
        };
        let (http_status, excerpt) = match err {
            DispatchError::Status(code, excerpt) => (Some(*code), Some(excerpt.clone())),
            _ => (None, None),
        };
        Failure {
            class,
            message,
            retry_now: false,
            kind: err.kind(),
            http_status,
            excerpt,
        }
    }

    /// Whether this failure stands for an attempt recovered from a stopped instance.
    pub(super) fn is_abandoned(&self) -> bool {
        self.kind == Self::ABANDONED
    }

    /// An attempt whose instance stopped before recording it: retried at once (it was lost,
    /// not refused).
    pub(super) fn abandoned(message: String) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message,
            retry_now: true,
            kind: Self::ABANDONED,
            http_status: None,
            excerpt: None,
        }
    }

    /// A call not made because its origin's circuit is open.
    pub(super) fn circuit_open(message: String) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message,
            retry_now: false,
            kind: Self::CIRCUIT_OPEN,
            http_status: None,
            excerpt: None,
        }
    }

    /// A call that panicked (a defect, not the target's doing): retried after the backoff.
    pub(super) fn panicked() -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message: "the call failed inside the scheduler (an internal error)".to_owned(),
            retry_now: false,
            kind: Self::INTERNAL,
            http_status: None,
            excerpt: None,
        }
    }

    /// The ledger's error class of a call that failed inside the scheduler.
    pub(super) const INTERNAL: &'static str = "internal";
    /// The ledger's error class of an abandoned attempt.
    pub(super) const ABANDONED: &'static str = "abandoned";
    /// The ledger's error class of a call the open circuit refused.
    pub(super) const CIRCUIT_OPEN: &'static str = "circuit_open";
    /// The ledger's error class of an error status (see [`DispatchError::kind`]).
    pub(super) const STATUS: &'static str = "status";
    /// The ledger's error class of an answer that could not be decoded.
    pub(super) const DECODE: &'static str = "decode";
}

/// One attempt's call, waiting to be recorded.
#[derive(Clone)]
pub(super) struct Attempt {
    pub schedule: Schedule,
    pub job: Job,
    pub result: Result<Value, Failure>,
    /// When the call returned (`None` for an attempt recovered from another instance): the
    /// attempt ledger's end and duration are the call's, not its record's.
    pub ended_at: Option<DateTime<Utc>>,
    /// Its answer was written ahead of the record (see [`Attempt::answer`]): the record
    /// deletes it.
    pub written_ahead: bool,
}

impl Attempt {
    /// A call just made, with what it returned.
    pub(super) fn called(
        schedule: Schedule,
        job: Job,
        result: Result<Value, Failure>,
        ended_at: DateTime<Utc>,
    ) -> Self {
        Self {
            schedule,
            job,
            result,
            ended_at: Some(ended_at),
            written_ahead: false,
        }
    }

    /// Whether the service answered this call (see [`encode_answer`]).
    pub(super) fn was_answered(&self) -> bool {
        self.ended_at.is_some() && is_answer(&self.result)
    }

    /// The answer to write ahead of the record, if the service answered.
    pub(super) fn answer(&self) -> Option<JobAnswer> {
        Some(JobAnswer {
            job_id: self.job.id,
            attempt: self.job.attempt,
            answered_at: self.ended_at?,
            answer: encode_answer(&self.result)?,
        })
    }
}

/// Whether a call's result is the service's answer: a result, an error status, or a body it
/// could not decode. A timeout, a refused connection or a call never made leaves nothing to
/// keep: recovering such an attempt as abandoned loses nothing the service said.
fn is_answer(result: &Result<Value, Failure>) -> bool {
    match result {
        Ok(_) => true,
        Err(failure) => failure.http_status.is_some() || failure.kind == Failure::DECODE,
    }
}

/// How an answer is written ahead of its record; [`answered`] reads it back.
pub(super) fn encode_answer(result: &Result<Value, Failure>) -> Option<Value> {
    if !is_answer(result) {
        return None;
    }
    Some(match result {
        Ok(result) => serde_json::json!({ "succeeded": result }),
        Err(failure) => serde_json::json!({ "failed": {
            "kind": failure.kind,
            "message": failure.message,
            "http_status": failure.http_status,
            "excerpt": failure.excerpt,
        }}),
    })
}

/// What an answer written ahead says the call returned: the outcome the instance that made
/// the call would have recorded. `None` for an encoding this version does not know.
pub(super) fn answered(answer: &Value) -> Option<Result<Value, Failure>> {
    if let Some(result) = answer.get("succeeded") {
        return Some(Ok(result.clone()));
    }
    let failed = answer.get("failed")?;
    let text = |key: &str| failed.get(key).and_then(Value::as_str).map(str::to_owned);
    let kind = match text("kind").as_deref() {
        Some(Failure::DECODE) => Failure::DECODE,
        _ => Failure::STATUS,
    };
    Some(Err(Failure {
        class: FailureClass::Retryable,
        message: text("message")?,
        retry_now: false,
        kind,
        http_status: failed
            .get("http_status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok()),
        excerpt: text("excerpt"),
    }))
}

/// The audit entry of a schedule the engine paused on failure: the row before and after, the
/// reason beside the after snapshot.
fn paused_on_failure_audit(
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
        "schedule.pause",
        "schedule",
        after.id.to_string(),
        serde_json::to_value(before).ok(),
        after_snapshot,
    )
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
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn failure(kind: &'static str, http_status: Option<u16>, excerpt: Option<String>) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message: format!("the service answered {http_status:?}"),
            retry_now: false,
            kind,
            http_status,
            excerpt,
        }
    }

    #[test]
    fn what_the_service_did_not_say_is_not_written_ahead() {
        let timeout = Err(failure("timeout", None, None));
        assert_eq!(encode_answer(&timeout), None);
        let abandoned = Err(Failure::abandoned("lost".into()));
        assert_eq!(encode_answer(&abandoned), None);
        let circuit = Err(Failure::circuit_open("open".into()));
        assert_eq!(encode_answer(&circuit), None);
    }

    #[test]
    fn an_unknown_encoding_is_not_an_answer() {
        assert_eq!(answered(&json!({"maybe": 1})), None);
        assert_eq!(answered(&json!({"failed": {"kind": "status"}})), None);
    }

    proptest! {
        /// Whatever the service answered reads back as the outcome its instance would have
        /// recorded.
        #[test]
        fn an_answer_reads_back_as_it_was_written(
            ok in any::<bool>(),
            n in any::<i64>(),
            text in ".{0,40}",
            status in proptest::option::of(100u16..600),
            excerpt in proptest::option::of(".{0,40}"),
        ) {
            let result = if ok {
                Ok(json!({"n": n, "text": text}))
            } else {
                let kind = if status.is_some() { Failure::STATUS } else { Failure::DECODE };
                Err(failure(kind, status, excerpt))
            };
            let encoded = encode_answer(&result).expect("an answer");
            prop_assert_eq!(answered(&encoded), Some(result));
        }
    }
}
