//! `GET /v1/schedules/{id}/describe`: the next calls with their jitter, the open job, the
//! recent jobs and the counts of the last days, as the engine left them; a pause's reason; a
//! schedule of another environment is not found.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::{Api, READ};
use crate::support::t0;

fn instant(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|| panic!("an instant: {value}"))
}

pub async fn a_schedule_is_described_with_its_next_calls_jobs_and_counts(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let mut body = api.new_schedule(env, "described");
    body["cron"] = json!("*/5 * * * *");
    body["timezone"] = json!("UTC");
    body["max_jitter"] = json!("30s");
    body["max_retries"] = json!(0);
    let (status, created, _) = api
        .call(
            Method::POST,
            "/v1/schedules",
            Some(&api.writer()),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let describe = || async {
        let (status, described, _) = api
            .call(
                Method::GET,
                &format!("/v1/schedules/{id}/describe?target_env_id={env}"),
                Some(&api.token(READ)),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{described}");
        described
    };

    let fresh = describe().await;
    assert_eq!(fresh["schedule"]["id"], id);
    assert_eq!(fresh["open_job"], Value::Null);
    assert_eq!(fresh["recent_jobs"], json!([]));
    let upcoming = fresh["upcoming"].as_array().unwrap();
    assert_eq!(upcoming.len(), 5, "{fresh}");
    for (i, call) in upcoming.iter().enumerate() {
        let occurrence = instant(&call["occurrence"]);
        let at = instant(&call["at"]);
        assert_eq!(occurrence, t0() + Duration::minutes(5 * (i as i64 + 1)));
        assert!(
            at >= occurrence && at < occurrence + Duration::seconds(30),
            "{call}"
        );
    }
    assert_eq!(
        instant(&upcoming[0]["at"]),
        instant(&fresh["schedule"]["next_run_at"])
    );
    assert_eq!(fresh["counts"]["succeeded"], 0);

    // The first call runs; then an hour passes with nobody ticking: the latest occurrence in
    // the catch-up window runs late and the ones before it are one missed record.
    let engine = api.engine();
    api.clock
        .set(instant(&upcoming[0]["at"]) + Duration::seconds(1));
    engine.tick().await.unwrap();
    api.clock
        .set(t0() + Duration::minutes(65) + Duration::seconds(31));
    engine.tick().await.unwrap();
    let later = describe().await;
    let counts = &later["counts"];
    assert_eq!(counts["succeeded"], 2, "{later}");
    assert_eq!(counts["failed"], 0);
    assert_eq!(counts["skipped"], 0);
    let recent = later["recent_jobs"].as_array().unwrap();
    assert_eq!(recent.len(), 3, "two calls and the missed record: {later}");
    let missed = recent
        .iter()
        .find(|job| job["missed"].is_object())
        .expect("the missed record");
    assert_eq!(counts["missed"], missed["missed"]["count"], "{later}");
    assert_eq!(counts["missed"], 11, "00:10 to 01:00: {later}");
    assert_eq!(instant(&counts["since"]), api_now(&api) - Duration::days(7));
    assert_eq!(later["open_job"], Value::Null);

    // Paused with a note: why and by whom, and no next call.
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{id}/pause?target_env_id={env}"),
            Some(&api.writer()),
            Some(json!({"note": "quarter close"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let paused = describe().await;
    assert_eq!(paused["schedule"]["paused"]["reason"], "quarter close");
    assert_eq!(paused["upcoming"], json!([]));

    // Another environment's token, or another environment's id, finds nothing.
    let (status, _, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{id}/describe?target_env_id={}", api.env_b),
            Some(&api.token(READ)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

fn api_now(api: &Api) -> DateTime<Utc> {
    use sentin8_cron::core::clock::Clock as _;
    api.clock.now()
}
