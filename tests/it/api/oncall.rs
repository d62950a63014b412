//! What on-call engineers asked of the API: a paused schedule refuses a trigger (saying how to
//! resume it), a job its paused schedule holds says so, pause and resume have their own audit
//! actions, and the schedule list reads deleted schedules on request.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::Value;

use super::{Api, problem_type};

async fn post(api: &Api, path: &str) -> (StatusCode, Value) {
    let (status, body, _) = api
        .call(Method::POST, path, Some(&api.writer()), None)
        .await;
    (status, body)
}

async fn get(api: &Api, path: &str) -> (StatusCode, Value) {
    let (status, body, _) = api.call(Method::GET, path, Some(&api.writer()), None).await;
    (status, body)
}

pub async fn a_paused_schedule_refuses_a_trigger_and_holds_its_jobs(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let id = api.create(env, "nightly").await;
    let (status, _) = post(
        &api,
        &format!("/v1/schedules/{id}/pause?target_env_id={env}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);

    // Refused, as a problem that says how to resume; no job waits silently.
    let (status, problem, headers) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{problem}");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:conflict");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("is paused"), "{detail}");
    assert!(
        detail.contains(&format!("POST /v1/schedules/{id}/resume")),
        "{detail}"
    );
    assert!(detail.contains("sentin8-cron schedules resume"), "{detail}");
    let (_, jobs) = get(
        &api,
        &format!("/v1/jobs?target_env_id={env}&schedule_id={id}"),
    )
    .await;
    assert_eq!(jobs["items"].as_array().unwrap().len(), 0, "{jobs}");

    // Resumed, it can be triggered; paused again, its pending job is held by the pause.
    let (status, _) = post(
        &api,
        &format!("/v1/schedules/{id}/resume?target_env_id={env}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, job) = post(
        &api,
        &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["held_by_pause"], false);
    let job_id = job["id"].as_str().unwrap().to_owned();
    let (status, _) = post(
        &api,
        &format!("/v1/schedules/{id}/pause?target_env_id={env}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, one) = get(&api, &format!("/v1/jobs/{job_id}?target_env_id={env}")).await;
    assert_eq!(
        (&one["status"], &one["held_by_pause"]),
        (&"pending".into(), &true.into())
    );
    let (_, listed) = get(&api, &format!("/v1/jobs?target_env_id={env}")).await;
    assert_eq!(listed["items"][0]["id"], job_id.as_str());
    assert_eq!(listed["items"][0]["held_by_pause"], true, "{listed}");
    // Another schedule's pending job is not held.
    let other = api.create(env, "other").await;
    let (_, free) = post(
        &api,
        &format!("/v1/schedules/{other}/trigger?target_env_id={env}"),
    )
    .await;
    let (_, listed) = get(&api, &format!("/v1/jobs?target_env_id={env}")).await;
    let held: Vec<(&str, bool)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap(),
                j["held_by_pause"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        held,
        [
            (free["id"].as_str().unwrap(), false),
            (job_id.as_str(), true)
        ]
    );
    let (status, _) = post(
        &api,
        &format!("/v1/schedules/{id}/resume?target_env_id={env}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, one) = get(&api, &format!("/v1/jobs/{job_id}?target_env_id={env}")).await;
    assert_eq!(one["held_by_pause"], false);

    // Pause and resume have their own audit actions (a status patch too).
    let (status, _, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&api.writer()),
            Some(serde_json::json!({"status": "paused"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, audit) = get(
        &api,
        &format!("/v1/audit?target_env_id={env}&schedule_id={id}"),
    )
    .await;
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "schedule.pause",
            "schedule.resume",
            "schedule.pause",
            "schedule.trigger",
            "schedule.resume",
            "schedule.pause",
            "schedule.create",
        ]
    );
}

pub async fn the_schedule_list_includes_deleted_ones_on_request(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let kept = api.create(env, "kept").await;
    let gone = api.create(env, "gone").await;
    let elsewhere = api.create(api.env_b, "elsewhere").await;
    let (status, _, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/schedules/{gone}?target_env_id={env}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, plain) = get(&api, &format!("/v1/schedules?target_env_id={env}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ids(&plain), std::slice::from_ref(&kept));
    let (status, all) = get(
        &api,
        &format!("/v1/schedules?target_env_id={env}&include_deleted=true"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(ids(&all), [kept.clone(), gone.clone()]);
    assert_eq!(all["items"][1]["status"], "deleted");
    let (_, explicit) = get(
        &api,
        &format!("/v1/schedules?target_env_id={env}&include_deleted=false"),
    )
    .await;
    assert_eq!(ids(&explicit), std::slice::from_ref(&kept));
    // With the other filters, and within the environment addressed only.
    let (_, filtered) = get(
        &api,
        &format!("/v1/schedules?target_env_id={env}&include_deleted=true&type_contains=gon"),
    )
    .await;
    assert_eq!(ids(&filtered), std::slice::from_ref(&gone));
    let (_, other) = get(
        &api,
        &format!(
            "/v1/schedules?target_env_id={}&include_deleted=true",
            api.env_b
        ),
    )
    .await;
    assert_eq!(ids(&other), [elsewhere]);
    let (status, problem) = get(
        &api,
        &format!("/v1/schedules?target_env_id={env}&include_deleted=maybe"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(
        problem_type(&problem),
        "urn:sentin8-cron:problem:invalid-request"
    );
}
