//! The embedded store's reading connections: a read does not wait behind a write in progress
//! (it sees the last committed state), and it cannot write.

use std::time::Duration;

use sentin8_cron::core::model::*;

use crate::conformance::{first_hundred, insert_schedule, new_schedule};

#[tokio::test]
async fn a_read_does_not_wait_behind_a_write_and_cannot_write() {
    let (store, _url, _dir) = crate::support::sqlite_file_store().await;
    let env = EnvId::new();
    let first = insert_schedule(&store, env, new_schedule("first", "billing")).await;

    // A write in progress holds the one writing connection.
    let mut writing = store.tenant_begin(env).await.unwrap();
    let second = writing
        .schedule_insert(&new_schedule("second", "billing"))
        .await
        .unwrap();

    let read = async {
        let mut tx = store.tenant_read(env).await.unwrap();
        tx.schedule_list(&first_hundred()).await.unwrap()
    };
    let listed = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the read did not wait for the write to end");
    assert_eq!(
        listed.iter().map(|s| s.id).collect::<Vec<_>>(),
        [first.id],
        "the last committed state"
    );

    writing.commit().await.unwrap();
    let mut tx = store.tenant_read(env).await.unwrap();
    let listed = tx.schedule_list(&first_hundred()).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().any(|s| s.id == second.id));

    let refused = tx.schedule_insert(&new_schedule("third", "billing")).await;
    assert!(
        refused.is_err(),
        "a read-only transaction wrote: {refused:?}"
    );
}
