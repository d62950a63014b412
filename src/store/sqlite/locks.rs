//! Process-local schedule locks: SQLite has no advisory locks, and its single writer plus the
//! claim-conditional UPDATE and the open-job index exclude other processes.

use async_trait::async_trait;

use super::SqliteStore;
use crate::core::model::{EnvId, ScheduleId};
use crate::core::store::*;

pub(super) fn try_lock(store: &SqliteStore, ids: &[ScheduleId]) -> Box<dyn ScheduleLock> {
    let mut locked = store.locks.lock().unwrap_or_else(|p| p.into_inner());
    let held = ids
        .iter()
        .copied()
        .filter(|id| locked.insert(*id))
        .collect();
    Box::new(SqliteScheduleLock {
        store: store.clone(),
        held,
        released: false,
    })
}

/// Process-local schedule locks.
struct SqliteScheduleLock {
    store: SqliteStore,
    held: Vec<ScheduleId>,
    released: bool,
}

impl SqliteScheduleLock {
    fn unlock(&mut self) -> bool {
        if self.released {
            return false;
        }
        self.released = true;
        let mut locked = self.store.locks.lock().unwrap_or_else(|p| p.into_inner());
        // Every lock is removed, even after one that was not held.
        let mut all_held = true;
        for id in &self.held {
            all_held &= locked.remove(id);
        }
        all_held
    }
}

#[async_trait]
impl ScheduleLock for SqliteScheduleLock {
    fn held(&self) -> &[ScheduleId] {
        &self.held
    }

    async fn tenant_begin(&mut self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx + '_>> {
        self.store.tenant_begin(env_id).await
    }

    async fn release(mut self: Box<Self>) -> StoreResult<bool> {
        Ok(self.unlock())
    }
}

impl Drop for SqliteScheduleLock {
    fn drop(&mut self) {
        self.unlock();
    }
}
