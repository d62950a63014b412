//! Health that tells the truth: `degraded` (HTTP 200) with its reasons when the bus has been
//! unreachable too long or when the outbox backlog is too old; the backlog's age in health and
//! in metrics. Calls signed but sent without a token (no M2M source) are a normal
//! configuration, and health says `ok` for them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration as StdDuration;

use chrono::Duration;
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::Clock;
use sentin8_cron::core::store::Store;
use sentin8_cron::server::system::HealthRules;
use serde_json::Value;

use crate::api::Api;
use crate::conformance::insert_event;
use crate::raw_http::{RawServer, Recorded, Reply};

/// Health as served right after a tick (this server runs no ticker of its own).
async fn health(api: &Api) -> (StatusCode, Value) {
    api.metrics
        .last_tick_unix
        .store(api.clock.now().timestamp(), Ordering::Relaxed);
    let admin = api.token(crate::api::ADMIN);
    let (status, body, _) = api
        .call(Method::GET, "/v1/health", Some(&admin), None)
        .await;
    (status, body)
}

pub async fn health_says_degraded_with_its_reasons(store: Arc<dyn Store>) {
    let rules = HealthRules {
        bus_unreachable_after: StdDuration::from_secs(60),
        outbox_backlog_age: StdDuration::from_secs(120),
    };
    let mut api = Api::start_with_health(store.clone(), rules).await;
    api.refresh_counts().await;
    let (status, body) = health(&api).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["reasons"], serde_json::json!([]));
    assert!(body["outbox_backlog_age_seconds"].is_null());

    // The bus unreachable, but not for long yet: still ok. Then too long: degraded.
    let now = api.clock.now();
    api.metrics
        .bus_unreachable_since_unix
        .store(now.timestamp(), Ordering::Relaxed);
    api.clock.advance(Duration::seconds(30));
    assert_eq!(health(&api).await.1["status"], "ok");
    api.clock.advance(Duration::seconds(60));
    let (status, body) = health(&api).await;
    assert_eq!(status, StatusCode::OK, "degraded is still 200");
    assert_eq!(body["status"], "degraded");
    let reasons = body["reasons"].to_string();
    assert!(
        reasons.contains("bus has been unreachable for 90 s"),
        "{reasons}"
    );
    api.metrics
        .bus_unreachable_since_unix
        .store(0, Ordering::Relaxed);

    // An event written now and not relayed: once older than the threshold, degraded, and
    // its age is in health and in the metrics.
    insert_event(&store, api.env_a, None, "waiting").await;
    api.clock.advance(Duration::minutes(5));
    api.refresh_counts().await;
    let (status, body) = health(&api).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "degraded", "{body}");
    let age = body["outbox_backlog_age_seconds"].as_i64().unwrap();
    assert!(age >= 300, "{body}");
    assert!(body["reasons"].to_string().contains("outbox event"));
    let (_, metrics, _) = api.call(Method::GET, "/metrics", None, None).await;
    let metrics = metrics.as_str().unwrap().to_owned();
    assert!(
        metrics.contains(&format!("sentin8_cron_outbox_backlog_age_seconds {age}")),
        "{metrics}"
    );
    api.stop().await.unwrap();
}

/// A relay over a webhook sink, sharing the API's clock and metrics (as `serve` does).
fn relay_to(api: &Api, url: &str, id: &str) -> sentin8_cron::core::relay::Relay {
    let clock: Arc<dyn Clock> = api.clock.clone();
    let sink =
        sentin8_cron::bus::WebhookSink::new(url.parse().unwrap(), None, clock.clone()).unwrap();
    sentin8_cron::core::relay::Relay::new(
        api.store.clone(),
        Arc::new(sink),
        clock,
        sentin8_cron::core::relay::RelayOptions {
            relay_id: id.into(),
            batch_size: 10,
            concurrency: 1,
            ..Default::default()
        },
        api.metrics.clone(),
    )
}

/// The bus reachability health reports is the relay's own finding: a real relay publishing to
/// a closed loopback port turns health degraded once past the threshold (on the injected
/// clock), and a publish that succeeds turns it back to ok.
pub async fn health_follows_the_relay_s_view_of_the_bus(store: Arc<dyn Store>) {
    let rules = HealthRules {
        bus_unreachable_after: StdDuration::from_secs(60),
        outbox_backlog_age: StdDuration::from_secs(3600),
    };
    let mut api = Api::start_with_health(store.clone(), rules).await;
    insert_event(&store, api.env_a, None, "waiting").await;
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        format!("http://{addr}/hook")
    };
    let down = relay_to(&api, &closed, "down");
    let summary = down.drain_once().await.unwrap();
    assert!(summary.bus_unavailable, "{summary:?}");
    assert_eq!(summary.relayed, 0);
    api.clock.advance(Duration::seconds(30));
    assert_eq!(health(&api).await.1["status"], "ok", "not for long yet");
    api.clock.advance(Duration::seconds(60));
    // Still down on the next drain: the outage is dated from its start, not the latest try.
    assert!(down.drain_once().await.unwrap().bus_unavailable);
    let (status, body) = health(&api).await;
    assert_eq!(status, StatusCode::OK, "degraded is still 200");
    assert_eq!(body["status"], "degraded", "{body}");
    assert!(
        body["reasons"]
            .to_string()
            .contains("bus has been unreachable for 90 s"),
        "{body}"
    );

    // The bus is back: one acknowledged publish and health is ok again.
    let bus = RawServer::start(|_: &Recorded| Reply::status(200)).await;
    let up = relay_to(&api, &format!("{}/hook", bus.url()), "up");
    api.clock.advance(Duration::seconds(30));
    let summary = up.drain_once().await.unwrap();
    assert_eq!(summary.relayed, 1, "{summary:?}");
    assert_eq!(bus.requests().len(), 1);
    let (status, body) = health(&api).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok", "{body}");
    api.stop().await.unwrap();
}
