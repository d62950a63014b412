//! The database's own checks, reached with raw SQL: rows the typed domain cannot even express
//! (a cron schedule without an expression, a one-shot schedule with one) are refused by the
//! schema on both backends, so a hand-edited or half-migrated row cannot slip past the types.

use sqlx::{Connection, Executor, PgConnection, SqliteConnection};
use uuid::Uuid;

use crate::support::{PgTestDb, sqlite_file_store};

/// Inserts one schedule row with the given timing columns; `$n` placeholders are numbered so
/// the same text runs on both backends.
const INSERT: &str = "INSERT INTO schedules (id, env_id, domain, schedule_type, kind, cron_expr, \
     run_at, status, next_run_at, created_at, updated_at, created_by, updated_by) \
     VALUES ($1, $2, 'billing', $3, $4, $5, NULL, 'paused', NULL, $6, $6, 'test', 'test')";

#[tokio::test]
async fn sqlite_refuses_a_cron_row_without_an_expression() {
    let (_store, url, _dir) = sqlite_file_store().await;
    let mut conn = SqliteConnection::connect(&url).await.unwrap();
    let env = Uuid::now_v7().to_string();
    let insert = |schedule_type: &'static str, cron_expr: Option<&'static str>| {
        sqlx::query(INSERT)
            .bind(Uuid::now_v7().to_string())
            .bind(env.clone())
            .bind(schedule_type)
            .bind("cron")
            .bind(cron_expr)
            .bind(1_700_000_000_000_000_i64)
    };
    let err = insert("no-expression", None)
        .execute(&mut conn)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("schedules_kind_timing"), "{err}");
    // The same row with its expression is accepted, so the refusal is about the expression.
    insert("with-expression", Some("0 * * * *"))
        .execute(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn postgres_refuses_a_cron_row_without_an_expression() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let mut conn = PgConnection::connect(&db.service_url).await.unwrap();
    conn.execute("SET search_path = cron").await.unwrap();
    let env = Uuid::now_v7();
    let now = chrono::Utc::now();
    for (schedule_type, cron_expr, accepted) in [
        ("no-expression", None, false),
        ("with-expression", Some("0 * * * *"), true),
    ] {
        let mut tx = conn.begin().await.unwrap();
        sqlx::query("SELECT sentin8_set_tenant_context($1)")
            .bind(env)
            .execute(&mut *tx)
            .await
            .unwrap();
        let result = sqlx::query(INSERT)
            .bind(Uuid::now_v7())
            .bind(env)
            .bind(schedule_type)
            .bind("cron")
            .bind(cron_expr)
            .bind(now)
            .execute(&mut *tx)
            .await;
        match (accepted, result) {
            (true, Ok(_)) => tx.commit().await.unwrap(),
            (false, Err(err)) => {
                assert!(err.to_string().contains("schedules_kind_timing"), "{err}")
            }
            (accepted, result) => panic!("{schedule_type}: accepted={accepted}, got {result:?}"),
        }
    }
}
