//! Contract tests for the proxy-back client: what goes over the wire to targets and to the
//! token endpoint, and how every kind of answer (or silence) maps to a result.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, TimeZone, Utc};
use sentin8_cron::callback::{
    ConfigError, DispatchConfig, HttpDispatcher, OAuth2Settings, Secret, TokenSettings,
};
use sentin8_cron::core::clock::ManualClock;
use sentin8_cron::core::dispatch::{DispatchError, Dispatcher, FailureClass, RunRequest};
use sentin8_cron::core::model::{EnvId, JobId, ScheduleId};
use sentin8_cron::core::target::Target;
use serde_json::{Value, json};

use crate::raw_http::{RawServer, Recorded, Reply};

mod tokens;

const CLIENT_ID: &str = "cron-client";
const CLIENT_SECRET: &str = "s3cr3t-value";
/// base64("cron-client:s3cr3t-value")
const BASIC_CREDENTIALS: &str = "Y3Jvbi1jbGllbnQ6czNjcjN0LXZhbHVl";
const RUN_PATH: &str = "/v1/internal/schedules/run";

fn run_request(base_url: Option<String>) -> RunRequest {
    let schedule_id = ScheduleId::new();
    let job_id = JobId::new();
    RunRequest {
        schedule_id,
        job_id,
        domain: "billing".into(),
        schedule_type: "invoice.close".into(),
        env_id: EnvId::new(),
        payload: json!({"invoice": 42, "tags": ["eu", "monthly"]}),
        attempt: 3,
        scheduled_for: Utc.with_ymd_and_hms(2025, 3, 1, 12, 30, 0).unwrap(),
        correlation_id: schedule_id.to_string(),
        idempotency_key: format!("schedule:{schedule_id}:{job_id}"),
        base_url: Target::from_stored(base_url.map_or(json!({}), |url| json!({"baseUrl": url})))
            .base_url()
            .cloned()
            .map_err(Clone::clone),
        fence: None,
        trace: None,
        prepared: None,
    }
}

fn static_config(token: &str) -> DispatchConfig {
    DispatchConfig {
        token: TokenSettings::Static(Secret::new(token)),
        // Generous: only a guard against a hung test, the timeout test sets its own.
        job_timeout: Duration::from_secs(10),
        egress: crate::support::dev_egress(),
        ..DispatchConfig::default()
    }
}

fn oauth_config(token_server: &RawServer) -> DispatchConfig {
    DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: format!("{}/oauth/token", token_server.url()),
            client_id: CLIENT_ID.into(),
            client_secret: Secret::new(CLIENT_SECRET),
            scope: Some("schedules:run".into()),
            resource_param: Some("resource".into()),
            audience_param: Some("audience".into()),
        }),
        job_timeout: Duration::from_secs(10),
        egress: crate::support::dev_egress(),
        ..DispatchConfig::default()
    }
}

/// A token endpoint issuing `tok-1`, `tok-2`, ... with the given `expires_in`.
async fn token_server(expires_in: Value) -> RawServer {
    let issued = AtomicUsize::new(0);
    RawServer::start(move |_| {
        let n = issued.fetch_add(1, Ordering::SeqCst) + 1;
        Reply::json(
            200,
            json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": expires_in}),
        )
    })
    .await
}

async fn ok_target() -> RawServer {
    RawServer::start(|_| Reply::json(200, json!({"ok": true}))).await
}

fn bearers(server: &RawServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .map(|r| r.bearer().unwrap_or("<none>").to_owned())
        .collect()
}

#[tokio::test]
async fn posts_the_envelope_with_headers_to_the_run_path() {
    let target = RawServer::start(|_| Reply::json(200, json!({"ran": true, "items": 7}))).await;
    let dispatcher = HttpDispatcher::new(&static_config("dev-token")).unwrap();
    let request = run_request(Some(target.url()));

    let answer = dispatcher.run(&request).await.unwrap();
    assert_eq!(answer, json!({"ran": true, "items": 7}));

    let seen = target.requests();
    assert_eq!(seen.len(), 1);
    let seen = &seen[0];
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.path, RUN_PATH);
    assert_eq!(seen.header("authorization"), Some("Bearer dev-token"));
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(
        seen.header("idempotency-key"),
        Some(request.idempotency_key.as_str())
    );
    assert_eq!(
        seen.header("x-correlation-id"),
        Some(request.schedule_id.to_string().as_str())
    );
    assert_eq!(
        seen.header("user-agent"),
        Some(format!("sentin8-cron/{}", env!("CARGO_PKG_VERSION")).as_str())
    );
    // The envelope, field by field: nothing missing, nothing extra (no base_url).
    assert_eq!(
        seen.json(),
        json!({
            "schedule_id": request.schedule_id.to_string(),
            "job_id": request.job_id.to_string(),
            "domain": "billing",
            "schedule_type": "invoice.close",
            "env_id": request.env_id.to_string(),
            "payload": {"invoice": 42, "tags": ["eu", "monthly"]},
            "attempt": 3,
            "scheduled_for": "2025-03-01T12:30:00Z",
            "correlation_id": request.schedule_id.to_string(),
            "idempotency_key": format!("schedule:{}:{}", request.schedule_id, request.job_id),
        })
    );
}

#[tokio::test]
async fn base_url_path_prefixes_and_trailing_slashes_join_cleanly() {
    let target = ok_target().await;
    let dispatcher = HttpDispatcher::new(&static_config("dev-token")).unwrap();
    let cases = [
        ("", RUN_PATH.to_owned()),
        ("/", RUN_PATH.to_owned()),
        ("/billing", format!("/billing{RUN_PATH}")),
        ("/billing/", format!("/billing{RUN_PATH}")),
        ("/a/b", format!("/a/b{RUN_PATH}")),
    ];
    for (suffix, _) in &cases {
        let base = format!("{}{suffix}", target.url());
        dispatcher.run(&run_request(Some(base))).await.unwrap();
    }
    let paths: Vec<String> = target.requests().into_iter().map(|r| r.path).collect();
    let expected: Vec<String> = cases.into_iter().map(|(_, p)| p).collect();
    assert_eq!(paths, expected);
}

/// Answers according to the first path segment, so one server covers every status case.
fn canned(request: &Recorded) -> Reply {
    let case = request.path.trim_start_matches('/').split('/').next();
    match case.unwrap_or_default() {
        "ok" => Reply::json(200, json!({"ok": 1})),
        "created" => Reply::json(201, json!([1, 2])),
        "no-content" => Reply::status(204),
        "empty" => Reply::status(200),
        "html" => Reply::body(200, "text/html", b"<html>hello</html>".to_vec()),
        "nul" => Reply::body(200, "application/json", br#"{"a":"\u0000"}"#.to_vec()),
        "server-error" => Reply::json(500, json!({"error": "boom"})),
        "not-found" => Reply::status(404),
        "unavailable" => Reply::status(503),
        "redirect" => Reply::status(302).with_header("location", "/elsewhere"),
        other => panic!("unexpected case {other:?}"),
    }
}

#[tokio::test]
async fn statuses_map_to_results() {
    let target = RawServer::start(canned).await;
    let dispatcher = HttpDispatcher::new(&static_config("dev-token")).unwrap();
    let run = |case: &str| {
        let request = run_request(Some(format!("{}/{case}", target.url())));
        let dispatcher = dispatcher.clone();
        async move { dispatcher.run(&request).await }
    };

    assert_eq!(run("ok").await, Ok(json!({"ok": 1})));
    assert_eq!(run("created").await, Ok(json!([1, 2])));
    assert_eq!(run("no-content").await, Ok(Value::Null));
    assert_eq!(run("empty").await, Ok(Value::Null));

    let err = run("server-error").await.unwrap_err();
    assert_eq!(
        err,
        DispatchError::Status(500, r#"{"error":"boom"}"#.into())
    );
    assert_eq!(
        err.to_string(),
        r#"proxy-back status 500: {"error":"boom"}"#
    );
    assert_eq!(
        run("not-found").await,
        Err(DispatchError::Status(404, String::new()))
    );
    assert_eq!(
        run("unavailable").await,
        Err(DispatchError::Status(503, String::new()))
    );
    // Redirects are reported, not followed: following would re-send the token elsewhere.
    assert_eq!(
        run("redirect").await,
        Err(DispatchError::Status(302, String::new()))
    );

    // A success whose body cannot be stored is still a success, recorded as a marker.
    assert_eq!(
        run("html").await,
        Ok(json!({"sentin8_result_omitted": {"reason": "not_json", "bytes": 18}}))
    );
    assert_eq!(
        run("nul").await,
        Ok(json!({"sentin8_result_omitted": {"reason": "nul", "bytes": 14}}))
    );

    // Non-401 failures are not retried: one request per call.
    assert_eq!(target.requests().len(), 10);
    assert!(
        target
            .requests()
            .iter()
            .all(|r| !r.path.contains("elsewhere"))
    );
}

#[tokio::test]
async fn results_over_the_cap_are_stored_as_a_marker() {
    let cap = 16 * 1024;
    let big = format!(r#""{}""#, "x".repeat(cap));
    let target = RawServer::start(move |r| {
        let reply = Reply::body(200, "application/json", big.clone().into_bytes());
        // One answer announces its length, the other only ends at EOF: both paths are capped.
        if r.path.starts_with("/streamed") {
            reply.without_content_length()
        } else {
            reply
        }
    })
    .await;
    let dispatcher = HttpDispatcher::new(&static_config("dev-token")).unwrap();
    let request = run_request(Some(format!("{}/announced", target.url())));
    assert_eq!(
        dispatcher.run(&request).await,
        Ok(json!({"sentin8_result_omitted": {"reason": "too_large", "bytes": cap + 2}}))
    );
    // Unannounced, reading stops one byte past the cap.
    let request = run_request(Some(format!("{}/streamed", target.url())));
    assert_eq!(
        dispatcher.run(&request).await,
        Ok(json!({"sentin8_result_omitted": {"reason": "too_large", "bytes": cap + 1}}))
    );
    // Exactly at the cap is stored as it is; the cap is a setting.
    let fits = format!(r#""{}""#, "y".repeat(cap - 2));
    let exact = RawServer::start(move |_| {
        Reply::body(200, "application/json", fits.clone().into_bytes()).without_content_length()
    })
    .await;
    let answer = dispatcher
        .run(&run_request(Some(exact.url())))
        .await
        .unwrap();
    assert_eq!(answer.as_str().map(str::len), Some(cap - 2));
    let small = HttpDispatcher::new(&DispatchConfig {
        result_cap: 100,
        ..static_config("dev-token")
    })
    .unwrap();
    assert_eq!(
        small.run(&run_request(Some(exact.url()))).await,
        Ok(json!({"sentin8_result_omitted": {"reason": "too_large", "bytes": 101}}))
    );
}

#[tokio::test]
async fn a_silent_target_times_out() {
    let target = RawServer::start(|_| Reply::Hang).await;
    let config = DispatchConfig {
        job_timeout: Duration::from_millis(200),
        ..static_config("dev-token")
    };
    let dispatcher = HttpDispatcher::new(&config).unwrap();
    let started = Instant::now();
    let err = dispatcher
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    assert_eq!(err, DispatchError::Timeout(Duration::from_millis(200)));
    assert!(started.elapsed() < Duration::from_secs(5));
    // The request did arrive; it is the answer that never came.
    assert_eq!(target.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error() {
    // Bind then drop, leaving a port nothing listens on.
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let dispatcher = HttpDispatcher::new(&static_config("dev-token-value")).unwrap();
    let err = dispatcher
        .run(&run_request(Some(format!("http://{addr}"))))
        .await
        .unwrap_err();
    assert!(matches!(err, DispatchError::Transport(_)), "{err:?}");
    // The class only: socket text would tell a tenant what listens where.
    let text = err.to_string();
    assert_eq!(text, "proxy-back connection refused");
    assert!(!text.contains("dev-token-value"), "{text}");
}

#[tokio::test]
async fn bad_base_urls_fail_before_any_network_use() {
    let tokens = token_server(json!(3600)).await;
    let dispatcher = HttpDispatcher::new(&oauth_config(&tokens)).unwrap();

    let err = dispatcher.run(&run_request(None)).await.unwrap_err();
    assert_eq!(err, DispatchError::MissingBaseUrl);
    assert_eq!(err.to_string(), "missing baseUrl in target_config");
    assert_eq!(err.class(), FailureClass::Configuration);

    for bad in [
        "billing.internal:8080",
        "ftp://127.0.0.1/",
        "/relative/only",
        "http://127.0.0.1:99999",
    ] {
        let err = dispatcher
            .run(&run_request(Some(bad.into())))
            .await
            .unwrap_err();
        assert!(
            matches!(err, DispatchError::InvalidBaseUrl(_)),
            "{bad}: {err:?}"
        );
        assert_eq!(err.class(), FailureClass::Configuration);
    }
    assert_eq!(tokens.connections(), 0);
}

#[tokio::test]
async fn no_token_source_fails_without_calling_the_target() {
    let target = ok_target().await;
    let config = DispatchConfig {
        egress: crate::support::dev_egress(),
        ..DispatchConfig::default()
    };
    let dispatcher = HttpDispatcher::new(&config).unwrap();
    let err = dispatcher
        .run(&run_request(Some(target.url())))
        .await
        .unwrap_err();
    assert_eq!(err, DispatchError::NoTokenSource);
    assert_eq!(
        err.to_string(),
        "no M2M token source configured (set SENTIN8_CRON_TOKEN for dev)"
    );
    assert_eq!(target.connections(), 0);
}

#[test]
fn debug_output_hides_secrets() {
    let config = DispatchConfig {
        token: TokenSettings::OAuth2(OAuth2Settings {
            token_url: "https://idp.example/token".into(),
            client_id: CLIENT_ID.into(),
            client_secret: Secret::new(CLIENT_SECRET),
            scope: None,
            resource_param: None,
            audience_param: None,
        }),
        ..DispatchConfig::default()
    };
    let dispatcher = HttpDispatcher::new(&config).unwrap();
    let shown = format!("{config:?} {config:#?} {dispatcher:?}");
    assert!(!shown.contains(CLIENT_SECRET), "{shown}");
    assert!(shown.contains(CLIENT_ID));

    let dev = static_config("dev-token-value");
    assert!(!format!("{dev:?}").contains("dev-token-value"));
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn an_extra_ca_bundle_is_loaded_or_refused_clearly() {
    let with_ca = |path: std::path::PathBuf| DispatchConfig {
        ca_file: Some(path),
        ..static_config("dev-token")
    };

    HttpDispatcher::new(&with_ca(fixture("test-ca.pem"))).expect("a valid CA bundle loads");

    let err = HttpDispatcher::new(&with_ca(fixture("no-such-ca.pem"))).unwrap_err();
    assert!(matches!(err, ConfigError::CaFile { .. }), "{err:?}");
    assert!(err.to_string().contains("cannot read it"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not.pem");
    std::fs::write(&not_pem, "this is not a certificate\n").unwrap();
    let err = HttpDispatcher::new(&with_ca(not_pem)).unwrap_err();
    assert!(
        err.to_string().ends_with("contains no PEM certificates"),
        "{err}"
    );

    let broken = dir.path().join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let err = HttpDispatcher::new(&with_ca(broken)).unwrap_err();
    assert!(matches!(err, ConfigError::CaFile { .. }), "{err:?}");
}
