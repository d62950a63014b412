//! Text PostgreSQL cannot store (U+0000) through the real API on both backends: refused with a
//! 400 naming the field, never a 500 on one backend and a 201 on the other; a target answering
//! a NUL is recorded as a success with a marker and not called again; client-supplied ids in
//! the audit are capped. Run on SQLite and PostgreSQL.

use std::sync::Arc;

use chrono::Duration;
use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::{Api, WRITE};
use crate::raw_http::{RawServer, Recorded, Reply};

/// A 400 naming `field` alone, for a NUL.
fn assert_field(status: StatusCode, body: &Value, field: &str) {
    assert_named(status, body, field);
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("NUL")),
        "{body}"
    );
}

/// A 400 naming `field` alone.
fn assert_named(status: StatusCode, body: &Value, field: &str) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["type"], "urn:sentin8-cron:problem:invalid-request");
    let fields: Vec<&str> = body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no field errors: {body}"))
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert_eq!(fields, [field], "{body}");
}

pub async fn nul_inputs_are_400_naming_the_field(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let create = |body: Value| {
        let (api, token) = (&api, &token);
        async move {
            let (status, body, _) = api
                .call(Method::POST, "/v1/schedules", Some(token), Some(body))
                .await;
            (status, body)
        }
    };

    let mut body = api.new_schedule(env, "nul-value");
    body["payload"] = json!({"note": "a\u{0}b"});
    let (status, problem) = create(body).await;
    assert_field(status, &problem, "payload.note");

    let mut body = api.new_schedule(env, "nul-key");
    body["payload"] = json!({"ok": 1, "bad\u{0}key": 2});
    let (status, problem) = create(body).await;
    assert_field(status, &problem, "payload.bad\\u0000key");

    let mut body = api.new_schedule(env, "nul-nested");
    body["payload"] = json!({"items": [{"name": "fine"}, {"name": "\u{0}"}]});
    let (status, problem) = create(body).await;
    assert_field(status, &problem, "payload.items[1].name");

    let mut body = api.new_schedule(env, "nul-target");
    body["target_config"]["label"] = json!("x\u{0}");
    let (status, problem) = create(body).await;
    assert_field(status, &problem, "target_config.label");

    let mut body = api.new_schedule(env, "nul-domain");
    body["domain"] = json!("bill\u{0}ing");
    let (status, problem) = create(body).await;
    // Names are plain ASCII, which leaves NUL out.
    assert_named(status, &problem, "domain");
    let mut body = api.new_schedule(env, "nul\u{0}type");
    body["domain"] = json!("billing");
    let (status, problem) = create(body).await;
    assert_named(status, &problem, "schedule_type");

    // A patch of the payload is checked the same way.
    let id = api.create(env, "clean").await;
    let (status, problem, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "payload": {"k": "\u{0}"}})),
        )
        .await;
    assert_field(status, &problem, "payload.k");

    // A filter is compared with stored text.
    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}&domain=bill%00ing"),
            Some(&token),
            None,
        )
        .await;
    assert_field(status, &problem, "domain");

    // A token whose subject holds a NUL cannot be recorded as the actor of a change.
    let mut claims = api.claims(WRITE, &[env]);
    claims["sub"] = json!("svc\u{0}billing");
    let odd = Api::sign(&claims);
    let (status, problem, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&odd),
            Some(api.new_schedule(env, "nul-sub")),
        )
        .await;
    assert_field(status, &problem, "sub");

    // Nothing but the clean schedule was written.
    let (status, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let types: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["schedule_type"].as_str())
        .collect();
    assert_eq!(types, ["clean"]);
}

pub async fn an_unstorable_response_is_a_success_with_a_marker(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let target = RawServer::start(|_: &Recorded| {
        Reply::body(
            200,
            "application/json",
            br#"{"done": true, "note": "a\u0000b"}"#.to_vec(),
        )
    })
    .await;
    let mut body = api.new_schedule(env, "nul-answer");
    body["target_config"] = json!({"baseUrl": target.url()});
    let (_, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, job, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");

    let engine = api.engine();
    let summary = engine.tick().await.unwrap();
    assert_eq!(summary.succeeded, 1, "{summary:?}");
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
    assert_eq!(fetched["status"], "succeeded", "{fetched}");
    assert_eq!(
        fetched["result"],
        json!({"sentin8_result_omitted": {"reason": "nul", "bytes": 34}})
    );

    // Long past the point where a stuck attempt would be recovered, it is not sent again.
    api.clock.advance(Duration::minutes(10));
    engine.tick().await.unwrap();
    assert_eq!(target.requests().len(), 1);
}

pub async fn client_supplied_ids_are_capped_in_the_audit(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let mut claims = api.claims(WRITE, &[env]);
    claims["sub"] = json!("s".repeat(1000));
    let token = Api::sign(&claims);
    let response = api
        .http
        .post(format!("{}/v1/schedules", api.base))
        .bearer_auth(&token)
        .header("x-request-id", "r".repeat(1000))
        .json(&api.new_schedule(env, "capped"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);

    let mut tx = api.store.tenant_begin(env).await.unwrap();
    let audit = tx.audit_list(10).await.unwrap();
    tx.commit().await.unwrap();
    let [entry] = audit.as_slice() else {
        panic!("one audit entry expected: {audit:?}");
    };
    assert_eq!(entry.actor, "s".repeat(256));
    assert_eq!(
        entry.correlation_id.as_deref(),
        Some("r".repeat(256).as_str())
    );
}

#[macro_export]
macro_rules! nul_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::nul as suite;
            $crate::nul_suite!(@tests $make;
                nul_inputs_are_400_naming_the_field,
                an_unstorable_response_is_a_success_with_a_marker,
                client_supplied_ids_are_capped_in_the_audit,
            );
        }
    };
    (@tests $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((store, _guard)) = $make.await else { return };
                suite::$name(store).await;
            }
        )+
    };
}
