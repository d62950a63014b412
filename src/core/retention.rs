//! Retention: finished jobs (with their attempts), audit entries and long-deleted schedules
//! are removed once older than their retention period, by `serve`, in bounded work. Each pass
//! deletes in batches (one short statement each, on its own, paced) and keeps going while
//! batches come back full, until a time budget per pass is spent, so a backlog of millions is
//! worked off over several passes without holding locks the ticker needs, and a steady stream
//! of thousands of fires a second is kept up with. The kinds are independent: a failing purge
//! of one is logged and the others still run. Open jobs, jobs a dead letter references and
//! schedules still referenced are never removed (the store's purge statements say so). Time
//! comes from the injected clock.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::core::clock::Clock;
use crate::core::store::{RetentionPurge, Store, StoreResult};

/// The shortest retention there is: one day. The settings refuse less, and PostgreSQL's purge
/// functions (cross-tenant, SECURITY DEFINER) never remove a row younger than this by the
/// database's own clock, whatever cut-off they are given.
pub const RETENTION_FLOOR: Duration = Duration::from_secs(24 * 3600);
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
    /// How long one pass may keep deleting (measured on the runtime's monotonic clock): it
    /// stops starting batches once this is spent. Every kind gets at least one batch a pass.
    pub budget: Duration,
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
            budget: Duration::from_secs(10),
            pause: Duration::from_millis(10),
            interval: Duration::from_secs(60),
        }
    }
}

/// What one pass removed, and how many kinds failed (each logged; the others went on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionSummary {
    pub jobs: u64,
    pub audit: u64,
    pub schedules: u64,
    pub errors: u32,
}

/// The retention worker of one store.
pub struct Retention {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    config: RetentionConfig,
}

#[derive(Debug, Clone, Copy)]
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
    /// then schedules, then audit entries, under one time budget. A kind that fails is logged
    /// and counted in `errors`; the next kinds still run.
    pub async fn pass(&self) -> RetentionSummary {
        let now = self.clock.now();
        let jobs_before = before(now, self.config.jobs);
        let audit_before = before(now, self.config.audit);
        let deadline = tokio::time::Instant::now().checked_add(self.config.budget);
        let mut summary = RetentionSummary::default();
        for (kind, cut_off) in [
            (Kind::Jobs, jobs_before),
            (Kind::Schedules, jobs_before),
            (Kind::Audit, audit_before),
        ] {
            let (removed, failed) = self.purge(kind, cut_off, deadline).await;
            match kind {
                Kind::Jobs => summary.jobs = removed,
                Kind::Schedules => summary.schedules = removed,
                Kind::Audit => summary.audit = removed,
            }
            if let Err(err) = failed {
                tracing::warn!(kind = ?kind, error = %err, "retention purge failed");
                summary.errors += 1;
            }
        }
        summary
    }

    /// Batches of one kind while they come back full and the deadline (none: no limit) has
    /// not passed; what was removed, even when a later batch failed.
    async fn purge(
        &self,
        kind: Kind,
        before: DateTime<Utc>,
        deadline: Option<tokio::time::Instant>,
    ) -> (u64, StoreResult<()>) {
        let purge = RetentionPurge {
            before,
            limit: self.config.batch.max(1),
        };
        let mut removed = 0;
        let mut first = true;
        loop {
            if !first {
                if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    return (removed, Ok(()));
                }
                if !self.config.pause.is_zero() {
                    tokio::time::sleep(self.config.pause).await;
                }
            }
            first = false;
            let deleted = match kind {
                Kind::Jobs => self.store.jobs_purge(&purge).await,
                Kind::Audit => self.store.audit_purge(&purge).await,
                Kind::Schedules => self.store.schedules_purge(&purge).await,
            };
            match deleted {
                Ok(deleted) => {
                    removed += deleted;
                    if deleted < u64::from(purge.limit) {
                        return (removed, Ok(()));
                    }
                }
                Err(err) => return (removed, Err(err)),
            }
        }
    }

    /// A pass every `interval` (the first at once) until `shutdown` resolves. A kind that
    /// fails is logged and tried again at the next interval.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let done = self.pass().await;
            if done.jobs + done.audit + done.schedules > 0 {
                tracing::info!(
                    jobs = done.jobs,
                    audit = done.audit,
                    schedules = done.schedules,
                    "removed rows past retention"
                );
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
