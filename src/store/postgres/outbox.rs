//! The relay's side of the outbox: claims, marks, releases and purges, all through SECURITY
//! DEFINER functions (the service role may only read and append to the outbox).

use sqlx::PgPool;

use crate::core::model::OutboxEvent;
use crate::core::store::*;
use crate::store::db_err;
use crate::store::rows::{self, OUTBOX_COLUMNS};

pub(super) async fn claim(pool: &PgPool, claim: &OutboxClaim) -> StoreResult<Vec<OutboxEvent>> {
    let statement = format!("SELECT {OUTBOX_COLUMNS} FROM cron.outbox_claim($1, $2, $3, $4)");
    rows::outbox_claim(pool, &statement, claim).await
}

pub(super) async fn mark_relayed(pool: &PgPool, relayed: &OutboxRelayed) -> StoreResult<u64> {
    if relayed.seqs.is_empty() {
        return Ok(0);
    }
    let changed: i64 = sqlx::query_scalar("SELECT cron.outbox_mark_relayed($1, $2)")
        .bind(&relayed.seqs)
        .bind(relayed.now)
        .fetch_one(pool)
        .await
        .map_err(db_err)?;
    Ok(u64::try_from(changed).unwrap_or(0))
}

pub(super) async fn mark_failed(
    pool: &PgPool,
    failed: &OutboxFailed,
) -> StoreResult<Vec<OutboxFailureRecorded>> {
    if failed.failures.is_empty() {
        return Ok(Vec::new());
    }
    let seqs: Vec<i64> = failed.failures.iter().map(|f| f.seq).collect();
    let errors: Vec<&str> = failed.failures.iter().map(|f| f.error.as_str()).collect();
    let parkable: Vec<bool> = failed.failures.iter().map(|f| f.parkable).collect();
    let rows = sqlx::query(
        "SELECT seq, attempts, parked FROM cron.outbox_mark_failed($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&failed.relay_id)
    .bind(&seqs)
    .bind(&errors)
    .bind(&parkable)
    .bind(failed.now)
    .bind(failed.retry_at)
    .bind(failed.max_attempts)
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    let mut recorded = rows::map_rows(&rows, "outbox", rows::failure_recorded)?;
    recorded.sort_by_key(|r| r.seq);
    Ok(recorded)
}

pub(super) async fn release(pool: &PgPool, release: &OutboxRelease) -> StoreResult<u64> {
    if release.seqs.is_empty() {
        return Ok(0);
    }
    let released: i64 = sqlx::query_scalar("SELECT cron.outbox_release($1, $2)")
        .bind(&release.relay_id)
        .bind(&release.seqs)
        .fetch_one(pool)
        .await
        .map_err(db_err)?;
    Ok(u64::try_from(released).unwrap_or(0))
}

pub(super) async fn purge(pool: &PgPool, purge: &OutboxPurge) -> StoreResult<u64> {
    let deleted: i64 = sqlx::query_scalar("SELECT cron.outbox_purge($1, $2)")
        .bind(purge.relayed_before)
        .bind(i32::try_from(purge.limit.min(10_000)).unwrap_or(10_000))
        .fetch_one(pool)
        .await
        .map_err(db_err)?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}
