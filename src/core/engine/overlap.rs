//! Fires whose schedule still has an open job (their job's insert met the one-open-job
//! index), by the schedule's overlap policy ([`PlannedAction::of`]): the occurrence waits as a
//! `buffered` job (`buffer_one`: one at most; `buffer_all`: up to the engine's bound), replaces
//! the open job (`cancel_other`: the open job is `cancelled`, and the new one runs), or is
//! skipped, on the record.
//!
//! A cancelled job's call, if one is in flight, is aborted by the instance that holds it: at
//! once when that is the claiming instance, else at its next lease renewal, which finds the job
//! no longer its own (seconds). Its outcome is refused by the job's fence either way. A job
//! whose answer is already durable has run: it is not cancelled, and the new occurrence waits
//! for its record as a `buffered` job (it runs right after, so the run the plan counted for
//! it is made).

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::PlannedAction;
use super::claim::ClaimedGroup;
use super::parts::{ENGINE_ACTOR, Parts};
use crate::core::events::{self, EventPayload};
use crate::core::model::*;
use crate::core::policies::Overlap;
use crate::core::store::*;

impl Parts {
    /// Records the fires whose schedule still has an open job, by overlap policy. What they
    /// need is read in two batched reads.
    pub(super) async fn record_overlaps(
        &self,
        tx: &mut dyn TenantTx,
        overlapping: Vec<(Schedule, NewJob)>,
        now: DateTime<Utc>,
        group: &mut ClaimedGroup,
        events: &mut Vec<NewEvent>,
    ) -> StoreResult<()> {
        if overlapping.is_empty() {
            return Ok(());
        }
        let buffering: Vec<ScheduleId> = overlapping
            .iter()
            .filter(|(s, _)| matches!(s.policies.overlap, Overlap::BufferOne | Overlap::BufferAll))
            .map(|(s, _)| s.id)
            .collect();
        let mut waiting: HashMap<ScheduleId, u32> = if buffering.is_empty() {
            HashMap::new()
        } else {
            tx.buffered_occurrence_counts(&buffering)
                .await?
                .into_iter()
                .collect()
        };
        let ids: Vec<ScheduleId> = overlapping.iter().map(|(s, _)| s.id).collect();
        let open = open_job_by_schedule(tx.jobs_open_of(&ids).await?);
        for (schedule, new) in overlapping {
            let waits = waiting.entry(schedule.id).or_default();
            let action = PlannedAction::of(
                schedule.policies.overlap,
                true,
                *waits,
                self.config.max_buffered,
            );
            let open_job = open.get(&schedule.id);
            let reason = match action {
                PlannedAction::Buffer => {
                    *waits += 1;
                    buffer(tx, &schedule, new, now, events).await?;
                    group.buffered += 1;
                    continue;
                }
                PlannedAction::Replace => {
                    let held = new.status == JobStatus::Scheduled;
                    let replaced = match open_job {
                        Some(open_job) => {
                            replace(tx, &schedule, open_job, &new, now, events).await?
                        }
                        None => None,
                    };
                    match replaced {
                        Some((cancelled, job)) => {
                            group.cancelled.push(cancelled);
                            group.runs.push((schedule, job, held));
                        }
                        // The open job has answered (its record is on its way): the new
                        // occurrence runs after it, as the plan counted.
                        None => {
                            buffer(tx, &schedule, new, now, events).await?;
                            group.buffered += 1;
                        }
                    }
                    continue;
                }
                _ if schedule.policies.overlap == Overlap::BufferAll => format!(
                    "skipped: {} occurrences of this schedule already wait for its open job \
                     (the most a buffer_all schedule may have waiting, --max-buffered)",
                    *waits
                ),
                _ => match open_job {
                    Some(open) => format!(
                        "skipped: job {} of this schedule is still {}",
                        open.id, open.status
                    ),
                    None => "skipped: another job of this schedule was open".to_owned(),
                },
            };
            let record = tx.job_insert(&new.skipped(reason, now)).await?;
            tracing::info!(schedule_id = %schedule.id, "fire skipped: previous job still open");
            events.push(super::claim::skip_event(&schedule, &record, now));
            group.skipped += 1;
        }
        Ok(())
    }
}

/// Keeps the occurrence as a `buffered` job, with its event.
async fn buffer(
    tx: &mut dyn TenantTx,
    schedule: &Schedule,
    new: NewJob,
    now: DateTime<Utc>,
    events: &mut Vec<NewEvent>,
) -> StoreResult<()> {
    let record = tx.job_insert(&new.buffered()).await?;
    tracing::info!(schedule_id = %schedule.id, job_id = %record.id, "fire buffered behind the open job");
    events.push(
        EventPayload::for_schedule(events::JOB_BUFFERED, schedule, now)
            .with_job(&record)
            .by(ENGINE_ACTOR)
            .into_event(schedule),
    );
    Ok(())
}

/// Cancels the open job for the new occurrence and opens the new one's job in its place, with
/// the `job.cancelled` event. `None` when the open job had answered (or ended) meanwhile. The
/// new job is a plain insert: were another job open beside it, the claim's transaction would
/// fail whole (the cancellation with it) rather than cancel for nothing.
async fn replace(
    tx: &mut dyn TenantTx,
    schedule: &Schedule,
    open: &Job,
    new: &NewJob,
    now: DateTime<Utc>,
    events: &mut Vec<NewEvent>,
) -> StoreResult<Option<(JobId, Job)>> {
    let change = JobReplace {
        id: open.id,
        reason: format!(
            "cancelled: the occurrence of {} replaced it (overlap cancel_other)",
            new.scheduled_for.to_rfc3339()
        ),
        now,
    };
    let Some(cancelled) = tx.job_replace(&change).await? else {
        return Ok(None);
    };
    let job = tx.job_insert(new).await?;
    tracing::info!(schedule_id = %schedule.id, cancelled = %cancelled.id, job_id = %job.id, "open job cancelled for a newer occurrence");
    events.push(
        EventPayload::for_schedule(events::JOB_CANCELLED, schedule, now)
            .with_job(&cancelled)
            .by(ENGINE_ACTOR)
            .into_event(schedule),
    );
    Ok(Some((cancelled.id, job)))
}

/// The open job a record names per schedule (the one a new occurrence overlaps): its fire
/// claimed ahead if it has one, else its oldest that excludes others.
fn open_job_by_schedule(jobs: Vec<Job>) -> HashMap<ScheduleId, Job> {
    let mut by_schedule: HashMap<ScheduleId, Job> = HashMap::new();
    for job in jobs.into_iter().filter(|j| !j.concurrent) {
        let keep = match by_schedule.get(&job.schedule_id) {
            None => true,
            Some(kept) => {
                let rank = |j: &Job| (j.status != JobStatus::Scheduled, j.created_at);
                rank(&job) < rank(kept)
            }
        };
        if keep {
            by_schedule.insert(job.schedule_id, job);
        }
    }
    by_schedule
}
