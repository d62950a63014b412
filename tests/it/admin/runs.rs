//! The read models added for on-call: the per-hour runs of a window, the environments an admin
//! is offered, the type search, and the schedule's description in words.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::json;

use super::assert_field;
use crate::api::{ADMIN, Api, READ};

pub async fn runs_sum_a_window_hour_by_hour(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let token = api.token(READ);
    let id = api.create(env, "nightly").await;
    let other = api.create(env, "other").await;
    for schedule in [&id, &other] {
        let (status, _, _) = api
            .call(
                Method::POST,
                &format!("/v1/schedules/{schedule}/trigger?target_env_id={env}"),
                Some(&api.writer()),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    api.engine().tick().await.unwrap();

    let (status, day, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/runs?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{day}");
    let hours = day["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 24);
    // The window ends with the current hour (the clock is at 2030-01-01T00:00Z).
    assert_eq!(hours[23]["hour"], "2030-01-01T00:00:00Z");
    assert_eq!(day["to"], "2030-01-01T01:00:00Z");
    assert_eq!(hours[23]["fires"], 2);
    assert_eq!(day["fires"], 2);
    assert_eq!(day["failures"], 0);
    assert_eq!(hours[0]["fires"], 0);
    assert_eq!(hours[0]["late_p50_ms"], json!(null));

    let (_, one, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/runs?target_env_id={env}&schedule_id={id}&hours=168"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(one["hours"].as_array().unwrap().len(), 168);
    assert_eq!(one["fires"], 1);

    // Another environment's window is empty.
    let (_, theirs, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/runs?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(theirs["fires"], 0);

    for bad in ["0", "169"] {
        let (status, problem, _) = api
            .call(
                Method::GET,
                &format!("/v1/admin/runs?target_env_id={env}&hours={bad}"),
                Some(&token),
                None,
            )
            .await;
        assert_field(status, &problem, "hours", "between 1 and 168");
    }
    let (status, _, _) = api
        .call(Method::GET, "/v1/admin/runs", Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "target_env_id is required");
}

pub async fn admins_are_offered_the_environments_that_hold_data(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    api.create(api.env_a, "one").await;
    api.create(api.env_a, "two").await;

    let admin = Api::sign(&api.claims(ADMIN, &[]));
    let (_, all, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&admin), None)
        .await;
    assert_eq!(
        all["with_data"],
        json!([{"env_id": api.env_a.0, "schedules": 2}])
    );
    // A token with named environments is not told about any other.
    let (_, reader, _) = api
        .call(Method::GET, "/v1/admin/envs", Some(&api.token(READ)), None)
        .await;
    assert_eq!(reader["with_data"], json!([]));
}

pub async fn schedules_are_searched_by_type_and_described_in_words(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    for schedule_type in ["Nightly-Report", "sync", "weekly-report"] {
        api.create(env, schedule_type).await;
    }
    let token = api.token(READ);
    for path in ["/v1/schedules", "/v1/admin/schedules"] {
        let (status, page, _) = api
            .call(
                Method::GET,
                &format!("{path}?target_env_id={env}&type_contains=REPORT&limit=1"),
                Some(&token),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["items"][0]["schedule_type"], "Nightly-Report");
        let cursor = page["next_cursor"].as_str().unwrap();
        let (_, rest, _) = api
            .call(
                Method::GET,
                &format!("{path}?target_env_id={env}&type_contains=report&cursor={cursor}"),
                Some(&token),
                None,
            )
            .await;
        let types: Vec<&str> = rest["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["schedule_type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["weekly-report"], "{path}");
    }
    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}&type_contains=a%00b"),
            Some(&token),
            None,
        )
        .await;
    assert_field(status, &problem, "type_contains", "");

    let (_, list, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules?target_env_id={env}&limit=1"),
            Some(&token),
            None,
        )
        .await;
    let description = list["items"][0]["description"].as_str().unwrap();
    assert!(
        description.starts_with("At 02:00 (Europe/London); a time skipped when clocks go forward"),
        "{description}"
    );
}
