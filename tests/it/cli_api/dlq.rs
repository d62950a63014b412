//! `jobs list|get` and `dlq list|get|republish` through the API.

use std::sync::Arc;

use sentin8_cron::core::store::Store;
use serde_json::json;

use super::{cli, create_doomed};
use crate::api::Api;
use crate::raw_http::{RawServer, Recorded, Reply};

pub async fn jobs_and_the_dlq_through_the_api_from_the_command_line(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let id = create_doomed(&api, &token, &failing.url()).await;
    let job = cli(
        &api,
        &token,
        &["schedules", "trigger", &id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    let job_id = job["id"].as_str().unwrap().to_owned();
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1);

    // Jobs.
    let jobs = cli(
        &api,
        &token,
        &[
            "jobs",
            "list",
            "--env",
            &env,
            "--schedule",
            &id,
            "--status",
            "failed",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    let items = jobs["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["id"], json!(job_id));
    assert_eq!(items[0]["schedule_id"], json!(id));
    assert_eq!(items[0]["status"], "failed");
    assert_eq!(items[0]["error"], "proxy-back status 500");
    let one = cli(
        &api,
        &token,
        &["jobs", "get", &job_id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(one["id"], json!(job_id));
    assert_eq!(one["env_id"], json!(env));
    assert_eq!(one["status"], "failed");
    let table = cli(&api, &token, &["jobs", "list", "--env", &env], None).await;
    let row = table.ok().lines().nth(1).unwrap().to_owned();
    assert!(row.starts_with(&job_id), "{row}");
    assert!(row.contains("failed"), "{row}");
    assert!(row.contains("proxy-back status 500"), "{row}");

    // The dead-letter queue.
    let listed = cli(
        &api,
        &token,
        &["dlq", "list", "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    let entry = listed["items"][0].clone();
    assert_eq!(entry["job_id"], json!(job_id));
    assert_eq!(entry["schedule_id"], json!(id));
    assert_eq!(entry["domain"], "billing");
    assert_eq!(entry["schedule_type"], "doomed");
    assert_eq!(entry["attempts"], 1);
    assert_eq!(entry["last_error"], "proxy-back status 500");
    let entry_id = entry["id"].as_str().unwrap().to_owned();
    let one = cli(
        &api,
        &token,
        &["dlq", "get", &entry_id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(one, entry);
    let republished = cli(
        &api,
        &token,
        &["dlq", "republish", &entry_id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(republished["status"], "pending");
    assert_eq!(republished["schedule_id"], json!(id));
    let empty = cli(&api, &token, &["dlq", "list", "--env", &env], None).await;
    assert_eq!(empty.ok(), "");
    assert!(
        empty.stderr.contains("no dead-letter entries found"),
        "{}",
        empty.stderr
    );

    // The API lists one environment at a time.
    let run = cli(&api, &token, &["dlq", "list"], None).await;
    assert_eq!(run.code, 2, "a usage error: {}", run.stderr);
    assert!(run.stderr.contains("give --env"), "{}", run.stderr);
}
