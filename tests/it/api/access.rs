//! Authentication, the scope and environment policy, and tenant isolation through the API.

use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::Clock;
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::store::Store;
use serde_json::json;

use super::{ADMIN, Api, READ, WRITE, problem_type};

pub async fn bad_credentials_are_401_with_a_challenge(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let path = format!("/v1/schedules?target_env_id={}", api.env_a);
    let (status, problem, headers) = api.call(Method::GET, &path, None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["www-authenticate"], "Bearer realm=\"sentin8-cron\"");
    assert_eq!(
        problem_type(&problem),
        "urn:sentin8-cron:problem:unauthorized"
    );

    let forged = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &api.claims(ADMIN, &[]),
        &EncodingKey::from_secret(b"someone-elses-secret-that-is-long-enough!!").unwrap(),
    )
    .unwrap();
    let mut expired = api.claims(WRITE, &[api.env_a]);
    expired["exp"] = json!(api.clock.now().timestamp() - 3600);
    let expired = Api::sign(&expired);
    let mut wrong_audience = api.claims(WRITE, &[api.env_a]);
    wrong_audience["aud"] = json!("someone-else");
    let wrong_audience = Api::sign(&wrong_audience);
    // alg "none": a header and claims with an empty signature.
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let none = format!(
        "{}.{}.",
        b64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        b64.encode(api.claims(ADMIN, &[]).to_string())
    );
    for token in [
        forged.as_str(),
        expired.as_str(),
        wrong_audience.as_str(),
        none.as_str(),
        "garbage",
    ] {
        let (status, problem, headers) = api.call(Method::GET, &path, Some(token), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token}: {problem}");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(
            !problem.to_string().contains(token),
            "the token is never echoed"
        );
    }
}

pub async fn the_policy_decides_scopes_and_environments(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let id = api.create(api.env_a, "nightly").await;
    let reader = api.token(READ);
    let env = api.env_a;
    // Reading needs read; every mutation needs write.
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    for (method, path) in [
        (
            Method::POST,
            format!("/v1/schedules/{id}/pause?target_env_id={env}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/resume?target_env_id={env}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/trigger?target_env_id={env}"),
        ),
        (
            Method::DELETE,
            format!("/v1/schedules/{id}?target_env_id={env}"),
        ),
    ] {
        let (status, problem, _) = api.call(method, &path, Some(&reader), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {problem}");
        assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:forbidden");
    }
    let (status, _, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&reader),
            Some(api.new_schedule(env, "nope")),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // An environment the token does not name is forbidden, even for writers.
    let stranger = EnvId::new();
    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={stranger}"),
            Some(&api.writer()),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        problem["detail"].as_str().unwrap().contains("environment"),
        "{problem}"
    );
    // No scope at all: forbidden.
    let nothing = Api::sign(&api.claims("openid", &[env]));
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&nothing),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Admins reach every environment, named in the token or not.
    let admin = Api::sign(&api.claims(ADMIN, &[]));
    let (status, _, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&admin),
            Some(api.new_schedule(stranger, "admin-made")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

pub async fn other_tenants_resources_are_404(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let id = api.create(api.env_a, "nightly").await;
    let token = api.writer();
    let b = api.env_b;
    for (method, path) in [
        (Method::GET, format!("/v1/schedules/{id}?target_env_id={b}")),
        (
            Method::PATCH,
            format!("/v1/schedules/{id}?target_env_id={b}"),
        ),
        (
            Method::DELETE,
            format!("/v1/schedules/{id}?target_env_id={b}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/pause?target_env_id={b}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/trigger?target_env_id={b}"),
        ),
        (
            Method::POST,
            format!("/v1/schedules/{id}/backfill?target_env_id={b}"),
        ),
    ] {
        let body = if method == Method::PATCH {
            Some(json!({"status": "paused"}))
        } else if path.contains("/backfill") {
            Some(json!({"from": "2029-12-31T00:00:00Z", "to": "2029-12-31T23:00:00Z"}))
        } else {
            None
        };
        let (status, problem, _) = api.call(method, &path, Some(&token), body).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {problem}");
        assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:not-found");
    }
    let (_, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={b}"),
            Some(&token),
            None,
        )
        .await;
    assert!(list["items"].as_array().unwrap().is_empty());
    // And the schedule is untouched in its own environment.
    let (_, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={}", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(fetched["status"], "active");
}
