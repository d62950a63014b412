//! The producer's rounds and leases: what a claim round may take (its budget from the slots
//! and the held fires), starting one, taking in what it claimed and deciding when the next
//! runs; how far ahead to claim; and the renewal of the leases that run low.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::super::fire::{FireEvent, FireState};
use super::super::held::{Ready, Start};
use super::super::lease::{self, Lease};
use super::super::outcome::{self, Attempt, Failure};
use super::super::parts::EngineError;
use super::super::round::{Budget, Claimed, Round};
use super::super::wake;
use super::{Mode, NextRound, Op, OpKind, Phase, Producer};
use crate::core::metrics::inc;
use crate::core::model::*;
use crate::core::store::*;

impl Producer {
    /// Learns from a round how fast claims go, and sizes the lead by what falls due soon.
    pub(super) fn adapt_lead(
        &mut self,
        fired: u64,
        took: Duration,
        due_soon: Option<StoreResult<u64>>,
    ) {
        // Only a round that claimed a batch's worth says how fast claims go.
        if fired >= 100 && !took.is_zero() {
            let sample = fired as f64 / took.as_secs_f64();
            self.pace.claim_rate = (self.pace.claim_rate + sample) / 2.0;
        }
        let Mode::Serve { lead } = self.mode else {
            return;
        };
        match due_soon {
            Some(Ok(due)) => {
                let (_, of) = *self.share.borrow();
                self.pace.size(lead, due, of);
            }
            Some(Err(err)) => {
                tracing::warn!(error = %err, "cannot count what falls due soon; claiming with the configured lead");
                self.pace.uncounted(lead);
            }
            None => {}
        }
    }

    pub(super) fn budget(&self, due: bool, drain: bool) -> Budget {
        let mut own = HashSet::new();
        if drain {
            own.extend(self.running.keys().copied());
            own.extend(self.recovering.iter().copied());
            own.extend(self.held.scheduled().iter().copied());
        }
        Budget {
            due,
            drain,
            ahead: self.lead(),
            share: *self.share.borrow(),
            slots: self.slots.clone(),
            held: self.held.count(),
            held_per_env: self.held.per_env().clone(),
            own,
            wake_up: matches!(self.mode, Mode::Serve { .. }),
        }
    }

    pub(super) fn start_round(&mut self, now: DateTime<Utc>) {
        if self.round_running {
            return;
        }
        let budget = match self.mode {
            Mode::Serve { .. } => {
                let due = self
                    .next_round
                    .is_some_and(|n| n.at <= now || n.real <= tokio::time::Instant::now());
                if !self.serving() || !due {
                    return;
                }
                self.next_round = None;
                let mut budget = self.budget(true, true);
                // Between claims ahead (a round woken by a lease's end, a retry's instant),
                // only what is due now is claimed.
                if !self.pace.round_starts(now) {
                    budget.ahead = budget.ahead.map(|_| Duration::ZERO);
                }
                budget
            }
            Mode::Tick => {
                if self.tick.phase == Phase::Done || self.tick.wait_for_slot {
                    return;
                }
                if self.tick.rounds >= self.parts.config.max_batches_per_tick {
                    self.next_phase();
                    return self.start_round(now);
                }
                if self.slots.room() == 0 {
                    // Wait for a slot (something is in flight to free one).
                    self.tick.wait_for_slot = true;
                    return;
                }
                self.tick.rounds += 1;
                let due = self.tick.phase == Phase::Due;
                self.budget(due, !due)
            }
        };
        self.round_running = true;
        self.tick.freed_in_round = false;
        let engine = self.parts.clone();
        self.spawn(OpKind::Round, async move {
            let started = Instant::now();
            let leased_from = engine.clock.now();
            let mono = engine.clock.monotonic();
            let claimed = engine.round(budget).await;
            Op::Round(Box::new(claimed), started, leased_from, mono)
        });
    }

    pub(super) fn next_phase(&mut self) {
        self.tick.rounds = 0;
        self.tick.wait_for_slot = false;
        self.tick.phase = match self.tick.phase {
            Phase::Due => Phase::Drain,
            Phase::Drain | Phase::Done => Phase::Done,
        };
    }

    pub(super) fn round_done(
        &mut self,
        mut claimed: Claimed,
        started: Instant,
        leased_from: DateTime<Utc>,
        mono: Duration,
    ) {
        self.round_running = false;
        self.parts.observe_round(started, claimed.failed.as_ref());
        self.adapt_lead(
            claimed.summary.fired,
            started.elapsed(),
            claimed.due_soon.take(),
        );
        self.summary.merge(&claimed.summary);
        self.cancelled(std::mem::take(&mut claimed.cancelled));
        for (schedule, job, held) in claimed.fires {
            if held {
                self.fires.step(job.id, FireEvent::ClaimedAhead);
                self.held.hold(schedule, job);
            } else {
                self.queue_claimed(schedule, job, Start::Fire, leased_from, mono);
            }
        }
        self.held.set_hand_off_before(wake::hand_off_before(
            self.held.count(),
            self.pace.hand_off_rate,
        ));
        for (schedule, job) in claimed.retries {
            self.queue_claimed(schedule, job, Start::Retry, leased_from, mono);
        }
        for (schedule, job, answer) in claimed.abandoned {
            if !self.recovering.insert(job.id) {
                continue;
            }
            self.fires.step(job.id, FireEvent::TakenOver);
            // The stopped instance's call was answered and the answer written ahead: recorded
            // as what the service said, not called again.
            if let Some((answer, result)) =
                answer.and_then(|a| outcome::answered(&a.answer).map(|r| (a, r)))
            {
                tracing::info!(job_id = %job.id, "an attempt of a stopped instance had been answered: recording its answer");
                let mut attempt = Attempt::called(schedule, job, result, answer.answered_at);
                attempt.written_ahead = true;
                self.record(attempt);
                continue;
            }
            // Counted as a failure once its record lands (several instances may find the same
            // lapsed lease; one record wins).
            self.summary.retried_attempts += 1;
            let message =
                "attempt abandoned: its lease ran out (the instance running it stopped)".to_owned();
            self.record(Attempt {
                schedule,
                job,
                result: Err(Failure::abandoned(message)),
                ended_at: None,
                written_ahead: false,
            });
        }
        match self.mode {
            Mode::Serve { .. } => {
                let round = claimed.round;
                let lead = self.lead().unwrap_or_default();
                self.pace.round_ended(self.pace.step(&round, lead));
                if round.progress && round.full && self.claim_room() > 0 {
                    self.wake_round();
                } else {
                    self.schedule_round_after(round, claimed.next_due);
                }
            }
            Mode::Tick => {
                if let Some(err) = claimed.failed {
                    self.tick.error = Some(EngineError::Store(err));
                    self.tick.phase = Phase::Done;
                    return;
                }
                let round = claimed.round;
                if round.deferred && !round.progress {
                    // Everything due waits for a slot under a cap: wait for one to free up,
                    // unless nothing is in flight to free one.
                    // A slot freed while the round ran (its budget saw them all taken): the
                    // next round tries again.
                    if self.slots.busy() || self.held.pressing() {
                        self.tick.wait_for_slot = true;
                    } else if !self.tick.freed_in_round {
                        self.next_phase();
                    }
                } else if !(round.progress && (round.full || round.deferred)) {
                    self.next_phase();
                }
            }
        }
    }

    /// A running attempt claimed to call now: its lease is renewed from here on, and it waits
    /// in the ready queue for a slot. The claim set the lease from an instant no earlier than
    /// `leased_from` (`mono` on the monotonic clock), so it is taken to end a lease after it.
    pub(super) fn queue_claimed(
        &mut self,
        schedule: Schedule,
        job: Job,
        start: Start,
        leased_from: DateTime<Utc>,
        mono: Duration,
    ) {
        let until = leased_from + super::super::parts::chrono_duration(self.parts.config.lease);
        self.fires.step(job.id, FireEvent::ClaimedNow);
        self.running.insert(
            job.id,
            Lease::written(job.lease_epoch, until, leased_from, mono),
        );
        self.held.queue(Ready {
            schedule,
            job,
            start,
            held: false,
            prepared: None,
        });
    }

    /// Due schedules a round may take: free slots, or when claiming ahead, room among the
    /// held fires.
    pub(super) fn claim_room(&self) -> usize {
        match self.lead() {
            None => self.slots.room(),
            Some(_) => self.held.room().max(self.slots.room()),
        }
    }

    pub(super) fn schedule_round_after(
        &mut self,
        round: Round,
        next_due: Option<StoreResult<Option<DateTime<Utc>>>>,
    ) {
        if !self.serving() {
            return;
        }
        let now = self.parts.clock.now();
        let due_at = match &next_due {
            Some(Ok(at)) => *at,
            _ => None,
        };
        let lead = self.lead().unwrap_or_default();
        let mut wait = wake::wait_after(
            &round,
            next_due,
            now,
            lead,
            self.pace.step(&round, lead),
            self.parts.config.tick_interval,
        );
        // The next claim ahead is not put off by what else the round saw.
        if let Some(until) = self.pace.until_claim(now)
            && !lead.is_zero()
        {
            wait.wait = wait.wait.min(until);
        }
        // A round that claims ahead is not run beside a burst's calls.
        if let (Some(due_at), false) = (due_at, wait.pause) {
            let at = now + super::super::parts::chrono_duration(wait.wait);
            let moved = self.held.bursts().round_at(at, due_at);
            wait.wait += (moved - at).to_std().unwrap_or_default();
        }
        self.deferred = round.deferred;
        let next = NextRound::after(now, wait.wait, wait.pause);
        // A change or a freed slot while the round ran asked for a round now: the round that
        // ended may have read before that change, so the one asked for still runs.
        self.next_round = match self.next_round {
            Some(woken) if woken.at <= next.at => Some(woken),
            _ => Some(next),
        };
    }

    /// Renews, in one fenced write, the leases that run low and those of attempts whose call
    /// waits for a renewal; marks the calls that started.
    pub(super) fn start_renewal(&mut self, now: DateTime<Utc>) {
        if self.renewing || self.next_renewal > now {
            return;
        }
        let lease = self.parts.config.lease;
        let every = wake::renewal_interval(lease);
        // Only leases that would run low before the renewal after this one: a burst's
        // attempts, recorded within seconds of their hand-off, are never written again.
        let renew_before = now + super::super::parts::chrono_duration(wake::renew_within(lease));
        let waiting: HashSet<JobId> = self.unsure.iter().map(|r| r.job.id).collect();
        let leases = lease::to_renew(&self.running, renew_before, |id| waiting.contains(id));
        if leases.is_empty() {
            self.next_renewal = now + super::super::parts::chrono_duration(every);
            return;
        }
        self.renewing = true;
        let mono = self.parts.clock.monotonic();
        let renewal = LeaseRenewal {
            leases,
            until: now + super::super::parts::chrono_duration(lease),
            now,
        };
        let store = self.parts.store.clone();
        self.spawn(OpKind::Renewal, async move {
            let result = store.jobs_lease_renew(&renewal).await;
            Op::Renewed {
                leases: renewal.leases,
                at: now,
                mono,
                result,
            }
        });
    }

    /// A renewal was answered: the leases it extended are known to hold from when it was sent;
    /// one it did not find under its epoch was taken over elsewhere (or cancelled for a newer
    /// occurrence) and is this instance's no longer (an attempt not called yet is dropped; a
    /// call in flight is aborted, though what reached the service cannot be taken back, and
    /// its outcome is refused by the record's fence). Attempts that waited for it are called
    /// or dropped.
    pub(super) fn renewed(
        &mut self,
        leases: Vec<HeldLease>,
        at: DateTime<Utc>,
        mono: Duration,
        result: StoreResult<Vec<JobId>>,
    ) {
        self.renewing = false;
        let now = self.parts.clock.now();
        let lease = self.parts.config.lease;
        let until = at + super::super::parts::chrono_duration(lease);
        let mut aborts = Vec::new();
        let after = match result {
            Ok(renewed) => {
                let renewed: HashSet<JobId> = renewed.into_iter().collect();
                for held in leases {
                    let Some(known) = self.running.get_mut(&held.id) else {
                        continue;
                    };
                    if known.epoch != held.epoch {
                        continue;
                    }
                    if renewed.contains(&held.id) {
                        known.renewed(until, at, mono, held.called);
                    } else if !known.lost {
                        known.lost = true;
                        aborts.push(held.id);
                        // A call that ended meanwhile may have been recorded before the
                        // renewal reached its row: its record decides, nothing was taken over.
                        if self.fires.state(held.id) != Some(FireState::Recording) {
                            tracing::warn!(job_id = %held.id, called = known.called, "an attempt's lease was taken over by another instance (this one stalled or could not renew it): it is not called again here");
                        }
                    }
                }
                wake::renewal_interval(lease)
            }
            Err(err) => {
                tracing::warn!(error = %err, jobs = self.running.len(), "renewing attempt leases failed; trying again");
                wake::RENEW_RETRY.min(wake::renewal_interval(lease))
            }
        };
        self.next_renewal = now + super::super::parts::chrono_duration(after);
        for job in aborts {
            self.abort_call(job);
        }
        self.retry_unsure();
    }

    /// Attempts whose call waited for a renewal: called if their lease now holds, dropped if
    /// it was taken over; the rest wait for the next renewal, which comes at once.
    fn retry_unsure(&mut self) {
        if self.unsure.is_empty() {
            return;
        }
        let mono = self.parts.clock.monotonic();
        let margin = lease::call_margin(self.parts.config.lease);
        let mut waiting = Vec::new();
        for ready in std::mem::take(&mut self.unsure) {
            match self.running.get(&ready.job.id) {
                Some(lease) if lease.holds(mono, margin) && !lease.lost => {
                    self.fires.step(ready.job.id, FireEvent::LeaseConfirmed);
                    self.held.queue_first(ready);
                }
                Some(lease) if !lease.lost => waiting.push(ready),
                _ => {
                    self.fires.step(ready.job.id, FireEvent::LeaseLost);
                    self.drop_taken_over(&ready);
                }
            }
        }
        if !waiting.is_empty() {
            self.unsure = waiting;
            self.next_renewal = self.parts.clock.now();
        }
    }

    /// An attempt taken over by another instance before its call left: forgotten here.
    pub(super) fn drop_taken_over(&mut self, ready: &Ready) {
        self.running.remove(&ready.job.id);
        self.summary.lost += 1;
        inc(&self.parts.metrics.lost_claims);
        tracing::warn!(schedule_id = %ready.schedule.id, job_id = %ready.job.id, "an attempt was taken over while this instance could not confirm its lease: not called here");
        self.freed();
    }

    /// An attempt whose lease was not known to hold when its call was to start: it waits for
    /// a renewal, asked for now.
    pub(super) fn wait_for_renewal(&mut self, ready: Ready) {
        if let Some(lease) = self.running.get_mut(&ready.job.id) {
            lease.called = false;
        }
        self.unsure.push(ready);
        self.next_renewal = self.parts.clock.now();
    }
}
