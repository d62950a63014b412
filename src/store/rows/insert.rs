//! The inserts of new rows, one at a time and in batches of a few hundred to a statement
//! (returned in the caller's order, whatever order the database returns them in).

use uuid::Uuid;

use super::sql::{Sql, Val};
use super::write::{TenantRows, audit_insert, dlq_insert, job_insert, schedule_insert};
use super::{DLQ_COLUMNS, JOB_COLUMNS, RowCells, SCHEDULE_COLUMNS};
use crate::core::model::*;
use crate::core::store::*;

pub(crate) async fn insert_schedule<T: TenantRows>(
    tx: &mut T,
    new: &NewSchedule,
) -> StoreResult<Schedule> {
    let columns = schedule_insert(tx.tenant(), new);
    let sql = Sql::insert(T::PLACEHOLDER, "schedules", columns, SCHEDULE_COLUMNS);
    let row = tx.fetch_one(&sql).await?;
    super::schedule(&row.cells("schedules"))
}

/// Rows per statement of [`insert_schedules`]: 28 values each, 5,600 a statement, far under
/// both databases' limits on bound values.
const SCHEDULES_PER_INSERT: usize = 200;

/// Inserts `news` in statements of [`SCHEDULES_PER_INSERT`] rows (an enrollment of ten
/// thousand costs fifty statements, not ten thousand), returned in the order given.
pub(crate) async fn insert_schedules<T: TenantRows>(
    tx: &mut T,
    news: &[NewSchedule],
) -> StoreResult<Vec<Schedule>> {
    let env = tx.tenant();
    let rows = news.iter().map(|new| schedule_insert(env, new)).collect();
    let returned = insert_in_statements(
        tx,
        "schedules",
        rows,
        SCHEDULES_PER_INSERT,
        SCHEDULE_COLUMNS,
    )
    .await?;
    let mut inserted = std::collections::HashMap::with_capacity(news.len());
    for row in returned {
        let schedule = super::schedule(&row.cells("schedules"))?;
        inserted.insert(schedule.id, schedule);
    }
    in_given_order(news.iter().map(|new| new.id.0), "schedules", |id| {
        inserted.remove(&ScheduleId(id))
    })
}

/// Inserts `rows` into `table` in statements of `per_statement` rows, returning the
/// `returning` columns of every row (in no promised order; none when `returning` is empty).
async fn insert_in_statements<T: TenantRows>(
    tx: &mut T,
    table: &'static str,
    rows: Vec<Vec<(&'static str, Val)>>,
    per_statement: usize,
    returning: &str,
) -> StoreResult<Vec<T::Row>> {
    let mut returned = Vec::with_capacity(rows.len());
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<_> = rows.by_ref().take(per_statement).collect();
        let sql = Sql::insert_many(T::PLACEHOLDER, table, chunk, returning);
        if returning.is_empty() {
            tx.execute(&sql).await?;
        } else {
            returned.extend(tx.fetch_all(&sql).await?);
        }
    }
    Ok(returned)
}

/// The inserted rows in the caller's order (RETURNING's is not promised): `take` hands over
/// the row with each id once; an id it does not have was not returned by its insert.
fn in_given_order<R>(
    ids: impl Iterator<Item = Uuid>,
    table: &'static str,
    mut take: impl FnMut(Uuid) -> Option<R>,
) -> StoreResult<Vec<R>> {
    ids.map(|id| {
        take(id).ok_or_else(|| StoreError::Corrupt {
            table,
            detail: format!("row {id} was not returned by its insert"),
        })
    })
    .collect()
}

/// Rows per statement of [`insert_audits`] (11 values each).
const AUDITS_PER_INSERT: usize = 400;

/// Appends audit entries in statements of [`AUDITS_PER_INSERT`] rows, in the order given.
pub(crate) async fn insert_audits<T: TenantRows>(
    tx: &mut T,
    entries: &[NewAudit],
) -> StoreResult<()> {
    let env = tx.tenant();
    let rows = entries
        .iter()
        .map(|entry| audit_insert(env, entry))
        .collect();
    insert_in_statements(tx, "audit_journal", rows, AUDITS_PER_INSERT, "").await?;
    Ok(())
}

pub(crate) async fn insert_job<T: TenantRows>(tx: &mut T, new: &NewJob) -> StoreResult<Job> {
    let columns = job_insert(tx.tenant(), new);
    let sql = Sql::insert(T::PLACEHOLDER, "jobs", columns, JOB_COLUMNS);
    let row = tx.fetch_one(&sql).await?;
    super::job(&row.cells("jobs"))
}

/// Rows per statement of [`insert_jobs`]: 19 values each stay far under both databases'
/// limits on bound values.
const JOBS_PER_INSERT: usize = 200;

/// Inserts `news` in statements of [`JOBS_PER_INSERT`] rows (a backfill's thousand jobs cost
/// five statements, not a thousand), returned in the order given.
pub(crate) async fn insert_jobs<T: TenantRows>(
    tx: &mut T,
    news: &[NewJob],
) -> StoreResult<Vec<Job>> {
    let env = tx.tenant();
    let rows = news.iter().map(|new| job_insert(env, new)).collect();
    let returned = insert_in_statements(tx, "jobs", rows, JOBS_PER_INSERT, JOB_COLUMNS).await?;
    let mut inserted = std::collections::HashMap::with_capacity(news.len());
    for row in returned {
        let job = super::job(&row.cells("jobs"))?;
        inserted.insert(job.id, job);
    }
    in_given_order(news.iter().map(|new| new.id.0), "jobs", |id| {
        inserted.remove(&JobId(id))
    })
}

pub(crate) async fn insert_dlq<T: TenantRows>(
    tx: &mut T,
    new: &NewDlqEntry,
) -> StoreResult<DlqEntry> {
    let columns = dlq_insert(tx.tenant(), new);
    let sql = Sql::insert(T::PLACEHOLDER, "dlq", columns, DLQ_COLUMNS);
    let row = tx.fetch_one(&sql).await?;
    super::dlq(&row.cells("dlq"))
}
