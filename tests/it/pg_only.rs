//! PostgreSQL-only guarantees: the database itself enforces tenant isolation (row-level
//! security), the transaction-locality rule, and the cross-tenant read path. Every test connects
//! as the service role, never as a superuser.

use std::time::Duration as StdDuration;

use chrono::Duration;
use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::core::target::Target;
use sqlx::{Connection, Executor, PgConnection};
use uuid::Uuid;

use crate::conformance::{insert_schedule, new_job, new_schedule};
use crate::support::{PgTestDb, t0};

mod bounded;
mod engines;
mod idle;
mod plans;
mod readers;

async fn service_conn(db: &PgTestDb) -> PgConnection {
    let mut conn = PgConnection::connect(&db.service_url).await.unwrap();
    conn.execute("SET search_path = cron").await.unwrap();
    conn
}

#[tokio::test]
async fn the_service_role_is_not_privileged() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let mut conn = service_conn(&db).await;
    let (user, sup, bypass): (String, bool, bool) = sqlx::query_as(
        "SELECT rolname::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(user, "sentin8_cron_service");
    assert!(!sup && !bypass);
    // The migration owner is a different role.
    let owner: String = sqlx::query_scalar(
        "SELECT tableowner::text FROM pg_tables WHERE schemaname = 'cron' AND tablename = 'schedules'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_ne!(owner, "sentin8_cron_service");
    // The instances' heartbeats hold no tenant data, and the service role may not touch them
    // but through their functions.
    let (read, write): (bool, bool) = sqlx::query_as(
        "SELECT has_table_privilege('cron.instances', 'SELECT'), \
                has_table_privilege('cron.instances', 'INSERT, UPDATE, DELETE')",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(!read && !write);
    // Answers are written ahead only through their function, which takes each answer's
    // environment from its job: the service role may read and delete them, not write them.
    let (read, delete, write): (bool, bool, bool) = sqlx::query_as(
        "SELECT has_table_privilege('cron.job_answers', 'SELECT'), \
                has_table_privilege('cron.job_answers', 'DELETE'), \
                has_table_privilege('cron.job_answers', 'INSERT, UPDATE')",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(read && delete && !write);
    // RLS is enabled and forced on every tenant table.
    let tables: Vec<(String, bool, bool)> = sqlx::query_as(
        "SELECT relname::text, relrowsecurity, relforcerowsecurity FROM pg_class \
         WHERE relnamespace = 'cron'::regnamespace AND relkind = 'r' \
           AND relname NOT IN ('schema_migrations', 'instances') \
         ORDER BY relname",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let names: Vec<_> = tables.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "audit_journal",
            "calendars",
            "dlq",
            "job_answers",
            "job_attempts",
            "jobs",
            "outbox",
            "schedules"
        ]
    );
    assert!(
        tables
            .iter()
            .all(|(_, enabled, forced)| *enabled && *forced),
        "{tables:?}"
    );
}

#[tokio::test]
async fn another_tenants_rows_are_invisible_and_unwritable() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let (env_a, env_b) = (EnvId::new(), EnvId::new());
    let a = insert_schedule(&store, env_a, new_schedule("a", "billing")).await;
    insert_schedule(&store, env_b, new_schedule("b", "billing")).await;

    let mut conn = service_conn(&db).await;
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SELECT sentin8_set_tenant_context($1)")
        .bind(env_b.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    // Raw SQL with no env filter still sees only env B.
    let visible: Vec<Uuid> = sqlx::query_scalar("SELECT env_id FROM schedules")
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    assert_eq!(visible, vec![env_b.0]);
    let updated = sqlx::query("UPDATE schedules SET status = 'paused' WHERE id = $1")
        .bind(a.id.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(
        updated.rows_affected(),
        0,
        "env A's row cannot be updated from env B"
    );
    // Writing a row for env A while the context says env B is rejected by the policy.
    let err = sqlx::query(
        "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, status, \
         next_run_at, created_at, updated_at, created_by, updated_by) \
         VALUES ($1, $2, 'x', 'x', 'cron', '* * * * *', 'active', now(), now(), now(), 'x', 'x')",
    )
    .bind(Uuid::now_v7())
    .bind(env_a.0)
    .execute(&mut *tx)
    .await
    .unwrap_err();
    assert!(err.to_string().contains("row-level security"), "{err}");
}

#[tokio::test]
async fn context_outside_the_transaction_does_not_count() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;
    let mut conn = service_conn(&db).await;

    // The trap the design warns about: setting the context in one autocommit statement and
    // writing in the next. set_config(..., true) ended with the first statement's transaction.
    sqlx::query("SELECT sentin8_set_tenant_context($1)")
        .bind(env.0)
        .execute(&mut conn)
        .await
        .unwrap();
    let err = sqlx::query(
        "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
         started_at, idempotency_key, created_at, updated_at) \
         VALUES ($1, $2, $3, 'running', 1, now(), now(), 'k', now(), now())",
    )
    .bind(Uuid::now_v7())
    .bind(s.id.0)
    .bind(env.0)
    .execute(&mut conn)
    .await
    .unwrap_err();
    assert!(err.to_string().contains("row-level security"), "{err}");
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM schedules")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(seen, 0, "without a context nothing is visible");

    // The same statements inside one transaction succeed.
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("SELECT sentin8_set_tenant_context($1)")
        .bind(env.0)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO jobs (id, schedule_id, env_id, status, attempt, scheduled_for, \
         started_at, idempotency_key, created_at, updated_at) \
         VALUES ($1, $2, $3, 'running', 1, now(), now(), 'k', now(), now())",
    )
    .bind(Uuid::now_v7())
    .bind(s.id.0)
    .bind(env.0)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn jobs_cannot_be_deleted_by_the_service() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let mut conn = service_conn(&db).await;
    let err = conn.execute("DELETE FROM jobs").await.unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
    let err = conn.execute("DELETE FROM schedules").await.unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
}

#[tokio::test]
async fn only_the_definer_functions_read_across_tenants() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let now = t0() + Duration::hours(1);
    let mut envs = Vec::new();
    for _ in 0..3 {
        let env = EnvId::new();
        let mut new = new_schedule("due", "billing");
        new.next_run_at = Some(now - Duration::minutes(1));
        insert_schedule(&store, env, new).await;
        envs.push(env.0);
    }
    let mut conn = service_conn(&db).await;
    let mut due: Vec<Uuid> = sqlx::query_scalar("SELECT env_id FROM due_schedules(50, $1, 0)")
        .bind(now)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    due.sort();
    envs.sort();
    assert_eq!(due, envs, "due_schedules sees every tenant");
    let direct: i64 = sqlx::query_scalar("SELECT count(*) FROM schedules")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(direct, 0, "a plain read sees no tenant");
    // The default limit applies when none is given.
    let default_limit: i64 = sqlx::query_scalar("SELECT count(*) FROM due_schedules()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(default_limit <= 50);
    // The definer function pins its search_path.
    let config: Vec<String> = sqlx::query_scalar(
        "SELECT unnest(proconfig) FROM pg_proc WHERE proname = 'due_schedules' AND prosecdef",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(config, vec!["search_path=pg_catalog, pg_temp"]);
}

#[tokio::test]
async fn two_transactions_cannot_both_open_a_job() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let env = EnvId::new();
    let s = insert_schedule(&store, env, new_schedule("s", "billing")).await;

    let mut first = store.tenant_begin(env).await.unwrap();
    first
        .job_insert(&new_job(s.id, JobStatus::Running))
        .await
        .unwrap();
    // The second insert waits on the first transaction's uncommitted index entry.
    let racer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut second = store.tenant_begin(env).await.unwrap();
            let result = second.job_insert(&new_job(s.id, JobStatus::Pending)).await;
            if result.is_ok() {
                second.commit().await.unwrap();
            }
            result
        })
    };
    tokio::time::sleep(StdDuration::from_millis(200)).await;
    assert!(
        !racer.is_finished(),
        "the second transaction must wait for the first"
    );
    first.commit().await.unwrap();
    let err = racer.await.unwrap().unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict(Conflict::OpenJobExists)),
        "got {err:?}"
    );

    let mut tx = store.tenant_begin(env).await.unwrap();
    let open = tx
        .job_list(&JobQuery {
            schedule_id: Some(s.id),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(open.len(), 1);
}

#[tokio::test]
async fn advisory_locks_exclude_other_sessions() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = db.dyn_store();
    let id = ScheduleId::new();
    let lock = store.schedule_lock_try(id).await.unwrap().expect("free");
    // Another session (another process, in production) cannot take it.
    let mut other = service_conn(&db).await;
    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(sentin8_cron::store::lock_key(id))
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert!(!taken);
    assert!(lock.release().await.unwrap());
    let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(sentin8_cron::store::lock_key(id))
        .fetch_one(&mut other)
        .await
        .unwrap();
    assert!(taken, "released on the connection that took it");
}

#[tokio::test]
async fn serve_refuses_an_unmigrated_database() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let status = db.store.schema_status().await.unwrap();
    status.ensure_current().unwrap();
    let unmigrated = SchemaStatus {
        applied: vec![],
        known: status.known.clone(),
    };
    let err = unmigrated.ensure_current().unwrap_err().to_string();
    assert!(err.contains("run `sentin8-cron migrate`"), "{err}");
    let newer = SchemaStatus {
        applied: vec![1, 999],
        known: vec![1],
    };
    let err = newer.ensure_current().unwrap_err().to_string();
    assert!(err.contains("[999]") && err.contains("newer"), "{err}");
}

#[tokio::test]
async fn other_processes_hear_about_committed_changes() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let writer = db.dyn_store();
    // A second store on the same database stands in for another process.
    let reader = sentin8_cron::store::postgres::PgStore::connect(
        &db.service_url,
        &sentin8_cron::store::ConnectOptions::default(),
    )
    .await
    .unwrap();
    reader.signals_listen().await.unwrap();
    let signals = reader.signals();

    let env = EnvId::new();
    let mut tx = writer.tenant_begin(env).await.unwrap();
    tx.schedule_insert(&new_schedule("s", "billing"))
        .await
        .unwrap();
    tx.notify_on_commit(Channel::Schedules);
    tx.commit().await.unwrap();
    tokio::time::timeout(StdDuration::from_secs(5), signals.schedules.notified())
        .await
        .expect("the other process is woken");
}
