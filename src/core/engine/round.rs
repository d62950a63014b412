//! A claim round: the database work the producer starts and waits for, on a task of its own.
//! It claims a batch of due schedules (round-robin across environments, several environment
//! groups at once) and a batch of due retries, within a budget: a copy of the producer's slots
//! and of its room for fires claimed ahead, taken when the round starts. The round touches no
//! shared state; it returns what it claimed, and the producer places each claimed attempt
//! (held for its instant, or queued for a slot).
//!
//! The budget is a snapshot: calls the producer starts while the round runs are not in it, so a
//! round may claim a few attempts more than the slots free when it ends. Those wait in the
//! producer's queue, claimed and under a renewed lease, until a slot frees; the caps are never
//! exceeded by a call.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};

use super::claim::RetryClaim;
use super::held::{HELD_MAX, HELD_PER_ENV};
use super::parts::{Parts, TickSummary};
use super::plan::{Admit, Recovery, recovery_of};
use super::slots::Slots;
pub(super) use super::wake::Round;
use crate::core::metrics::inc;
use crate::core::model::*;
use crate::core::store::*;

/// Environment groups claimed (or retries drained) at once.
const CLAIMS_AT_ONCE: usize = 4;

/// What a round may take, as the producer saw it when the round started.
pub(super) struct Budget {
    /// Claim due schedules (a lead ahead when `ahead` is set), and drain due retries.
    pub due: bool,
    pub drain: bool,
    pub ahead: Option<Duration>,
    /// This instance's place among the instances alive, `(index, of)`: it claims ahead its
    /// share of the fires when several run.
    pub share: (u32, u32),
    pub slots: Slots,
    pub held: usize,
    pub held_per_env: HashMap<EnvId, usize>,
    /// Jobs this instance holds (running attempts, fires claimed ahead not handed off yet, and
    /// abandoned attempts on their way to the recorder): the drain leaves them alone. Empty
    /// when the round does not drain.
    pub own: HashSet<JobId>,
    /// Ask for the next due instant when the round ends (the continuous loop's wake-up).
    pub wake_up: bool,
}

impl Budget {
    /// Due schedules a claim may take: free slots, or when claiming ahead, room among the held
    /// fires (occurrences already due still take free slots when the held fires are full).
    fn claim_room(&self) -> usize {
        match self.ahead {
            None => self.slots.room(),
            Some(_) => HELD_MAX.saturating_sub(self.held).max(self.slots.room()),
        }
    }

    fn hold(&mut self, env: EnvId) -> bool {
        let of_env = self.held_per_env.entry(env).or_default();
        if self.held >= HELD_MAX || *of_env >= HELD_PER_ENV {
            return false;
        }
        *of_env += 1;
        self.held += 1;
        true
    }
}

/// What a round claimed, for the producer to place.
#[derive(Default)]
pub(super) struct Claimed {
    pub round: Round,
    /// The round failed as a whole (its due selection).
    pub failed: Option<StoreError>,
    /// Fires claimed: `true` held for their instant, `false` to call now.
    pub fires: Vec<(Schedule, Job, bool)>,
    /// Retries (and triggered or republished runs) claimed, to call now.
    pub retries: Vec<(Schedule, Job)>,
    /// Running attempts whose lease ran out (their instance stopped), to record as failed.
    /// With the answer its instance wrote ahead of the record, if the call was answered.
    pub abandoned: Vec<(Schedule, Job, Option<JobAnswer>)>,
    /// Open jobs cancelled for a newer occurrence (overlap `cancel_other`): their calls, if
    /// this instance has them in flight, are aborted.
    pub cancelled: Vec<JobId>,
    pub summary: TickSummary,
    /// The earliest instant anything is due (`None`: nothing is), or why it is unknown.
    pub next_due: Option<StoreResult<Option<DateTime<Utc>>>>,
    /// How many schedules fall due within the longest lead (claiming ahead only).
    pub due_soon: Option<StoreResult<u64>>,
}

impl Parts {
    /// One round within `budget`.
    pub(super) async fn round(&self, mut budget: Budget) -> Claimed {
        let mut claimed = Claimed::default();
        if budget.due {
            match self.claim_due(&mut budget, &mut claimed).await {
                Ok(round) => claimed.round = claimed.round.and(round),
                Err(err) => claimed.failed = Some(err),
            }
        }
        if budget.drain && claimed.failed.is_none() {
            match self.drain_due(&mut budget, &mut claimed).await {
                Ok(round) => claimed.round = claimed.round.and(round),
                Err(err) => claimed.failed = Some(err),
            }
        }
        if budget.wake_up {
            claimed.next_due = Some(self.store.wakeup_next().await);
            // Rounds that run back to back (a burst being claimed) keep the lead they have; the
            // count is taken when the loop is about to wait.
            let back_to_back = claimed.round.progress && claimed.round.full;
            // Counted by a round that claims ahead (one between claims claims only what is due).
            if budget.ahead.is_some_and(|ahead| !ahead.is_zero()) && !back_to_back {
                let until = self.clock.now() + super::parts::chrono_duration(super::wake::LEAD_MAX);
                claimed.due_soon = Some(
                    self.store
                        .schedules_due_count(until, super::wake::DUE_COUNT_CAP)
                        .await,
                );
            }
        }
        claimed
    }

    /// Claims a batch of due schedules, as far as the budget allows; claiming ahead, the
    /// schedules due up to the lead ahead, held for their instants.
    async fn claim_due(&self, budget: &mut Budget, out: &mut Claimed) -> StoreResult<Round> {
        let room = budget.claim_room();
        if room == 0 {
            return Ok(Round {
                deferred: true,
                ..Round::default()
            });
        }
        let limit = self
            .config
            .batch_size
            .min(u32::try_from(room).unwrap_or(u32::MAX));
        let now = self.clock.now();
        let horizon = now + super::parts::chrono_duration(budget.ahead.unwrap_or_default());
        let (index, of) = budget.share;
        let share = (budget.ahead.is_some() && of > 1).then_some(Share {
            index,
            of,
            ahead_after: now,
        });
        let due = self
            .store
            .schedules_due(horizon, limit, self.config.claim_seed, share)
            .await?;
        let full = due.len() as u64 >= u64::from(limit);
        out.summary.due += due.len() as u64;
        let mut groups: BTreeMap<EnvId, Vec<DueSchedule>> = BTreeMap::new();
        for d in due {
            groups.entry(d.env_id).or_default().push(d);
        }
        // The environment groups are claimed side by side within this task; their admissions
        // take from the one budget under a lock local to this round (no other task sees it).
        let ahead = budget.ahead;
        let shared = std::sync::Mutex::new(&mut *budget);
        let claimed: Vec<(EnvId, usize, StoreResult<super::claim::ClaimedGroup>)> =
            stream::iter(groups)
                .map(|(env, group)| {
                    let shared = &shared;
                    async move {
                        // Only an occurrence still to come is held; one already due takes a
                        // free slot, or waits unclaimed (a backlog is not claimed beyond the
                        // slots).
                        let mut admit = |s: &Schedule| {
                            let mut budget = shared.lock().unwrap_or_else(|p| p.into_inner());
                            match ahead {
                                Some(_) if s.next_run_at.is_some_and(|at| at > now) => {
                                    if budget.hold(s.env_id) {
                                        Admit::Hold
                                    } else {
                                        Admit::Refuse
                                    }
                                }
                                _ => match budget.slots.reserve_for(s) {
                                    Some(_) => Admit::Now,
                                    None => Admit::Refuse,
                                },
                            }
                        };
                        let claimed = self.claim_group(env, &group, &mut admit).await;
                        (env, group.len(), claimed)
                    }
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
                    out.summary.errors += count as u64;
                    continue;
                }
            };
            round.progress |=
                !claimed.runs.is_empty() || claimed.skipped + claimed.missed + claimed.buffered > 0;
            round.deferred |= claimed.deferred > 0;
            round.busy_ahead |= claimed.busy > 0;
            for _ in 0..claimed.lost {
                inc(&self.metrics.lost_claims);
            }
            out.summary.fired += claimed.runs.len() as u64;
            out.summary.skipped += (claimed.skipped + claimed.missed) as u64;
            out.summary.buffered += claimed.buffered as u64;
            out.summary.cancelled += claimed.cancelled.len() as u64;
            out.cancelled.extend(claimed.cancelled);
            out.summary.lost += claimed.lost as u64;
            out.fires.extend(claimed.runs);
        }
        Ok(round)
    }

    /// Claims a batch of due retries (and triggered or republished runs) as far as the budget
    /// allows; finds running attempts whose lease ran out, and releases fires claimed ahead by
    /// a stopped instance.
    async fn drain_due(&self, budget: &mut Budget, out: &mut Claimed) -> StoreResult<Round> {
        let room = budget.slots.room();
        if room == 0 {
            return Ok(Round {
                deferred: true,
                ..Round::default()
            });
        }
        let now = self.clock.now();
        let limit = self
            .config
            .drain_size
            .min(u32::try_from(room).unwrap_or(u32::MAX));
        // Attempts without a lease (written before leases existed) expire a lease after start.
        let stale_before = now - super::parts::chrono_duration(self.config.lease);
        let due = self.store.jobs_due(now, stale_before, limit).await?;
        let full = due.len() as u64 >= u64::from(limit);
        // A retry takes a place under its environment's cap like a fire, before it is claimed;
        // without one it waits. Its origin is known once claimed: the producer's slot for its
        // call is reserved then.
        let mut deferred = false;
        let mut admitted = Vec::with_capacity(due.len());
        for job in due {
            if budget.own.contains(&job.id) {
                continue;
            }
            if job.status == JobStatus::Pending && budget.slots.reserve(job.env_id, None).is_none()
            {
                deferred = true;
                continue;
            }
            admitted.push(job);
        }
        let drained: Vec<Drained> = stream::iter(admitted)
            .map(|job| self.drain_one(job))
            .buffer_unordered(CLAIMS_AT_ONCE)
            .collect()
            .await;
        let mut progress = false;
        for drained in drained {
            match drained {
                Drained::Retry(claimed) => {
                    progress = true;
                    out.summary.retried_attempts += 1;
                    out.retries.push(*claimed);
                }
                Drained::Abandoned(found) => {
                    progress = true;
                    out.abandoned.push(*found);
                }
                Drained::Released => progress = true,
                Drained::Lost => {
                    inc(&self.metrics.lost_claims);
                    out.summary.lost += 1;
                }
                Drained::Error => out.summary.errors += 1,
                Drained::Nothing => {}
            }
        }
        Ok(Round {
            progress,
            full,
            deferred,
            busy_ahead: false,
        })
    }

    async fn drain_one(&self, due: DueJob) -> Drained {
        match due.status {
            JobStatus::Pending => match self.claim_retry(due).await {
                Ok(RetryClaim::Claimed(claimed)) => Drained::Retry(claimed),
                Ok(RetryClaim::Busy) => Drained::Nothing,
                Ok(RetryClaim::Lost) => Drained::Lost,
                Err(err) => {
                    tracing::error!(job_id = %due.id, error = %err, "claiming a due retry failed");
                    Drained::Error
                }
            },
            // Claimed ahead by an instance that stopped before handing it off (its claim lease
            // ran out): never called, so released to run, not a failed attempt. The hand-off
            // and the release are guarded alike (`scheduled`), so only one takes it.
            JobStatus::Scheduled => released(
                self.release_unstarted(due.env_id, due.id).await,
                due.id,
                "a fire claimed ahead by a stopped instance",
            ),
            // The instance that held this attempt stopped renewing its lease (it died or
            // stalled). What is known of its call decides (`recovery_of`): an answer written
            // ahead is recorded; a call never known to have started is released to run, its
            // attempt still to come; one that started is recorded as a failed attempt, so the
            // retry rules (and, for a job that keeps killing its process, the DLQ) apply, its
            // retry due at once.
            JobStatus::Running => match self.load_for_stale(due).await {
                Ok(Some((schedule, job, answer))) => match recovery_of(&job, answer.as_ref()) {
                    Recovery::Release => released(
                        self.release_uncalled(&job).await,
                        job.id,
                        "an attempt whose instance stopped before its call was known to start",
                    ),
                    Recovery::Record => Drained::Abandoned(Box::new((schedule, job, answer))),
                },
                Ok(None) => Drained::Nothing,
                Err(err) => {
                    tracing::error!(job_id = %due.id, error = %err, "loading an abandoned attempt failed");
                    Drained::Error
                }
            },
            _ => Drained::Nothing,
        }
    }
}

/// What a release of `job` (`what` says which) did, logged.
fn released(result: StoreResult<bool>, job: JobId, what: &str) -> Drained {
    match result {
        Ok(true) => {
            tracing::warn!(job_id = %job, "{what} was released to run");
            Drained::Released
        }
        Ok(false) => Drained::Nothing,
        Err(err) => {
            tracing::error!(job_id = %job, error = %err, "releasing {what} failed");
            Drained::Error
        }
    }
}

/// What draining one due job did.
enum Drained {
    Retry(Box<(Schedule, Job)>),
    Abandoned(Box<(Schedule, Job, Option<JobAnswer>)>),
    Released,
    Lost,
    Error,
    Nothing,
}
