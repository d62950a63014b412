//! The API's rate limits through the real server on port 0: a client over its budget, then an
//! environment over its budget, answered 429 with `Retry-After` and a problem document, while
//! other clients and environments are served; time moved on the injected clock refills them.

use chrono::Duration;
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::Clock as _;
use sentin8_cron::server::listener::ListenerLimits;
use sentin8_cron::server::rate::{Rate, RateSettings};

use crate::api::{Api, READ};

fn path(env: sentin8_cron::core::model::EnvId) -> String {
    format!("/v1/schedules?target_env_id={env}")
}

#[tokio::test]
async fn a_client_or_an_environment_over_its_budget_gets_429_and_others_are_served() {
    let limits = ListenerLimits {
        rate: RateSettings {
            per_client: Rate {
                per_second: 1.0,
                burst: 3.0,
            },
            per_env: Rate {
                per_second: 2.0,
                burst: 5.0,
            },
        },
        ..ListenerLimits::default()
    };
    let store = crate::support::sqlite_store().await;
    let api = Api::start_listening(store, axum::Router::new(), false, None, limits, None).await;
    let sign = |sub: &str| {
        let mut claims = api.claims(READ, &[api.env_a, api.env_b]);
        claims["sub"] = sub.into();
        Api::sign(&claims)
    };
    let (alice, bob, carol) = (sign("alice"), sign("bob"), sign("carol"));
    let get = |token: String, env| {
        let api = &api;
        async move { api.call(Method::GET, &path(env), Some(&token), None).await }
    };

    // Alice's burst of 3, then 429 with the wait for her next request.
    for _ in 0..3 {
        let (status, body, _) = get(alice.clone(), api.env_a).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body, headers) = get(alice.clone(), api.env_a).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(body["type"], "urn:sentin8-cron:problem:rate-limited");
    assert!(
        body["detail"].as_str().unwrap().contains("this client's"),
        "{body}"
    );

    // Bob is another client: env A still has 2 of its 5; then env A is over its budget for
    // everyone, while env B is served.
    for _ in 0..2 {
        let (status, body, _) = get(bob.clone(), api.env_a).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (status, body, headers) = get(carol.clone(), api.env_a).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("this environment's"),
        "{body}"
    );
    assert_eq!(headers["retry-after"], "1");
    let (status, body, _) = get(carol.clone(), api.env_b).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A second later both have refilled a little.
    api.clock.advance(Duration::seconds(1));
    let (status, body, _) = get(alice.clone(), api.env_a).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Refused requests are cheap and counted, without tenant labels.
    let metrics = api.text("/metrics").await;
    assert!(
        metrics.contains("sentin8_cron_api_rate_limit_total{outcome=\"limited_client\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sentin8_cron_api_rate_limit_total{outcome=\"limited_environment\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sentin8_cron_api_rate_limit_total{outcome=\"allowed\"} 7"),
        "{metrics}"
    );
    assert!(!metrics.contains(&api.env_a.to_string()));
}

#[tokio::test]
async fn a_caller_cannot_spend_another_environment_s_budget() {
    let limits = ListenerLimits {
        rate: RateSettings {
            per_client: Rate::OFF,
            per_env: Rate {
                per_second: 1.0,
                burst: 2.0,
            },
        },
        ..ListenerLimits::default()
    };
    let store = crate::support::sqlite_store().await;
    let api = Api::start_listening(store, axum::Router::new(), false, None, limits, None).await;
    // A token for env A only, aimed at env B: refused by the policy, before any budget.
    let only_a = Api::sign(&api.claims(READ, &[api.env_a]));
    for _ in 0..5 {
        let (status, _, _) = api
            .call(Method::GET, &path(api.env_b), Some(&only_a), None)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let owner = Api::sign(&api.claims(READ, &[api.env_b]));
    for _ in 0..2 {
        let (status, body, _) = api
            .call(Method::GET, &path(api.env_b), Some(&owner), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

/// A backfill pays its environment's rate by the occurrences it queued, as far as the bucket
/// holds: the environment's next request waits for the refill; another environment pays
/// nothing.
#[tokio::test]
async fn a_backfill_is_charged_to_its_environment_by_its_occurrences() {
    let limits = ListenerLimits {
        rate: RateSettings {
            per_client: Rate::OFF,
            per_env: Rate {
                per_second: 2.0,
                burst: 5.0,
            },
        },
        ..ListenerLimits::default()
    };
    let store = crate::support::sqlite_store().await;
    let api = Api::start_listening(store, axum::Router::new(), false, None, limits, None).await;
    let token = api.writer();
    let mut schedule = api.new_schedule(api.env_a, "hourly");
    schedule["cron"] = "* * * * *".into();
    let (status, created, _) = api
        .call(Method::POST, &path(api.env_a), Some(&token), Some(schedule))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let now = api.clock.now();
    let range = serde_json::json!({
        "from": (now - Duration::minutes(9)).to_rfc3339(),
        "to": now.to_rfc3339(),
    });
    let backfill = format!(
        "/v1/schedules/{}/backfill?target_env_id={}",
        created["id"].as_str().unwrap(),
        api.env_a
    );
    let (status, body, _) = api
        .call(Method::POST, &backfill, Some(&token), Some(range))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["occurrences"], 10);

    // Two requests of five were spent; without the charge three would remain.
    let (status, body, headers) = api
        .call(Method::GET, &path(api.env_a), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers["retry-after"], "1");
    let (status, body, _) = api
        .call(Method::GET, &path(api.env_b), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "another environment: {body}");
    api.clock.advance(Duration::seconds(1));
    let (status, body, _) = api
        .call(Method::GET, &path(api.env_a), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "refilled: {body}");
}
