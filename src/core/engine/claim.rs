//! Step 1 of a fire: claiming due schedules (under their locks, in one tenant transaction per
//! environment group) and due retries, and loading attempts whose lease ran out.
//!
//! A claim records every due occurrence: the one it fires, and the ones it cannot fire, as a
//! skipped job (the previous job is still open, or occurrences were missed while nobody could
//! fire them: one record per run of missed occurrences, with the first, the last and the
//! count).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::{ENGINE_ACTOR, Engine};
use crate::core::events::{self, EventPayload};
use crate::core::metrics::inc;
use crate::core::model::*;
use crate::core::policies::{Occurrences, Overlap, format_duration};
use crate::core::store::*;
use crate::core::timing::Timing;

/// At most this many missed occurrences are counted for one record; beyond, the record says
/// "at least" (an every-minute schedule down for a week is about 10,000).
pub const MISSED_COUNT_CAP: u32 = 10_000;

/// What a claim may do with one due schedule.
pub(super) enum Admit {
    /// Claim it and call it now (a slot is reserved for it in the round's budget).
    Now,
    /// Claim it and hold it for its instant (a slot is reserved when it comes).
    Hold,
    /// Leave it due for later (no slot is free for it).
    Refuse,
}

/// What claiming a group of due schedules gave.
pub(super) struct ClaimedGroup {
    /// Jobs opened, each held for its instant (`true`) or to call now.
    pub runs: Vec<(Schedule, Job, bool)>,
    /// Fires waiting for the open job of their schedule (overlap `buffer_one`).
    pub buffered: usize,
    /// Fires recorded as skipped (the previous job was still open).
    pub skipped: usize,
    /// Skipped records of missed occurrences written.
    pub missed: usize,
    /// Due schedules another ticker claimed first (or that changed meanwhile): the claim's
    /// conditional write found them no longer due at the instant read.
    pub lost: usize,
    /// Due schedules left for later: no slot was free for them (in-flight caps).
    pub deferred: usize,
}

impl ClaimedGroup {
    /// Nothing claimed: every schedule was busy elsewhere (its lock or row held by another
    /// claim, a record in progress or an operator's change), left for a later round and not
    /// counted as lost.
    fn none() -> Self {
        Self {
            runs: Vec::new(),
            buffered: 0,
            skipped: 0,
            missed: 0,
            lost: 0,
            deferred: 0,
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

/// A run of a schedule's missed occurrences (first, last, count), recorded as one skipped job.
struct MissedRun {
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    count: u32,
    capped: bool,
    /// The run ends with the latest occurrence, which was older than the catch-up window
    /// and did not run either.
    beyond_window: Option<std::time::Duration>,
}

impl Engine {
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

    async fn claim_locked(
        &self,
        locks: &mut dyn ScheduleLock,
        env: EnvId,
        due: &[DueSchedule],
        admit: &mut (dyn FnMut(&Schedule) -> Admit + Send),
    ) -> StoreResult<ClaimedGroup> {
        let held: Vec<ScheduleId> = locks.held().to_vec();
        if held.is_empty() {
            return Ok(ClaimedGroup::none());
        }
        let mut tx = locks.tenant_begin(env).await?;
        // Rows another transaction holds (a record in progress, an operator's lock) are left
        // for a later round instead of waited for.
        let schedules: HashMap<ScheduleId, Schedule> = tx
            .schedule_get_many_skip_locked(&held)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let now = self.clock.now();
        // An occurrence still to come is claimed ahead only if its schedule has no open job: one
        // that is open now may finish before the instant, and the fire must not be skipped
        // for it. It is claimed at its instant instead (and skipped then if still open).
        // One whose jobs run side by side (`allow_all`) is claimed ahead whatever is open.
        let ahead: Vec<ScheduleId> = due
            .iter()
            .filter(|d| d.next_run_at > now)
            .filter(|d| {
                schedules
                    .get(&d.id)
                    .is_some_and(|s| s.policies.overlap != Overlap::AllowAll)
            })
            .map(|d| d.id)
            .collect();
        let busy: HashSet<ScheduleId> = if ahead.is_empty() {
            HashSet::new()
        } else {
            tx.schedules_with_open_job(&ahead)
                .await?
                .into_iter()
                .collect()
        };
        // A schedule with a run limit counts only occurrences that run: one whose job is open
        // now is skipped (or buffered) and counts nothing.
        let limited: Vec<ScheduleId> = due
            .iter()
            .filter(|d| d.next_run_at <= now)
            .filter(|d| {
                schedules
                    .get(&d.id)
                    .is_some_and(|s| s.remaining_runs.is_some())
            })
            .map(|d| d.id)
            .collect();
        let (open_now, buffered_now): (HashSet<ScheduleId>, HashSet<ScheduleId>) =
            if limited.is_empty() {
                (HashSet::new(), HashSet::new())
            } else {
                (
                    tx.schedules_with_open_job(&limited)
                        .await?
                        .into_iter()
                        .collect(),
                    tx.schedules_with_buffered(&limited)
                        .await?
                        .into_iter()
                        .collect(),
                )
            };
        let mut claims = Vec::with_capacity(schedules.len());
        let mut completing = Vec::new();
        let mut holds: HashMap<ScheduleId, bool> = HashMap::new();
        let mut missed_runs: HashMap<ScheduleId, MissedRun> = HashMap::new();
        // The occurrence each claim fires: the stored next fire, or after missed ones the
        // latest of them. A claim with none (the latest is older than the catch-up window)
        // records what it missed and fires nothing.
        let mut fire_ats: HashMap<ScheduleId, DateTime<Utc>> = HashMap::new();
        let mut deferred = 0;
        for d in due.iter().filter(|d| held.contains(&d.id)) {
            let Some(schedule) = schedules.get(&d.id) else {
                continue;
            };
            // Its open job may end before the instant: claimed at the instant instead.
            if busy.contains(&d.id) {
                continue;
            }
            let occurrences = schedule.occurrences();
            let (fire_at, mut missed) = catch_up(&occurrences, d.next_run_at, now);
            let fires = schedule.policies.in_catchup_window(fire_at, now);
            if fires {
                match admit(schedule) {
                    Admit::Now => holds.insert(d.id, false),
                    Admit::Hold => holds.insert(d.id, true),
                    Admit::Refuse => {
                        deferred += 1;
                        continue;
                    }
                };
                fire_ats.insert(d.id, fire_at);
            } else {
                missed = Some(beyond_window(
                    missed,
                    fire_at,
                    schedule.policies.catchup_window,
                ));
            }
            if let Some(run) = missed {
                missed_runs.insert(d.id, run);
            }
            let remaining_runs = match schedule.remaining_runs {
                Some(left) if fires && will_run(schedule, &open_now, &buffered_now) => {
                    Some((left - 1).max(0))
                }
                left => left,
            };
            // Claimed ahead, the occurrence is still to come: the next fire is the one after
            // it.
            let next = self.next_fire(schedule, now.max(d.next_run_at));
            let next_run_at = match next {
                Some(next) if remaining_runs != Some(0) => Some(next),
                // A cron schedule with nothing left to fire (its end, its last run, an
                // expression that never fires again) completes; its job, if it fires, runs.
                _ if schedule.kind() == ScheduleKind::Cron => {
                    completing.push(d.id);
                    Some(d.next_run_at)
                }
                // A one-shot schedule has no next fire; it completes when its job finishes,
                // or now when it fires nothing.
                _ => {
                    if !fires {
                        completing.push(d.id);
                    }
                    None
                }
            };
            claims.push(ScheduleClaim {
                id: d.id,
                expected_next_run_at: d.next_run_at,
                next_run_at,
                remaining_runs,
                now,
            });
        }
        let mut claimed = tx.schedule_claim_many(&claims).await?;
        // A claim whose conditional write found the schedule no longer due at the instant read
        // was taken by another ticker (or changed meanwhile): lost. Rows or locks held
        // elsewhere were left out above, for a later round, and are not lost.
        let lost = claims.len() - claimed.len();
        for schedule in claimed.iter_mut().filter(|s| completing.contains(&s.id)) {
            tracing::info!(schedule_id = %schedule.id, "schedule has no occurrence left; completed");
            *schedule = tx
                .schedule_set_outcome(&ScheduleSetOutcome {
                    id: schedule.id,
                    retry_count: schedule.retry_count,
                    status: Some(ScheduleStatus::Completed),
                    now,
                })
                .await?;
        }
        let lease = super::chrono_duration(self.config.lease);
        let claim_lease = super::chrono_duration(super::CLAIM_LEASE_PAST_INSTANT);
        let new_jobs: Vec<NewJob> = claimed
            .iter()
            .filter_map(|s| fire_ats.get(&s.id).map(|at| (s, *at)))
            .map(|(s, scheduled_for)| {
                // A fire held for its instant is `scheduled` until it is handed off for its
                // call (a change may withdraw it until then), with a short claim lease past its
                // instant: a stopped instance's fire is released to run seconds after it. Held
                // is what `admit` decided, not a second look at the clock: an instant passed
                // since is still handed off (at once).
                let held = holds.get(&s.id).copied().unwrap_or(false);
                let job = if held {
                    NewJob::scheduled(
                        s.id,
                        scheduled_for,
                        scheduled_for.max(now) + claim_lease,
                        now,
                    )
                } else {
                    NewJob {
                        lease_until: Some(scheduled_for.max(now) + lease),
                        ..NewJob::running(s.id, scheduled_for, now)
                    }
                };
                // Under `allow_all` it runs beside whatever job of its schedule is open.
                NewJob {
                    concurrent: s.policies.overlap == Overlap::AllowAll,
                    ..job
                }
            })
            .collect();
        let mut opened: HashMap<ScheduleId, Job> = tx
            .job_open_many(&new_jobs)
            .await?
            .into_iter()
            .map(|j| (j.schedule_id, j))
            .collect();

        let mut runs = Vec::with_capacity(opened.len());
        let mut buffered = 0;
        let mut skipped = 0;
        let mut missed = 0;
        let mut skip_events = Vec::new();
        let new_by_schedule: HashMap<ScheduleId, &NewJob> =
            new_jobs.iter().map(|j| (j.schedule_id, j)).collect();
        for schedule in claimed {
            let new = new_by_schedule.get(&schedule.id).copied();
            // Occurrences nobody fired (an outage, an overload) are recorded, one record for
            // the whole run.
            if let Some(run) = missed_runs.remove(&schedule.id) {
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
                        ..skipped_job(new.unwrap_or(&template), missed_reason(&run), now)
                    })
                    .await?;
                tracing::info!(schedule_id = %schedule.id, missed = run.count, first = %run.first, last = %run.last, "missed occurrences recorded as skipped");
                skip_events.push(skip_event(&schedule, &record, now));
                missed += 1;
            }
            // Nothing fires: the latest occurrence was older than the catch-up window.
            let Some(new) = new else {
                continue;
            };
            if let Some(job) = opened.remove(&schedule.id) {
                let held = holds.get(&schedule.id).copied().unwrap_or(false);
                runs.push((schedule, job, held));
                continue;
            }
            // The previous job is still open (a pending retry, a slow call). Under
            // `buffer_one` this occurrence waits for it, unless one already does.
            if schedule.policies.overlap == Overlap::BufferOne
                && !tx
                    .jobs_of_schedule(schedule.id, &[JobStatus::Buffered])
                    .await?
                    .iter()
                    .any(|j| !j.backfill)
            {
                let record = tx
                    .job_insert(&NewJob {
                        status: JobStatus::Buffered,
                        attempt: 0,
                        started_at: None,
                        lease_until: None,
                        ..new.clone()
                    })
                    .await?;
                tracing::info!(schedule_id = %schedule.id, job_id = %record.id, "fire buffered behind the open job");
                skip_events.push(
                    EventPayload::for_schedule(events::JOB_BUFFERED, &schedule, now)
                        .with_job(&record)
                        .by(ENGINE_ACTOR)
                        .into_event(&schedule),
                );
                buffered += 1;
                continue;
            }
            // Otherwise this fire is skipped, on the record.
            let open = tx.job_get_open(schedule.id).await?;
            let reason = match open {
                Some(open) => format!(
                    "skipped: job {} of this schedule is still {}",
                    open.id, open.status
                ),
                None => "skipped: another job of this schedule was open".to_owned(),
            };
            let record = tx.job_insert(&skipped_job(new, reason, now)).await?;
            tracing::info!(schedule_id = %schedule.id, "fire skipped: previous job still open");
            skip_events.push(skip_event(&schedule, &record, now));
            skipped += 1;
        }
        tx.outbox_insert_many(&skip_events).await?;
        tx.commit().await?;
        for _ in 0..skipped + missed {
            inc(&self.metrics.skipped);
        }
        Ok(ClaimedGroup {
            lost,
            runs,
            buffered,
            skipped,
            missed,
            deferred,
        })
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
                lease_until: now + super::chrono_duration(self.config.lease),
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

/// How many times a job is released without its call known to have started before a lapsed
/// lease counts as a failed attempt: a call that takes its instance down before the first
/// renewal would otherwise be tried for ever without reaching the retry limit and the DLQ.
pub(super) const UNCALLED_RELEASES_MAX: i32 = 3;

/// What becomes of a running attempt whose lease lapsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recovery {
    /// Released to run again, its attempt still to come: its call was never known to start.
    Release,
    /// Recorded: as the answer its instance wrote ahead, or as a failed attempt.
    Record,
}

/// The rule for a running attempt whose lease lapsed, from what the store knows of it: an
/// answer written ahead is recorded as that answer; a call never marked as started is released
/// (at most [`UNCALLED_RELEASES_MAX`] times for a job); anything else is a failed attempt.
pub(super) fn recovery_of(job: &Job, answer: Option<&JobAnswer>) -> Recovery {
    if answer.is_some() || job.called_at.is_some() {
        return Recovery::Record;
    }
    // Each claim of a pending job moves the epoch on and, unless it follows a release, the
    // attempt too: their difference counts the releases (one more for a job that began
    // pending, a triggered run or a buffered occurrence).
    let releases = job.lease_epoch - job.attempt + 1;
    if releases < UNCALLED_RELEASES_MAX {
        Recovery::Release
    } else {
        Recovery::Record
    }
}

/// What the instant of a fire claimed ahead decided.
pub(super) enum Recheck {
    /// Call it, with the schedule as it is now (its payload or target may have changed).
    Fire(Box<Schedule>),
    /// Not called: recorded as skipped (the schedule was paused, deleted or re-timed).
    Withdrawn,
}

impl Engine {
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

/// The missed-occurrence rule: of a schedule's occurrences from its stored next fire up to
/// `now`, the latest runs (late, once) and the ones before it are missed, one skipped run
/// (first, last, count; never replayed). Returns the occurrence to fire and the missed run.
/// A schedule claimed on time (or ahead) has nothing missed and fires its stored next fire.
fn catch_up(
    timing: &Occurrences<'_>,
    stored: DateTime<Utc>,
    now: DateTime<Utc>,
) -> (DateTime<Utc>, Option<MissedRun>) {
    let Some(after) = missed_between(timing, stored, now) else {
        return (stored, None);
    };
    // The stored fire and every occurrence after it but the latest: as many as `after` holds.
    let last = if after.count > 1 || after.capped {
        last_up_to(
            timing,
            stored,
            after.last - chrono::Duration::microseconds(1),
        )
    } else {
        stored
    };
    let missed = MissedRun {
        first: stored,
        last,
        count: after.count,
        capped: after.capped,
        beyond_window: None,
    };
    (after.last, Some(missed))
}

/// The occurrences of a schedule strictly after `fired` and up to `now`: fires nobody made.
/// Counting stops at [`MISSED_COUNT_CAP`] ("at least"), but the last is always the true last
/// occurrence up to now.
fn missed_between(
    timing: &Occurrences<'_>,
    fired: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<MissedRun> {
    let mut run = missed_counted(timing, fired, now)?;
    if run.capped {
        run.last = last_up_to(timing, run.last, now);
    }
    Some(run)
}

/// The last occurrence in `(floor, now]`, or `floor` if there is none: searched in windows
/// ending at `now` that double until one holds an occurrence, so the work follows the
/// distance from the last occurrence to now, not the length of the outage.
fn last_up_to(timing: &Occurrences<'_>, floor: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    let mut window = chrono::Duration::minutes(1);
    loop {
        let from = (now - window).max(floor);
        let mut last = None;
        let mut at = from;
        for _ in 0..MISSED_COUNT_CAP {
            match timing.next_after(at) {
                Ok(Some(next)) if next <= now && next > at => {
                    last = Some(next);
                    at = next;
                }
                _ => break,
            }
        }
        if let Some(last) = last {
            return last;
        }
        if from <= floor {
            return floor;
        }
        window = window * 2;
    }
}

fn missed_counted(
    timing: &Occurrences<'_>,
    fired: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<MissedRun> {
    if !matches!(timing.timing, Timing::Cron(_)) {
        return None;
    }
    let mut run: Option<MissedRun> = None;
    let mut at = fired;
    while let Ok(Some(next)) = timing.next_after(at) {
        if next > now || next <= at {
            break;
        }
        match &mut run {
            Some(run) if run.count >= MISSED_COUNT_CAP => {
                run.capped = true;
                break;
            }
            Some(run) => {
                run.last = next;
                run.count += 1;
            }
            None => {
                run = Some(MissedRun {
                    first: next,
                    last: next,
                    count: 1,
                    capped: false,
                    beyond_window: None,
                })
            }
        }
        at = next;
    }
    run
}

/// `missed` with the occurrence `fire_at` added at its end: the latest occurrence, found
/// older than the catch-up window `window`, does not run either.
fn beyond_window(
    missed: Option<MissedRun>,
    fire_at: DateTime<Utc>,
    window: std::time::Duration,
) -> MissedRun {
    let mut run = missed.unwrap_or(MissedRun {
        first: fire_at,
        last: fire_at,
        count: 0,
        capped: false,
        beyond_window: None,
    });
    run.last = fire_at;
    run.count = run.count.saturating_add(1);
    run.beyond_window = Some(window);
    run
}

fn missed_reason(run: &MissedRun) -> String {
    let count = if run.capped {
        format!("at least {}", run.count)
    } else {
        run.count.to_string()
    };
    let why = match run.beyond_window {
        None => "no instance could fire them in time".to_owned(),
        Some(window) => format!(
            "the latest was older than the catch-up window of {}, so none ran",
            format_duration(window)
        ),
    };
    format!(
        "skipped: {count} occurrence(s) from {} to {} were missed ({why})",
        run.first.to_rfc3339(),
        run.last.to_rfc3339()
    )
}

/// Whether a due occurrence of a schedule with a run limit will run (and so counts): not
/// when its job is open, unless it runs beside it (`allow_all`) or waits for it as the one
/// buffered occurrence (`buffer_one`).
fn will_run(
    schedule: &Schedule,
    open_now: &HashSet<ScheduleId>,
    buffered_now: &HashSet<ScheduleId>,
) -> bool {
    match schedule.policies.overlap {
        _ if !open_now.contains(&schedule.id) => true,
        Overlap::AllowAll => true,
        Overlap::BufferOne => !buffered_now.contains(&schedule.id),
        Overlap::Skip => false,
    }
}

/// A skipped record shaped after the job a claim would open.
fn skipped_job(new: &NewJob, reason: String, now: DateTime<Utc>) -> NewJob {
    NewJob {
        status: JobStatus::Skipped,
        attempt: 0,
        started_at: None,
        finished_at: Some(now),
        error: Some(reason),
        lease_until: None,
        missed: None,
        ..new.clone()
    }
}

fn skip_event(schedule: &Schedule, record: &Job, now: DateTime<Utc>) -> NewEvent {
    EventPayload::for_schedule(events::JOB_SKIPPED, schedule, now)
        .with_job(record)
        .by(ENGINE_ACTOR)
        .into_event(schedule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cron::{OnDstGap, OnDstRepeat};
    use crate::core::policies::Policies;
    use crate::core::timing::CronTiming;
    use chrono::TimeZone;

    /// A timing with the default policies, whose calls the rules walk.
    struct Calls(Timing, Policies);

    impl Calls {
        fn calls(&self) -> Occurrences<'_> {
            Occurrences {
                timing: &self.0,
                policies: &self.1,
                seed: ScheduleId(uuid::Uuid::nil()),
            }
        }
    }

    fn every_minute() -> Calls {
        Calls(
            Timing::Cron(CronTiming::from_stored(
                "* * * * *",
                "UTC",
                OnDstGap::Skip,
                OnDstRepeat::Once,
            )),
            Policies::default(),
        )
    }

    #[test]
    fn a_capped_run_of_missed_occurrences_ends_at_the_last_one_up_to_now() {
        let fired = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        // Thirty days of an every-minute schedule: far more than the cap.
        let now = fired + chrono::Duration::days(30) + chrono::Duration::seconds(30);
        let run = missed_between(&every_minute().calls(), fired, now).unwrap();
        assert!(run.capped);
        assert_eq!(run.count, MISSED_COUNT_CAP);
        assert_eq!(run.first, fired + chrono::Duration::minutes(1));
        assert_eq!(run.last, fired + chrono::Duration::days(30));
        assert!(missed_reason(&run).contains("at least 10000"));
    }

    #[test]
    fn after_missed_occurrences_the_latest_fires_and_the_rest_are_one_run() {
        let stored = Utc.with_ymd_and_hms(2026, 1, 1, 0, 2, 0).unwrap();
        let minute = chrono::Duration::minutes(1);
        // On time, or claimed ahead: the stored fire, nothing missed.
        for now in [
            stored,
            stored + chrono::Duration::seconds(59),
            stored - minute,
        ] {
            let (fire, missed) = catch_up(&every_minute().calls(), stored, now);
            assert_eq!(fire, stored);
            assert!(missed.is_none());
        }
        // Down from before 00:02 until 00:04:30: 00:04 fires, 00:02 and 00:03 were missed.
        let (fire, missed) = catch_up(
            &every_minute().calls(),
            stored,
            stored + minute * 2 + minute / 2,
        );
        assert_eq!(fire, stored + minute * 2);
        let missed = missed.unwrap();
        assert_eq!(
            (missed.first, missed.last, missed.count, missed.capped),
            (stored, stored + minute, 2, false)
        );
        // One occurrence late: the stored one alone is missed.
        let (fire, missed) = catch_up(&every_minute().calls(), stored, stored + minute);
        assert_eq!(fire, stored + minute);
        let missed = missed.unwrap();
        assert_eq!(
            (missed.first, missed.last, missed.count),
            (stored, stored, 1)
        );
        // Thirty days down: the latest fires, the count stops at the cap.
        let now = stored + chrono::Duration::days(30) + chrono::Duration::seconds(30);
        let (fire, missed) = catch_up(&every_minute().calls(), stored, now);
        assert_eq!(fire, stored + chrono::Duration::days(30));
        let missed = missed.unwrap();
        assert!(missed.capped);
        assert_eq!(missed.last, fire - minute);
    }

    #[test]
    fn an_uncapped_run_counts_every_occurrence() {
        let fired = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let now = fired + chrono::Duration::minutes(5);
        let run = missed_between(&every_minute().calls(), fired, now).unwrap();
        assert!(!run.capped);
        assert_eq!((run.count, run.last), (5, now));
    }
}
