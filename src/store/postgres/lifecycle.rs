//! PostgreSQL: the attempt ledger, supersede and retention.
//! Retention runs through SECURITY DEFINER functions (`cron.purge_*`), each call one bounded
//! batch, because the service role may not delete jobs, schedules or journal entries itself.

use sqlx::PgPool;

use super::tenant::PgTenantTx;
use crate::core::store::*;
use crate::store::db_err;

impl PgTenantTx<'_> {
    /// One ledger row per written outcome, in one statement.
    pub(super) async fn attempts_insert(&mut self, finishes: &[&JobFinish]) -> StoreResult<()> {
        if finishes.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO job_attempts (job_id, env_id, attempt, started_at, finished_at, \
                                       duration_ms, outcome, http_status, error_class, error, \
                                       response_excerpt) \
             SELECT u.job_id, $1, u.attempt, u.started_at, u.finished_at, u.duration_ms, \
                    u.outcome, u.http_status, u.error_class, u.error, u.response_excerpt \
               FROM unnest($2::uuid[], $3::int[], $4::timestamptz[], $5::timestamptz[], \
                           $6::bigint[], $7::text[], $8::int[], $9::text[], $10::text[], \
                           $11::text[]) \
                    AS u(job_id, attempt, started_at, finished_at, duration_ms, outcome, \
                         http_status, error_class, error, response_excerpt) \
             ON CONFLICT (job_id, attempt) DO NOTHING",
        )
        .bind(self.env_id.0)
        .bind(finishes.iter().map(|f| f.id.0).collect::<Vec<_>>())
        .bind(finishes.iter().map(|f| f.attempt).collect::<Vec<_>>())
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
                .map(|f| f.outcome.error().map(str::to_owned))
                .collect::<Vec<_>>(),
        )
        .bind(
            finishes
                .iter()
                .map(|f| f.detail.response_excerpt.clone())
                .collect::<Vec<_>>(),
        )
        .execute(&mut *self.tx)
        .await
        .map_err(db_err)?;
        Ok(())
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
