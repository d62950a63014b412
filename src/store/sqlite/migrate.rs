//! SQLite's hooks for the shared migration runner: the bookkeeping table lives beside the
//! schema, and each migration runs in an immediate (write-locked) transaction.

use chrono::Utc;
use sqlx::{Connection, SqliteConnection};

use super::sqlite_options;
use crate::core::store::{MigrationReport, SchemaStatus, StoreResult};
use crate::store::db_err;
use crate::store::migrations::{self, Migration, MigrationTarget};

/// Applies pending migrations to the database file the URL names.
pub async fn migrate(url: &str, dry_run: bool) -> StoreResult<(Vec<MigrationReport>, Vec<String>)> {
    use sqlx::ConnectOptions as _;
    let mut conn = sqlite_options(url)?.connect().await.map_err(db_err)?;
    migrations::run(&mut SqliteMigration { conn: &mut conn }, dry_run).await
}

/// Applies pending migrations on a connection of the store's own pool.
pub(super) async fn migrate_conn(
    conn: &mut SqliteConnection,
    dry_run: bool,
) -> StoreResult<Vec<MigrationReport>> {
    Ok(migrations::run(&mut SqliteMigration { conn }, dry_run)
        .await?
        .0)
}

/// Applied and known versions.
pub(super) async fn schema_status(conn: &mut SqliteConnection) -> StoreResult<SchemaStatus> {
    migrations::schema_status(&mut SqliteMigration { conn }).await
}

struct SqliteMigration<'c> {
    conn: &'c mut SqliteConnection,
}

impl MigrationTarget for SqliteMigration<'_> {
    fn known(&self) -> &'static [Migration] {
        migrations::SQLITE
    }

    async fn prepare(&mut self, dry_run: bool) -> StoreResult<Vec<String>> {
        if !dry_run {
            sqlx::query(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, \
                 name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at INTEGER NOT NULL)",
            )
            .execute(&mut *self.conn)
            .await
            .map_err(db_err)?;
        }
        Ok(Vec::new())
    }

    async fn bookkeeping_exists(&mut self) -> StoreResult<bool> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master \
             WHERE type = 'table' AND name = 'schema_migrations')",
        )
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db_err)
    }

    async fn read_applied(&mut self) -> StoreResult<Vec<(i64, String)>> {
        sqlx::query_as("SELECT version, checksum FROM schema_migrations ORDER BY version")
            .fetch_all(&mut *self.conn)
            .await
            .map_err(db_err)
    }

    async fn apply(&mut self, migration: &Migration) -> StoreResult<()> {
        // SQLite changes a table's constraints by rebuilding it, which a parent table's
        // drop would refuse while foreign keys are enforced (the pragma is a no-op inside a
        // transaction, so it is set around it); the keys are checked before committing.
        sqlx::query("PRAGMA foreign_keys = OFF")
            .execute(&mut *self.conn)
            .await
            .map_err(db_err)?;
        let applied = self.apply_unchecked(migration).await;
        sqlx::query("PRAGMA foreign_keys = ON")
            .execute(&mut *self.conn)
            .await
            .map_err(db_err)?;
        applied
    }

    async fn finish(&mut self) -> StoreResult<()> {
        Ok(())
    }
}

impl SqliteMigration<'_> {
    async fn apply_unchecked(&mut self, migration: &Migration) -> StoreResult<()> {
        let mut tx = self
            .conn
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_err)?;
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| migrations::failed(migration, e))?;
        let violations = sqlx::query("PRAGMA foreign_key_check")
            .fetch_all(&mut *tx)
            .await
            .map_err(db_err)?;
        if !violations.is_empty() {
            return Err(crate::core::store::StoreError::Schema(format!(
                "migration {} ({}) would leave {} rows with a dangling foreign key",
                migration.version,
                migration.name,
                violations.len()
            )));
        }
        sqlx::query(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) \
             VALUES (?1, ?2, ?3, ?4)",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(migration.checksum())
        .bind(Utc::now().timestamp_micros())
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        tx.commit().await.map_err(db_err)
    }
}
