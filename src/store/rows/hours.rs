//! The hourly job summary of both backends: one statement shape, written once, with each
//! backend's expressions for "the hour of `scheduled_for`" and "the lateness in milliseconds".
//! The sums and the nearest-rank percentiles are computed in SQL (window functions), so a
//! window's answer is one row per hour, however many jobs it holds.

use chrono::{DateTime, Utc};

use super::{Cells, RowCells, Sql, TenantRows, Val};
use crate::core::store::{JobHour, JobHours, JobHoursQuery, StoreError, StoreResult};

/// A backend's spelling of the parts that differ.
pub(crate) struct HoursDialect {
    /// The hour number (hours since the Unix epoch) of `scheduled_for`.
    pub hour: &'static str,
    /// The lateness in milliseconds of the instant `{first}` (see [`FIRST_START`]).
    pub late: &'static str,
}

/// The placeholders of [`job_hours_sql`]: environment, window start, window end, and the
/// schedule filter (`NULL` means every schedule).
struct HoursParams {
    env: String,
    from: String,
    to: String,
    schedule: String,
}

/// When a job's first attempt started: the attempt ledger's first row (it keeps the first
/// start after a retry has moved the job's own `started_at`), or, for a job without ledger rows,
/// its own start when it has run once.
const FIRST_START: &str = "COALESCE((SELECT a.started_at FROM job_attempts a \
       WHERE a.env_id = jobs.env_id AND a.job_id = jobs.id AND a.attempt = 1), \
     CASE WHEN jobs.attempt = 1 THEN jobs.started_at END)";

/// One row per hour with jobs (`by_hour`), or one row for the whole window, with the columns
/// `h, fires, succeeded, failures, skips, p50, p99`. A job superseded by a successor is left out:
/// the successor (a republished dead letter keeps its `scheduled_for`) stands for the same
/// occurrence; a discarded one (superseded with no successor) counts as the failure it was. A
/// record of a run of missed occurrences counts each of them (`missed_count`), in the hour of
/// the first. A backfilled job counts as a fire but has no lateness: it runs long after its
/// occurrence because an operator asked, not because the scheduler was late.
fn job_hours_sql(d: &HoursDialect, p: &HoursParams, by_hour: bool) -> String {
    let (rank_by, count_by, group) = if by_hour {
        ("h, late IS NULL", "PARTITION BY h", "GROUP BY h ORDER BY h")
    } else {
        ("late IS NULL", "", "")
    };
    let hour_out = if by_hour { "h" } else { "CAST(0 AS BIGINT)" };
    format!(
        "WITH j AS (SELECT {hour} AS h, \
                           CASE WHEN status = 'superseded' THEN 'failed' ELSE status END AS status, \
                           CASE WHEN missed_count > 0 THEN missed_count ELSE 1 END AS occurrences, \
                           CASE WHEN backfill THEN NULL ELSE {late} END AS late FROM jobs \
                     WHERE env_id = {env} AND scheduled_for >= {from} AND scheduled_for < {to} \
                       AND NOT (status = 'superseded' AND superseded_by IS NOT NULL) \
                       AND ({schedule} IS NULL OR schedule_id = {schedule})), \
              r AS (SELECT h, status, occurrences, late, \
                           ROW_NUMBER() OVER (PARTITION BY {rank_by} ORDER BY late) AS n, \
                           COUNT(late) OVER ({count_by}) AS total \
                      FROM j) \
         SELECT {hour_out} AS h, COALESCE(SUM(occurrences), 0) AS fires, \
                COALESCE(SUM(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END), 0) AS succeeded, \
                COALESCE(SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END), 0) AS failures, \
                COALESCE(SUM(CASE WHEN status = 'skipped' THEN occurrences ELSE 0 END), 0) AS skips, \
                MIN(CASE WHEN late IS NOT NULL AND n * 100 >= total * 50 THEN late END) AS p50, \
                MIN(CASE WHEN late IS NOT NULL AND n * 100 >= total * 99 THEN late END) AS p99 \
           FROM r {group}",
        hour = d.hour,
        late = d.late.replace("{first}", FIRST_START),
        env = p.env,
        from = p.from,
        to = p.to,
        schedule = p.schedule,
    )
}

/// The hourly summary of the transaction's environment that `query` asks for: one statement
/// per hour with jobs, one for the whole window.
pub(crate) async fn job_hours_of<T: TenantRows>(
    tx: &mut T,
    query: &JobHoursQuery,
) -> StoreResult<JobHours> {
    let mut rows = Vec::with_capacity(2);
    for by_hour in [true, false] {
        let mut sql = Sql::new(T::PLACEHOLDER);
        let params = HoursParams {
            env: sql.val(Val::uuid(tx.tenant().0)),
            from: sql.val(Val::ts(query.from)),
            to: sql.val(Val::ts(query.to)),
            schedule: sql.val(Val::Uuid(query.schedule_id.map(|id| id.0))),
        };
        sql.text = job_hours_sql(&T::HOURS, &params, by_hour);
        let found = tx.fetch_all(&sql).await?;
        let found = found
            .iter()
            .map(|row| hour_row(&row.cells("jobs")))
            .collect::<StoreResult<Vec<_>>>()?;
        rows.push(found);
    }
    let window = rows.pop().and_then(|mut w| w.pop());
    job_hours(rows.pop().unwrap_or_default(), window)
}

/// A row of [`job_hours_sql`]: `(h, fires, succeeded, failures, skips, p50, p99)`.
type HourRow = (i64, i64, i64, i64, i64, Option<i64>, Option<i64>);

fn hour_row(c: &impl Cells) -> StoreResult<HourRow> {
    Ok((
        c.i64("h")?,
        c.i64("fires")?,
        c.i64("succeeded")?,
        c.i64("failures")?,
        c.i64("skips")?,
        c.opt_i64("p50")?,
        c.opt_i64("p99")?,
    ))
}

/// The summary from the per-hour rows and the whole-window row.
fn job_hours(hours: Vec<HourRow>, window: Option<HourRow>) -> StoreResult<JobHours> {
    let hours = hours
        .into_iter()
        .map(|(h, fires, succeeded, failures, skips, p50, p99)| {
            let hour = h
                .checked_mul(3600)
                .and_then(|secs| DateTime::<Utc>::from_timestamp(secs, 0))
                .ok_or_else(|| StoreError::Corrupt {
                    table: "jobs",
                    detail: format!("hour {h} is out of range"),
                })?;
            Ok(JobHour {
                hour,
                fires,
                succeeded,
                failures,
                skips,
                late_p50_ms: p50,
                late_p99_ms: p99,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let (late_p50_ms, late_p99_ms) = window.map_or((None, None), |row| (row.5, row.6));
    Ok(JobHours {
        hours,
        late_p50_ms,
        late_p99_ms,
    })
}
