//! Creating, reading, changing and validating schedules through the API.

use std::sync::Arc;

use chrono::{DateTime, Duration};
use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use super::{Api, problem_type};

pub async fn schedule_lifecycle(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let (status, created, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&token),
            Some(api.new_schedule(api.env_a, "nightly")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"], "active");
    assert_eq!(created["cron"], "0 2 * * *");
    assert_eq!(created["timezone"], "Europe/London");
    assert_eq!(created["next_run_at"], "2030-01-01T02:00:00Z");
    assert_eq!(created["created_by"], "svc-billing");
    let id = created["id"].as_str().unwrap();
    let env = api.env_a.to_string();

    let (status, fetched, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(fetched, created);

    let (status, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}&domain=billing"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(list["next_cursor"], Value::Null);

    // Patch: a new expression is validated and the next fire recomputed.
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "cron": "30 6 * * MON-FRI", "payload": {"report": "weekday"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["cron"], "30 6 * * MON-FRI");
    assert_eq!(patched["payload"], json!({"report": "weekday"}));
    assert_eq!(patched["next_run_at"], "2030-01-01T06:30:00Z");

    // Pause, then resume a day later: the next fire is recomputed from now.
    let (status, paused, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/pause?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(paused["status"], "paused");
    api.clock.advance(Duration::days(2));
    let token = api.writer();
    let (status, resumed, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/resume"),
            Some(&token),
            Some(json!({"target_env_id": env})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["status"], "active");
    assert_eq!(resumed["next_run_at"], "2030-01-03T06:30:00Z");
    let (_, via_patch, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "status": "paused"})),
        )
        .await;
    assert_eq!(via_patch["status"], "paused");
    // A patch's target goes through the same parser.
    let (status, problem, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}"),
            Some(&token),
            Some(json!({"target_env_id": env, "target_config": {"baseUrl": "http://127.0.0.1:99999"}})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "target_config.baseUrl");

    // Delete (soft): gone from the API, but the row stays for audit and DLQ references.
    let (status, deleted, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deleted["status"], "deleted");
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert!(list["items"].as_array().unwrap().is_empty());

    // The POST alias deletes too.
    let other = api.create(api.env_a, "other").await;
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{other}/delete?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Every mutation wrote its event and an audit entry naming the caller.
    let mut tx = api.store.tenant_begin(api.env_a).await.unwrap();
    let events: Vec<String> = tx
        .outbox_list(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert_eq!(
        events,
        [
            "io.sentin8.cron.schedule.created.v1",
            "io.sentin8.cron.schedule.updated.v1",
            "io.sentin8.cron.schedule.paused.v1",
            "io.sentin8.cron.schedule.resumed.v1",
            "io.sentin8.cron.schedule.paused.v1",
            "io.sentin8.cron.schedule.deleted.v1",
            "io.sentin8.cron.schedule.created.v1",
            "io.sentin8.cron.schedule.deleted.v1",
        ]
    );
    let audit = tx.audit_list(100).await.unwrap();
    assert_eq!(audit.len(), 8);
    assert!(audit.iter().all(|a| a.actor == "svc-billing"));
    assert!(
        audit.iter().all(|a| a.correlation_id.is_some()),
        "the request id correlates"
    );
}

pub async fn one_shot_schedules_are_created_and_validated(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let body = json!({
        "target_env_id": env, "domain": "billing", "schedule_type": "migrate-accounts",
        "run_at": "2030-06-01T12:00:00Z", "target_config": {"baseUrl": "https://billing.internal"},
    });
    let (status, created, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&api.writer()),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "once");
    assert_eq!(created["next_run_at"], "2030-06-01T12:00:00Z");
    let past = json!({
        "target_env_id": env, "domain": "billing", "schedule_type": "late",
        "run_at": "2020-01-01T00:00:00Z", "target_config": {"baseUrl": "https://billing.internal"},
    });
    let (status, problem, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&api.writer()),
            Some(past),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "run_at");
}

pub async fn invalid_requests_are_400_naming_every_field(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let post = |body: Value| api.call(Method::POST, "/v1/schedules", Some(&token), Some(body));

    // Missing target_env_id: never a fallback to the token's environments.
    let mut body = api.new_schedule(api.env_a, "x");
    body.as_object_mut().unwrap().remove("target_env_id");
    let (status, problem, headers) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(
        problem_type(&problem),
        "urn:sentin8-cron:problem:invalid-request"
    );
    assert_eq!(problem["errors"][0]["field"], "target_env_id");

    // Several problems at once: all reported.
    let mut body = api.new_schedule(api.env_a, "x");
    body["cron"] = json!("61 * * * *");
    body["timezone"] = json!("Mars/Olympus");
    body["target_config"] =
        json!({"baseUrl": "https://x", "headers": {"Authorization": "Bearer t"}});
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert!(fields.contains(&"cron"), "{problem}");
    assert!(fields.contains(&"timezone"), "{problem}");
    assert!(
        fields.contains(&"target_config.headers.Authorization"),
        "{problem}"
    );
    let cron_error = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["field"] == "cron")
        .unwrap();
    assert!(
        cron_error["message"]
            .as_str()
            .unwrap()
            .contains("minute: 61 is out of range 0-59"),
        "{problem}"
    );

    let mut body = api.new_schedule(api.env_a, "x");
    body["cron"] = json!("0 0 30 2 *");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(problem.to_string().contains("no future fire"), "{problem}");

    let mut body = api.new_schedule(api.env_a, "x");
    body["target_config"] = json!({"baseUrl": "not-a-url"});
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(problem["errors"][0]["field"], "target_config.baseUrl");

    // Base URLs the callback could not use are refused with the dispatcher's own parser.
    for bad in [
        "http://127.0.0.1:99999",
        "ftp://billing.internal",
        "http://billing.internal/\r\nX-Evil: 1",
        "https://svc@billing.internal",
    ] {
        let mut body = api.new_schedule(api.env_a, "x");
        body["target_config"] = json!({"baseUrl": bad});
        let (status, problem, _) = post(body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad:?}: {problem}");
        assert_eq!(
            problem["errors"][0]["field"], "target_config.baseUrl",
            "{bad:?}: {problem}"
        );
    }

    let mut body = api.new_schedule(api.env_a, "x");
    body["colour"] = json!("blue");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        problem["detail"].as_str().unwrap().contains("colour"),
        "{problem}"
    );

    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/not-a-uuid?target_env_id={}", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/jobs?target_env_id={}&limit=1000", api.env_a),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = api.call(Method::GET, "/v1/dlq", Some(&token), None).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "GET needs target_env_id too"
    );

    // A body that is not JSON at all.
    let response = api
        .http
        .post(format!("{}/v1/schedules", api.base))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
}

pub async fn policy_fields_are_validated_by_field(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let post = |body: Value| api.call(Method::POST, "/v1/schedules", Some(&token), Some(body));
    let field_of = |problem: &Value, field: &str| -> String {
        problem["errors"]
            .as_array()
            .and_then(|errors| errors.iter().find(|e| e["field"] == field))
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("no error for {field}: {problem}"))
    };

    // An unknown policy name, a misspelt DST rule, a number as text and a bad domain: each
    // reported by its field, none hiding another, no position in the text shown.
    let mut body = api.new_schedule(api.env_a, "x");
    body["overlap"] = json!("queue");
    body["on_dst_gap"] = json!("skipp");
    body["max_retries"] = json!("three");
    body["domain"] = json!("bad domain");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert!(field_of(&problem, "overlap").contains("queue"), "{problem}");
    assert!(
        field_of(&problem, "on_dst_gap").contains("skipp"),
        "{problem}"
    );
    field_of(&problem, "max_retries");
    field_of(&problem, "domain");
    assert!(!problem.to_string().contains(" column "), "{problem}");
    // The same for a change.
    let (_, created, _) = post(api.new_schedule(api.env_a, "lenient")).await;
    let path = format!(
        "/v1/schedules/{}?target_env_id={}",
        created["id"].as_str().unwrap(),
        api.env_a
    );
    let (status, problem, _) = api
        .call(
            Method::PATCH,
            &path,
            Some(&token),
            Some(json!({"overlap": "queue", "pause_on_failure": "yes"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    field_of(&problem, "overlap");
    field_of(&problem, "pause_on_failure");
    // A field of the wrong type elsewhere is one field error, without the position.
    let mut body = api.new_schedule(api.env_a, "x");
    body["payload"] = json!("not an object");
    body["timezone"] = json!(7);
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert!(!problem.to_string().contains(" column "), "{problem}");

    // A jitter longer than the interval, an end before the start, a catch-up window out of
    // range: every one reported, each by its field.
    let mut body = api.new_schedule(api.env_a, "x");
    body["cron"] = json!("*/5 * * * *");
    body["max_jitter"] = json!("10m");
    body["start_at"] = json!("2031-01-01T00:00:00Z");
    body["end_at"] = json!("2030-06-01T00:00:00Z");
    body["catchup_window"] = json!("400d");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert!(
        field_of(&problem, "max_jitter").contains("longer than the schedule's interval"),
        "{problem}"
    );
    assert!(
        field_of(&problem, "end_at").contains("is not after start_at"),
        "{problem}"
    );
    assert!(
        field_of(&problem, "catchup_window").contains("out of range"),
        "{problem}"
    );

    // Valid policies are stored and shown, and a patch can clear a bound with null.
    let mut body = api.new_schedule(api.env_a, "x");
    body["overlap"] = json!("allow_all");
    body["end_at"] = json!("2031-01-01T00:00:00Z");
    let (status, created, _) = post(body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["overlap"], "allow_all");
    assert_eq!(created["catchup_window"], "1h");
    assert_eq!(created["max_jitter"], "0s");
    let id = created["id"].as_str().unwrap();
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{id}?target_env_id={}", api.env_a),
            Some(&token),
            Some(json!({"end_at": null, "overlap": "skip"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["end_at"], Value::Null);
    assert_eq!(patched["overlap"], "skip");
    assert_eq!(patched["after_completion"], "keep", "the default");

    // Deleted once completed: only for a schedule that completes, and kept so by a patch.
    let mut body = api.new_schedule(api.env_a, "x");
    body["after_completion"] = json!("delete");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert!(
        field_of(&problem, "after_completion").contains("a schedule that completes"),
        "{problem}"
    );
    let mut body = api.new_schedule(api.env_a, "x");
    body["after_completion"] = json!("later");
    let (status, problem, _) = post(body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert!(
        field_of(&problem, "after_completion").contains("later"),
        "{problem}"
    );
    let mut body = api.new_schedule(api.env_a, "counted");
    body["after_completion"] = json!("delete");
    body["remaining_runs"] = json!(3);
    let (status, created, _) = post(body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["after_completion"], "delete");
    let id = created["id"].as_str().unwrap();
    let path = format!("/v1/schedules/{id}?target_env_id={}", api.env_a);
    let (status, problem, _) = api
        .call(
            Method::PATCH,
            &path,
            Some(&token),
            Some(json!({"remaining_runs": null})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    field_of(&problem, "after_completion");
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &path,
            Some(&token),
            Some(json!({"remaining_runs": null, "after_completion": "keep"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(
        (&patched["after_completion"], &patched["remaining_runs"]),
        (&json!("keep"), &Value::Null)
    );
}

pub async fn intervals_are_created_shown_and_patched_through_the_api(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let mut body = api.new_schedule(api.env_a, "interval");
    body.as_object_mut().unwrap().remove("cron");
    body["every"] = json!("90s");
    body["phase"] = json!("15s");
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        (
            &created["kind"],
            &created["cron"],
            &created["every"],
            &created["phase"]
        ),
        (
            &json!("cron"),
            &json!("@every 1m30s phase 15s"),
            &json!("1m30s"),
            &json!("15s")
        ),
        "{created}"
    );
    let description = created["description"].as_str().unwrap();
    assert!(
        description.starts_with("every 90 seconds, from 00:00:15 UTC"),
        "{description}"
    );
    let next = DateTime::parse_from_rfc3339(created["next_run_at"].as_str().unwrap()).unwrap();
    assert_eq!((next.timestamp() - 15).rem_euclid(90), 0, "{next}");
    // A patch gives it another interval through the expression.
    let path = format!(
        "/v1/schedules/{}?target_env_id={}",
        created["id"].as_str().unwrap(),
        api.env_a
    );
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &path,
            Some(&token),
            Some(json!({"cron": "@every 2m"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(
        (&patched["every"], &patched["phase"]),
        (&json!("2m"), &json!("0s"))
    );
    // A cron schedule shows neither.
    let (_, cron, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&token),
            Some(api.new_schedule(api.env_a, "plain")),
        )
        .await;
    assert_eq!(
        (&cron["every"], &cron["phase"]),
        (&Value::Null, &Value::Null)
    );
    // Refused by field: a phase not shorter than the interval, both every and cron.
    let mut body = api.new_schedule(api.env_a, "bad-interval");
    body["every"] = json!("1m");
    body["phase"] = json!("2m");
    let (status, problem, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert_eq!(fields, ["cron", "phase"], "{problem}");
}
