//! Migration 5 on an embedded store that already holds work: SQLite rebuilds the jobs table to
//! admit the `superseded` status, and every row, index and foreign key survives it.

use std::str::FromStr;

use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::store::migrations::SQLITE;
use sentin8_cron::store::{self, ConnectOptions};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Executor};
use uuid::Uuid;

#[tokio::test]
async fn sqlite_keeps_jobs_dead_letters_and_keys_across_the_jobs_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let mut conn = SqliteConnectOptions::from_str(&url)
        .unwrap()
        .create_if_missing(true)
        .foreign_keys(true)
        .connect()
        .await
        .unwrap();
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, \
         checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)",
    )
    .await
    .unwrap();
    for migration in SQLITE.iter().filter(|m| m.version < 5) {
        sqlx::raw_sql(migration.sql)
            .execute(&mut conn)
            .await
            .unwrap();
        sqlx::query("INSERT INTO schema_migrations VALUES (?1, ?2, ?3, 0)")
            .bind(migration.version)
            .bind(migration.name)
            .bind(migration.checksum())
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let (env, schedule, job, dlq) = (
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
        Uuid::now_v7().to_string(),
    );
    for statement in [
        format!(
            "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, status, \
             next_run_at, created_at, updated_at, created_by, updated_by) VALUES ('{schedule}', \
             '{env}', 'billing', 'nightly', 'cron', '0 2 * * *', 'active', 10, 1, 1, 't', 't')"
        ),
        format!(
            "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
             finished_at, error, idempotency_key, created_at, updated_at) VALUES ('{job}', \
             '{schedule}', '{env}', 'failed', 1, 5, 6, 'proxy-back status 500', 'k', 5, 6)"
        ),
        format!(
            "INSERT INTO dlq (id, env_id, schedule_id, job_id, domain, schedule_type, attempts, \
             last_error, scheduled_for, landed_at) VALUES ('{dlq}', '{env}', '{schedule}', \
             '{job}', 'billing', 'nightly', 1, 'proxy-back status 500', 5, 6)"
        ),
        format!(
            "INSERT INTO audit_journal (id, env_id, actor, action, resource_type, resource_id, \
             at) VALUES ('{}', '{env}', 't', 'schedule.create', 'schedule', '{schedule}', 1)",
            Uuid::now_v7()
        ),
    ] {
        conn.execute(statement.as_str()).await.unwrap();
    }
    drop(conn);

    let outcome = store::migrate(&url, false).await.unwrap();
    assert!(
        outcome
            .migrations
            .iter()
            .any(|m| m.version == 5 && m.applied)
    );
    let store = store::connect(&url, &ConnectOptions::default())
        .await
        .unwrap();
    let env = EnvId(env.parse().unwrap());
    let (schedule, job) = (
        ScheduleId(schedule.parse().unwrap()),
        JobId(job.parse().unwrap()),
    );
    let mut tx = store.tenant_begin(env).await.unwrap();
    let kept = tx.job_get(job).await.unwrap().expect("the job survived");
    assert_eq!(kept.status, JobStatus::Failed);
    assert_eq!(kept.superseded_by, None);
    let entry = tx
        .dlq_get(DlqId(dlq.parse().unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.job_id, job);
    let journal = tx
        .audit_query(&AuditQuery {
            schedule_id: Some(schedule),
            limit: 10,
            ..AuditQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(journal.len(), 1, "old entries are filterable by schedule");
    // The rebuilt table still enforces one open job per schedule and its foreign key.
    let pending = |id: JobId| NewJob {
        id,
        schedule_id: schedule,
        status: JobStatus::Pending,
        attempt: 0,
        scheduled_for: kept.scheduled_for,
        next_attempt_at: Some(kept.scheduled_for),
        started_at: None,
        finished_at: None,
        error: None,
        now: kept.scheduled_for,
    };
    tx.job_insert(&pending(JobId::new())).await.unwrap();
    assert!(matches!(
        tx.job_insert(&pending(JobId::new())).await,
        Err(StoreError::Conflict(Conflict::OpenJobExists))
    ));
    drop(tx);
    let mut tx = store.tenant_begin(env).await.unwrap();
    let mut orphan = pending(JobId::new());
    orphan.schedule_id = ScheduleId::new();
    assert!(
        tx.job_insert(&orphan).await.is_err(),
        "the schedule key holds"
    );
}
