//! The producer's calls: ready attempts are started as slots allow, each call on a task of its
//! own that reports its end back; the outcome goes to the recorder, which reports back when it
//! is durable.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};

use futures_util::FutureExt;

use super::super::fire::FireEvent;
use super::super::held::{Ready, Start};
use super::super::lease::call_margin;
use super::super::outcome::{Attempt, Failure, call_alone, run_request};
use super::super::parts::Outcome;
use super::super::slots::{Slot, origin_shown};
use super::{Called, Producer};
use crate::core::breaker::{Admission, CIRCUIT_OPEN, CallHealth};
use crate::core::dispatch::{CallFence, PreparedCall};
use crate::core::metrics::{EnvCounter, inc};
use crate::core::model::*;
use crate::core::trace::{Span, Step};

impl Producer {
    /// Starts ready attempts as slots allow, one per environment and origin in turn.
    pub(super) fn launch_ready(&mut self) {
        if !self.held.pressing() {
            self.drain.observe(self.parts.clock.monotonic(), 0, false);
            return;
        }
        if self.slots.room() == 0 {
            return;
        }
        let slots = &mut self.slots;
        let taken = self.held.take_ready(|schedule| slots.reserve_for(schedule));
        let started = taken.len();
        let left = taken.iter().any(|(ready, _)| ready.held);
        for (ready, slot) in taken {
            self.launch(ready, slot);
        }
        let waiting = self.held.pressing();
        self.drain
            .observe(self.parts.clock.monotonic(), started, waiting);
        if left {
            self.freed();
        }
    }

    /// Starts an attempt: its call on a task of its own (or, while its origin's circuit is
    /// open, a fast failure); the outcome comes back as a [`Called`].
    pub(super) fn launch(&mut self, ready: Ready, slot: Slot) {
        let Some(deadline) = self.lease_for_call(&ready) else {
            self.slots.give_back(slot);
            return self.not_launched(ready);
        };
        self.fires.step(ready.job.id, FireEvent::SlotTaken);
        let Ready {
            schedule,
            mut job,
            start,
            prepared,
            ..
        } = ready;
        let now = self.parts.clock.now();
        if start == Start::Fire {
            self.count_fire(&mut job, now);
        }
        if let Some(origin) = slot.origin.as_deref()
            && let Admission::Reject { until } = self.breakers.admit(origin, now)
        {
            inc(&self.parts.metrics.calls.breaker_rejections);
            let failure = self.circuit_open(origin, until, &schedule, &job);
            return self.call_done(Called {
                attempt: Attempt::called(schedule, job, Err(failure), now),
                slot,
                health: None,
                unsent: None,
            });
        }
        let margin = call_margin(self.parts.config.lease);
        let fence = CallFence::new(self.parts.clock.clone(), deadline, margin);
        self.spawn_call(schedule, job, start, slot, fence, prepared);
    }

    /// The lease's deadline the call checks before it leaves, if the lease holds with the
    /// margin on the monotonic clock: an attempt taken over elsewhere is not called, and one
    /// whose lease is not known to hold (the instance stalled, or a renewal failed) waits for
    /// a renewal.
    fn lease_for_call(&mut self, ready: &Ready) -> Option<Arc<AtomicU64>> {
        let mono = self.parts.clock.monotonic();
        let margin = call_margin(self.parts.config.lease);
        let lease = self.running.get_mut(&ready.job.id)?;
        (!lease.lost && lease.holds(mono, margin)).then(|| {
            lease.called = true;
            lease.deadline()
        })
    }

    /// An attempt whose lease did not hold at its launch: it waits for a renewal, or, taken
    /// over elsewhere, is dropped.
    fn not_launched(&mut self, ready: Ready) {
        if self.running.get(&ready.job.id).is_some_and(|l| !l.lost) {
            self.fires.step(ready.job.id, FireEvent::LeaseUnsure);
            self.wait_for_renewal(ready);
        } else {
            self.fires.step(ready.job.id, FireEvent::LeaseLost);
            self.drop_taken_over(&ready);
        }
    }

    /// A fire is counted and its lateness observed when it is called; the attempt ledger
    /// records when the call really started (a fire may have waited for a slot past its
    /// instant).
    fn count_fire(&self, job: &mut Job, now: DateTime<Utc>) {
        let metrics = &self.parts.metrics;
        metrics.count(job.env_id, EnvCounter::Fires);
        job.started_at = Some(now);
        let late = now - job.scheduled_for;
        metrics.lateness.observe(late.to_std().unwrap_or_default());
    }

    /// The fast failure of a call whose origin's circuit is open.
    fn circuit_open(
        &self,
        origin: &str,
        until: DateTime<Utc>,
        schedule: &Schedule,
        job: &Job,
    ) -> Failure {
        let origin = origin_shown(origin).to_owned();
        inc(&self.parts.metrics.failures);
        tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, origin = %origin, "circuit open: failing fast");
        Failure::circuit_open(format!(
            "{CIRCUIT_OPEN}: {origin} kept timing out or refusing; calls fail fast until {}",
            until.to_rfc3339()
        ))
    }

    /// Runs the call on a task of its own; its end, with what it says about the origin's
    /// health, comes back as a [`Called`]. The task holds nothing of the producer's.
    fn spawn_call(
        &mut self,
        schedule: Schedule,
        job: Job,
        start: Start,
        slot: Slot,
        fence: CallFence,
        prepared: Option<PreparedCall>,
    ) {
        let engine = &self.parts;
        let dispatcher = engine.dispatcher.clone();
        let metrics = engine.metrics.clone();
        let clock = engine.clock.clone();
        let spans = engine.spans.clone();
        let timeout = engine.config.job_timeout;
        let done = self.calls_tx.clone();
        let (abort, aborted) = tokio::sync::oneshot::channel::<()>();
        self.call_aborts.insert(job.id, abort);
        self.call_tasks.spawn(async move {
            // A call that panics still ends in an outcome: otherwise its job would stay
            // running (its lease renewed) for the life of the process and every later fire
            // of its schedule be skipped.
            let began = clock.now();
            let mut request = run_request(&schedule, &job);
            request.fence = Some(fence);
            request.prepared = prepared;
            let call = AssertUnwindSafe(call_alone(
                &*dispatcher,
                &*clock,
                &metrics,
                timeout,
                &schedule,
                &job,
                request,
            ))
            .catch_unwind();
            // Aborted when the job is no longer this instance's (a dropped sender is not an
            // abort: the call goes on).
            let abort = async {
                if aborted.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let called = tokio::select! {
                called = call => Some(called),
                () = abort => None,
            };
            let (result, health, unsent) = match called {
                None => {
                    inc(&metrics.calls.aborted);
                    tracing::info!(schedule_id = %schedule.id, job_id = %job.id, "call aborted: the job is no longer this instance's");
                    (Err(Failure::aborted()), None, None)
                }
                Some(Ok(Some((result, health)))) => (result, Some(health), None),
                // Not sent: nothing reached the target and nothing says anything of it.
                Some(Ok(None)) => (Ok(serde_json::Value::Null), None, Some(start)),
                Some(Err(_)) => {
                    metrics.count(schedule.env_id, EnvCounter::Failures);
                    tracing::error!(schedule_id = %schedule.id, job_id = %job.id, "the call panicked; recorded as a failed attempt");
                    (Err(Failure::panicked()), Some(CallHealth::Neutral), None)
                }
            };
            let ended = clock.now();
            if unsent.is_none() && spans.enabled() {
                let span = Span::step(Step::Call, schedule.id, schedule.env_id, &job, began, ended);
                spans.export(vec![match &result {
                    Ok(_) => span,
                    Err(failure) => span.failed(failure.message.clone()),
                }]);
            }
            let _ = done.send(Called {
                attempt: Attempt::called(schedule, job, result, ended),
                slot,
                health,
                unsent,
            });
        });
    }

    /// A call ended: its slot is free, its outcome goes to the recorder (its backlog place is
    /// held until the record is done).
    pub(super) fn call_done(&mut self, called: Called) {
        // Finished tasks leave the set (their ends came through the channel).
        while self.call_tasks.try_join_next().is_some() {}
        self.call_aborts.remove(&called.attempt.job.id);
        if let Some(start) = called.unsent {
            self.slots.give_back(called.slot);
            let Attempt { schedule, job, .. } = called.attempt;
            tracing::info!(job_id = %job.id, "a call was not sent: its lease is not known to hold; renewing it first");
            self.fires.step(job.id, FireEvent::LeaseUnsure);
            self.wait_for_renewal(Ready {
                schedule,
                job,
                start,
                held: false,
                prepared: None,
            });
            self.freed();
            return;
        }
        // What the call says about its origin's health, kept by the producer alone.
        if let (Some(origin), Some(health)) = (called.slot.origin.as_deref(), called.health) {
            let ended_at = called
                .attempt
                .ended_at
                .unwrap_or_else(|| self.parts.clock.now());
            let calls = &self.parts.metrics.calls;
            if self.breakers.record(origin, health, ended_at) {
                inc(&calls.breaker_openings);
            }
            let not_closed = i64::try_from(self.breakers.not_closed()).unwrap_or(i64::MAX);
            calls
                .breakers_open
                .store(not_closed, std::sync::atomic::Ordering::Relaxed);
        }
        self.slots.call_ended(called.slot);
        self.fires.step(called.attempt.job.id, FireEvent::CallEnded);
        self.record(called.attempt);
        self.freed();
    }

    /// Aborts the call in flight of a job this instance no longer holds (cancelled for a newer
    /// occurrence, or taken over): its outcome comes back as a failure the fence refuses.
    pub(super) fn abort_call(&mut self, job: JobId) {
        if let Some(abort) = self.call_aborts.remove(&job) {
            let _ = abort.send(());
        }
    }

    /// Jobs cancelled for a newer occurrence: those this instance holds are its no longer
    /// (an attempt not called yet is dropped at its launch; a call in flight is aborted).
    pub(super) fn cancelled(&mut self, jobs: Vec<JobId>) {
        for job in jobs {
            if let Some(lease) = self.running.get_mut(&job) {
                lease.lost = true;
            }
            self.abort_call(job);
        }
    }

    pub(super) fn record(&mut self, attempt: Attempt) {
        if let Some(recorder) = &self.to_recorder {
            let _ = recorder.send(attempt);
        }
    }

    /// The recorder wrote these attempts' answers ahead of their records: their leases are
    /// renewed no more (see [`super::super::lease::Lease::answer_durable`]).
    pub(super) fn answers_durable(&mut self, jobs: Vec<JobId>) {
        for job in jobs {
            if let Some(lease) = self.running.get_mut(&job) {
                lease.answer_durable = true;
            }
        }
    }

    /// The recorder made these outcomes durable.
    pub(super) fn recorded(&mut self, outcomes: Vec<(JobId, Outcome)>) {
        for (job, outcome) in outcomes {
            self.fires.step(job, FireEvent::Recorded);
            // A recovered (abandoned) attempt was never this instance's to renew; any other
            // outcome ends the attempt this instance launched.
            if !self.recovering.remove(&job) && self.running.remove(&job).is_some() {
                self.slots.recorded();
            }
            self.summary.add(&outcome);
        }
        self.freed();
    }
}
