//! A record's transaction waits a bounded time for a schedule row held elsewhere (an operator's
//! open transaction): its lock timeout is set as it begins.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;

use crate::conformance::{insert_schedule, new_schedule};
use crate::support::PgTestDb;

#[tokio::test]
async fn a_bounded_transaction_gives_up_on_a_row_held_elsewhere_after_its_timeout() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store: Arc<dyn Store> = db.store.clone();
    let env = EnvId::new();
    let schedule = insert_schedule(&store, env, new_schedule("held", "billing")).await;

    let mut holder = store.tenant_begin(env).await.unwrap();
    assert!(
        holder
            .schedule_get_for_update(schedule.id)
            .await
            .unwrap()
            .is_some()
    );

    let mut bounded = store
        .tenant_begin_bounded(env, Duration::from_millis(300))
        .await
        .unwrap();
    let began = Instant::now();
    let waited = tokio::time::timeout(
        Duration::from_secs(20),
        bounded.schedule_get_for_update(schedule.id),
    )
    .await
    .expect("the transaction waited for the row past its lock timeout");
    assert!(waited.is_err(), "it read a row held elsewhere: {waited:?}");
    assert!(
        began.elapsed() >= Duration::from_millis(300),
        "it gave up before its timeout"
    );
    drop(bounded);

    // Its tenant context and the holder's row are as they were: the holder commits.
    holder.commit().await.unwrap();
    let mut tx = store
        .tenant_begin_bounded(env, Duration::from_millis(300))
        .await
        .unwrap();
    let read = tx.schedule_get_for_update(schedule.id).await.unwrap();
    assert_eq!(read.map(|s| s.id), Some(schedule.id));
}
