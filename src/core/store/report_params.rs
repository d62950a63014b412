//! The records of the storage seam's reports: counts for health and metrics, the schema's
//! state, an environment picker's summaries and the hourly job summary. None carries a
//! tenant's content.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{StoreError, StoreResult};
use crate::core::model::{EnvId, ScheduleId};

/// Aggregate counts across all tenants, for health and metrics. Carries no tenant data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StoreStats {
    pub schedules_active: i64,
    pub schedules_paused: i64,
    /// Fires claimed ahead, waiting for their instant.
    pub jobs_scheduled: i64,
    pub jobs_pending: i64,
    pub jobs_running: i64,
    /// Occurrences waiting for their schedule's open job to end.
    #[serde(default)]
    pub jobs_buffered: i64,
    pub dlq_entries: i64,
    /// Events not relayed yet, parked ones included.
    pub outbox_unrelayed: i64,
    /// Events the relay gave up on (see [`Store::outbox_mark_failed`]); an operator must look.
    pub outbox_parked: i64,
    /// When the oldest event waiting to be relayed was written (the backlog's age). Parked
    /// events are left out: they never leave, and are counted in `outbox_parked`.
    #[serde(default)]
    pub outbox_oldest_unrelayed_at: Option<DateTime<Utc>>,
}

/// One environment's counts by status, for the operator's overview. Read inside a tenant
/// transaction, so it covers that environment only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EnvCounts {
    pub schedules_active: i64,
    pub schedules_paused: i64,
    pub schedules_completed: i64,
    /// Fires claimed ahead, waiting for their instant.
    pub jobs_scheduled: i64,
    pub jobs_pending: i64,
    pub jobs_running: i64,
    /// Occurrences waiting for their schedule's open job to end.
    pub jobs_buffered: i64,
    pub jobs_succeeded: i64,
    pub jobs_failed: i64,
    pub jobs_skipped: i64,
    /// Failed jobs whose dead letter was republished or discarded.
    pub jobs_superseded: i64,
    pub dlq_entries: i64,
}

/// One schedule's jobs counted for `describe`: what its occurrences since an instant came to,
/// and its jobs open now. A run of missed occurrences is one skipped record; `missed` counts
/// the occurrences in it, and `skipped` the other skipped records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ScheduleJobCounts {
    /// Since the instant asked for, by the occurrence's instant.
    pub succeeded: i64,
    pub failed: i64,
    pub skipped: i64,
    pub missed: i64,
    /// Backfilled jobs among all of the above.
    pub backfilled: i64,
    /// Open now, whenever their occurrence.
    pub scheduled: i64,
    pub pending: i64,
    pub running: i64,
    pub buffered: i64,
}

/// Applied and known schema versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaStatus {
    pub applied: Vec<i64>,
    pub known: Vec<i64>,
}

impl SchemaStatus {
    /// Versions this build knows that the database has not applied yet.
    pub fn pending(&self) -> Vec<i64> {
        self.known
            .iter()
            .copied()
            .filter(|v| !self.applied.contains(v))
            .collect()
    }

    /// Versions the database has that this build does not know (a newer build migrated it).
    pub fn unknown(&self) -> Vec<i64> {
        self.applied
            .iter()
            .copied()
            .filter(|v| !self.known.contains(v))
            .collect()
    }

    /// Refuses a schema that a newer build migrated (versions this build does not know).
    pub fn ensure_known(&self) -> StoreResult<()> {
        let unknown = self.unknown();
        if !unknown.is_empty() {
            return Err(StoreError::Schema(format!(
                "the database schema has versions {unknown:?} that this build does not know; \
                 run a newer sentin8-cron"
            )));
        }
        Ok(())
    }

    /// Refuses a schema that is not exactly the one this build expects.
    pub fn ensure_current(&self) -> StoreResult<()> {
        self.ensure_known()?;
        let pending = self.pending();
        if !pending.is_empty() {
            return Err(StoreError::Schema(format!(
                "the database schema is not migrated (pending versions {pending:?}); \
                 run `sentin8-cron migrate` first"
            )));
        }
        Ok(())
    }
}

/// One migration applied (or that would be applied) by [`Store::migrate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    pub version: i64,
    pub name: String,
    pub applied: bool,
}

/// An environment that holds schedules, as an operator's environment picker lists it: its id
/// and counts, nothing of its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSummary {
    pub env_id: EnvId,
    /// Schedules that are not deleted.
    pub schedules: i64,
}

/// The window of an hourly job summary: whole hours `[from, to)`, optionally one schedule's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobHoursQuery {
    pub schedule_id: Option<ScheduleId>,
    /// The first hour (its start; the caller truncates to the hour).
    pub from: DateTime<Utc>,
    /// The end of the last hour, exclusive.
    pub to: DateTime<Utc>,
}

/// What the jobs scheduled in one hour came to. Lateness is how long after its scheduled
/// instant a job's first attempt started (the attempt ledger's first row). A run of missed
/// occurrences counts each of them, in the hour of the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobHour {
    /// The hour's start.
    pub hour: DateTime<Utc>,
    /// Jobs scheduled in the hour, in any state but superseded.
    pub fires: i64,
    /// Of those, the ones that succeeded (the rest are pending, running, failed or skipped).
    pub succeeded: i64,
    pub failures: i64,
    pub skips: i64,
    /// Nearest-rank median and 99th percentile of the lateness, in milliseconds.
    pub late_p50_ms: Option<i64>,
    pub late_p99_ms: Option<i64>,
}

/// An hourly job summary: the hours that had jobs (others are absent), and the lateness
/// percentiles over the whole window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobHours {
    pub hours: Vec<JobHour>,
    pub late_p50_ms: Option<i64>,
    pub late_p99_ms: Option<i64>,
}
