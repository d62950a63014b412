//! Jobs, the dead-letter queue and paging through the API.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::json;

use super::{Api, READ, problem_type};
use crate::raw_http::{RawServer, Recorded, Reply};

pub async fn jobs_and_the_dlq_through_the_api(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let mut body = api.new_schedule(env, "doomed");
    body["max_retries"] = json!(0);
    body["target_config"] = json!({"baseUrl": failing.url()});
    let (_, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    let id = created["id"].as_str().unwrap().to_owned();

    // Trigger runs it now; a second trigger while the job is open is a conflict.
    let (status, job, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["status"], "pending");
    let (status, problem, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:conflict");

    let engine = api.engine();
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1);

    let job_id = job["id"].as_str().unwrap();
    let (status, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs/{job_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched["status"], "failed");
    assert_eq!(fetched["error"], "proxy-back status 500");
    let (_, jobs, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={env}&schedule_id={id}&status=failed"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(jobs["items"].as_array().unwrap().len(), 1);

    let (status, dlq, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq?target_env_id={env}&domain=billing"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let entry = &dlq["items"][0];
    assert_eq!(entry["job_id"], json!(job_id));
    let dlq_id = entry["id"].as_str().unwrap().to_owned();
    let (status, one, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq/{dlq_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["attempts"], 1);
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq/{dlq_id}?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "not visible from another environment"
    );

    let (status, republished, _) = api
        .call(
            Method::POST,
            &format!("/v1/dlq/{dlq_id}/republish"),
            Some(&token),
            Some(json!({"target_env_id": env})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{republished}");
    assert_eq!(republished["status"], "pending");
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq/{dlq_id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "republished entries leave the DLQ"
    );
    engine.tick().await.unwrap();

    // Retrying a failed job puts it back to pending and removes its DLQ entry.
    let new_job = republished["id"].as_str().unwrap();
    let (_, after, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs/{new_job}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(after["status"], "failed");
    let (status, retried, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{new_job}/retry?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{retried}");
    assert_eq!(retried["status"], "pending");
    let (_, dlq, _) = api
        .call(
            Method::GET,
            &format!("/v1/dlq?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert!(dlq["items"].as_array().unwrap().is_empty(), "{dlq}");
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/jobs/{new_job}/retry?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a pending job is not retried again"
    );
    assert_eq!(failing.requests().len(), 2);
}

pub async fn lists_page_with_cursors(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(api.create(api.env_a, &format!("t{i}")).await);
    }
    let token = api.token(READ);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/schedules?target_env_id={}&limit=2", api.env_a);
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page, _) = api.call(Method::GET, &path, Some(&token), None).await;
        assert_eq!(status, StatusCode::OK);
        for item in page["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ids);
}
