//! The engine's cross-tenant reads: ids, instants and counts through the schema's SECURITY
//! DEFINER functions, never tenant payloads.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::PgCells;
use crate::core::model::{EnvId, JobId};
use crate::core::store::{
    DueJob, DueSchedule, EnvSummary, HandedOff, JobAnswer, LeaseRenewal, Share, StoreResult,
    StoreStats, ZoneInUse,
};
use crate::store::{db_err, rows};

pub(super) async fn schedules_due(
    pool: &PgPool,
    now: DateTime<Utc>,
    limit: u32,
    seed: u32,
    share: Option<Share>,
) -> StoreResult<Vec<DueSchedule>> {
    let statement =
        "SELECT id, env_id, next_run_at FROM cron.due_schedules($1, $2, $3, $4, $5, $6)";
    rows::schedules_due(pool, statement, now, limit, seed, share).await
}

pub(super) async fn instance_beat(
    pool: &PgPool,
    id: Uuid,
    now: DateTime<Utc>,
    stale_before: DateTime<Utc>,
) -> StoreResult<Vec<Uuid>> {
    sqlx::query_scalar("SELECT cron.instance_beat($1, $2, $3)")
        .bind(id)
        .bind(now)
        .bind(stale_before)
        .fetch_all(pool)
        .await
        .map_err(db_err)
}

pub(super) async fn instance_leave(pool: &PgPool, id: Uuid) -> StoreResult<()> {
    sqlx::query("SELECT cron.instance_leave($1)")
        .bind(id)
        .execute(pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

pub(super) async fn jobs_due(
    pool: &PgPool,
    now: DateTime<Utc>,
    stale_before: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<DueJob>> {
    let statement = "SELECT id, schedule_id, env_id, status FROM cron.due_jobs($1, $2, $3)";
    rows::jobs_due(pool, statement, now, stale_before, limit).await
}

pub(super) async fn jobs_lease_renew(
    pool: &PgPool,
    renewal: &LeaseRenewal,
) -> StoreResult<Vec<JobId>> {
    let ids: Vec<Uuid> = renewal.leases.iter().map(|l| l.id.0).collect();
    let epochs: Vec<i32> = renewal.leases.iter().map(|l| l.epoch).collect();
    let called: Vec<bool> = renewal.leases.iter().map(|l| l.called).collect();
    let renewed: Vec<Uuid> =
        sqlx::query_scalar("SELECT job_id FROM cron.jobs_lease_renew($1, $2, $3, $4, $5)")
            .bind(&ids)
            .bind(&epochs)
            .bind(&called)
            .bind(renewal.until)
            .bind(renewal.now)
            .fetch_all(pool)
            .await
            .map_err(db_err)?;
    Ok(renewed.into_iter().map(JobId).collect())
}

pub(super) async fn jobs_hand_off(
    pool: &PgPool,
    ids: &[JobId],
    lease: chrono::Duration,
    now: DateTime<Utc>,
) -> StoreResult<Vec<HandedOff>> {
    let ids: Vec<Uuid> = ids.iter().map(|id| id.0).collect();
    let rows: Vec<(Uuid, DateTime<Utc>)> = sqlx::query_as(
        "SELECT job_id, schedule_updated_at \
           FROM cron.jobs_hand_off($1, $2::bigint * interval '1 microsecond', $3)",
    )
    .bind(&ids)
    .bind(lease.num_microseconds().unwrap_or(i64::MAX))
    .bind(now)
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    Ok(rows
        .into_iter()
        .map(|(id, updated_at)| HandedOff {
            job_id: JobId(id),
            schedule_updated_at: updated_at,
        })
        .collect())
}

/// `cron.refresh_statistics()`: ANALYZE of the tables that changed by a tenth since their
/// last one (SECURITY DEFINER: the service role owns no table).
pub(super) async fn statistics_refresh(pool: &PgPool) -> StoreResult<Vec<String>> {
    sqlx::query_scalar("SELECT cron.refresh_statistics()")
        .fetch_all(pool)
        .await
        .map_err(db_err)
}

pub(super) async fn wakeup_next(pool: &PgPool) -> StoreResult<Option<DateTime<Utc>>> {
    sqlx::query_scalar("SELECT cron.next_wakeup()")
        .fetch_one(pool)
        .await
        .map_err(db_err)
}

pub(super) async fn schedules_due_count(
    pool: &PgPool,
    until: DateTime<Utc>,
    cap: u32,
) -> StoreResult<u64> {
    // The count's bound is a parameter of the function's statement, which PostgreSQL plans
    // for a third of the table: a whole-table read, 170 ms a round at a million schedules.
    // Read through the index of active schedules' next instants instead (3-9 ms there).
    let mut tx = pool
        .begin_with("BEGIN; SET LOCAL enable_seqscan = off")
        .await
        .map_err(db_err)?;
    let count: i64 = sqlx::query_scalar("SELECT cron.due_count($1, $2)")
        .bind(until)
        .bind(i32::try_from(cap).unwrap_or(i32::MAX))
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    Ok(u64::try_from(count).unwrap_or(0))
}

pub(super) async fn job_answers_put(pool: &PgPool, answers: &[JobAnswer]) -> StoreResult<u64> {
    if answers.is_empty() {
        return Ok(0);
    }
    let written: i64 = sqlx::query_scalar("SELECT cron.job_answers_put($1, $2, $3, $4)")
        .bind(answers.iter().map(|a| a.job_id.0).collect::<Vec<_>>())
        .bind(answers.iter().map(|a| a.attempt).collect::<Vec<_>>())
        .bind(answers.iter().map(|a| a.answered_at).collect::<Vec<_>>())
        .bind(answers.iter().map(|a| &a.answer).collect::<Vec<_>>())
        .fetch_one(pool)
        .await
        .map_err(db_err)?;
    Ok(u64::try_from(written).unwrap_or(0))
}

pub(super) async fn dlq_envs(pool: &PgPool) -> StoreResult<Vec<EnvId>> {
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT cron.dlq_envs()")
        .fetch_all(pool)
        .await
        .map_err(db_err)?;
    Ok(ids.into_iter().map(EnvId).collect())
}

pub(super) async fn stats_get(pool: &PgPool) -> StoreResult<StoreStats> {
    let row = sqlx::query(
        "SELECT s.*, o.*, cron.outbox_oldest_unrelayed() AS outbox_oldest_unrelayed_at \
         FROM cron.stats() s CROSS JOIN cron.outbox_stats() o",
    )
    .fetch_one(pool)
    .await
    .map_err(db_err)?;
    rows::stats(&PgCells(&row, "stats"))
}

pub(super) async fn outbox_parked_count(pool: &PgPool) -> StoreResult<i64> {
    sqlx::query_scalar("SELECT outbox_parked FROM cron.outbox_stats()")
        .fetch_one(pool)
        .await
        .map_err(db_err)
}

pub(super) async fn schedule_zones_active(pool: &PgPool) -> StoreResult<Vec<ZoneInUse>> {
    let pairs: Vec<(Uuid, String)> =
        sqlx::query_as("SELECT env_id, timezone FROM cron.schedule_zones_active()")
            .fetch_all(pool)
            .await
            .map_err(db_err)?;
    Ok(pairs
        .into_iter()
        .map(|(env_id, timezone)| ZoneInUse {
            env_id: EnvId(env_id),
            timezone,
        })
        .collect())
}

pub(super) async fn envs_with_data(pool: &PgPool, limit: u32) -> StoreResult<Vec<EnvSummary>> {
    let rows: Vec<(Uuid, i64)> =
        sqlx::query_as("SELECT env_id, schedules FROM cron.envs_with_data($1)")
            .bind(i32::try_from(limit).unwrap_or(i32::MAX))
            .fetch_all(pool)
            .await
            .map_err(db_err)?;
    Ok(rows
        .into_iter()
        .map(|(env_id, schedules)| EnvSummary {
            env_id: EnvId(env_id),
            schedules,
        })
        .collect())
}
