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
//! - a fire counts its schedule's `remaining_runs` down only if it will run (an occurrence
//!   skipped for an open job counts nothing, `will_run`);
//! - the next call is the one strictly after the occurrence (or now, if later); a cron
//!   schedule with no occurrence left completes, one whose last run (of its runs, or before its
//!   end) fires completes as that run is called (a run claimed ahead keeps it due until its
//!   instant), a one-shot completes when its job ends (now, if it fires nothing).

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::core::model::*;
use crate::core::policies::{Occurrences, Overlap, format_duration};
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
#[derive(Debug, Default, Clone)]
pub(super) struct Seen {
    /// Among the schedules due ahead: those with an open job (under `allow_all`, with a fire
    /// held ahead), claimed at their instant instead.
    pub busy: HashSet<ScheduleId>,
    /// Among the schedules with a run limit due now: those with an open job ...
    pub open_now: HashSet<ScheduleId>,
    /// ... and those with a buffered occurrence.
    pub buffered_now: HashSet<ScheduleId>,
    /// Among the cron schedules due at their last occurrence: those whose occurrence a fire
    /// claimed ahead already holds. They were kept due at it so as to complete as it is
    /// called: left alone until its instant, they complete then, firing nothing.
    pub last_claimed: HashSet<ScheduleId>,
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
    /// The schedule completes in the claim's transaction.
    pub completes: bool,
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
        let fires = schedule.policies.in_catchup_window(fire_at, now);
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
        } else {
            missed = Some(beyond_window(
                missed,
                fire_at,
                schedule.policies.catchup_window,
            ));
            None
        };
        let remaining_runs = match schedule.remaining_runs {
            Some(left) if fires && will_run(schedule, &seen.open_now, &seen.buffered_now) => {
                Some((left - 1).max(0))
            }
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

#[derive(Debug, Clone, PartialEq, Eq)]
/// A run of a schedule's missed occurrences (first, last, count), recorded as one skipped job.
pub(super) struct MissedRun {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub count: u32,
    capped: bool,
    /// The run ends with the latest occurrence, which was older than the catch-up window
    /// and did not run either.
    beyond_window: Option<std::time::Duration>,
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

pub(super) fn missed_reason(run: &MissedRun) -> String {
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

#[cfg(test)]
mod planner_tests;

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
