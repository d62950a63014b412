//! Backfill: an operator asks for a past range of a cron schedule's occurrences. Each becomes
//! a job of its own (`backfill`, a fresh idempotency key), waiting its turn as a `buffered`
//! job and run under the schedule's overlap policy: never beside another job of a schedule
//! whose jobs exclude each other (`skip`, `buffer_one`: one after another, none skipped, since
//! the operator asked for each), and up to `BACKFILL_AT_ONCE` at a time beside the others
//! under `allow_all`.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::audit::snapshot;
use super::schedule::{live_for_update, paused_detail};
use super::{Actor, Ops, OpsError, OpsResult};
use crate::core::buffered::{MAX_BACKFILL, release_buffered};
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
    /// Those released to run at once (the rest wait their turn).
    pub started: usize,
}

impl Ops {
    /// Backfills the occurrences of schedule `id` in `[from, to]` (`to` not after now, at most
    /// [`MAX_BACKFILL`] of them), in one transaction with its event and audit entry.
    pub async fn schedule_backfill(
        &self,
        env: EnvId,
        id: ScheduleId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        actor: &Actor,
    ) -> OpsResult<Backfilled> {
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
        let waiting = tx.jobs_waiting_count().await?;
        let adding = occurrences.len() as u64;
        if waiting + adding > self.waiting_cap {
            return Err(OpsError::Conflict(format!(
                "this environment has {waiting} jobs waiting their turn and the backfill would add \
                 {adding}: at most {} may wait (SENTIN8_CRON_MAX_WAITING_JOBS); backfill again \
                 once they have run, or in smaller parts",
                self.waiting_cap
            )));
        }
        let concurrent = schedule.policies.overlap == Overlap::AllowAll;
        let news: Vec<NewJob> = occurrences
            .iter()
            .map(|occurrence| NewJob {
                status: JobStatus::Buffered,
                attempt: 0,
                started_at: None,
                concurrent,
                backfill: true,
                ..NewJob::running(schedule.id, *occurrence, actor.now)
            })
            .collect();
        let mut jobs = tx.job_insert_many(&news).await?;
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
        tx.outbox_insert(&event.into_event(&schedule)).await?;
        tx.audit_insert(&actor.audit(
            "schedule.backfill",
            "schedule",
            id.to_string(),
            snapshot(&schedule),
            Some(json!({
                "from": from,
                "to": to,
                "occurrences": jobs.len(),
                "first": occurrences.first(),
                "last": occurrences.last(),
                "job_ids": jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
            })),
        ))
        .await?;
        tx.notify_on_commit(Channel::Schedules);
        tx.commit().await?;
        Ok(Backfilled { jobs, started })
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
