//! Why a schedule is paused: a pause may carry a note; while the schedule is paused, reading it
//! (and the pause's own answer) says who paused it, when and why; a resume clears it.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::Api;

pub async fn a_pause_says_who_when_and_why_until_the_resume(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let (status, created, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&token),
            Some(api.new_schedule(env, "noted")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["paused"], Value::Null);
    let id = created["id"].as_str().unwrap().to_owned();
    let at = |suffix: &str| format!("/v1/schedules/{id}{suffix}?target_env_id={env}");

    let (status, paused, _) = api
        .call(
            Method::POST,
            &at("/pause"),
            Some(&token),
            Some(json!({"note": "billing freeze until the 3rd"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["status"], "paused");
    assert_eq!(
        paused["paused"]["reason"], "billing freeze until the 3rd",
        "{paused}"
    );
    assert_eq!(paused["paused"]["by"], "svc-billing", "{paused}");
    let (_, read, _) = api.call(Method::GET, &at(""), Some(&token), None).await;
    assert_eq!(read["paused"], paused["paused"], "{read}");
    // A list does not read the journal per schedule.
    let (_, listed, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(listed["items"][0]["paused"], Value::Null, "{listed}");

    // A note too long, or with a NUL, is refused by its field, and changes nothing.
    let (status, problem, _) = api
        .call(
            Method::POST,
            &at("/pause"),
            Some(&token),
            Some(json!({"note": "x".repeat(501)})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "note", "{problem}");

    let (status, resumed, _) = api
        .call(Method::POST, &at("/resume"), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    let (_, read, _) = api.call(Method::GET, &at(""), Some(&token), None).await;
    assert_eq!(read["paused"], Value::Null, "resumed: {read}");

    // A pause without a note says who and when, and no reason.
    let (_, paused, _) = api
        .call(Method::POST, &at("/pause"), Some(&token), None)
        .await;
    assert_eq!(paused["paused"]["by"], "svc-billing", "{paused}");
    assert_eq!(paused["paused"]["reason"], Value::Null, "{paused}");
}
