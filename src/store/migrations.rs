//! The embedded migrations of both backends and the one runner that applies them. Versions
//! are the same on both; each file says where SQLite has to differ. A backend plugs into the
//! runner through [`MigrationTarget`]: how to prepare the database, read what is applied, and
//! apply one migration atomically.

use crate::core::store::{MigrationReport, SchemaStatus, StoreError, StoreResult};

/// One versioned migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

impl Migration {
    /// A stable fingerprint of the migration text (FNV-1a, 64 bits): enough to notice a file
    /// edited after it was applied, which is all it is for.
    pub fn checksum(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.sql.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("{hash:016x}")
    }
}

/// PostgreSQL migrations, in order.
pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "outbox_relay",
        sql: include_str!("../../migrations/postgres/0002_outbox_relay.sql"),
    },
    Migration {
        version: 3,
        name: "schedule_zones",
        sql: include_str!("../../migrations/postgres/0003_schedule_zones.sql"),
    },
    Migration {
        version: 4,
        name: "dispatch_fairness",
        sql: include_str!("../../migrations/postgres/0004_dispatch_fairness.sql"),
    },
    Migration {
        version: 5,
        name: "lifecycle",
        sql: include_str!("../../migrations/postgres/0005_lifecycle.sql"),
    },
    Migration {
        version: 6,
        name: "admin_reads",
        sql: include_str!("../../migrations/postgres/0006_admin_reads.sql"),
    },
    Migration {
        version: 7,
        name: "lifecycle_fixes",
        sql: include_str!("../../migrations/postgres/0007_lifecycle_fixes.sql"),
    },
    Migration {
        version: 8,
        name: "claim_ahead",
        sql: include_str!("../../migrations/postgres/0008_claim_ahead.sql"),
    },
    Migration {
        version: 9,
        name: "cheaper_hand_off",
        sql: include_str!("../../migrations/postgres/0009_cheaper_hand_off.sql"),
    },
    Migration {
        version: 10,
        name: "scheduled_jobs",
        sql: include_str!("../../migrations/postgres/0010_scheduled_jobs.sql"),
    },
    Migration {
        version: 11,
        name: "instance_shares",
        sql: include_str!("../../migrations/postgres/0011_instance_shares.sql"),
    },
    Migration {
        version: 12,
        name: "due_count",
        sql: include_str!("../../migrations/postgres/0012_due_count.sql"),
    },
    Migration {
        version: 13,
        name: "job_answers",
        sql: include_str!("../../migrations/postgres/0013_job_answers.sql"),
    },
    Migration {
        version: 14,
        name: "due_window",
        sql: include_str!("../../migrations/postgres/0014_due_window.sql"),
    },
    Migration {
        version: 15,
        name: "hand_off_again",
        sql: include_str!("../../migrations/postgres/0015_hand_off_again.sql"),
    },
    Migration {
        version: 16,
        name: "schedule_policies",
        sql: include_str!("../../migrations/postgres/0016_schedule_policies.sql"),
    },
    Migration {
        version: 17,
        name: "overlap_and_backfill",
        sql: include_str!("../../migrations/postgres/0017_overlap_and_backfill.sql"),
    },
    Migration {
        version: 18,
        name: "fenced_leases",
        sql: include_str!("../../migrations/postgres/0018_fenced_leases.sql"),
    },
    Migration {
        version: 19,
        name: "cloudevents",
        sql: include_str!("../../migrations/postgres/0019_cloudevents.sql"),
    },
    Migration {
        version: 20,
        name: "operator_counts",
        sql: include_str!("../../migrations/postgres/0020_operator_counts.sql"),
    },
    Migration {
        version: 21,
        name: "stable_plans",
        sql: include_str!("../../migrations/postgres/0021_stable_plans.sql"),
    },
    Migration {
        version: 22,
        name: "labels",
        sql: include_str!("../../migrations/postgres/0022_labels.sql"),
    },
    Migration {
        version: 23,
        name: "after_completion",
        sql: include_str!("../../migrations/postgres/0023_after_completion.sql"),
    },
    Migration {
        version: 24,
        name: "overlap_modes",
        sql: include_str!("../../migrations/postgres/0024_overlap_modes.sql"),
    },
    Migration {
        version: 25,
        name: "calendars",
        sql: include_str!("../../migrations/postgres/0025_calendars.sql"),
    },
    Migration {
        version: 26,
        name: "open_jobs_index",
        sql: include_str!("../../migrations/postgres/0026_open_jobs_index.sql"),
    },
    Migration {
        version: 27,
        name: "answers_unkeyed",
        sql: include_str!("../../migrations/postgres/0027_answers_unkeyed.sql"),
    },
];

/// SQLite migrations, in order, with the same versions as [`POSTGRES`].
pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "outbox_relay",
        sql: include_str!("../../migrations/sqlite/0002_outbox_relay.sql"),
    },
    Migration {
        version: 3,
        name: "schedule_zones",
        sql: include_str!("../../migrations/sqlite/0003_schedule_zones.sql"),
    },
    Migration {
        version: 4,
        name: "dispatch_fairness",
        sql: include_str!("../../migrations/sqlite/0004_dispatch_fairness.sql"),
    },
    Migration {
        version: 5,
        name: "lifecycle",
        sql: include_str!("../../migrations/sqlite/0005_lifecycle.sql"),
    },
    Migration {
        version: 6,
        name: "admin_reads",
        sql: include_str!("../../migrations/sqlite/0006_admin_reads.sql"),
    },
    Migration {
        version: 7,
        name: "lifecycle_fixes",
        sql: include_str!("../../migrations/sqlite/0007_lifecycle_fixes.sql"),
    },
    Migration {
        version: 8,
        name: "claim_ahead",
        sql: include_str!("../../migrations/sqlite/0008_claim_ahead.sql"),
    },
    Migration {
        version: 9,
        name: "cheaper_hand_off",
        sql: include_str!("../../migrations/sqlite/0009_cheaper_hand_off.sql"),
    },
    Migration {
        version: 10,
        name: "scheduled_jobs",
        sql: include_str!("../../migrations/sqlite/0010_scheduled_jobs.sql"),
    },
    Migration {
        version: 11,
        name: "instance_shares",
        sql: include_str!("../../migrations/sqlite/0011_instance_shares.sql"),
    },
    Migration {
        version: 12,
        name: "due_count",
        sql: include_str!("../../migrations/sqlite/0012_due_count.sql"),
    },
    Migration {
        version: 13,
        name: "job_answers",
        sql: include_str!("../../migrations/sqlite/0013_job_answers.sql"),
    },
    Migration {
        version: 14,
        name: "due_window",
        sql: include_str!("../../migrations/sqlite/0014_due_window.sql"),
    },
    Migration {
        version: 15,
        name: "hand_off_again",
        sql: include_str!("../../migrations/sqlite/0015_hand_off_again.sql"),
    },
    Migration {
        version: 16,
        name: "schedule_policies",
        sql: include_str!("../../migrations/sqlite/0016_schedule_policies.sql"),
    },
    Migration {
        version: 17,
        name: "overlap_and_backfill",
        sql: include_str!("../../migrations/sqlite/0017_overlap_and_backfill.sql"),
    },
    Migration {
        version: 18,
        name: "fenced_leases",
        sql: include_str!("../../migrations/sqlite/0018_fenced_leases.sql"),
    },
    Migration {
        version: 19,
        name: "cloudevents",
        sql: include_str!("../../migrations/sqlite/0019_cloudevents.sql"),
    },
    Migration {
        version: 20,
        name: "operator_counts",
        sql: include_str!("../../migrations/sqlite/0020_operator_counts.sql"),
    },
    Migration {
        version: 21,
        name: "stable_plans",
        sql: include_str!("../../migrations/sqlite/0021_stable_plans.sql"),
    },
    Migration {
        version: 22,
        name: "labels",
        sql: include_str!("../../migrations/sqlite/0022_labels.sql"),
    },
    Migration {
        version: 23,
        name: "after_completion",
        sql: include_str!("../../migrations/sqlite/0023_after_completion.sql"),
    },
    Migration {
        version: 24,
        name: "overlap_modes",
        sql: include_str!("../../migrations/sqlite/0024_overlap_modes.sql"),
    },
    Migration {
        version: 25,
        name: "calendars",
        sql: include_str!("../../migrations/sqlite/0025_calendars.sql"),
    },
    Migration {
        version: 26,
        name: "open_jobs_index",
        sql: include_str!("../../migrations/sqlite/0026_open_jobs_index.sql"),
    },
    Migration {
        version: 27,
        name: "answers_unkeyed",
        sql: include_str!("../../migrations/sqlite/0027_answers_unkeyed.sql"),
    },
];

/// Refuses a database whose applied migrations were changed after they were applied.
pub fn check_applied(known: &[Migration], applied: &[(i64, String)]) -> StoreResult<()> {
    for (version, checksum) in applied {
        if let Some(migration) = known.iter().find(|m| m.version == *version)
            && migration.checksum() != *checksum
        {
            return Err(StoreError::Schema(format!(
                "migration {version} ({}) differs from the one applied to this database; \
                 migrations must never change once released",
                migration.name
            )));
        }
    }
    Ok(())
}

/// The schema status of a database that has `applied` (version, checksum) pairs.
pub(crate) fn status(known: &[Migration], applied: &[(i64, String)]) -> SchemaStatus {
    SchemaStatus {
        applied: applied.iter().map(|(v, _)| *v).collect(),
        known: known.iter().map(|m| m.version).collect(),
    }
}

/// A backend's hooks for [`run`].
pub(crate) trait MigrationTarget {
    /// This backend's migrations, in order.
    fn known(&self) -> &'static [Migration];
    /// Checks the connection may migrate and, unless `dry_run`, creates the bookkeeping table.
    /// Returns notes for the operator.
    async fn prepare(&mut self, dry_run: bool) -> StoreResult<Vec<String>>;
    /// Whether the bookkeeping table exists (a database never migrated has none).
    async fn bookkeeping_exists(&mut self) -> StoreResult<bool>;
    /// The applied versions with their checksums, from the bookkeeping table.
    async fn read_applied(&mut self) -> StoreResult<Vec<(i64, String)>>;
    /// Applies one migration and records it in one transaction (nothing when a concurrent run
    /// recorded it first).
    async fn apply(&mut self, migration: &Migration) -> StoreResult<()>;
    /// Runs after the migrations were applied (not on a dry run).
    async fn finish(&mut self) -> StoreResult<()>;
}

/// The applied versions with their checksums; none when the bookkeeping table is missing.
async fn applied(target: &mut impl MigrationTarget) -> StoreResult<Vec<(i64, String)>> {
    if target.bookkeeping_exists().await? {
        target.read_applied().await
    } else {
        Ok(Vec::new())
    }
}

/// Applied and known versions, without changing anything.
pub(crate) async fn schema_status(target: &mut impl MigrationTarget) -> StoreResult<SchemaStatus> {
    let applied = applied(target).await?;
    Ok(status(target.known(), &applied))
}

/// Applies the pending migrations (or, with `dry_run`, reports what would be applied). A
/// database with versions this build does not know, or with an applied migration that was
/// edited since, is refused before anything is applied.
pub(crate) async fn run(
    target: &mut impl MigrationTarget,
    dry_run: bool,
) -> StoreResult<(Vec<MigrationReport>, Vec<String>)> {
    let notes = target.prepare(dry_run).await?;
    let applied = applied(target).await?;
    let known = target.known();
    check_applied(known, &applied)?;
    let status = status(known, &applied);
    status.ensure_known()?;
    let mut reports = Vec::with_capacity(known.len());
    for migration in known {
        let already = status.applied.contains(&migration.version);
        if !already && !dry_run {
            target.apply(migration).await?;
        }
        reports.push(MigrationReport {
            version: migration.version,
            name: migration.name.to_owned(),
            applied: !already,
        });
    }
    if !dry_run {
        target.finish().await?;
    }
    Ok((reports, notes))
}

/// The error of a migration whose SQL failed.
pub(crate) fn failed(migration: &Migration, err: impl std::fmt::Display) -> StoreError {
    StoreError::Schema(format!(
        "migration {} ({}) failed: {err}",
        migration.version, migration.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cloudevents_migration_renames_exactly_the_former_event_types() {
        for migrations in [POSTGRES, SQLITE] {
            let sql = migrations
                .iter()
                .find(|m| m.name == "cloudevents")
                .expect("version 19")
                .sql;
            let renames: Vec<&str> = sql.lines().filter(|l| l.contains(" WHEN ")).collect();
            assert_eq!(renames.len(), crate::core::events::RENAMED.len());
            for (old, new) in crate::core::events::RENAMED {
                let line = format!("WHEN '{old}' THEN '{new}'");
                assert!(renames.iter().any(|l| l.trim() == line), "{line}");
            }
        }
    }

    fn files(dir: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut names: Vec<String> = std::fs::read_dir(path)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        names.sort();
        names
    }

    fn expected(migrations: &[Migration]) -> Vec<String> {
        migrations
            .iter()
            .map(|m| format!("{:04}_{}.sql", m.version, m.name))
            .collect()
    }

    #[test]
    fn every_migration_file_is_embedded_in_order() {
        assert_eq!(files("migrations/postgres"), expected(POSTGRES));
        assert_eq!(files("migrations/sqlite"), expected(SQLITE));
    }

    #[test]
    fn both_backends_share_version_numbers() {
        let pg: Vec<i64> = POSTGRES.iter().map(|m| m.version).collect();
        let lite: Vec<i64> = SQLITE.iter().map(|m| m.version).collect();
        assert_eq!(pg, lite);
        assert!(pg.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn an_edited_migration_is_refused() {
        let applied = vec![(1, "0000000000000000".to_owned())];
        let err = check_applied(POSTGRES, &applied).unwrap_err();
        assert!(
            err.to_string().contains("differs from the one applied"),
            "{err}"
        );
        let ok = vec![(1, POSTGRES[0].checksum())];
        check_applied(POSTGRES, &ok).unwrap();
    }
}
