//! The commands over the discard and audit endpoints (`DELETE /v1/dlq/{id}`, `GET /v1/audit`).

use std::sync::Arc;

use sentin8_cron::core::store::Store;
use serde_json::json;

use super::{cli, create_doomed};
use crate::api::Api;
use crate::raw_http::{RawServer, Recorded, Reply};

pub async fn dlq_discard_through_the_api(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let id = &create_doomed(&api, &token, &failing.url()).await;
    cli(
        &api,
        &token,
        &["schedules", "trigger", id, "--env", &env],
        None,
    )
    .await
    .ok();
    api.engine().tick().await.unwrap();
    let listed = cli(
        &api,
        &token,
        &["dlq", "list", "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    let entry_id = listed["items"][0]["id"].as_str().unwrap().to_owned();

    let run = cli(
        &api,
        &token,
        &["dlq", "discard", &entry_id, "--env", &env],
        None,
    )
    .await;
    assert_eq!(
        run.ok().trim(),
        format!("discarded dead-letter entry {entry_id}")
    );
    let listed = cli(
        &api,
        &token,
        &["dlq", "list", "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(listed["items"], json!([]));
    let again = cli(
        &api,
        &token,
        &["dlq", "discard", &entry_id, "--env", &env],
        None,
    )
    .await;
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("(404)"), "{}", again.stderr);
}

pub async fn audit_list_through_the_api(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = api.target.url();
    let created = cli(
        &api,
        &token,
        &[
            "schedules",
            "create",
            "--env",
            &env,
            "--domain",
            "billing",
            "--type",
            "audited",
            "--cron",
            "0 2 * * *",
            "--base-url",
            &base,
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    let id = created["id"].as_str().unwrap().to_owned();
    cli(
        &api,
        &token,
        &["schedules", "pause", &id, "--env", &env],
        None,
    )
    .await
    .ok();

    let audit = cli(
        &api,
        &token,
        &[
            "audit",
            "list",
            "--env",
            &env,
            "--schedule",
            &id,
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    let items = audit["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{audit}");
    for item in items {
        assert_eq!(item["schedule_id"], json!(id));
        assert_eq!(item["actor"], "svc-billing");
        assert!(item["at"].as_str().unwrap().ends_with('Z'));
        assert!(item["id"].is_string());
    }
    let table = cli(&api, &token, &["audit", "list", "--env", &env], None).await;
    let lines: Vec<&str> = table.ok().lines().collect();
    assert!(lines[0].starts_with("at "), "{}", lines[0]);
    assert_eq!(lines.len(), 3, "{}", table.stdout);
}
