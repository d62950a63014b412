//! Backfill: an operator asks for a past range of a cron schedule's occurrences. Each becomes
//! a job of its own (`backfill`, a fresh idempotency key), waiting its turn as a `buffered`
//! job, under an overlap policy the request may name ([`backfill_overlap`]; the schedule's own
//! by default): one after another (`buffer_all`, and the default of every schedule whose
//! jobs exclude each other: the operator asked for each), up to `BACKFILL_AT_ONCE` at a time
//! beside the schedule's other jobs (`allow_all`), or as the occurrences of a burst would
//! under `skip` and `buffer_one` (the first runs, one more waits under `buffer_one`, the rest
//! are skipped, on the record). `cancel_other` is refused: each occurrence would cancel the
//! one before it.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::audit::snapshot;
use super::schedule::{live_for_update, paused_detail};
use super::{Actor, Ops, OpsError, OpsResult};
use crate::core::buffered::{MAX_BACKFILL, OPEN, release_buffered};
use crate::core::decl::FieldError;
use crate::core::events::{self, EventPayload};
use crate::core::model::*;
use crate::core::policies::Overlap;
use crate::core::store::*;

/// What a backfill created.
#[derive(Debug, Clone, PartialEq)]
pub struct Backfilled {
    /// One job per occurrence, oldest first.
    pub jobs: Vec<Job>,
    /// Those released to run at once (the rest wait their turn, or were skipped).
    pub started: usize,
    /// Those skipped by the backfill's overlap policy (`skip`, `buffer_one`).
    pub skipped: usize,
    /// The overlap policy the backfill ran under.
    pub overlap: Overlap,
}

/// How many of a backfill's occurrences run (the oldest), by its overlap policy, given
/// whether the schedule has an open job that excludes others and whether one already waits
/// its turn; the rest are skipped. Every occurrence runs under `buffer_all` and `allow_all`.
pub fn backfill_keeps(overlap: Overlap, open: bool, waiting: bool, occurrences: usize) -> usize {
    let keep = match overlap {
        Overlap::BufferAll | Overlap::AllowAll | Overlap::CancelOther => occurrences,
        // The first runs, unless something runs or waits already.
        Overlap::Skip => usize::from(!open && !waiting),
        // The first runs (or waits, behind an open job) and one more waits.
        Overlap::BufferOne if waiting => 0,
        Overlap::BufferOne if open => 1,
        Overlap::BufferOne => 2,
    };
    keep.min(occurrences)
}

/// The overlap policy a backfill runs under: the one it names, or by default `allow_all` for a
/// schedule whose jobs run side by side and `buffer_all` for any other. `cancel_other` cannot
/// be named.
pub fn backfill_overlap(schedule: &Schedule, named: Option<Overlap>) -> OpsResult<Overlap> {
    match named {
        Some(Overlap::CancelOther) => Err(OpsError::Invalid(vec![FieldError::new(
            "overlap",
            "a backfill cannot run under cancel_other (each occurrence would cancel the one \
             before it); name skip, buffer_one, buffer_all or allow_all",
        )])),
        Some(overlap) => Ok(overlap),
        None if schedule.policies.overlap == Overlap::AllowAll => Ok(Overlap::AllowAll),
        None => Ok(Overlap::BufferAll),
    }
}

impl Ops {
    /// Backfills the occurrences of schedule `id` in `[from, to]` (`to` not after now, at most
    /// [`MAX_BACKFILL`] of them) under `overlap` ([`backfill_overlap`]), in one transaction with
    /// its events and audit entry.
    pub async fn schedule_backfill(
        &self,
        env: EnvId,
        id: ScheduleId,
        range: (DateTime<Utc>, DateTime<Utc>),
        overlap: Option<Overlap>,
        actor: &Actor,
    ) -> OpsResult<Backfilled> {
        let (from, to) = range;
        let mut tx = self.store.tenant_begin(env).await?;
        let schedule = live_for_update(&mut *tx, id).await?;
        // As a trigger is: its jobs would only wait for the resume, and "started" would not be
        // true.
        if schedule.status == ScheduleStatus::Paused {
            return Err(OpsError::Conflict(paused_detail(
                id,
                "a backfilled run",
                "backfill it",
            )));
        }
        let occurrences = occurrences_between(&schedule, from, to, actor.now)?;
        let overlap = backfill_overlap(&schedule, overlap)?;
        let concurrent = overlap == Overlap::AllowAll;
        let keep = if concurrent {
            occurrences.len()
        } else {
            let open = tx
                .jobs_of_schedule(schedule.id, OPEN)
                .await?
                .iter()
                .any(|j| !j.concurrent);
            let waiting = !tx
                .jobs_buffered_first(schedule.id, false, 1)
                .await?
                .is_empty();
            backfill_keeps(overlap, open, waiting, occurrences.len())
        };
        let waiting = tx.jobs_waiting_count().await?;
        let adding = keep as u64;
        if waiting + adding > self.waiting_cap {
            return Err(OpsError::Conflict(format!(
                "this environment has {waiting} jobs waiting their turn and the backfill would add \
                 {adding}: at most {} may wait (SENTIN8_CRON_MAX_WAITING_JOBS); backfill again \
                 once they have run, or in smaller parts",
                self.waiting_cap
            )));
        }
        let skip_reason = format!(
            "skipped: the backfill ran under overlap {overlap}, which keeps {keep} of its {} \
             occurrence(s) (the oldest)",
            occurrences.len()
        );
        let news: Vec<NewJob> = occurrences
            .iter()
            .enumerate()
            .map(|(i, occurrence)| {
                let job = NewJob {
                    concurrent,
                    backfill: true,
                    ..NewJob::running(schedule.id, *occurrence, actor.now)
                }
                .buffered();
                if i < keep {
                    return job;
                }
                job.skipped(skip_reason.clone(), actor.now)
            })
            .collect();
        let mut jobs = tx.job_insert_many(&news).await?;
        let skipped: Vec<NewEvent> = jobs
            .iter()
            .filter(|j| j.status == JobStatus::Skipped)
            .map(|j| {
                EventPayload::for_schedule(events::JOB_SKIPPED, &schedule, actor.now)
                    .with_job(j)
                    .by(&actor.name)
                    .into_event(&schedule)
            })
            .collect();
        // Those whose turn is now show as released.
        let released = release_buffered(&mut *tx, &schedule, actor.now).await?;
        let started = released.len();
        for job in released {
            if let Some(slot) = jobs.iter_mut().find(|j| j.id == job.id) {
                *slot = job;
            }
        }
        let event = EventPayload::for_schedule(events::SCHEDULE_BACKFILLED, &schedule, actor.now)
            .by(&actor.name);
        let skipped_count = skipped.len();
        let mut events = vec![event.into_event(&schedule)];
        events.extend(skipped);
        tx.outbox_insert_many(&events).await?;
        tx.audit_insert(&actor.audit(
            "schedule.backfill",
            "schedule",
            id.to_string(),
            snapshot(&schedule),
            Some(json!({
                "from": from,
                "to": to,
                "occurrences": jobs.len(),
                "overlap": overlap,
                "skipped": skipped_count,
                "first": occurrences.first(),
                "last": occurrences.last(),
                "job_ids": jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
            })),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(Backfilled {
            jobs,
            started,
            skipped: skipped_count,
            overlap,
        })
    }
}

/// The schedule's occurrences in `[from, to]`, checked: a cron schedule, a range in order
/// and in the past, at least one and at most [`MAX_BACKFILL`] occurrences. Bounds and jitter
/// do not apply: the operator names the range, and each runs as soon as its turn comes.
fn occurrences_between(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> OpsResult<Vec<DateTime<Utc>>> {
    let mut errors = Vec::new();
    if schedule.kind() != ScheduleKind::Cron {
        errors.push(FieldError::new(
            "schedule",
            "only a cron schedule has occurrences to backfill",
        ));
    }
    if to < from {
        errors.push(FieldError::new(
            "to",
            format!("{} is before from ({})", to.to_rfc3339(), from.to_rfc3339()),
        ));
    }
    if to > now {
        errors.push(FieldError::new(
            "to",
            format!(
                "{} is in the future: a backfill runs past occurrences (now is {})",
                to.to_rfc3339(),
                now.to_rfc3339()
            ),
        ));
    }
    if !errors.is_empty() {
        return Err(OpsError::Invalid(errors));
    }
    let mut found = Vec::new();
    let mut after = from - chrono::Duration::microseconds(1);
    while let Ok(Some(next)) = schedule.timing.next_after(after) {
        if next > to {
            break;
        }
        if found.len() == MAX_BACKFILL {
            return Err(OpsError::Invalid(vec![FieldError::new(
                "to",
                format!(
                    "the range holds more than {MAX_BACKFILL} occurrences; backfill it in \
                     parts (the first {MAX_BACKFILL} end at {})",
                    found.last().map_or_else(String::new, DateTime::to_rfc3339)
                ),
            )]));
        }
        found.push(next);
        after = next;
    }
    if found.is_empty() {
        return Err(OpsError::Invalid(vec![FieldError::new(
            "from",
            format!(
                "the schedule has no occurrence from {} to {}",
                from.to_rfc3339(),
                to.to_rfc3339()
            ),
        )]));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backfill_keeps_what_its_overlap_policy_would_of_a_burst() {
        use Overlap::*;
        // (policy, open job, one waiting already) -> kept of ten.
        let cases = [
            (BufferAll, true, true, 10),
            (AllowAll, true, true, 10),
            (Skip, false, false, 1),
            (Skip, true, false, 0),
            (Skip, false, true, 0),
            (BufferOne, false, false, 2),
            (BufferOne, true, false, 1),
            (BufferOne, false, true, 0),
        ];
        for (overlap, open, waiting, kept) in cases {
            assert_eq!(
                backfill_keeps(overlap, open, waiting, 10),
                kept,
                "{overlap} open={open} waiting={waiting}"
            );
        }
        assert_eq!(backfill_keeps(BufferOne, false, false, 1), 1);
    }
}
