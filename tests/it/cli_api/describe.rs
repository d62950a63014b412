//! `schedules describe` against a running service: the table shows the facts, the counts, the
//! next calls and the recent jobs; `-o json` is the API's document.

use std::sync::Arc;

use chrono::Duration;
use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use super::cli;
use crate::api::Api;
use crate::support::t0;

pub async fn describe_shows_a_schedule_at_a_glance(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let mut body = api.new_schedule(env, "glance");
    body["cron"] = json!("*/10 * * * *");
    body["timezone"] = json!("UTC");
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    api.clock.set(t0() + Duration::minutes(10));
    api.engine().tick().await.unwrap();
    let env = env.to_string();

    let table = cli(
        &api,
        &token,
        &["schedules", "describe", &id, "--env", &env],
        None,
    )
    .await
    .ok()
    .to_owned();
    for line in [
        format!("billing/glance ({id})"),
        "*/10 * * * * (UTC); overlap skip".to_owned(),
        "1 succeeded, 0 failed, 0 skipped, 0 missed".to_owned(),
        "0 scheduled, 0 pending, 0 running, 0 buffered".to_owned(),
        "Next calls".to_owned(),
        "2030-01-01T00:20:00Z".to_owned(),
        "Recent jobs".to_owned(),
        "succeeded".to_owned(),
    ] {
        assert!(table.contains(&line), "{line:?} in:\n{table}");
    }

    let json = cli(
        &api,
        &token,
        &["schedules", "describe", &id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .ok()
    .to_owned();
    let described: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(described["schedule"]["id"], id);
    assert_eq!(described["counts"]["succeeded"], 1);
    assert_eq!(described["recent_jobs"].as_array().unwrap().len(), 1);
    assert_eq!(described["upcoming"][0]["at"], "2030-01-01T00:20:00Z");
}
