//! The producer's calls: ready attempts are started as slots allow, each call on a task of its
//! own that reports its end back; the outcome goes to the recorder, which reports back when it
//! is durable.

use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

use super::super::Outcome;
use super::super::fire::FireEvent;
use super::super::held::{Ready, Start};
use super::super::lease::call_margin;
use super::super::outcome::{Attempt, Failure, call_alone};
use super::super::slots::{Slot, origin_shown};
use super::{Called, Producer};
use crate::core::breaker::{Admission, CIRCUIT_OPEN, CallHealth};
use crate::core::dispatch::CallFence;
use crate::core::metrics::inc;
use crate::core::model::*;

impl Producer {
    /// Starts ready attempts as slots allow, one per environment and origin in turn.
    pub(super) fn launch_ready(&mut self) {
        if !self.held.pressing() || self.slots.room() == 0 {
            return;
        }
        let slots = &mut self.slots;
        let taken = self.held.take_ready(|schedule| slots.reserve_for(schedule));
        let left = taken.iter().any(|(ready, _)| ready.held);
        for (ready, slot) in taken {
            self.launch(ready, slot);
        }
        if left {
            self.freed();
        }
    }

    /// Starts an attempt: its call on a task of its own (or, while its origin's circuit is
    /// open, a fast failure); the outcome comes back as a [`Called`].
    pub(super) fn launch(&mut self, ready: Ready, slot: Slot) {
        // The lease first: an attempt taken over elsewhere is not called; one whose lease is
        // not known to hold with the margin (the instance stalled, or a renewal failed) waits
        // for a renewal.
        let mono = self.engine.clock.monotonic();
        let margin = call_margin(self.engine.config.lease);
        let fence = match self.running.get_mut(&ready.job.id) {
            Some(lease) if !lease.lost && lease.holds(mono, margin) => {
                lease.called = true;
                lease.deadline()
            }
            Some(lease) if !lease.lost => {
                self.slots.give_back(slot);
                self.fires.step(ready.job.id, FireEvent::LeaseUnsure);
                self.wait_for_renewal(ready);
                return;
            }
            _ => {
                self.slots.give_back(slot);
                self.fires.step(ready.job.id, FireEvent::LeaseLost);
                self.drop_taken_over(&ready);
                return;
            }
        };
        self.fires.step(ready.job.id, FireEvent::SlotTaken);
        let Ready {
            schedule,
            mut job,
            start,
            ..
        } = ready;
        let engine = &self.engine;
        let now = engine.clock.now();
        if start == Start::Fire {
            inc(&engine.metrics.fires);
            // The attempt ledger records when the call really started (a fire may have
            // waited for a slot past its instant).
            job.started_at = Some(now);
            let late = now - job.scheduled_for;
            engine
                .metrics
                .lateness
                .observe(late.to_std().unwrap_or_default());
        }
        let admission = slot.origin.as_deref().map(|origin| {
            engine
                .breakers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .admit(origin, now)
        });
        if let Some(Admission::Reject { until }) = admission {
            let origin = origin_shown(slot.origin.as_deref().unwrap_or_default()).to_owned();
            inc(&engine.metrics.failures);
            let failure = Failure::circuit_open(format!(
                "{CIRCUIT_OPEN}: {origin} kept timing out or refusing; calls fail fast until {}",
                until.to_rfc3339()
            ));
            tracing::warn!(schedule_id = %schedule.id, job_id = %job.id, origin = %origin, "circuit open: failing fast");
            self.call_done(Called {
                attempt: Attempt::called(schedule, job, Err(failure), now),
                slot,
                unsent: None,
            });
            return;
        }
        let fence = CallFence::new(engine.clock.clone(), fence, margin);
        let dispatcher = engine.dispatcher.clone();
        let metrics = engine.metrics.clone();
        let breakers = engine.breakers.clone();
        let clock = engine.clock.clone();
        let timeout = engine.config.job_timeout;
        let done = self.calls_tx.clone();
        tokio::spawn(async move {
            // A call that panics still ends in an outcome: otherwise its job would stay
            // running (its lease renewed) for the life of the process and every later fire
            // of its schedule be skipped.
            let called = AssertUnwindSafe(call_alone(
                &*dispatcher,
                &*clock,
                &metrics,
                timeout,
                &schedule,
                &job,
                Some(fence),
            ))
            .catch_unwind()
            .await;
            let (result, health) = match called {
                Ok(Some(called)) => called,
                // Not sent: nothing reached the target and nothing says anything of it.
                Ok(None) => {
                    let ended_at = clock.now();
                    let _ = done.send(Called {
                        attempt: Attempt::called(
                            schedule,
                            job,
                            Ok(serde_json::Value::Null),
                            ended_at,
                        ),
                        slot,
                        unsent: Some(start),
                    });
                    return;
                }
                Err(_) => {
                    inc(&metrics.failures);
                    tracing::error!(schedule_id = %schedule.id, job_id = %job.id, "the call panicked; recorded as a failed attempt");
                    (Err(Failure::panicked()), CallHealth::Neutral)
                }
            };
            let ended_at = clock.now();
            if let Some(origin) = &slot.origin {
                breakers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .record(origin, health, ended_at);
            }
            let _ = done.send(Called {
                attempt: Attempt::called(schedule, job, result, ended_at),
                slot,
                unsent: None,
            });
        });
    }

    /// A call ended: its slot is free, its outcome goes to the recorder (its backlog place is
    /// held until the record is done).
    pub(super) fn call_done(&mut self, called: Called) {
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
            });
            self.freed();
            return;
        }
        self.slots.call_ended(called.slot);
        self.fires.step(called.attempt.job.id, FireEvent::CallEnded);
        self.record(called.attempt);
        self.freed();
    }

    pub(super) fn record(&mut self, attempt: Attempt) {
        if let Some(recorder) = &self.to_recorder {
            let _ = recorder.send(attempt);
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
