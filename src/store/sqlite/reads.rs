//! The engine's cross-tenant reads: ids, instants and counts, never tenant payloads.

use chrono::{DateTime, Utc};
use sqlx::SqlitePool;
use uuid::Uuid;

use super::SqliteCells;
use crate::core::model::EnvId;
use crate::core::store::{
    DueJob, DueSchedule, EnvSummary, StoreError, StoreResult, StoreStats, ZoneInUse,
};
use crate::store::db_err;
use crate::store::rows::{self, from_micros};

pub(super) async fn schedules_due(
    pool: &SqlitePool,
    now: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<DueSchedule>> {
    let rows = sqlx::query(
        "SELECT id, env_id, next_run_at FROM schedules \
         WHERE status = 'active' AND next_run_at <= ?1 ORDER BY next_run_at LIMIT ?2",
    )
    .bind(now.timestamp_micros())
    .bind(i64::from(limit.min(1000)))
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    rows::map_rows(&rows, "schedules", rows::due_schedule)
}

pub(super) async fn jobs_due(
    pool: &SqlitePool,
    now: DateTime<Utc>,
    stale_before: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<DueJob>> {
    let rows = sqlx::query(
        "SELECT id, schedule_id, env_id, status FROM ( \
             SELECT * FROM (SELECT id, schedule_id, env_id, status, next_attempt_at AS due_at \
               FROM jobs j WHERE status = 'pending' AND next_attempt_at <= ?1 \
                 AND NOT EXISTS (SELECT 1 FROM schedules s \
                                  WHERE s.id = j.schedule_id AND s.status = 'paused') \
               ORDER BY next_attempt_at LIMIT ?3) \
             UNION ALL \
             SELECT * FROM (SELECT id, schedule_id, env_id, status, started_at AS due_at \
               FROM jobs WHERE status = 'running' AND started_at < ?2 \
               ORDER BY started_at LIMIT ?3)) \
         ORDER BY due_at LIMIT ?3",
    )
    .bind(now.timestamp_micros())
    .bind(stale_before.timestamp_micros())
    .bind(i64::from(limit.min(1000)))
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    rows::map_rows(&rows, "jobs", rows::due_job)
}

pub(super) async fn wakeup_next(pool: &SqlitePool) -> StoreResult<Option<DateTime<Utc>>> {
    let micros: Option<i64> = sqlx::query_scalar(
        "SELECT min(t) FROM ( \
             SELECT min(next_run_at) AS t FROM schedules WHERE status = 'active' \
             UNION ALL \
             SELECT min(next_attempt_at) FROM jobs j WHERE status = 'pending' \
                AND NOT EXISTS (SELECT 1 FROM schedules s \
                                 WHERE s.id = j.schedule_id AND s.status = 'paused'))",
    )
    .fetch_one(pool)
    .await
    .map_err(db_err)?;
    micros.map(|m| from_micros(m, "schedules")).transpose()
}

pub(super) async fn dlq_envs(pool: &SqlitePool) -> StoreResult<Vec<EnvId>> {
    let ids: Vec<String> = sqlx::query_scalar("SELECT DISTINCT env_id FROM dlq ORDER BY env_id")
        .fetch_all(pool)
        .await
        .map_err(db_err)?;
    ids.iter()
        .map(|id| {
            Uuid::parse_str(id)
                .map(EnvId)
                .map_err(|e| StoreError::Corrupt {
                    table: "dlq",
                    detail: format!("env_id: {e}"),
                })
        })
        .collect()
}

pub(super) async fn stats_get(pool: &SqlitePool) -> StoreResult<StoreStats> {
    let row = sqlx::query(
        "SELECT (SELECT count(*) FROM schedules WHERE status = 'active') AS schedules_active, \
                (SELECT count(*) FROM schedules WHERE status = 'paused') AS schedules_paused, \
                (SELECT count(*) FROM jobs WHERE status = 'pending') AS jobs_pending, \
                (SELECT count(*) FROM jobs WHERE status = 'running') AS jobs_running, \
                (SELECT count(*) FROM dlq) AS dlq_entries, \
                (SELECT count(*) FROM outbox WHERE relayed_at IS NULL) AS outbox_unrelayed, \
                (SELECT count(*) FROM outbox \
                  WHERE parked_at IS NOT NULL AND relayed_at IS NULL) AS outbox_parked, \
                (SELECT created_at FROM outbox WHERE relayed_at IS NULL AND parked_at IS NULL \
                  ORDER BY seq LIMIT 1) AS outbox_oldest_unrelayed_at",
    )
    .fetch_one(pool)
    .await
    .map_err(db_err)?;
    rows::stats(&SqliteCells(&row, "stats"))
}

pub(super) async fn schedule_zones_active(pool: &SqlitePool) -> StoreResult<Vec<ZoneInUse>> {
    let pairs: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT env_id, timezone FROM schedules \
         WHERE status = 'active' AND kind = 'cron' ORDER BY env_id, timezone",
    )
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    pairs
        .into_iter()
        .map(|(env_id, timezone)| {
            let env_id = Uuid::parse_str(&env_id).map_err(|e| StoreError::Corrupt {
                table: "schedules",
                detail: format!("env_id: {e}"),
            })?;
            Ok(ZoneInUse {
                env_id: EnvId(env_id),
                timezone,
            })
        })
        .collect()
}

pub(super) async fn envs_with_data(pool: &SqlitePool, limit: u32) -> StoreResult<Vec<EnvSummary>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT env_id, SUM(CASE WHEN status <> 'deleted' THEN 1 ELSE 0 END) FROM schedules \
         GROUP BY env_id HAVING SUM(CASE WHEN status <> 'deleted' THEN 1 ELSE 0 END) > 0 \
         ORDER BY env_id LIMIT ?1",
    )
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
    .map_err(db_err)?;
    rows.into_iter()
        .map(|(env_id, schedules)| {
            let env_id = Uuid::parse_str(&env_id).map_err(|e| StoreError::Corrupt {
                table: "schedules",
                detail: format!("env_id: {e}"),
            })?;
            Ok(EnvSummary {
                env_id: EnvId(env_id),
                schedules,
            })
        })
        .collect()
}
