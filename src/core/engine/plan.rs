//! The claim's decisions, pure: from the due rows a claim locked, their schedules, what it
//! read of their jobs and the instant, which schedule fires which occurrence (now, or held
//! for its instant), which is left for later, what it missed, how its run limit counts down,
//! its next call, and whether it completes. The claim (`claim.rs`) reads before and writes
//! after, in batches; everything it decides is here, where tests reach it without a store.
//!
//! The rules:
//! - an occurrence still to come whose schedule has an open job is not claimed ahead (the job
//!   may end before the instant); when its jobs run side by side (`allow_all`), only one
//!   whose schedule already holds a fire claimed ahead is not (a schedule that repeats within
//!   the lead would otherwise be claimed again, and the fire it held withdrawn as moved);
//! - after missed occurrences the latest fires, late, if it is inside the catch-up window, and
//!   the ones before it are one skipped run (`catch_up`); older than the window, it joins the
//!   run and nothing fires;
//! - an occurrence its exclusions cover (a date, a range, a cron-like spec, a calendar) does
//!   not run: it is recorded as skipped with what excluded it, takes no slot and counts no
//!   run; the schedule moves on as after a fire;
//! - a fire counts its schedule's `remaining_runs` down only if it will run (an occurrence
//!   skipped for an open job counts nothing, `will_run`);
//! - the next call is the one strictly after the occurrence (or now, if later); a cron
//!   schedule with no occurrence left completes, one whose last run (of its runs, or before its
//!   end) fires completes as that run is called (a run claimed ahead keeps it due until its
//!   instant), a one-shot completes when its job ends (now, if it fires nothing).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::PlannedAction;
use crate::core::calendar::{Calendars, Exclusion};
use crate::core::model::*;
use crate::core::policies::Overlap;
use crate::core::store::{DueSchedule, JobAnswer, ScheduleClaim};
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

/// What a claim read of its schedules' jobs, for the plan.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    /// Among the schedules due ahead: those with an open job (under `allow_all`, with a fire
    /// held ahead), claimed at their instant instead.
    pub busy: HashSet<ScheduleId>,
    /// Among the schedules with a run limit due now: those with an open job ...
    pub open_now: HashSet<ScheduleId>,
    /// ... and how many regular occurrences of each wait (buffered).
    pub buffered_now: HashMap<ScheduleId, u32>,
    /// How many may wait for a `buffer_all` schedule ([`super::EngineConfig::max_buffered`]).
    pub max_buffered: u32,
    /// Among the cron schedules due at their last occurrence: those whose occurrence a fire
    /// claimed ahead already holds. They were kept due at it so as to complete as it is
    /// called: left alone until its instant, they complete then, firing nothing.
    pub last_claimed: HashSet<ScheduleId>,
    /// The calendars the due schedules' exclusions name.
    pub calendars: Calendars,
}

impl Default for Seen {
    fn default() -> Self {
        Self {
            busy: HashSet::new(),
            open_now: HashSet::new(),
            buffered_now: HashMap::new(),
            max_buffered: super::parts::DEFAULT_MAX_BUFFERED,
            last_claimed: HashSet::new(),
            calendars: Calendars::new(),
        }
    }
}

/// The due schedules whose jobs the plan must know about, as the claim reads them: due ahead
/// (for `Seen::busy`, by open job or, under `allow_all`, by fire held ahead), with a run
/// limit due now (for `Seen::open_now` and `Seen::buffered_now`), and cron schedules due at
/// their last occurrence (for `Seen::last_claimed`).
pub(super) fn to_look_at(
    due: &[DueSchedule],
    schedules: &HashMap<ScheduleId, Schedule>,
    now: DateTime<Utc>,
) -> LookAt {
    let (side_by_side, ahead): (Vec<&DueSchedule>, Vec<&DueSchedule>) = due
        .iter()
        .filter(|d| d.next_run_at > now)
        .filter(|d| schedules.contains_key(&d.id))
        .partition(|d| schedules[&d.id].policies.overlap == Overlap::AllowAll);
    let ahead = ahead.into_iter().map(|d| d.id).collect();
    let ahead_side_by_side = side_by_side.into_iter().map(|d| d.id).collect();
    let limited = due
        .iter()
        .filter(|d| d.next_run_at <= now)
        .filter(|d| {
            schedules
                .get(&d.id)
                .is_some_and(|s| s.remaining_runs.is_some())
        })
        .map(|d| d.id)
        .collect();
    // Due now or ahead: a last occurrence claimed ahead is neither claimed again before its
    // instant (under `allow_all` an open job does not make it busy) nor after it. Only an end
    // ends a cron expression's occurrences, so only schedules with one are looked at (a
    // burst's other rows cost no second evaluation).
    let at_last = due
        .iter()
        .filter(|d| {
            schedules.get(&d.id).is_some_and(|s| {
                s.kind() == ScheduleKind::Cron
                    && s.policies.end_at.is_some()
                    && s.remaining_runs != Some(0)
                    && matches!(s.occurrences().next_after(d.next_run_at), Ok(None))
            })
        })
        .map(|d| d.id)
        .collect();
    LookAt {
        ahead,
        ahead_side_by_side,
        limited,
        at_last,
    }
}

/// The due schedules whose jobs a claim reads, by what it asks of them (see [`to_look_at`]).
#[derive(Debug, Default)]
pub(super) struct LookAt {
    /// Due ahead, not `allow_all`: has it an open job?
    pub ahead: Vec<ScheduleId>,
    /// Due ahead, `allow_all`: has it a fire held ahead?
    pub ahead_side_by_side: Vec<ScheduleId>,
    /// With a run limit, due now: has it an open job, a buffered occurrence?
    pub limited: Vec<ScheduleId>,
    /// Cron schedules due at their last occurrence: is it claimed already?
    pub at_last: Vec<ScheduleId>,
}

/// The occurrence a claim fires, and whether it is held for its instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fire {
    pub at: DateTime<Utc>,
    pub held: bool,
}

/// What a claim decided for one schedule.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Decision {
    /// The claim-conditional advance.
    pub claim: ScheduleClaim,
    /// The occurrence it fires (none: the latest was older than the catch-up window).
    pub fire: Option<Fire>,
    /// Occurrences nobody fired, recorded as one skipped run.
    pub missed: Option<MissedRun>,
    /// The occurrence it would fire is excluded: recorded as skipped, with what excluded it.
    pub excluded: Option<Excluded>,
    /// The schedule completes in the claim's transaction.
    pub completes: bool,
}

/// An occurrence its exclusions cover: its call instant and what excluded it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Excluded {
    pub at: DateTime<Utc>,
    pub by: Exclusion,
}

/// What a claim decided for its group.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Plan {
    pub decisions: Vec<Decision>,
    /// Due schedules left for later: no slot or room for them (`admit` refused).
    pub deferred: usize,
    /// Schedules due ahead left for their instant because their previous job is open (it
    /// may end before then, and they can be claimed ahead after all).
    pub busy: usize,
}

/// Decides the claim of `due` (rows whose locks the claim holds) at `now`. `admit` is asked
/// about each schedule that would fire (call it now, hold it, or leave it due).
pub(super) fn plan(
    due: &[DueSchedule],
    schedules: &HashMap<ScheduleId, Schedule>,
    seen: &Seen,
    now: DateTime<Utc>,
    admit: &mut dyn FnMut(&Schedule) -> Admit,
) -> Plan {
    let mut plan = Plan::default();
    for d in due {
        let Some(schedule) = schedules.get(&d.id) else {
            continue;
        };
        // Its open job may end before the instant: claimed at the instant instead.
        if seen.busy.contains(&d.id) {
            plan.busy += 1;
            continue;
        }
        // Its last run counted (claimed ahead or called): it completes at that run's instant,
        // when its call is made, not before. The same for its last occurrence before its end,
        // claimed ahead.
        if (schedule.remaining_runs == Some(0) || seen.last_claimed.contains(&d.id))
            && schedule.kind() == ScheduleKind::Cron
        {
            if d.next_run_at <= now {
                plan.decisions.push(completion(d, now));
            }
            continue;
        }
        let occurrences = schedule.occurrences();
        let (fire_at, mut missed) = catch_up(&occurrences, d.next_run_at, now);
        let in_window = schedule.policies.in_catchup_window(fire_at, now);
        let excluded = in_window
            .then(|| schedule.exclusion_of(occurrences.occurrence_of(fire_at), &seen.calendars))
            .flatten()
            .map(|by| Excluded { at: fire_at, by });
        let fires = in_window && excluded.is_none();
        let fire = if fires {
            let held = match admit(schedule) {
                Admit::Now => false,
                Admit::Hold => true,
                Admit::Refuse => {
                    plan.deferred += 1;
                    continue;
                }
            };
            Some(Fire { at: fire_at, held })
        } else if !in_window {
            missed = Some(beyond_window(
                missed,
                fire_at,
                schedule.policies.catchup_window,
            ));
            None
        } else {
            None
        };
        let remaining_runs = match schedule.remaining_runs {
            Some(left) if fires && will_run(schedule, seen) => Some((left - 1).max(0)),
            left => left,
        };
        // Claimed ahead, the occurrence is still to come: the next call is the one after it.
        let next = next_fire(schedule, now.max(d.next_run_at));
        let (next_run_at, completes) = match next {
            Some(next) if remaining_runs != Some(0) => (Some(next), false),
            // The last run (of its runs, or of its occurrences) is held for its instant: the
            // schedule stays due at that instant and completes then, as the call is made (a run
            // called now completes now, below).
            _ if fire.is_some_and(|f| f.held) && schedule.kind() == ScheduleKind::Cron => {
                (Some(fire_at), false)
            }
            // A cron schedule with nothing left to fire (its end, its last run, an expression
            // that never fires again) completes; its job, if it fires, runs.
            _ if schedule.kind() == ScheduleKind::Cron => (Some(d.next_run_at), true),
            // A one-shot schedule has no next fire; it completes when its job finishes, or now
            // when it fires nothing.
            _ => (None, !fires),
        };
        plan.decisions.push(Decision {
            claim: ScheduleClaim {
                id: d.id,
                expected_next_run_at: d.next_run_at,
                next_run_at,
                remaining_runs,
                now,
            },
            fire,
            missed,
            excluded,
            completes,
        });
    }
    plan
}

/// The completion of a schedule whose last run was fired: at the instant of that run (its
/// stored next fire), with nothing more fired or missed.
fn completion(d: &DueSchedule, now: DateTime<Utc>) -> Decision {
    Decision {
        claim: ScheduleClaim {
            id: d.id,
            expected_next_run_at: d.next_run_at,
            next_run_at: Some(d.next_run_at),
            remaining_runs: Some(0),
            now,
        },
        fire: None,
        missed: None,
        excluded: None,
        completes: true,
    }
}

/// The next call of a schedule strictly after `after`. An expression that no longer parses is
/// never hot-looped: it is looked at again in an hour.
pub(super) fn next_fire(schedule: &Schedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let Timing::Cron(cron) = &schedule.timing else {
        return None;
    };
    if cron.zone_fell_back_to_utc() {
        tracing::warn!(schedule_id = %schedule.id, timezone = %cron.timezone, "stored time zone is unknown; evaluating in UTC");
    }
    // Its call instants: bounded by start and end, each with its jitter.
    match schedule.occurrences().next_after(after) {
        Ok(Some(next)) => Some(next),
        Ok(None) => {
            tracing::info!(schedule_id = %schedule.id, "no further occurrence; the schedule completes with this one");
            None
        }
        Err(err) => {
            tracing::error!(schedule_id = %schedule.id, error = %err, "stored cron expression does not parse; retrying in 1h");
            Some(after + chrono::Duration::hours(1))
        }
    }
}

/// Whether a due occurrence of a schedule with a run limit will run (and so counts): not
/// when the overlap rule skips it for its open job ([`PlannedAction::of`]).
fn will_run(schedule: &Schedule, seen: &Seen) -> bool {
    PlannedAction::of(
        schedule.policies.overlap,
        seen.open_now.contains(&schedule.id),
        seen.buffered_now.get(&schedule.id).copied().unwrap_or(0),
        seen.max_buffered,
    )
    .runs()
}

mod missed;
#[cfg(test)]
mod planner_tests;

pub(super) use missed::{MissedRun, missed_reason};
use missed::{beyond_window, catch_up};
