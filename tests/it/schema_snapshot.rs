//! The schema as the migrations leave it, checked in: `migrations/schema/postgres.sql` and
//! `migrations/schema/sqlite.sql` hold every table's columns, constraints and indexes and every
//! SQL function's current body, dumped from a freshly migrated database. A migration that
//! changes the schema changes the snapshot in the same commit (run the tests with
//! `SENTIN8_CRON_WRITE_SCHEMA=1` to rewrite it), so a reader finds each function's body as it
//! stands in one file rather than in the last migration that redefined it.

use std::fmt::Write as _;
use std::path::PathBuf;

use sqlx::{Connection, PgConnection, Row, SqliteConnection};

use crate::support::{PgTestDb, sqlite_file_store};

/// Compares `dumped` with the checked-in snapshot `name`, or rewrites it when asked to.
fn compare_or_write(name: &str, dumped: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("migrations/schema/{name}"));
    if std::env::var_os("SENTIN8_CRON_WRITE_SCHEMA").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, dumped).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    if stored != dumped {
        let first = stored
            .lines()
            .zip(dumped.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(stored.lines().count().min(dumped.lines().count()));
        panic!(
            "{} is not the schema the migrations leave (first difference at line {}); run the \
             tests with SENTIN8_CRON_WRITE_SCHEMA=1 and commit the new snapshot with the \
             migration",
            path.display(),
            first + 1
        );
    }
}

const HEADER: &str = "-- The schema as the migrations leave it: a snapshot dumped by \
tests/it/schema_snapshot.rs\n-- and checked in CI. Not applied by anything; the migrations are.\n";

#[tokio::test]
async fn the_postgres_schema_snapshot_matches_the_migrations() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let mut conn = PgConnection::connect(&db.service_url).await.unwrap();
    let mut out = String::from(HEADER);
    let tables = sqlx::query(
        "SELECT c.oid::bigint AS oid, c.relname::text AS name, c.relrowsecurity AS rls, \
                c.relforcerowsecurity AS forced \
           FROM pg_class c WHERE c.relnamespace = 'cron'::regnamespace AND c.relkind = 'r' \
          ORDER BY c.relname",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for table in &tables {
        let (oid, name): (i64, String) = (table.get("oid"), table.get("name"));
        let _ = writeln!(out, "\n-- table cron.{name}");
        let columns = sqlx::query(
            "SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type, \
                    a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS dflt \
               FROM pg_attribute a \
               LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
              WHERE a.attrelid = $1::bigint::oid AND a.attnum > 0 AND NOT a.attisdropped \
              ORDER BY a.attnum",
        )
        .bind(oid)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        for c in &columns {
            let dflt: Option<String> = c.get("dflt");
            let _ = writeln!(
                out,
                "--   {} {}{}{}",
                c.get::<String, _>("name"),
                c.get::<String, _>("type"),
                if c.get::<bool, _>("not_null") {
                    " NOT NULL"
                } else {
                    ""
                },
                dflt.map(|d| format!(" DEFAULT {d}")).unwrap_or_default()
            );
        }
        let constraints = sqlx::query(
            "SELECT conname::text AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint \
              WHERE conrelid = $1::bigint::oid ORDER BY conname",
        )
        .bind(oid)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        for c in &constraints {
            let _ = writeln!(
                out,
                "--   CONSTRAINT {} {}",
                c.get::<String, _>("name"),
                c.get::<String, _>("def")
            );
        }
        let (rls, forced): (bool, bool) = (table.get("rls"), table.get("forced"));
        let _ = writeln!(out, "--   row level security: {rls}, forced: {forced}");
        let indexes: Vec<String> = sqlx::query_scalar(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'cron' AND tablename = $1 \
              ORDER BY indexname",
        )
        .bind(&name)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        for index in indexes {
            let _ = writeln!(out, "{index};");
        }
    }
    let functions: Vec<String> = sqlx::query_scalar(
        "SELECT pg_get_functiondef(p.oid) FROM pg_proc p \
          WHERE p.pronamespace = 'cron'::regnamespace \
          ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for function in functions {
        let _ = write!(out, "\n{};\n", function.trim_end());
    }
    compare_or_write("postgres.sql", &out);
}

#[tokio::test]
async fn the_sqlite_schema_snapshot_matches_the_migrations() {
    let (_store, url, _dir) = sqlite_file_store().await;
    let mut conn = SqliteConnection::connect(&url).await.unwrap();
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT type, name, sql FROM sqlite_master \
          WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY tbl_name, type DESC, name",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut out = String::from(HEADER);
    for (kind, name, sql) in rows {
        let _ = write!(out, "\n-- {kind} {name}\n{};\n", sql.trim_end());
    }
    compare_or_write("sqlite.sql", &out);
}
