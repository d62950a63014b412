//! Step 1 of a fire: claiming due schedules (under their locks, in one tenant transaction per
//! environment group) and due retries, and loading attempts whose lease ran out.
//!
//! A claim records every due occurrence: the one it fires, and the ones it cannot fire, as a
//! skipped job (the previous job is still open, or occurrences were missed while nobody could
//! fire them: one record per run of missed occurrences, with the first, the last and the
//! count). A fire whose schedule has an open job goes by its overlap policy (`overlap.rs`).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::after_completion::{delete_when_done, wants_deleting};
use super::parts::{ENGINE_ACTOR, Parts};
use super::plan::{self, Admit};
use crate::core::events::{self, EventPayload};
use crate::core::metrics::inc;
use crate::core::model::*;
use crate::core::policies::Overlap;
use crate::core::store::*;

/// What claiming a group of due schedules gave.
pub(super) struct ClaimedGroup {
    /// Jobs opened, each held for its instant (`true`) or to call now.
    pub runs: Vec<(Schedule, Job, bool)>,
    /// Fires waiting for the open job of their schedule (overlap `buffer_one`, `buffer_all`).
    pub buffered: usize,
    /// Open jobs cancelled for a newer occurrence (overlap `cancel_other`): their calls in
    /// flight are aborted.
    pub cancelled: Vec<JobId>,
    /// Fires recorded as skipped (the previous job was still open).
    pub skipped: usize,
    /// Skipped records of missed occurrences written.
    pub missed: usize,
    /// Due schedules another ticker claimed first (or that changed meanwhile): the claim's
    /// conditional write found them no longer due at the instant read.
    pub lost: usize,
    /// Due schedules left for later: no slot was free for them (in-flight caps).
    pub deferred: usize,
    /// Schedules due ahead left for their instant: their previous job was open.
    pub busy: usize,
}

impl ClaimedGroup {
    /// Nothing claimed: every schedule was busy elsewhere (its lock or row held by another
    /// claim, a record in progress or an operator's change), left for a later round and not
    /// counted as lost.
    fn none() -> Self {
        Self {
            runs: Vec::new(),
            buffered: 0,
            cancelled: Vec::new(),
            skipped: 0,
            missed: 0,
            lost: 0,
            deferred: 0,
            busy: 0,
        }
    }
}

/// What claiming a due retry gave.
pub(super) enum RetryClaim {
    Claimed(Box<(Schedule, Job)>),
    /// Its schedule is locked elsewhere or paused since the selection: left for later.
    Busy,
    /// Another ticker claimed it first (its conditional write found it no longer due).
    Lost,
}

impl Parts {
    /// Claims one environment's due schedules under their locks. `admit` decides for a
    /// schedule about to be claimed: call it now, hold it for its instant, or leave it due.
    pub(super) async fn claim_group(
        &self,
        env: EnvId,
        due: &[DueSchedule],
        admit: &mut (dyn FnMut(&Schedule) -> Admit + Send),
    ) -> StoreResult<ClaimedGroup> {
        let ids: Vec<ScheduleId> = due.iter().map(|d| d.id).collect();
        let mut locks = self.store.schedule_locks_try(&ids).await?;
        let claimed = self.claim_locked(&mut *locks, env, due, admit).await;
        match locks.release().await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(env_id = %env, "a schedule lock was not held at release"),
            Err(err) => {
                tracing::warn!(env_id = %env, error = %err, "releasing schedule locks failed")
            }
        }
        claimed
    }

    /// Claims the schedules of `due` whose locks are held, in one tenant transaction: reads
    /// what the plan needs (their rows, skipping those locked elsewhere, and which have open
    /// or buffered jobs, a few batched reads), decides (`plan::plan`, pure), writes the plan
    /// in batches.
    async fn claim_locked(
        &self,
        locks: &mut dyn ScheduleLock,
        env: EnvId,
        due: &[DueSchedule],
        admit: &mut (dyn FnMut(&Schedule) -> Admit + Send),
    ) -> StoreResult<ClaimedGroup> {
        let held: HashSet<ScheduleId> = locks.held().iter().copied().collect();
        if held.is_empty() {
            return Ok(ClaimedGroup::none());
        }
        let began = self.clock.now();
        let mut tx = locks.tenant_begin(env).await?;
        let due: Vec<DueSchedule> = due
            .iter()
            .filter(|d| held.contains(&d.id))
            .copied()
            .collect();
        let ids: Vec<ScheduleId> = due.iter().map(|d| d.id).collect();
        // Rows another transaction holds (a record in progress, an operator's lock) are left
        // for a later round instead of waited for.
        let schedules: HashMap<ScheduleId, Schedule> = tx
            .schedule_get_many_skip_locked(&ids)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let now = self.clock.now();
        let seen = read_seen(&mut *tx, &due, &schedules, now, self.config.max_buffered).await?;
        let plan = plan::plan(&due, &schedules, &seen, now, admit);
        let (deferred, busy) = (plan.deferred, plan.busy);
        let mut group = self.write_plan(&mut *tx, plan, now).await?;
        tx.commit().await?;
        self.trace_claims(&group.runs, began);
        for _ in 0..group.skipped + group.missed {
            inc(&self.metrics.skipped);
        }
        group.deferred = deferred;
        group.busy = busy;
        Ok(group)
    }

    /// Writes a claim's plan: the conditional advances in one statement, the completions, the
    /// fires' jobs in one statement, the missed runs' records, and for a fire whose schedule
    /// still has an open job (the job's insert met the one-open-job index) its buffered or
    /// skipped record, with their events in one statement.
    async fn write_plan(
        &self,
        tx: &mut dyn TenantTx,
        plan: plan::Plan,
        now: DateTime<Utc>,
    ) -> StoreResult<ClaimedGroup> {
        let claims: Vec<ScheduleClaim> = plan.decisions.iter().map(|d| d.claim).collect();
        let mut claimed = tx.schedule_claim_many(&claims).await?;
        // A claim whose conditional write found the schedule no longer due at the instant read
        // was taken by another ticker (or changed meanwhile): lost. Rows or locks held
        // elsewhere were left out before the plan, for a later round, and are not lost.
        let lost = claims.len() - claimed.len();
        let mut decisions: HashMap<ScheduleId, plan::Decision> = plan
            .decisions
            .into_iter()
            .map(|d| (d.claim.id, d))
            .collect();
        let (completions, to_delete) = complete(tx, &mut claimed, &decisions, now).await?;
        let new_jobs: Vec<NewJob> = claimed
            .iter()
            .filter_map(|s| {
                let fire = decisions.get(&s.id)?.fire?;
                Some(self.fire_job(s, fire, now))
            })
            .collect();
        let mut opened: HashMap<ScheduleId, Job> = tx
            .job_open_many(&new_jobs)
            .await?
            .into_iter()
            .map(|j| (j.schedule_id, j))
            .collect();
        let new_by_schedule: HashMap<ScheduleId, &NewJob> =
            new_jobs.iter().map(|j| (j.schedule_id, j)).collect();
        let mut group = ClaimedGroup::none();
        group.lost = lost;
        let mut events = completions;
        let mut overlapping = Vec::new();
        let mut excluded = Vec::new();
        for schedule in claimed {
            let Some(decision) = decisions.remove(&schedule.id) else {
                continue;
            };
            let new = new_by_schedule.get(&schedule.id).copied();
            // Occurrences nobody fired (an outage, an overload) are recorded, one record for
            // the whole run.
            if let Some(run) = decision.missed {
                let template = NewJob::running(schedule.id, run.first, now);
                let record = tx
                    .job_insert(&NewJob {
                        id: JobId::new(),
                        scheduled_for: run.first,
                        missed: Some(MissedOccurrences {
                            first: run.first,
                            last: run.last,
                            count: run.count,
                        }),
                        ..new
                            .unwrap_or(&template)
                            .clone()
                            .skipped(plan::missed_reason(&run), now)
                    })
                    .await?;
                tracing::info!(schedule_id = %schedule.id, missed = run.count, first = %run.first, last = %run.last, "missed occurrences recorded as skipped");
                events.push(skip_event(&schedule, &record, now));
                group.missed += 1;
            }
            // An occurrence its exclusions cover: on the record, with what excluded it.
            if let Some(ex) = decision.excluded {
                tracing::info!(schedule_id = %schedule.id, at = %ex.at, by = %ex.by, "excluded occurrence recorded as skipped");
                let record = NewJob::running(schedule.id, ex.at, now).skipped(ex.by.reason(), now);
                excluded.push((schedule.clone(), record));
            }
            match (decision.fire, opened.remove(&schedule.id)) {
                (Some(fire), Some(job)) => group.runs.push((schedule, job, fire.held)),
                // The previous job is still open (a pending retry, a slow call).
                (Some(_), None) => {
                    if let Some(new) = new {
                        overlapping.push((schedule, new.clone()));
                    }
                }
                // Nothing fires: the latest occurrence was older than the catch-up window.
                (None, _) => {}
            }
        }
        self.record_overlaps(tx, overlapping, now, &mut group, &mut events)
            .await?;
        if !excluded.is_empty() {
            let records: Vec<NewJob> = excluded.iter().map(|(_, r)| r.clone()).collect();
            let written = tx.job_insert_many(&records).await?;
            for ((schedule, _), record) in excluded.iter().zip(&written) {
                events.push(skip_event(schedule, record, now));
            }
            group.skipped += written.len();
        }
        events.extend(delete_completed(tx, to_delete, now).await?);
        tx.outbox_insert_many(&events).await?;
        Ok(group)
    }

    /// The job a fire opens. A fire held for its instant is `scheduled` until it is handed off
    /// for its call (a change may withdraw it until then), with a short claim lease past its
    /// instant: a stopped instance's fire is released to run seconds after it. Held is what
    /// `admit` decided, not a second look at the clock: an instant passed since is still
    /// handed off (at once). Under `allow_all` it runs beside whatever job of its schedule is
    /// open.
    fn fire_job(&self, schedule: &Schedule, fire: plan::Fire, now: DateTime<Utc>) -> NewJob {
        let lease = super::parts::chrono_duration(self.config.lease);
        let claim_lease = super::parts::chrono_duration(super::parts::CLAIM_LEASE_PAST_INSTANT);
        let job = if fire.held {
            NewJob::scheduled(schedule.id, fire.at, fire.at.max(now) + claim_lease, now)
        } else {
            NewJob {
                lease_until: Some(fire.at.max(now) + lease),
                ..NewJob::running(schedule.id, fire.at, now)
            }
        };
        NewJob {
            concurrent: schedule.policies.overlap == Overlap::AllowAll,
            ..job
        }
    }

    /// Claims a due retry under its schedule's lock.
    pub(super) async fn claim_retry(&self, due: DueJob) -> StoreResult<RetryClaim> {
        let Some(mut lock) = self.store.schedule_lock_try(due.schedule_id).await? else {
            return Ok(RetryClaim::Busy);
        };
        let claimed = async {
            let mut tx = lock.tenant_begin(due.env_id).await?;
            let now = self.clock.now();
            let Some(schedule) = tx.schedule_get(due.schedule_id).await? else {
                return Ok(RetryClaim::Busy);
            };
            // A paused schedule's retries wait for its resume (paused after selection).
            if schedule.status == ScheduleStatus::Paused {
                return Ok(RetryClaim::Busy);
            }
            let claim = JobClaim {
                id: due.id,
                now,
                lease_until: now + super::parts::chrono_duration(self.config.lease),
            };
            let Some(job) = tx.job_claim(&claim).await? else {
                return Ok(RetryClaim::Lost);
            };
            tx.commit().await?;
            Ok(RetryClaim::Claimed(Box::new((schedule, job))))
        }
        .await;
        if let Err(err) = lock.release().await {
            tracing::warn!(schedule_id = %due.schedule_id, error = %err, "releasing a schedule lock failed");
        }
        claimed
    }

    /// Releases a fire claimed ahead that its instance never handed off (it stopped): a
    /// pending run due now, its first attempt still to come. True when released.
    pub(super) async fn release_unstarted(&self, env: EnvId, job: JobId) -> StoreResult<bool> {
        let mut tx = self.store.tenant_begin(env).await?;
        let released = tx
            .job_release(&JobRelease {
                id: job,
                now: self.clock.now(),
            })
            .await?;
        tx.commit().await?;
        Ok(released.is_some())
    }

    /// Releases a running attempt whose lease lapsed before its call was known to start. True
    /// when released (the write is fenced on the epoch read and the lapsed lease).
    pub(super) async fn release_uncalled(&self, job: &Job) -> StoreResult<bool> {
        let mut tx = self.store.tenant_begin(job.env_id).await?;
        let released = tx
            .job_release_uncalled(&UncalledRelease {
                id: job.id,
                epoch: job.lease_epoch,
                now: self.clock.now(),
            })
            .await?;
        tx.commit().await?;
        Ok(released.is_some())
    }

    /// A running attempt whose lease ran out, with its schedule.
    pub(super) async fn load_for_stale(
        &self,
        due: DueJob,
    ) -> StoreResult<Option<(Schedule, Job, Option<JobAnswer>)>> {
        let mut tx = self.store.tenant_begin(due.env_id).await?;
        let Some(job) = tx.job_get(due.id).await? else {
            return Ok(None);
        };
        let Some(schedule) = tx.schedule_get(due.schedule_id).await? else {
            return Ok(None);
        };
        // The stopped instance may have had its answer written before its record.
        let answer = tx.job_answer_get(job.id, job.attempt).await?;
        Ok(Some((schedule, job, answer)))
    }
}

/// What the instant of a fire claimed ahead decided.
pub(super) enum Recheck {
    /// Call it, with the schedule as it is now (its payload or target may have changed).
    Fire(Box<Schedule>),
    /// Not called: recorded as skipped (the schedule was paused, deleted or re-timed).
    Withdrawn,
}

impl Parts {
    /// Reads again the schedules of fires one environment handed off whose schedule changed
    /// since the claim. A schedule whose status, timing or next fire changed without the
    /// change withdrawing the fire (it bypassed the operations) has the fire withdrawn here,
    /// recorded as skipped with the reason and the `job:skipped` event; any other fire goes
    /// ahead with the schedule as it is now (a new payload or target).
    pub(super) async fn reread_handed_off(
        &self,
        env: EnvId,
        fires: &[(&Schedule, &Job)],
    ) -> StoreResult<Vec<Recheck>> {
        let ids: Vec<ScheduleId> = fires.iter().map(|(s, _)| s.id).collect();
        let mut tx = self.store.tenant_begin(env).await?;
        let fresh: HashMap<ScheduleId, Schedule> = tx
            .schedule_get_many(&ids, false)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let now = self.clock.now();
        let mut verdicts = Vec::with_capacity(fires.len());
        let mut events = Vec::new();
        for (held, job) in fires {
            let current = fresh.get(&held.id);
            let reason = match current {
                None => "skipped: the schedule was removed before this fire's instant".to_owned(),
                Some(s) => match s.withdraws_fire_of(held) {
                    Some(reason) => reason,
                    None => {
                        verdicts.push(Recheck::Fire(Box::new(s.clone())));
                        continue;
                    }
                },
            };
            let withdraw = JobWithdraw {
                id: job.id,
                reason,
                now,
                handed_off: true,
            };
            match tx.job_withdraw(&withdraw).await? {
                Some(record) => {
                    tracing::info!(schedule_id = %held.id, job_id = %job.id, reason = %withdraw.reason, "fire claimed ahead withdrawn");
                    events.push(skip_event(current.unwrap_or(held), &record, now));
                }
                // Not running its first attempt any more: somebody else has it (never call
                // it twice).
                None => {
                    tracing::warn!(schedule_id = %held.id, job_id = %job.id, "a fire claimed ahead was no longer running at its instant; not called")
                }
            }
            verdicts.push(Recheck::Withdrawn);
        }
        if !events.is_empty() {
            tx.outbox_insert_many(&events).await?;
            tx.commit().await?;
            for _ in &events {
                inc(&self.metrics.skipped);
            }
        }
        Ok(verdicts)
    }
}

/// Completes the claimed schedules the plan found done, each with its event (its reason).
/// Returns those events and the completed schedules that ask to be deleted, to be looked at
/// once the claim's jobs are written ([`delete_completed`]).
async fn complete(
    tx: &mut dyn TenantTx,
    claimed: &mut [Schedule],
    decisions: &HashMap<ScheduleId, plan::Decision>,
    now: DateTime<Utc>,
) -> StoreResult<(Vec<NewEvent>, Vec<Schedule>)> {
    let mut completions = Vec::new();
    let mut to_delete = Vec::new();
    for schedule in claimed.iter_mut() {
        if !decisions.get(&schedule.id).is_some_and(|d| d.completes) {
            continue;
        }
        tracing::info!(schedule_id = %schedule.id, "schedule has no occurrence left; completed");
        *schedule = tx
            .schedule_set_outcome(&ScheduleSetOutcome {
                id: schedule.id,
                retry_count: schedule.retry_count,
                status: Some(ScheduleStatus::Completed),
                now,
            })
            .await?;
        completions.push(
            EventPayload::completed(schedule, None, now)
                .by(ENGINE_ACTOR)
                .into_event(schedule),
        );
        if wants_deleting(schedule) {
            to_delete.push(schedule.clone());
        }
    }
    Ok((completions, to_delete))
}

/// Deletes the completed schedules that ask for it and have nothing left to run (their last
/// fire skipped, or ended before); one whose last job is still open is asked again by that
/// job's outcome.
async fn delete_completed(
    tx: &mut dyn TenantTx,
    completed: Vec<Schedule>,
    now: DateTime<Utc>,
) -> StoreResult<Vec<NewEvent>> {
    let mut events = Vec::new();
    for mut schedule in completed {
        events.extend(delete_when_done(tx, &mut schedule, now).await?);
    }
    Ok(events)
}

pub(super) fn skip_event(schedule: &Schedule, record: &Job, now: DateTime<Utc>) -> NewEvent {
    EventPayload::for_schedule(events::JOB_SKIPPED, schedule, now)
        .with_job(record)
        .by(ENGINE_ACTOR)
        .into_event(schedule)
}

/// What the plan needs to know of the due schedules' jobs (see [`plan::Seen`]).
async fn read_seen(
    tx: &mut dyn TenantTx,
    due: &[DueSchedule],
    schedules: &HashMap<ScheduleId, Schedule>,
    now: DateTime<Utc>,
    max_buffered: u32,
) -> StoreResult<plan::Seen> {
    let plan::LookAt {
        ahead,
        ahead_side_by_side,
        limited,
        at_last,
    } = plan::to_look_at(due, schedules, now);
    let mut seen = plan::Seen {
        max_buffered,
        ..plan::Seen::default()
    };
    if !ahead.is_empty() {
        seen.busy = tx
            .schedules_with_open_job(&ahead)
            .await?
            .into_iter()
            .collect();
    }
    if !ahead_side_by_side.is_empty() {
        seen.busy
            .extend(tx.schedules_with_held_fire(&ahead_side_by_side).await?);
    }
    if !limited.is_empty() {
        seen.open_now = tx
            .schedules_with_open_job(&limited)
            .await?
            .into_iter()
            .collect();
        seen.buffered_now = tx
            .buffered_occurrence_counts(&limited)
            .await?
            .into_iter()
            .collect();
    }
    let mut calendars: Vec<String> = due
        .iter()
        .filter_map(|d| schedules.get(&d.id))
        .flat_map(|s| s.exclude.calendar_names().map(str::to_owned))
        .collect();
    if !calendars.is_empty() {
        calendars.sort_unstable();
        calendars.dedup();
        seen.calendars = tx
            .calendars_named(&calendars, false)
            .await?
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect();
    }
    if !at_last.is_empty() {
        seen.last_claimed = tx
            .schedules_with_job_for_next_call(&at_last)
            .await?
            .into_iter()
            .collect();
    }
    Ok(seen)
}
