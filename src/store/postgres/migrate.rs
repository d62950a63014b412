//! PostgreSQL's hooks for the shared migration runner: the migrating role must bypass
//! row-level security (it owns the schema and the SECURITY DEFINER functions), the service
//! role is created when missing, and concurrent runs are serialised by an advisory lock.

use sqlx::{Connection, Executor, PgConnection};

use super::{SERVICE_ROLE, connect_one};
use crate::core::store::{MigrationReport, SchemaStatus, StoreError, StoreResult};
use crate::store::db_err;
use crate::store::migrations::{self, Migration, MigrationTarget};

/// Applies pending migrations as the connected (owner) role, then refreshes the statistics
/// of the tables a migration rewrote (a refresh that fails is a note: the migrations stand).
/// Returns what it did and notes for the operator.
pub async fn migrate(url: &str, dry_run: bool) -> StoreResult<(Vec<MigrationReport>, Vec<String>)> {
    let mut conn = connect_one(url).await?;
    let (reports, mut notes) =
        migrations::run(&mut PgMigration { conn: &mut conn }, dry_run).await?;
    if !dry_run {
        let analyzed: Result<Vec<String>, _> =
            sqlx::query_scalar("SELECT cron.refresh_statistics()")
                .fetch_all(&mut conn)
                .await;
        match analyzed {
            Ok(tables) if tables.is_empty() => {}
            Ok(tables) => notes.push(format!(
                "refreshed the planner's statistics of {}",
                tables.join(", ")
            )),
            Err(err) => notes.push(format!(
                "could not refresh the planner's statistics ({}); autovacuum will",
                db_err(err)
            )),
        }
    }
    Ok((reports, notes))
}

/// Applied and known versions.
pub(super) async fn schema_status(conn: &mut PgConnection) -> StoreResult<SchemaStatus> {
    migrations::schema_status(&mut PgMigration { conn }).await
}

/// Whether the service role is a superuser and whether it bypasses row-level security, or
/// `None` when it does not exist.
async fn service_role(conn: &mut PgConnection) -> StoreResult<Option<(bool, bool)>> {
    sqlx::query_as("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1")
        .bind(SERVICE_ROLE)
        .fetch_optional(conn)
        .await
        .map_err(db_err)
}

struct PgMigration<'c> {
    conn: &'c mut PgConnection,
}

impl MigrationTarget for PgMigration<'_> {
    fn known(&self) -> &'static [Migration] {
        migrations::POSTGRES
    }

    async fn prepare(&mut self, dry_run: bool) -> StoreResult<Vec<String>> {
        let conn = &mut *self.conn;
        let mut notes = Vec::new();
        let (is_super, bypass_rls, create_role): (bool, bool, bool) = sqlx::query_as(
            "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles \
             WHERE rolname = current_user",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)?;
        if !is_super && !bypass_rls {
            return Err(StoreError::Config(
                "the migrating role must bypass row-level security (a superuser or a role with \
                 BYPASSRLS): it owns the schema, and the engine's SECURITY DEFINER functions \
                 read across tenants with its rights"
                    .into(),
            ));
        }

        match service_role(conn).await? {
            Some((true, _)) | Some((_, true)) => {
                return Err(StoreError::Config(format!(
                    "the role {SERVICE_ROLE} exists but bypasses row-level security; run \
                     `ALTER ROLE {SERVICE_ROLE} NOSUPERUSER NOBYPASSRLS;` and migrate again"
                )));
            }
            Some(_) => {}
            None if dry_run => notes.push(format!("would create the role {SERVICE_ROLE}")),
            None if is_super || create_role => {
                let created = conn
                    .execute(
                        format!(
                            "CREATE ROLE {SERVICE_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB \
                             NOCREATEROLE NOREPLICATION"
                        )
                        .as_str(),
                    )
                    .await;
                // Roles belong to the cluster, and the advisory lock to one database: a
                // migration of another database may have created the role since we looked.
                match created {
                    Ok(_) => notes.push(format!(
                        "created the role {SERVICE_ROLE} (NOBYPASSRLS); give it a password with \
                         `ALTER ROLE {SERVICE_ROLE} PASSWORD '...'` unless your server trusts \
                         it otherwise"
                    )),
                    Err(_) if service_role(conn).await? == Some((false, false)) => {}
                    Err(err) => return Err(db_err(err)),
                }
            }
            None => {
                return Err(StoreError::Config(format!(
                    "the role {SERVICE_ROLE} does not exist and the migrating role may not \
                     create it; ask an administrator to run `CREATE ROLE {SERVICE_ROLE} LOGIN \
                     NOSUPERUSER NOBYPASSRLS;` and migrate again"
                )));
            }
        }

        if !dry_run {
            conn.execute(
                "CREATE SCHEMA IF NOT EXISTS cron; \
                 CREATE TABLE IF NOT EXISTS cron.schema_migrations ( \
                     version bigint PRIMARY KEY, name text NOT NULL, checksum text NOT NULL, \
                     applied_at timestamptz NOT NULL DEFAULT now())",
            )
            .await
            .map_err(db_err)?;
        }
        Ok(notes)
    }

    async fn bookkeeping_exists(&mut self) -> StoreResult<bool> {
        sqlx::query_scalar("SELECT to_regclass('cron.schema_migrations') IS NOT NULL")
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db_err)
    }

    async fn read_applied(&mut self) -> StoreResult<Vec<(i64, String)>> {
        sqlx::query_as("SELECT version, checksum FROM cron.schema_migrations ORDER BY version")
            .fetch_all(&mut *self.conn)
            .await
            .map_err(db_err)
    }

    async fn apply(&mut self, migration: &Migration) -> StoreResult<()> {
        let mut tx = self.conn.begin().await.map_err(db_err)?;
        // Serialises concurrent `migrate` runs; the version check below is then authoritative.
        sqlx::query("SELECT pg_advisory_xact_lock(7355608001)")
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        let done: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM cron.schema_migrations WHERE version = $1)",
        )
        .bind(migration.version)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_err)?;
        if !done {
            sqlx::raw_sql(migration.sql)
                .execute(&mut *tx)
                .await
                .map_err(|e| migrations::failed(migration, e))?;
            sqlx::query(
                "INSERT INTO cron.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            )
            .bind(migration.version)
            .bind(migration.name)
            .bind(migration.checksum())
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
        tx.commit().await.map_err(db_err)
    }

    async fn finish(&mut self) -> StoreResult<()> {
        self.conn
            .execute(format!("GRANT SELECT ON cron.schema_migrations TO {SERVICE_ROLE}").as_str())
            .await
            .map_err(db_err)?;
        Ok(())
    }
}
