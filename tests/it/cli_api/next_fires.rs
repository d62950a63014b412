//! `next-fires --jitter --schedule-id` against a running service: the calls it lists are the
//! ones the server stores as the schedule's `next_run_at`, fire after fire.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use super::cli;
use crate::api::Api;

pub async fn next_fires_lists_the_calls_the_server_makes(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let mut body = api.new_schedule(env, "rollup");
    body["cron"] = json!("*/15 * * * *");
    body["timezone"] = json!("UTC");
    body["max_jitter"] = json!("3m");
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();

    let listed = cli(
        &api,
        &token,
        &[
            "next-fires",
            "*/15 * * * *",
            "--jitter",
            "3m",
            "--schedule-id",
            &id,
            "--after",
            "2030-01-01T00:00:00Z",
            "-n",
            "5",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    // The call of each occurrence, as the listing gives it.
    let call_of = |occurrence: &str| -> DateTime<Utc> {
        let row = listed["fires"]
            .as_array()
            .unwrap()
            .iter()
            .find(|fire| fire["utc"] == occurrence)
            .unwrap_or_else(|| panic!("{occurrence} listed: {listed}"));
        row["call"].as_str().unwrap().parse().unwrap()
    };
    let next_run_at = |schedule: &Value| -> DateTime<Utc> {
        schedule["next_run_at"].as_str().unwrap().parse().unwrap()
    };

    // A schedule created at 00:00 first calls for 00:15; each fire moves it to the next call.
    assert_eq!(next_run_at(&created), call_of("2030-01-01T00:15:00Z"));
    let mut due = next_run_at(&created);
    for occurrence in ["2030-01-01T00:30:00Z", "2030-01-01T00:45:00Z"] {
        api.clock.set(due);
        let summary = api.engine().tick().await.unwrap();
        assert_eq!(summary.fired, 1, "{summary:?}");
        let (status, schedule, _) = api
            .call(
                Method::GET,
                &format!("/v1/schedules/{id}?target_env_id={env}"),
                Some(&token),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{schedule}");
        due = next_run_at(&schedule);
        assert_eq!(due, call_of(occurrence), "{schedule}");
    }
}
