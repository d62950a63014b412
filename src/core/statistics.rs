//! Planner statistics that follow bulk writes. PostgreSQL plans each statement on the
//! statistics it last took of a table; autovacuum refreshes them only on its next round (a
//! minute by default). A table analyzed while empty, then loaded with 50,000 schedules by
//! `enroll` and their first jobs by a burst, is planned meanwhile as if each environment held
//! a handful of rows. So `enroll` asks for a refresh when it has written, and `serve` asks at
//! start-up and every 30 s: the store refreshes only the tables that changed by a tenth, so a
//! quiet ask costs one read of the statistics views. (Each ANALYZE of a busy table costs a few
//! hundred milliseconds of the database's time; the burst's own statements no longer depend
//! on the count of running jobs, which no statistics keep up with.)

use std::time::Duration;

use crate::core::clock::{Clock, wait_on};
use crate::core::store::Store;

/// How often `serve` asks for a refresh.
pub const REFRESH_EVERY: Duration = Duration::from_secs(30);

/// Refreshes what changed a lot; logs what it analyzed, and a failure (never fatal: plans on
/// older statistics are slower, not wrong). Returns the tables refreshed.
pub async fn refresh(store: &dyn Store) -> Vec<String> {
    match store.statistics_refresh().await {
        Ok(tables) => {
            if !tables.is_empty() {
                tracing::info!(tables = ?tables, "refreshed the planner's statistics");
            }
            tables
        }
        Err(err) => {
            tracing::warn!(error = %err, "could not refresh the planner's statistics");
            Vec::new()
        }
    }
}

/// Refreshes every [`REFRESH_EVERY`] on `clock` until `shutdown` (the first time a period
/// from now: `serve` refreshes once before its ticker starts).
pub async fn keep_fresh(
    store: &dyn Store,
    clock: &dyn Clock,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            () = wait_on(clock, REFRESH_EVERY) => {}
        }
        refresh(store).await;
    }
}
