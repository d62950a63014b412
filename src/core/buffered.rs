//! Occurrences that wait for their turn (`buffered` jobs): one that came due while its
//! schedule's job was open (overlap `buffer_one`), and backfilled ones an operator asked for.
//!
//! They are released to `pending` (due at once, drained like retries) in the transaction that
//! makes room for them: the one that records the open job's end, a resume, or the backfill
//! itself. A schedule whose jobs exclude each other runs one at a time, its regular occurrence
//! before backfilled ones; an `allow_all` schedule runs up to [`BACKFILL_AT_ONCE`] backfilled
//! occurrences beside its other jobs.

use chrono::{DateTime, Utc};

use crate::core::model::{Job, JobStatus, Schedule};
use crate::core::store::{JobRelease, StoreResult, TenantTx};

/// How many backfilled occurrences of an `allow_all` schedule run at once.
pub const BACKFILL_AT_ONCE: usize = 5;
/// The most occurrences one backfill may ask for.
pub const MAX_BACKFILL: usize = 1_000;

/// The statuses of an open job.
pub const OPEN: &[JobStatus] = &[JobStatus::Scheduled, JobStatus::Pending, JobStatus::Running];

/// Releases what may run now of `schedule`'s buffered occurrences, in the caller's
/// transaction (which holds the schedule's row). Returns the released jobs. Only as many
/// buffered jobs are read as there is room for, so a backlog of thousands costs each release
/// what a backlog of one does.
pub async fn release_buffered(
    tx: &mut dyn TenantTx,
    schedule: &Schedule,
    now: DateTime<Utc>,
) -> StoreResult<Vec<Job>> {
    let open = tx.jobs_of_schedule(schedule.id, OPEN).await?;
    let exclusive_room = usize::from(!open.iter().any(|j| !j.concurrent));
    let side_by_side = open.iter().filter(|j| j.concurrent && j.backfill).count();
    let concurrent_room = BACKFILL_AT_ONCE.saturating_sub(side_by_side);
    let mut released = Vec::new();
    for (concurrent, room) in [(false, exclusive_room), (true, concurrent_room)] {
        for job in tx
            .jobs_buffered_first(schedule.id, concurrent, room)
            .await?
        {
            let release = JobRelease { id: job.id, now };
            if let Some(job) = tx.job_release_buffered(&release).await? {
                released.push(job);
            }
        }
    }
    Ok(released)
}
