//! The API's and the admin pages' reads (`tenant_read`) have connections of their own: a burst
//! that holds every connection of the engine's pool does not hold a read up, a read cannot
//! write, and it sees its own tenant's rows only.

use std::sync::Arc;
use std::time::Duration;

use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::store::ConnectOptions;
use sentin8_cron::store::postgres::PgStore;

use crate::conformance::{first_hundred, insert_schedule, new_schedule};
use crate::support::PgTestDb;

#[tokio::test]
async fn a_read_does_not_wait_for_the_pool_the_engine_holds_and_cannot_write() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(
        PgStore::connect(
            &db.service_url,
            &ConnectOptions {
                max_connections: 2,
                acquire_timeout: Duration::from_millis(500),
                ..ConnectOptions::default()
            },
        )
        .await
        .unwrap(),
    );
    let env = EnvId::new();
    let first = insert_schedule(&store, env, new_schedule("first", "billing")).await;

    // Every connection of the pool is in a transaction (a burst's records and claims).
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(store.tenant_begin(env).await.unwrap());
    }
    let starved = store.tenant_begin(env).await;
    assert!(starved.is_err(), "the pool had a third connection");

    let mut tx = tokio::time::timeout(Duration::from_secs(10), store.tenant_read(env))
        .await
        .expect("the read waited")
        .expect("the read found no connection");
    let listed = tx.schedule_list(&first_hundred()).await.unwrap();
    assert_eq!(listed.iter().map(|s| s.id).collect::<Vec<_>>(), [first.id]);
    let refused = tx.schedule_insert(&new_schedule("second", "billing")).await;
    assert!(
        refused.is_err(),
        "a read-only transaction wrote: {refused:?}"
    );
    drop(tx);

    // The reading connections set the tenant context as the pool's do: another environment's
    // read sees none of these rows (row-level security, as the service role).
    let mut other = store.tenant_read(EnvId::new()).await.unwrap();
    let seen = other.schedule_list(&first_hundred()).await.unwrap();
    assert!(seen.is_empty(), "another tenant's rows: {seen:?}");
    assert!(other.schedule_get(first.id).await.unwrap().is_none());
    drop(held);
}
