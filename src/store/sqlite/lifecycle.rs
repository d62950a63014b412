//! SQLite: the attempt ledger, supersede and retention. Retention
//! deletes one bounded batch per statement; the one writer connection keeps each short.

use sqlx::SqlitePool;

use super::tenant::SqliteTenantTx;
use crate::core::model::ScheduleId;
use crate::core::store::*;
use crate::store::db_err;

/// The most rows one retention statement deletes, whatever the caller asks.
const MAX_PURGE_BATCH: u32 = 10_000;

impl SqliteTenantTx {
    /// One ledger row per written outcome.
    pub(super) async fn attempts_insert(&mut self, finishes: &[&JobFinish]) -> StoreResult<()> {
        for finish in finishes {
            sqlx::query(
                "INSERT INTO job_attempts (job_id, env_id, attempt, started_at, finished_at, \
                                           duration_ms, outcome, http_status, error_class, \
                                           error, response_excerpt) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
                 ON CONFLICT (job_id, attempt) DO NOTHING",
            )
            .bind(finish.id.0.to_string())
            .bind(self.env())
            .bind(finish.attempt)
            .bind(finish.detail.started_at.map(|t| t.timestamp_micros()))
            .bind(finish.detail.ended(finish.now).timestamp_micros())
            .bind(finish.detail.duration_ms(finish.now))
            .bind(finish.outcome.attempt_outcome().as_str())
            .bind(finish.detail.http_status.map(i32::from))
            .bind(finish.detail.error_class.as_deref())
            .bind(finish.outcome.error())
            .bind(finish.detail.response_excerpt.as_deref())
            .execute(&mut *self.tx)
            .await
            .map_err(db_err)?;
        }
        Ok(())
    }

    /// A written outcome's call start as its schedule's `last_run_at`, unless that is later.
    pub(super) async fn last_run_set(
        &mut self,
        id: ScheduleId,
        at: chrono::DateTime<chrono::Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE schedules SET last_run_at = ?3 \
             WHERE env_id = ?1 AND id = ?2 AND (last_run_at IS NULL OR last_run_at < ?3)",
        )
        .bind(self.env())
        .bind(id.0.to_string())
        .bind(at.timestamp_micros())
        .execute(&mut *self.tx)
        .await
        .map_err(db_err)?;
        Ok(())
    }
}

/// Deletes one batch of finished jobs past retention (their attempts go with them).
pub(super) async fn jobs_purge(pool: &SqlitePool, purge: &RetentionPurge) -> StoreResult<u64> {
    batch(
        pool,
        "DELETE FROM jobs WHERE id IN ( \
             SELECT j.id FROM jobs j \
              WHERE j.status IN ('succeeded', 'failed', 'skipped', 'superseded', 'cancelled') \
                AND j.updated_at < ?1 \
                AND NOT EXISTS (SELECT 1 FROM dlq d WHERE d.job_id = j.id) \
              ORDER BY j.updated_at LIMIT ?2)",
        purge,
    )
    .await
}

/// Deletes one batch of audit entries past retention.
pub(super) async fn audit_purge(pool: &SqlitePool, purge: &RetentionPurge) -> StoreResult<u64> {
    batch(
        pool,
        "DELETE FROM audit_journal WHERE id IN ( \
             SELECT id FROM audit_journal WHERE at < ?1 ORDER BY at LIMIT ?2)",
        purge,
    )
    .await
}

/// Deletes one batch of long-deleted schedules nothing references.
pub(super) async fn schedules_purge(pool: &SqlitePool, purge: &RetentionPurge) -> StoreResult<u64> {
    batch(
        pool,
        "DELETE FROM schedules WHERE id IN ( \
             SELECT s.id FROM schedules s \
              WHERE s.status = 'deleted' AND s.updated_at < ?1 \
                AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.schedule_id = s.id) \
                AND NOT EXISTS (SELECT 1 FROM dlq d WHERE d.schedule_id = s.id) \
              ORDER BY s.updated_at LIMIT ?2)",
        purge,
    )
    .await
}

async fn batch(pool: &SqlitePool, sql: &str, purge: &RetentionPurge) -> StoreResult<u64> {
    let done = sqlx::query(sql)
        .bind(purge.before.timestamp_micros())
        .bind(i64::from(purge.limit.min(MAX_PURGE_BATCH)))
        .execute(pool)
        .await
        .map_err(db_err)?;
    Ok(done.rows_affected())
}
