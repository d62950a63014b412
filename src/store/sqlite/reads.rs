//! The engine's cross-tenant reads: ids, instants and counts, never tenant payloads.

use chrono::{DateTime, Utc};
use sqlx::SqlitePool;
use uuid::Uuid;

use super::SqliteCells;
use crate::core::model::{EnvId, JobId};
use crate::core::store::{
    DueJob, DueSchedule, EnvSummary, HandedOff, JobAnswer, LeaseRenewal, Share, StoreError,
    StoreResult, StoreStats, ZoneInUse,
};
use crate::store::db_err;
use crate::store::rows::{self, LEASED_JOB, from_micros};

pub(super) async fn schedules_due(
    pool: &SqlitePool,
    now: DateTime<Utc>,
    limit: u32,
    seed: u32,
    share: Option<Share>,
) -> StoreResult<Vec<DueSchedule>> {
    // Round-robin across environments; ties at one instant by a seeded hash of the id (its
    // last characters, multiplied by an odd factor from the seed modulo a prime, so each seed
    // permutes them differently; one process writes SQLite, so this only varies the order).
    let statement = "SELECT id, env_id, next_run_at FROM ( \
             SELECT id, env_id, next_run_at, \
                    row_number() OVER (PARTITION BY env_id ORDER BY next_run_at, \
                        ((unicode(substr(id, -1)) * 31 + unicode(substr(id, -2, 1))) * 131 \
                          + unicode(substr(id, -3, 1))) * (?3 % 997 * 2 + 1) % 997, id) \
                      AS turn \
               FROM schedules WHERE status = 'active' AND next_run_at <= ?2 \
                AND (?5 <= 1 OR next_run_at <= ?4 \
                     OR ((unicode(substr(id, -4, 1)) * 31 + unicode(substr(id, -5, 1))) * 131 \
                          + unicode(substr(id, -6, 1))) % ?5 = ?6)) \
         ORDER BY turn, next_run_at, env_id LIMIT ?1";
    rows::schedules_due(pool, statement, now, limit, seed, share).await
}

pub(super) async fn instance_beat(
    pool: &SqlitePool,
    id: Uuid,
    now: DateTime<Utc>,
    stale_before: DateTime<Utc>,
) -> StoreResult<Vec<Uuid>> {
    let mut tx = pool.begin().await.map_err(db_err)?;
    sqlx::query(
        "INSERT INTO instances (id, seen_at) VALUES (?1, ?2) \
         ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
    )
    .bind(id.to_string())
    .bind(now.timestamp_micros())
    .execute(&mut *tx)
    .await
    .map_err(db_err)?;
    sqlx::query("DELETE FROM instances WHERE seen_at < ?1")
        .bind(stale_before.timestamp_micros())
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM instances ORDER BY id")
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(db_err)?;
    let mut ids = ids
        .iter()
        .map(|id| {
            Uuid::parse_str(id).map_err(|e| StoreError::Corrupt {
                table: "instances",
                detail: e.to_string(),
            })
        })
        .collect::<StoreResult<Vec<Uuid>>>()?;
    // The same order as PostgreSQL's (by the id's bytes), whatever the text's case.
    ids.sort();
    Ok(ids)
}

pub(super) async fn instance_leave(pool: &SqlitePool, id: Uuid) -> StoreResult<()> {
    sqlx::query("DELETE FROM instances WHERE id = ?1")
        .bind(id.to_string())
        .execute(pool)
        .await
        .map_err(db_err)?;
    Ok(())
}

pub(super) async fn jobs_due(
    pool: &SqlitePool,
    now: DateTime<Utc>,
    stale_before: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<DueJob>> {
    let statement = format!(
        "SELECT id, schedule_id, env_id, status FROM ( \
             SELECT * FROM (SELECT id, schedule_id, env_id, status, next_attempt_at AS due_at \
               FROM jobs j WHERE status = 'pending' AND next_attempt_at <= ?2 \
                 AND NOT EXISTS (SELECT 1 FROM schedules s \
                                  WHERE s.id = j.schedule_id AND s.status = 'paused') \
               ORDER BY next_attempt_at LIMIT ?1) \
             UNION ALL \
             SELECT * FROM (SELECT id, schedule_id, env_id, status, lease_until AS due_at \
               FROM jobs WHERE {LEASED_JOB} AND lease_until < ?2 \
               ORDER BY lease_until LIMIT ?1) \
             UNION ALL \
             SELECT * FROM (SELECT id, schedule_id, env_id, status, started_at AS due_at \
               FROM jobs WHERE status = 'running' AND lease_until IS NULL AND started_at < ?3 \
               ORDER BY started_at LIMIT ?1)) \
         ORDER BY due_at LIMIT ?1"
    );
    rows::jobs_due(pool, &statement, now, stale_before, limit).await
}

pub(super) async fn schedules_due_count(
    pool: &SqlitePool,
    until: DateTime<Utc>,
    cap: u32,
) -> StoreResult<u64> {
    let count: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM schedules \
          WHERE status = 'active' AND next_run_at <= ?1 LIMIT ?2)",
    )
    .bind(until.timestamp_micros())
    .bind(i64::from(cap))
    .fetch_one(pool)
    .await
    .map_err(db_err)?;
    Ok(u64::try_from(count).unwrap_or(0))
}

pub(super) async fn job_answers_put(pool: &SqlitePool, answers: &[JobAnswer]) -> StoreResult<u64> {
    let mut tx = pool.begin().await.map_err(db_err)?;
    let mut written = 0;
    // Bounded statements: SQLite caps the number of parameters.
    for chunk in answers.chunks(200) {
        let rows = (0..chunk.len())
            .map(|i| {
                let n = i * 4;
                format!("(?{}, ?{}, ?{}, ?{})", n + 1, n + 2, n + 3, n + 4)
            })
            .collect::<Vec<_>>()
            .join(", ");
        // The environment is the job's own, and only an attempt still running takes an answer.
        let sql = format!(
            "INSERT INTO job_answers (job_id, env_id, attempt, answered_at, answer) \
             SELECT j.id, j.env_id, v.column2, v.column3, v.column4 \
               FROM (VALUES {rows}) AS v JOIN jobs j ON j.id = v.column1 AND j.attempt = v.column2 \
              WHERE j.status = 'running' \
             ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, \
                answered_at = excluded.answered_at, answer = excluded.answer"
        );
        let mut query = sqlx::query(&sql);
        for answer in chunk {
            query = query
                .bind(answer.job_id.0.to_string())
                .bind(answer.attempt)
                .bind(answer.answered_at.timestamp_micros())
                .bind(answer.answer.to_string());
        }
        written += query
            .execute(&mut *tx)
            .await
            .map_err(db_err)?
            .rows_affected();
    }
    tx.commit().await.map_err(db_err)?;
    Ok(written)
}

/// SQLite's own advice on statistics: `PRAGMA optimize` analyzes the tables whose statistics
/// it judges out of date (it names none).
pub(super) async fn statistics_refresh(pool: &SqlitePool) -> StoreResult<Vec<String>> {
    sqlx::query("PRAGMA optimize")
        .execute(pool)
        .await
        .map_err(db_err)?;
    Ok(Vec::new())
}

pub(super) async fn wakeup_next(pool: &SqlitePool) -> StoreResult<Option<DateTime<Utc>>> {
    let sql = format!(
        "SELECT min(t) FROM ( \
             SELECT min(next_run_at) AS t FROM schedules WHERE status = 'active' \
             UNION ALL \
             SELECT min(next_attempt_at) FROM jobs j WHERE status = 'pending' \
                AND NOT EXISTS (SELECT 1 FROM schedules s \
                                 WHERE s.id = j.schedule_id AND s.status = 'paused') \
             UNION ALL \
             SELECT min(lease_until) FROM jobs WHERE {LEASED_JOB})"
    );
    let micros: Option<i64> = sqlx::query_scalar(&sql)
        .fetch_one(pool)
        .await
        .map_err(db_err)?;
    micros.map(|m| from_micros(m, "schedules")).transpose()
}

pub(super) async fn jobs_lease_renew(
    pool: &SqlitePool,
    renewal: &LeaseRenewal,
) -> StoreResult<Vec<JobId>> {
    // One transaction, one short statement per lease: the embedded store has one writer, and
    // each row's fence (its epoch) is its own.
    let mut tx = pool.begin().await.map_err(db_err)?;
    let mut renewed = Vec::with_capacity(renewal.leases.len());
    for lease in &renewal.leases {
        let done = sqlx::query(
            "UPDATE jobs SET lease_until = ?1, \
                             called_at = CASE WHEN ?4 THEN coalesce(called_at, ?5) \
                                              ELSE called_at END \
             WHERE id = ?2 AND lease_epoch = ?3 AND status = 'running'",
        )
        .bind(renewal.until.timestamp_micros())
        .bind(lease.id.0.to_string())
        .bind(lease.epoch)
        .bind(lease.called)
        .bind(renewal.now.timestamp_micros())
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        if done.rows_affected() > 0 {
            renewed.push(lease.id);
        }
    }
    tx.commit().await.map_err(db_err)?;
    Ok(renewed)
}

pub(super) async fn jobs_hand_off(
    pool: &SqlitePool,
    ids: &[JobId],
    lease: chrono::Duration,
    now: DateTime<Utc>,
) -> StoreResult<Vec<HandedOff>> {
    let mut tx = pool.begin().await.map_err(db_err)?;
    let mut handed = Vec::with_capacity(ids.len());
    for id in ids {
        let updated_at: Option<i64> = sqlx::query_scalar(
            "UPDATE jobs SET status = 'running', started_at = scheduled_for, \
                             lease_until = max(scheduled_for, ?3) + ?2 \
             WHERE id = ?1 AND (status = 'scheduled' \
                   OR (status = 'running' AND attempt = 1 AND started_at = scheduled_for)) \
             RETURNING (SELECT s.updated_at FROM schedules s \
                        WHERE s.id = jobs.schedule_id AND s.env_id = jobs.env_id)",
        )
        .bind(id.0.to_string())
        .bind(lease.num_microseconds().unwrap_or(i64::MAX))
        .bind(now.timestamp_micros())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err)?;
        if let Some(updated_at) = updated_at {
            handed.push(HandedOff {
                job_id: *id,
                schedule_updated_at: from_micros(updated_at, "schedules")?,
            });
        }
    }
    tx.commit().await.map_err(db_err)?;
    Ok(handed)
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

pub(super) async fn outbox_parked_count(pool: &SqlitePool) -> StoreResult<i64> {
    sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL AND relayed_at IS NULL",
    )
    .fetch_one(pool)
    .await
    .map_err(db_err)
}

pub(super) async fn stats_get(pool: &SqlitePool) -> StoreResult<StoreStats> {
    let row = sqlx::query(
        "SELECT (SELECT count(*) FROM schedules WHERE status = 'active') AS schedules_active, \
                (SELECT count(*) FROM schedules WHERE status = 'paused') AS schedules_paused, \
                (SELECT count(*) FROM jobs WHERE status = 'scheduled') AS jobs_scheduled, \
                (SELECT count(*) FROM jobs WHERE status = 'pending') AS jobs_pending, \
                (SELECT count(*) FROM jobs WHERE status = 'running') AS jobs_running, \
                (SELECT count(*) FROM jobs WHERE status = 'buffered') AS jobs_buffered, \
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
