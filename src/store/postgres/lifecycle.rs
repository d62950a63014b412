//! PostgreSQL: the attempt ledger, supersede and retention.
//! Retention runs through SECURITY DEFINER functions (`cron.purge_*`), each call one bounded
//! batch, because the service role may not delete jobs, schedules or journal entries itself.

use sqlx::PgPool;

use super::tenant::PgTenantTx;
use crate::core::model::Job;
use crate::core::store::*;
use crate::store::db_err;
use crate::store::rows::{self, JOB_COLUMNS, prefixed};

impl PgTenantTx<'_> {
    /// [`TenantTx::job_finish_many`] in one statement: the outcomes written to the jobs still
    /// running their attempts, and for each job written, its ledger row, its schedule's last
    /// call (an attempt of this instance's own, not one recovered) and the answer written ahead
    /// of it forgotten. A record of a jittered stream holds a few outcomes, so each round trip
    /// saved is a large share of its cost.
    ///
    /// The batch's columns come back from the update (`RETURNING` may name the `FROM` list),
    /// so the other writes read the written rows alone and never join the batch again.
    pub(super) async fn finish_jobs(&mut self, finishes: &[JobFinish]) -> StoreResult<Vec<Job>> {
        if finishes.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "WITH f AS ( \
               UPDATE jobs j SET status = u.status, next_attempt_at = u.next_attempt_at, \
                                 finished_at = u.finished_at, result = u.result, error = u.error, \
                                 updated_at = u.updated_at \
               FROM unnest($2::uuid[], $3::int[], $4::text[], $5::timestamptz[], \
                           $6::timestamptz[], $7::jsonb[], $8::text[], $9::timestamptz[], \
                           $10::timestamptz[], $11::int[], \
                           array_fill('running'::text, ARRAY[cardinality($2::uuid[])]), \
                           $12::timestamptz[], $13::timestamptz[], $14::bigint[], $15::text[], \
                           $16::int[], $17::text[], $18::text[]) \
                    AS u(id, attempt, status, next_attempt_at, finished_at, result, error, \
                         updated_at, lease_by, epoch, was, call_started_at, call_ended_at, \
                         duration_ms, outcome, http_status, error_class, response_excerpt) \
               WHERE j.env_id = (SELECT $1::uuid) AND j.id = u.id AND j.status = u.was \
                 AND j.attempt = u.attempt AND j.lease_epoch = u.epoch \
                 AND (u.lease_by IS NULL OR j.lease_until IS NULL OR j.lease_until < u.lease_by) \
               RETURNING {returned}, u.lease_by, u.call_started_at, u.call_ended_at, \
                         u.duration_ms, u.outcome, u.http_status, u.error_class, \
                         u.response_excerpt \
             ), ledger AS ( \
               INSERT INTO job_attempts (job_id, env_id, attempt, started_at, finished_at, \
                                         duration_ms, outcome, http_status, error_class, error, \
                                         response_excerpt) \
               SELECT f.id, f.env_id, f.attempt, f.call_started_at, f.call_ended_at, \
                      f.duration_ms, f.outcome, f.http_status, f.error_class, f.error, \
                      f.response_excerpt \
                 FROM f \
               ON CONFLICT (job_id, attempt) DO NOTHING \
             ), last_run AS ( \
               UPDATE schedules s SET last_run_at = greatest(s.last_run_at, r.at) \
               FROM (SELECT schedule_id AS id, max(call_started_at) AS at FROM f \
                      WHERE lease_by IS NULL AND call_started_at IS NOT NULL \
                      GROUP BY schedule_id) r \
               WHERE s.env_id = (SELECT $1::uuid) AND s.id = r.id \
                 AND (s.last_run_at IS NULL OR s.last_run_at < r.at) \
             ), answered AS ( \
               DELETE FROM job_answers a USING f \
                WHERE a.env_id = (SELECT $1::uuid) AND a.job_id = f.id \
             ) \
             SELECT {JOB_COLUMNS} FROM f",
            returned = prefixed(JOB_COLUMNS, "j")
        );
        let columns: Vec<rows::FinishColumns> = finishes.iter().map(rows::job_finish).collect();
        let rows = sqlx::query(&sql)
            .persistent(false)
            .bind(self.env_id.0)
            .bind(finishes.iter().map(|f| f.id.0).collect::<Vec<_>>())
            .bind(finishes.iter().map(|f| f.attempt).collect::<Vec<_>>())
            .bind(columns.iter().map(|c| c.status).collect::<Vec<_>>())
            .bind(
                columns
                    .iter()
                    .map(|c| c.next_attempt_at)
                    .collect::<Vec<_>>(),
            )
            .bind(columns.iter().map(|c| c.finished_at).collect::<Vec<_>>())
            .bind(columns.iter().map(|c| c.result.clone()).collect::<Vec<_>>())
            .bind(columns.iter().map(|c| c.error.clone()).collect::<Vec<_>>())
            .bind(finishes.iter().map(|f| f.now).collect::<Vec<_>>())
            .bind(
                finishes
                    .iter()
                    .map(|f| f.lease_expired_by)
                    .collect::<Vec<_>>(),
            )
            .bind(finishes.iter().map(|f| f.epoch).collect::<Vec<_>>())
            .bind(
                finishes
                    .iter()
                    .map(|f| f.detail.started_at)
                    .collect::<Vec<_>>(),
            )
            .bind(
                finishes
                    .iter()
                    .map(|f| f.detail.ended(f.now))
                    .collect::<Vec<_>>(),
            )
            .bind(
                finishes
                    .iter()
                    .map(|f| f.detail.duration_ms(f.now))
                    .collect::<Vec<_>>(),
            )
            .bind(
                finishes
                    .iter()
                    .map(|f| f.outcome.attempt_outcome().as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                finishes
                    .iter()
                    .map(|f| f.detail.http_status.map(i32::from))
                    .collect::<Vec<_>>(),
            )
            .bind(
                finishes
                    .iter()
                    .map(|f| f.detail.error_class.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(
                finishes
                    .iter()
                    .map(|f| f.detail.response_excerpt.clone())
                    .collect::<Vec<_>>(),
            )
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "jobs", rows::job)
    }
}

/// One bounded retention batch through `cron.{function}`.
pub(super) async fn purge(
    pool: &PgPool,
    function: &'static str,
    purge: &RetentionPurge,
) -> StoreResult<u64> {
    let deleted: i64 = sqlx::query_scalar(&format!("SELECT cron.{function}($1, $2)"))
        .bind(purge.before)
        .bind(i32::try_from(purge.limit).unwrap_or(i32::MAX))
        .fetch_one(pool)
        .await
        .map_err(db_err)?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}
