//! The audit journal through the API: filtered by schedule, actor and instant, newest first,
//! paged with cursors, under the same tenant rules as every read.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::json;

use super::get;
use crate::api::{Api, READ};

pub async fn the_audit_journal_is_readable_and_paged(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let first = api.create(env, "first").await;
    let second = api.create(env, "second").await;
    api.clock.advance(chrono::Duration::minutes(5));
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{first}/pause?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let (status, page) = get(&api, &format!("/v1/audit?target_env_id={env}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let actions: Vec<(&str, &str)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["schedule_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("schedule.pause", first.as_str()),
            ("schedule.create", second.as_str()),
            ("schedule.create", first.as_str()),
        ],
        "newest first"
    );
    assert_eq!(page["items"][0]["actor"], "svc-billing");
    assert_eq!(page["items"][0]["after"]["status"], "paused");

    let (_, about) = get(
        &api,
        &format!("/v1/audit?target_env_id={env}&schedule_id={second}"),
    )
    .await;
    assert_eq!(about["items"].as_array().unwrap().len(), 1);
    let since = (sentin8_cron::core::clock::Clock::now(api.clock.as_ref())).to_rfc3339();
    let (_, recent) = get(
        &api,
        &format!(
            "/v1/audit?target_env_id={env}&since={}",
            urlencoding(&since)
        ),
    )
    .await;
    assert_eq!(recent["items"].as_array().unwrap().len(), 1, "{recent}");
    let (_, nobody) = get(&api, &format!("/v1/audit?target_env_id={env}&actor=nobody")).await;
    assert!(nobody["items"].as_array().unwrap().is_empty());

    // Pages of one, following the cursor, give the same entries in the same order.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/audit?target_env_id={env}&limit=1&cursor={c}"),
            None => format!("/v1/audit?target_env_id={env}&limit=1"),
        };
        let (_, page) = get(&api, &path).await;
        let items = page["items"].as_array().unwrap();
        seen.extend(items.iter().map(|e| e["id"].clone()));
        match page["next_cursor"].as_str() {
            Some(next) if !items.is_empty() => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    let all: Vec<_> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(seen, all);

    // The same tenant rules as every read.
    let (status, _) = get(&api, "/v1/audit").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "target_env_id is required");
    let other = Api::sign(&api.claims(READ, &[api.env_b]));
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/audit?target_env_id={env}"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, elsewhere) = get(&api, &format!("/v1/audit?target_env_id={}", api.env_b)).await;
    assert_eq!(elsewhere["items"], json!([]));
    let (status, problem) = get(
        &api,
        &format!("/v1/audit?target_env_id={env}&since=yesterday"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(problem.to_string().contains("since"));
}

fn urlencoding(text: &str) -> String {
    text.replace('+', "%2B").replace(':', "%3A")
}
