//! Schedule locks: session-level advisory locks held on their own pooled connection, on which
//! the claim transaction then runs.

use std::sync::Arc;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::{Connection, Postgres};

use super::PgStore;
use super::tenant::{PgTenantTx, begin_tenant_sql};
use crate::core::model::{EnvId, ScheduleId};
use crate::core::store::*;
use crate::store::{db_err, lock_key};

pub(super) async fn try_lock(
    store: &PgStore,
    ids: &[ScheduleId],
) -> StoreResult<Box<dyn ScheduleLock>> {
    let mut conn = store.pool.acquire().await.map_err(db_err)?;
    let keys: Vec<i64> = ids.iter().map(|id| lock_key(*id)).collect();
    // Session locks are re-entrant: two ids sharing a key both get it (and both unlock).
    let taken: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_try_advisory_lock(k) FROM unnest($1::bigint[]) WITH ORDINALITY AS t(k, n) \
         ORDER BY n",
    )
    .bind(&keys)
    .fetch_all(&mut *conn)
    .await
    .map_err(db_err)?;
    let held: Vec<ScheduleId> = ids
        .iter()
        .zip(taken)
        .filter_map(|(id, taken)| taken.then_some(*id))
        .collect();
    Ok(Box::new(PgScheduleLock {
        conn: Some(conn),
        held,
        signals: store.signals.clone(),
        announce: store.announce.clone(),
    }))
}

/// Session-level advisory locks held on their own pooled connection.
struct PgScheduleLock {
    conn: Option<PoolConnection<Postgres>>,
    held: Vec<ScheduleId>,
    signals: Arc<Signals>,
    announce: super::tenant::Announce,
}

#[async_trait]
impl ScheduleLock for PgScheduleLock {
    fn held(&self) -> &[ScheduleId] {
        &self.held
    }

    async fn tenant_begin(&mut self, env_id: EnvId) -> StoreResult<Box<dyn TenantTx + '_>> {
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| StoreError::Config("schedule lock already released".into()))?;
        let tx = conn
            .begin_with(begin_tenant_sql(env_id))
            .await
            .map_err(db_err)?;
        Ok(Box::new(PgTenantTx::new(
            tx,
            env_id,
            self.signals.clone(),
            self.announce.clone(),
        )))
    }

    async fn release(mut self: Box<Self>) -> StoreResult<bool> {
        let Some(mut conn) = self.conn.take() else {
            return Ok(false);
        };
        if self.held.is_empty() {
            return Ok(true);
        }
        let keys: Vec<i64> = self.held.iter().map(|id| lock_key(*id)).collect();
        let released: Result<Vec<bool>, _> =
            sqlx::query_scalar("SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS k")
                .bind(&keys)
                .fetch_all(&mut *conn)
                .await;
        match released {
            Ok(held) => Ok(held.iter().all(|h| *h)),
            Err(err) => {
                // The session state is unknown: never hand this connection to someone else.
                conn.close_on_drop();
                Err(db_err(err))
            }
        }
    }
}

impl Drop for PgScheduleLock {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take()
            && !self.held.is_empty()
        {
            // Dropped without release (a panic or a cancelled task): closing the session is the
            // only way to free a session lock without awaiting.
            tracing::warn!(
                locks = self.held.len(),
                "schedule locks dropped without release; closing their connection"
            );
            conn.close_on_drop();
        }
    }
}
