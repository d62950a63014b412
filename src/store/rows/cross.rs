//! The cross-tenant reads and the relay's claim as both backends run them: the values each
//! binds, in one order, the fetch and the mapping, over [`PoolRows`]. Each backend's statement
//! is its own (PostgreSQL calls a SECURITY DEFINER function; SQLite reads the tables) and
//! takes the values as its placeholders 1, 2, ... in the order each function here names.

use chrono::{DateTime, Utc};

use super::{Placeholder, RowCells, Sql, Val, due_job, due_schedule, map_rows, outbox};
use crate::core::model::OutboxEvent;
use crate::core::store::{DueJob, DueSchedule, OutboxClaim, Share, StoreResult};

/// The most rows one engine read or claim returns.
const READ_LIMIT: u32 = 1000;

/// What the shared cross-tenant reads need from a backend's pool.
pub(crate) trait PoolRows: Sync {
    type Row: RowCells + Send;
    /// How the backend writes placeholders.
    const PLACEHOLDER: Placeholder;
    /// A count or limit as the backend's statements take it.
    fn count(n: u32) -> Val;
    async fn fetch_all(&self, sql: &Sql) -> StoreResult<Vec<Self::Row>>;
}

/// The rows of `statement` with `vals` as its placeholders 1, 2, ...
async fn fetch<P: PoolRows>(pool: &P, statement: &str, vals: Vec<Val>) -> StoreResult<Vec<P::Row>> {
    let mut sql = Sql::new(P::PLACEHOLDER);
    for val in vals {
        sql.val(val);
    }
    sql.text = statement.to_owned();
    pool.fetch_all(&sql).await
}

/// Due schedules. `statement`'s placeholders: the limit, now, the seed, then the share's
/// `ahead_after`, `of` and `index` (`NULL`, 1 and 0 without a share).
pub(crate) async fn schedules_due<P: PoolRows>(
    pool: &P,
    statement: &str,
    now: DateTime<Utc>,
    limit: u32,
    seed: u32,
    share: Option<Share>,
) -> StoreResult<Vec<DueSchedule>> {
    let (of, index) = share.map_or((1, 0), |s| (s.of, s.index));
    let vals = vec![
        P::count(limit.min(READ_LIMIT)),
        Val::ts(now),
        Val::I64(i64::from(seed)),
        Val::Ts(share.map(|s| s.ahead_after)),
        P::count(of),
        P::count(index),
    ];
    let rows = fetch(pool, statement, vals).await?;
    map_rows(&rows, "schedules", due_schedule)
}

/// Due retries and attempts whose lease ran out. `statement`'s placeholders: the limit, now
/// and `stale_before`.
pub(crate) async fn jobs_due<P: PoolRows>(
    pool: &P,
    statement: &str,
    now: DateTime<Utc>,
    stale_before: DateTime<Utc>,
    limit: u32,
) -> StoreResult<Vec<DueJob>> {
    let limit = P::count(limit.min(READ_LIMIT));
    let rows = fetch(
        pool,
        statement,
        vec![limit, Val::ts(now), Val::ts(stale_before)],
    )
    .await?;
    map_rows(&rows, "jobs", due_job)
}

/// Claims outbox events for a relay, in sequence order (`UPDATE ... RETURNING` does not promise
/// one). `statement`'s placeholders: the relay, now, the lease's end and the limit.
pub(crate) async fn outbox_claim<P: PoolRows>(
    pool: &P,
    statement: &str,
    claim: &OutboxClaim,
) -> StoreResult<Vec<OutboxEvent>> {
    let relay = Val::text(&claim.relay_id);
    let lease = Val::ts(claim.lease_until);
    let limit = P::count(claim.limit.min(READ_LIMIT));
    let rows = fetch(
        pool,
        statement,
        vec![relay, Val::ts(claim.now), lease, limit],
    )
    .await?;
    let mut events = map_rows(&rows, "outbox", outbox)?;
    events.sort_by_key(|e| e.seq);
    Ok(events)
}

/// A backend pool's [`PoolRows`]: it runs the backend's `query` (named at the expansion site)
/// with `placeholder`, and `count` binds a count.
macro_rules! pool_rows {
    ($pool:ty, $row:ty, count: $count:expr) => {
        impl $crate::store::rows::PoolRows for $pool {
            type Row = $row;
            const PLACEHOLDER: $crate::store::rows::Placeholder = placeholder;

            fn count(n: u32) -> $crate::store::rows::Val {
                $count(n)
            }

            async fn fetch_all(&self, sql: &$crate::store::rows::Sql) -> StoreResult<Vec<$row>> {
                query(sql)
                    .fetch_all(self)
                    .await
                    .map_err($crate::store::db_err)
            }
        }
    };
}
pub(crate) use pool_rows;
