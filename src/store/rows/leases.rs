//! The tenant reads and writes of attempts and their leases that both backends run alike: the
//! open jobs of several schedules in one read, and the release of an attempt whose lease lapsed
//! before its call was known to start.

use super::shared::scoped;
use super::{JOB_COLUMNS, OPEN_JOB, TenantRows, Val, map_row, map_rows};
use crate::core::model::*;
use crate::core::store::*;

/// The open jobs of schedules `ids` (see [`TenantTx::jobs_open_of`]), in statements of at
/// most 500 ids.
pub(crate) async fn open_jobs_of<T: TenantRows>(
    tx: &mut T,
    ids: &[ScheduleId],
) -> StoreResult<Vec<Job>> {
    let mut found = Vec::new();
    for chunk in ids.chunks(500) {
        let sql = scoped(tx, |env, sql| {
            let list: Vec<String> = chunk.iter().map(|id| sql.val(Val::uuid(id.0))).collect();
            format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE env_id = {env} \
                 AND schedule_id IN ({}) AND {OPEN_JOB}",
                list.join(", ")
            )
        });
        let rows = tx.fetch_all(&sql).await?;
        found.extend(map_rows(&rows, "jobs", super::job)?);
    }
    Ok(found)
}

/// Releases a running attempt whose lease lapsed before its call was marked as started (see
/// [`TenantTx::job_release_uncalled`]).
pub(crate) async fn release_uncalled<T: TenantRows>(
    tx: &mut T,
    change: &UncalledRelease,
) -> StoreResult<Option<Job>> {
    let sql = scoped(tx, |env, sql| {
        let id = sql.val(Val::uuid(change.id.0));
        let epoch = sql.val(Val::I32(change.epoch));
        let now = sql.val(Val::ts(change.now));
        format!(
            "UPDATE jobs SET status = 'pending', attempt = attempt - 1, started_at = NULL, \
             next_attempt_at = {now}, updated_at = {now}, lease_until = NULL \
             WHERE env_id = {env} AND id = {id} AND status = 'running' \
               AND lease_epoch = {epoch} AND called_at IS NULL AND attempt > 0 \
               AND lease_until IS NOT NULL AND lease_until < {now} \
             RETURNING {JOB_COLUMNS}"
        )
    });
    let row = tx.fetch_optional(&sql).await?;
    map_row(row.as_ref(), "jobs", super::job)
}
