//! The pools check a connection before handing it out only when it sat idle (a ping per
//! transaction was a fifth of a jittered minute's round trips): a connection the server
//! closed while it sat idle (a restart, an idle timeout) is not handed out.

use std::time::Duration;

use sentin8_cron::core::model::*;
use sentin8_cron::core::store::*;
use sentin8_cron::store::ConnectOptions;
use sentin8_cron::store::postgres::PgStore;
use sqlx::{Connection, PgConnection};

use crate::conformance::{first_hundred, insert_schedule, new_schedule};
use crate::support::PgTestDb;

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_handed_out() {
    let Some(db) = PgTestDb::create().await else {
        return;
    };
    let store = PgStore::connect(&db.service_url, &ConnectOptions::default())
        .await
        .unwrap();
    let env = EnvId::new();
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(store);
    let first = insert_schedule(&store, env, new_schedule("first", "billing")).await;
    let mut read = store.tenant_read(env).await.unwrap();
    read.schedule_list(&first_hundred()).await.unwrap();
    drop(read);

    // Both pools hold idle connections; the server ends every one of them.
    let mut owner = PgConnection::connect(&db.owner_url()).await.unwrap();
    let ended: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND usename = 'sentin8_cron_service') t",
    )
    .fetch_one(&mut owner)
    .await
    .unwrap();
    assert!(ended >= 2, "{ended} connections ended");
    // Idle past the point where a connection is pinged before it is handed out.
    tokio::time::sleep(Duration::from_millis(1_500)).await;

    let mut tx = store.tenant_begin(env).await.unwrap();
    let got = tx.schedule_get(first.id).await.unwrap();
    assert_eq!(got.map(|s| s.id), Some(first.id));
    tx.commit().await.unwrap();
    let mut read = store.tenant_read(env).await.unwrap();
    let listed = read.schedule_list(&first_hundred()).await.unwrap();
    assert_eq!(listed.iter().map(|s| s.id).collect::<Vec<_>>(), [first.id]);
}
