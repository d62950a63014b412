//! The relay's side of the outbox: claims, marks, releases and purges.

use serde_json::Value;
use sqlx::SqlitePool;

use super::SqliteCells;
use crate::core::model::OutboxEvent;
use crate::core::store::*;
use crate::store::db_err;
use crate::store::rows::{self, OUTBOX_COLUMNS};

pub(super) async fn claim(pool: &SqlitePool, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>> {
    // One statement: SQLite runs it under its single write lock, so the candidate check and
    // the lease cannot interleave with another claim.
    let statement = format!(
        "UPDATE outbox SET locked_until = ?3, locked_by = ?1 \
         WHERE seq IN ( \
             SELECT o.seq FROM outbox o \
              WHERE o.relayed_at IS NULL AND o.parked_at IS NULL \
                AND (o.locked_until IS NULL OR o.locked_until <= ?2) \
                AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= ?2) \
                AND (o.schedule_id IS NULL OR NOT EXISTS ( \
                        SELECT 1 FROM outbox e \
                         WHERE e.schedule_id = o.schedule_id AND e.seq < o.seq \
                           AND e.relayed_at IS NULL AND e.parked_at IS NULL)) \
              ORDER BY o.seq LIMIT ?4) \
         RETURNING {OUTBOX_COLUMNS}"
    );
    rows::outbox_claim(pool, &statement, claim).await
}

pub(super) async fn mark_relayed(pool: &SqlitePool, relayed: &OutboxRelayed) -> StoreResult<u64> {
    if relayed.seqs.is_empty() {
        return Ok(0);
    }
    let seqs = Value::from(relayed.seqs.clone()).to_string();
    let done = sqlx::query(
        "UPDATE outbox SET relayed_at = ?2, locked_until = NULL, locked_by = NULL, \
         next_attempt_at = NULL \
         WHERE relayed_at IS NULL AND seq IN (SELECT value FROM json_each(?1))",
    )
    .bind(seqs)
    .bind(relayed.now.timestamp_micros())
    .execute(pool)
    .await
    .map_err(db_err)?;
    Ok(done.rows_affected())
}

pub(super) async fn mark_failed(
    pool: &SqlitePool,
    failed: &OutboxFailed,
) -> StoreResult<Vec<OutboxFailureRecorded>> {
    let mut recorded = Vec::with_capacity(failed.failures.len());
    if failed.failures.is_empty() {
        return Ok(recorded);
    }
    let mut tx = pool.begin().await.map_err(db_err)?;
    for failure in &failed.failures {
        let row = sqlx::query(
            "UPDATE outbox SET attempts = attempts + 1, last_error = substr(?3, 1, 2000), \
             locked_until = NULL, locked_by = NULL, next_attempt_at = ?5, \
             parked_at = CASE WHEN ?4 AND attempts + 1 >= ?6 THEN ?7 END \
             WHERE seq = ?2 AND relayed_at IS NULL AND parked_at IS NULL AND locked_by = ?1 \
             RETURNING seq, attempts, parked_at IS NOT NULL AS parked",
        )
        .bind(&failed.relay_id)
        .bind(failure.seq)
        .bind(&failure.error)
        .bind(failure.parkable)
        .bind(failed.retry_at.timestamp_micros())
        .bind(failed.max_attempts)
        .bind(failed.now.timestamp_micros())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err)?;
        if let Some(row) = row {
            recorded.push(rows::failure_recorded(&SqliteCells(&row, "outbox"))?);
        }
    }
    tx.commit().await.map_err(db_err)?;
    recorded.sort_by_key(|r| r.seq);
    Ok(recorded)
}

pub(super) async fn release(pool: &SqlitePool, release: &OutboxRelease) -> StoreResult<u64> {
    if release.seqs.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query(
        "UPDATE outbox SET locked_until = NULL, locked_by = NULL \
         WHERE locked_by = ?1 AND relayed_at IS NULL \
           AND seq IN (SELECT value FROM json_each(?2))",
    )
    .bind(&release.relay_id)
    .bind(Value::from(release.seqs.clone()).to_string())
    .execute(pool)
    .await
    .map_err(db_err)?;
    Ok(done.rows_affected())
}

pub(super) async fn purge(pool: &SqlitePool, purge: &OutboxPurge) -> StoreResult<u64> {
    let done = sqlx::query(
        "DELETE FROM outbox WHERE seq IN ( \
             SELECT seq FROM outbox \
              WHERE relayed_at IS NOT NULL AND relayed_at < ?1 \
              ORDER BY relayed_at LIMIT ?2)",
    )
    .bind(purge.relayed_before.timestamp_micros())
    .bind(i64::from(purge.limit.min(10_000)))
    .execute(pool)
    .await
    .map_err(db_err)?;
    Ok(done.rows_affected())
}
