//! Retention: finished jobs (with their attempts), audit entries and long-deleted schedules
//! are removed once older than their retention period, by `serve`, in bounded work. Each pass
//! deletes in batches (one short statement each, on its own) up to a cap per kind, so a
//! backlog of millions is worked off over several passes without holding locks the ticker
//! needs. Open jobs, jobs a dead letter references and schedules still referenced are never
//! removed (the store's purge statements say so). Time comes from the injected clock.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::core::clock::Clock;
use crate::core::store::{RetentionPurge, Store, StoreResult};

/// Default job retention: 30 days.
pub const DEFAULT_JOB_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Default audit retention: 365 days.
pub const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(365 * 24 * 3600);

/// How much is kept and how much one pass may remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionConfig {
    /// Finished jobs (and their attempts) last changed longer ago than this are removed; so
    /// are schedules deleted longer ago than this once nothing references them.
    pub jobs: Duration,
    /// Audit entries older than this are removed.
    pub audit: Duration,
    /// Rows per delete statement.
    pub batch: u32,
    /// Statements per kind and pass, so one pass is bounded.
    pub max_batches: u32,
    /// Pause between two statements, leaving the database to the ticker in between.
    pub pause: Duration,
    /// How often a pass runs.
    pub interval: Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            jobs: DEFAULT_JOB_RETENTION,
            audit: DEFAULT_AUDIT_RETENTION,
            batch: 1000,
            max_batches: 100,
            pause: Duration::from_millis(10),
            interval: Duration::from_secs(60),
        }
    }
}

/// What one pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionSummary {
    pub jobs: u64,
    pub audit: u64,
    pub schedules: u64,
}

/// The retention worker of one store.
pub struct Retention {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: RetentionConfig,
}

#[derive(Clone, Copy)]
enum Kind {
    Jobs,
    Audit,
    Schedules,
}

impl Retention {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: RetentionConfig) -> Self {
        Self {
            store,
            clock,
            config,
        }
    }

    /// One bounded pass: jobs first (a schedule is removable only once its jobs are gone),
    /// then schedules, then audit entries.
    pub async fn pass(&self) -> StoreResult<RetentionSummary> {
        let now = self.clock.now();
        let jobs_before = before(now, self.config.jobs);
        let audit_before = before(now, self.config.audit);
        Ok(RetentionSummary {
            jobs: self.purge(Kind::Jobs, jobs_before).await?,
            schedules: self.purge(Kind::Schedules, jobs_before).await?,
            audit: self.purge(Kind::Audit, audit_before).await?,
        })
    }

    async fn purge(&self, kind: Kind, before: DateTime<Utc>) -> StoreResult<u64> {
        let purge = RetentionPurge {
            before,
            limit: self.config.batch.max(1),
        };
        let mut removed = 0;
        for batch in 0..self.config.max_batches.max(1) {
            if batch > 0 && !self.config.pause.is_zero() {
                tokio::time::sleep(self.config.pause).await;
            }
            let deleted = match kind {
                Kind::Jobs => self.store.jobs_purge(&purge).await?,
                Kind::Audit => self.store.audit_purge(&purge).await?,
                Kind::Schedules => self.store.schedules_purge(&purge).await?,
            };
            removed += deleted;
            if deleted < u64::from(purge.limit) {
                break;
            }
        }
        Ok(removed)
    }

    /// A pass every `interval` (the first at once) until `shutdown` resolves. A failed pass is
    /// logged and tried again at the next interval.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            match self.pass().await {
                Ok(done) if done != RetentionSummary::default() => {
                    tracing::info!(
                        jobs = done.jobs,
                        audit = done.audit,
                        schedules = done.schedules,
                        "removed rows past retention"
                    );
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "retention pass failed"),
            }
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }
}

/// `now` minus `age`, or the earliest instant when that is out of range (keep everything).
fn before(now: DateTime<Utc>, age: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(age)
        .ok()
        .and_then(|age| now.checked_sub_signed(age))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}
