//! The reference model: what the store must show after every step, and at the end, for the
//! schedules the world made. The calls' own promises are checked by the ledger as they are made.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Duration, Utc};
use sentin8_cron::core::calendar::Calendars;
use sentin8_cron::core::engine::DEFAULT_MAX_BUFFERED;
use sentin8_cron::core::model::*;
use sentin8_cron::core::policies::Overlap;
use sentin8_cron::core::store::JobQuery;

use super::world::World;

/// What the store holds of the world's environment.
pub struct Seen {
    pub schedules: HashMap<ScheduleId, Schedule>,
    pub jobs: HashMap<ScheduleId, Vec<Job>>,
    /// Schedules that changed while the jobs were read (a claim committed meanwhile: on
    /// PostgreSQL each statement sees what was committed when it began), whose rows and jobs
    /// may not agree in this look.
    pub moving: HashSet<ScheduleId>,
    /// The environment's calendars (the one some schedules name).
    pub calendars: Calendars,
}

pub async fn look(world: &World) -> Option<Seen> {
    let mut tx = world.store.tenant_begin(world.env).await.ok()?;
    let mut first = HashMap::new();
    for tracked in &world.schedules {
        if let Some(s) = tx.schedule_get(tracked.id).await.ok()? {
            first.insert(s.id, s);
        }
    }
    let mut jobs: HashMap<ScheduleId, Vec<Job>> = HashMap::new();
    let mut before = None;
    loop {
        let page = tx
            .job_list(&JobQuery {
                before,
                limit: 500,
                ..JobQuery::default()
            })
            .await
            .ok()?;
        before = page.last().map(|j| j.id);
        let done = page.len() < 500;
        for job in page {
            jobs.entry(job.schedule_id).or_default().push(job);
        }
        if done {
            break;
        }
    }
    let calendars = tx
        .calendar_list()
        .await
        .ok()?
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    let mut schedules = HashMap::new();
    let mut moving = HashSet::new();
    for tracked in &world.schedules {
        if let Some(s) = tx.schedule_get(tracked.id).await.ok()? {
            if first.get(&s.id) != Some(&s) {
                moving.insert(s.id);
            }
            schedules.insert(s.id, s);
        }
    }
    Some(Seen {
        schedules,
        jobs,
        moving,
        calendars,
    })
}

/// The invariants that hold after every step.
pub fn check_step(world: &World, seen: &Seen) -> Vec<String> {
    let mut violations = Vec::new();
    for tracked in &world.schedules {
        let Some(schedule) = seen.schedules.get(&tracked.id) else {
            continue;
        };
        let jobs = seen.jobs.get(&tracked.id).map(Vec::as_slice).unwrap_or(&[]);
        if schedule.policies.overlap != Overlap::AllowAll {
            let open = jobs
                .iter()
                .filter(|j| j.status.is_open() && !j.concurrent)
                .count();
            if open > 1 {
                violations.push(format!(
                    "schedule {} ({:?}) has {open} open jobs",
                    tracked.id, schedule.policies.overlap
                ));
            }
        }
        let bound = match schedule.policies.overlap {
            Overlap::BufferOne => 1,
            Overlap::BufferAll => DEFAULT_MAX_BUFFERED as usize,
            // An occurrence waits behind an open job that has answered (it is not cancelled),
            // one per occurrence that comes before that job's record.
            Overlap::CancelOther => usize::MAX,
            Overlap::Skip | Overlap::AllowAll => 0,
        };
        let buffered = jobs
            .iter()
            .filter(|j| j.status == JobStatus::Buffered && !j.backfill)
            .count();
        if buffered > bound {
            violations.push(format!(
                "schedule {} keeps {buffered} buffered occurrences under {}",
                tracked.id, schedule.policies.overlap
            ));
        }
        if !tracked.observed || seen.moving.contains(&tracked.id) {
            continue;
        }
        let fired: Vec<&Job> = jobs.iter().filter(|j| is_fire(j)).collect();
        if let Some(runs) = tracked.runs {
            let counted = fired
                .iter()
                .filter(|j| j.status != JobStatus::Skipped)
                .count();
            let left = schedule.remaining_runs.unwrap_or(-1);
            if i64::from(runs) - i64::from(left) != counted as i64 {
                violations.push(format!(
                    "schedule {} of {runs} runs has {left} left after {counted} fires",
                    tracked.id
                ));
            }
        }
        for job in fired {
            let late = job.created_at - job.scheduled_for;
            let window = Duration::from_std(schedule.policies.catchup_window).unwrap_or_default();
            if late > window + Duration::seconds(1) {
                violations.push(format!(
                    "schedule {} fired its occurrence {} at {}, {late} late, past its catch-up window {window}",
                    tracked.id, job.scheduled_for, job.created_at
                ));
            }
        }
        // An excluded occurrence is a skipped record naming the exclusion, never a call; an
        // occurrence not excluded is never skipped as one.
        for job in jobs.iter().filter(|j| is_fire(j)) {
            let occurrence = schedule.occurrences().occurrence_of(job.scheduled_for);
            let excluded = schedule.exclusion_of(occurrence, &seen.calendars).is_some();
            let as_excluded = job.status == JobStatus::Skipped
                && job
                    .error
                    .as_deref()
                    .is_some_and(|e| e.contains("excluded by"));
            if excluded != as_excluded {
                violations.push(format!(
                    "schedule {} (exclude {:?}): its occurrence {occurrence} is {} but its job is {:?} ({:?})",
                    tracked.id,
                    schedule.exclude.texts(),
                    if excluded { "excluded" } else { "not excluded" },
                    job.status,
                    job.error
                ));
            }
        }
        let mut per_occurrence: HashMap<DateTime<Utc>, usize> = HashMap::new();
        for job in jobs.iter().filter(|j| is_fire(j)) {
            *per_occurrence.entry(job.scheduled_for).or_default() += 1;
        }
        for (at, n) in per_occurrence {
            if n > 1 {
                violations.push(format!(
                    "schedule {} has {n} jobs for its occurrence {at}",
                    tracked.id
                ));
            }
        }
    }
    violations
}

/// A job of an occurrence of the schedule's timing (not a trigger, a backfill or a record of
/// missed ones).
fn is_fire(job: &Job) -> bool {
    job.missed.is_none() && !job.backfill
}

/// At the end: every occurrence of an observed schedule, from its creation up to `until`, has
/// exactly one job or lies in exactly one run of missed occurrences; and no job is left claimed
/// or mid-call.
pub fn check_end(world: &World, seen: &Seen, until: DateTime<Utc>) -> Vec<String> {
    let mut violations = Vec::new();
    for tracked in world.schedules.iter().filter(|t| t.observed) {
        let Some(schedule) = seen.schedules.get(&tracked.id) else {
            continue;
        };
        let jobs = seen.jobs.get(&tracked.id).map(Vec::as_slice).unwrap_or(&[]);
        let last_fire = jobs
            .iter()
            .filter(|j| is_fire(j))
            .map(|j| j.scheduled_for)
            .max();
        // A schedule whose runs ran out fires nothing after its last.
        let end = match (schedule.status, last_fire) {
            (ScheduleStatus::Completed, Some(last)) => last.min(until),
            _ => until,
        };
        let mut at = schedule.created_at;
        while let Ok(Some(next)) = schedule.timing.next_after(at) {
            if next > end {
                break;
            }
            at = next;
            let fires = jobs
                .iter()
                .filter(|j| is_fire(j) && j.scheduled_for == at)
                .count();
            let missed = jobs
                .iter()
                .filter_map(|j| j.missed.as_ref())
                .filter(|m| m.first <= at && at <= m.last)
                .count();
            if fires + missed != 1 {
                violations.push(format!(
                    "schedule {}: its occurrence {at} has {fires} jobs and lies in {missed} missed runs",
                    tracked.id
                ));
            }
        }
    }
    // A stop cut short is a kill: what it held stays running until its lease lapses.
    let jobs = seen
        .jobs
        .values()
        .flatten()
        .filter(|_| !world.stop_cut_short);
    for job in jobs {
        // A retry may still wait for its time; nothing is left mid-call or claimed.
        if matches!(job.status, JobStatus::Running | JobStatus::Scheduled) {
            violations.push(format!(
                "job {} of schedule {} is still {:?} when everything stopped",
                job.id, job.schedule_id, job.status
            ));
        }
    }
    violations
}
