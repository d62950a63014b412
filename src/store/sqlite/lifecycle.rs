//! SQLite: the attempt ledger, supersede, the audit journal's query and retention. Retention
//! deletes one bounded batch per statement; the one writer connection keeps each short.

use sqlx::SqlitePool;

use super::tenant::SqliteTenantTx;
use crate::core::model::*;
use crate::core::store::*;
use crate::store::db_err;
use crate::store::rows::{self, ATTEMPT_COLUMNS, AUDIT_COLUMNS};

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

    pub(super) async fn attempts_list(&mut self, job_id: JobId) -> StoreResult<Vec<JobAttempt>> {
        let sql = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM job_attempts WHERE env_id = ?1 AND job_id = ?2 \
             ORDER BY attempt"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(job_id.0.to_string())
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "job_attempts", rows::attempt)
    }

    pub(super) async fn audit_page(&mut self, query: &AuditQuery) -> StoreResult<Vec<AuditEntry>> {
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_journal \
             WHERE env_id = ?1 \
               AND (?2 IS NULL OR schedule_id = ?2) \
               AND (?3 IS NULL OR actor = ?3) \
               AND (?4 IS NULL OR at >= ?4) \
               AND (?5 IS NULL OR id < ?5) \
             ORDER BY id DESC LIMIT ?6"
        );
        let rows = sqlx::query(&sql)
            .bind(self.env())
            .bind(query.schedule_id.map(|id| id.0.to_string()))
            .bind(query.actor.as_deref())
            .bind(query.since.map(|t| t.timestamp_micros()))
            .bind(query.before.map(|id| id.to_string()))
            .bind(i64::from(query.limit))
            .fetch_all(&mut *self.tx)
            .await
            .map_err(db_err)?;
        rows::map_rows(&rows, "audit_journal", rows::audit)
    }
}

/// Deletes one batch of finished jobs past retention (their attempts go with them).
pub(super) async fn jobs_purge(pool: &SqlitePool, purge: &RetentionPurge) -> StoreResult<u64> {
    batch(
        pool,
        "DELETE FROM jobs WHERE id IN ( \
             SELECT j.id FROM jobs j \
              WHERE j.status IN ('succeeded', 'failed', 'skipped', 'superseded') \
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
