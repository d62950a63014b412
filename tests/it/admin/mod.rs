//! The admin pages' JSON endpoints and HTML shells, through the real `Service` on port 0: the
//! same authentication, policy and tenant transactions as the API. Run on SQLite and
//! PostgreSQL.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::model::EnvId;
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::{ADMIN, Api, READ};

mod pages;
mod runs;
mod views;

pub use pages::*;
pub use runs::*;
pub use views::*;

pub(crate) fn fields(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .map(|e| e["field"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A 400 naming exactly `field` (among possibly others), with a message containing `text`.
pub(crate) fn assert_field(status: StatusCode, problem: &Value, field: &str, text: &str) {
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let error = problem["errors"]
        .as_array()
        .and_then(|errors| errors.iter().find(|e| e["field"] == field))
        .unwrap_or_else(|| panic!("no error for {field}: {problem}"));
    assert!(
        error["message"].as_str().unwrap_or_default().contains(text),
        "{field}: {problem}"
    );
}

pub(crate) fn enc(text: &str) -> String {
    text.replace(' ', "%20")
        .replace('/', "%2F")
        .replace('+', "%2B")
}

pub async fn admin_endpoints_need_a_token_a_scope_and_an_environment(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let a = api.env_a;
    let with_env = [
        "/v1/admin/overview",
        "/v1/admin/schedules",
        "/v1/admin/preview?cron=*%20*%20*%20*%20*",
    ];
    let join = |path: &str, env: &str| {
        let separator = if path.contains('?') { '&' } else { '?' };
        format!("{path}{separator}target_env_id={env}")
    };
    let mut all: Vec<String> = vec!["/v1/admin/envs".to_owned()];
    all.extend(with_env.iter().map(|p| join(p, &a.to_string())));

    // No token, or a bad one: 401 with the challenge.
    for path in &all {
        let (status, problem, headers) = api.call(Method::GET, path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}: {problem}");
        assert!(headers.contains_key("www-authenticate"), "{path}");
        let (status, _, _) = api.call(Method::GET, path, Some("garbage"), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    // A token without any of the three scopes: 403, whether or not an environment is named.
    let nothing = Api::sign(&api.claims("openid profile", &[a]));
    for path in all.iter().map(String::as_str).chain(with_env) {
        let (status, problem, _) = api.call(Method::GET, path, Some(&nothing), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {problem}");
        assert_eq!(problem["type"], "urn:sentin8-cron:problem:forbidden");
    }
    // target_env_id is required: a 400 naming it, never a fallback to the token's list.
    let writer = api.writer();
    for path in with_env {
        let (status, problem, _) = api.call(Method::GET, path, Some(&writer), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {problem}");
        assert_eq!(fields(&problem), ["target_env_id"], "{path}");
    }
    // An environment the token does not grant: 403, even for a writer.
    let stranger = EnvId::new().to_string();
    for path in with_env {
        let (status, problem, _) = api
            .call(Method::GET, &join(path, &stranger), Some(&writer), None)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {problem}");
        assert!(
            problem["detail"].as_str().unwrap().contains("environment"),
            "{problem}"
        );
    }
    // The read scope is enough for every admin read; admins reach any environment.
    let reader = api.token(READ);
    let admin = Api::sign(&api.claims(ADMIN, &[]));
    for path in &all {
        let (status, body, _) = api.call(Method::GET, path, Some(&reader), None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    for path in with_env {
        let (status, body, _) = api
            .call(Method::GET, &join(path, &stranger), Some(&admin), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    // Unknown parameters are refused, as on the API.
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={a}&colour=blue"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

pub async fn envs_lists_what_the_token_grants(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let mut granted = vec![api.env_a.0.to_string(), api.env_b.0.to_string()];
    granted.sort();

    let (status, reader, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&api.token(READ)), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{reader}");
    assert_eq!(reader["subject"], "svc-billing");
    assert_eq!(reader["all"], false);
    assert_eq!(reader["can_write"], false);
    assert_eq!(reader["dev"], false);
    let mut envs: Vec<String> = reader["envs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect();
    envs.sort();
    assert_eq!(envs, granted);

    let (_, writer, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&api.writer()), None)
        .await;
    assert_eq!(writer["can_write"], true);
    assert_eq!(writer["all"], false);

    let admin = Api::sign(&api.claims(ADMIN, &[]));
    let (status, all, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&admin), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(all["all"], true);
    assert_eq!(all["envs"], json!([]));
    assert_eq!(all["can_write"], true);

    let (_, none, _) = api
        .call(
            Method::GET,
            "/v1/admin/envs",
            Some(&Api::sign(&api.claims(READ, &[]))),
            None,
        )
        .await;
    assert_eq!(none["envs"], json!([]), "a reader of nothing");
}

#[macro_export]
macro_rules! admin_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::admin as suite;
            $crate::admin_suite!(@tests $make;
                admin_endpoints_need_a_token_a_scope_and_an_environment,
                envs_lists_what_the_token_grants,
                overview_counts_failures_and_next_fires,
                schedules_show_their_next_fires_in_their_zone,
                schedules_and_the_preview_show_the_calls_their_policies_make,
                preview_validates_like_creation_and_names_the_field,
                pages_are_public_shells_with_a_strict_policy,
                runs_sum_a_window_hour_by_hour,
                admins_are_offered_the_environments_that_hold_data,
                schedules_are_searched_by_type_and_described_in_words,
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
