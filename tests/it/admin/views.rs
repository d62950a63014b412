//! The overview and schedule listings the on-call pages read.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use super::fields;
use crate::api::{Api, READ};
use crate::raw_http::{RawServer, Recorded, Reply};

pub async fn overview_counts_failures_and_next_fires(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let token = api.writer();
    // Two active schedules (London at 02:00, and hourly in UTC), one paused.
    api.create(env, "nightly").await;
    let mut hourly = api.new_schedule(env, "hourly");
    hourly["cron"] = json!("15 * * * *");
    hourly["timezone"] = json!("UTC");
    let (status, _, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(hourly))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let paused = api.create(env, "paused").await;
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{paused}/pause?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // One that fails straight into the dead-letter queue.
    let failing = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let mut doomed = api.new_schedule(env, "doomed");
    doomed["max_retries"] = json!(0);
    doomed["target_config"] = json!({"baseUrl": failing.url()});
    let (_, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(doomed))
        .await;
    let doomed_id = created["id"].as_str().unwrap().to_owned();
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{doomed_id}/trigger?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let summary = api.engine().tick().await.unwrap();
    assert_eq!(summary.dead_lettered, 1);

    let (status, overview, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={env}"),
            Some(&api.token(READ)),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    assert_eq!(overview["env_id"], json!(env));
    assert_eq!(overview["now"], "2030-01-01T00:00:00Z");
    assert_eq!(
        overview["counts"],
        json!({
            "schedules_active": 3, "schedules_paused": 1, "schedules_completed": 0,
            "jobs_scheduled": 0, "jobs_pending": 0, "jobs_running": 0, "jobs_buffered": 0, "jobs_succeeded": 0, "jobs_failed": 1,
            "jobs_skipped": 0, "jobs_superseded": 0, "dlq_entries": 1,
        })
    );
    assert_eq!(overview["ticker"]["status"], "ok");
    assert_eq!(overview["ticker"]["tick_interval_seconds"], 60);
    let failures = overview["recent_failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["schedule_type"], "doomed");
    assert_eq!(failures[0]["domain"], "billing");
    assert_eq!(failures[0]["schedule_id"], json!(doomed_id));
    assert_eq!(failures[0]["error"], "proxy-back status 500");
    // Soonest first, each on its own clock; the paused one is not listed.
    let next: Vec<(&str, &str)> = overview["next_fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["schedule_type"].as_str().unwrap(),
                n["fire"]["display"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        next,
        [
            ("hourly", "Tue 2030-01-01 00:15 UTC"),
            ("nightly", "Tue 2030-01-01 02:00 GMT"),
            ("doomed", "Tue 2030-01-01 02:00 GMT"),
        ]
    );
    assert_eq!(
        overview["next_fires"][1]["fire"]["at"],
        "2030-01-01T02:00:00Z"
    );
    assert_eq!(
        overview["next_fires"][1]["fire"]["local"],
        "2030-01-01T02:00:00+00:00"
    );

    // Another environment sees none of it.
    let (_, other, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={}", api.env_b),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(other["counts"]["schedules_active"], 0);
    assert_eq!(other["counts"]["dlq_entries"], 0);
    assert_eq!(other["recent_failures"], json!([]));
    assert_eq!(other["next_fires"], json!([]));
    assert_eq!(failing.requests().len(), 1);
}

pub async fn schedules_show_their_next_fires_in_their_zone(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let env = api.env_a;
    let token = api.writer();
    api.create(env, "nightly").await;
    let mut new_york = api.new_schedule(env, "spring");
    new_york["cron"] = json!("30 2 10 3 *");
    new_york["timezone"] = json!("America/New_York");
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(new_york))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let spring = created["id"].as_str().unwrap().to_owned();
    let (status, _, _) = api
        .call(
            Method::POST,
            &format!("/v1/schedules/{spring}/pause?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut once = api.new_schedule(env, "cutover");
    once.as_object_mut().unwrap().remove("cron");
    once.as_object_mut().unwrap().remove("timezone");
    once["run_at"] = json!("2030-06-01T12:00:00Z");
    let (status, _, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(once))
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let reader = api.token(READ);
    let (status, page, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["now"], "2030-01-01T00:00:00Z");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    // The API's fields are all there, plus the fires.
    let nightly = &items[0];
    assert_eq!(nightly["schedule_type"], "nightly");
    assert_eq!(nightly["cron"], "0 2 * * *");
    assert_eq!(nightly["next_run_at"], "2030-01-01T02:00:00Z");
    let displays: Vec<&str> = nightly["upcoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["display"].as_str().unwrap())
        .collect();
    assert_eq!(
        displays,
        [
            "Tue 2030-01-01 02:00 GMT",
            "Wed 2030-01-02 02:00 GMT",
            "Thu 2030-01-03 02:00 GMT"
        ]
    );
    // A paused schedule shows what it would do if resumed: 02:30 does not exist on
    // 10 March 2030 in New York, so the fire moves to the end of the gap.
    let spring_row = &items[1];
    assert_eq!(spring_row["status"], "paused");
    assert_eq!(
        spring_row["upcoming"][0],
        json!({
            "at": "2030-03-10T07:00:00Z",
            "local": "2030-03-10T03:00:00-04:00",
            "display": "Sun 2030-03-10 03:00 EDT",
            "dst": "shifted",
        })
    );
    assert_eq!(spring_row["upcoming"][1]["at"], "2031-03-10T06:30:00Z");
    assert_eq!(spring_row["upcoming"][1]["dst"], Value::Null);
    let cutover = &items[2];
    assert_eq!(cutover["kind"], "once");
    assert_eq!(cutover["upcoming"].as_array().unwrap().len(), 1);
    assert_eq!(cutover["upcoming"][0]["at"], "2030-06-01T12:00:00Z");

    // The API's filters and paging apply, and the number of fires is chosen.
    let (_, paused, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&status=paused&fires=5"),
            Some(&reader),
            None,
        )
        .await;
    let paused = paused["items"].as_array().unwrap();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["upcoming"].as_array().unwrap().len(), 5);
    let (_, first, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&limit=2&fires=0"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    assert_eq!(first["items"][0]["upcoming"], json!([]));
    let cursor = first["next_cursor"].as_str().unwrap();
    let (_, second, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&limit=2&cursor={cursor}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(second["items"][0]["schedule_type"], "cutover");
    for (query, field) in [
        ("fires=21", "fires"),
        ("limit=1000", "limit"),
        ("status=sleeping", "status"),
    ] {
        let (status, problem, _) = api
            .call(
                Method::GET,
                &format!("/v1/admin/schedules?target_env_id={env}&{query}"),
                Some(&reader),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {problem}");
        assert_eq!(fields(&problem), [field], "{query}");
    }
    // Deleted schedules are gone from the list, as on the API.
    let (status, _, _) = api
        .call(
            Method::DELETE,
            &format!("/v1/schedules/{spring}?target_env_id={env}"),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, after, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(after["items"].as_array().unwrap().len(), 2);
    // Unless asked for, as on the API.
    let (_, deleted, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&status=deleted"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(deleted["items"][0]["id"], json!(spring));
    // And env B is empty.
    let (_, other, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={}", api.env_b),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(other["items"], json!([]));
}

/// A schedule with a jitter, a start and a run limit: the listing shows its calls (each its
/// occurrence plus the core's jitter for its id, the first one its `next_run_at`), no more than
/// its remaining runs, and its policy fields; the preview, given the same policies and id,
/// lists the same calls; the overview's next fire is the stored call.
pub async fn schedules_and_the_preview_show_the_calls_their_policies_make(store: Arc<dyn Store>) {
    use chrono::{DateTime, Duration, Utc};
    use sentin8_cron::core::model::ScheduleId;
    use sentin8_cron::core::policies::jitter_offset;

    let api = Api::start(store).await;
    let env = api.env_a;
    let token = api.writer();
    let mut body = api.new_schedule(env, "rollup");
    body["cron"] = json!("*/15 * * * *");
    body["timezone"] = json!("UTC");
    body["max_jitter"] = json!("2m");
    body["start_at"] = json!("2030-01-01T01:00:00Z");
    body["remaining_runs"] = json!(3);
    body["catchup_window"] = json!("30m");
    body["pause_on_failure"] = json!(true);
    let (status, created, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let seed = ScheduleId(id.parse().unwrap());
    let call = |occurrence: &str| -> DateTime<Utc> {
        let occurrence: DateTime<Utc> = occurrence.parse().unwrap();
        occurrence + jitter_offset(seed, occurrence, std::time::Duration::from_secs(120))
    };
    let expected: Vec<Value> = [
        "2030-01-01T01:00:00Z",
        "2030-01-01T01:15:00Z",
        "2030-01-01T01:30:00Z",
    ]
    .iter()
    .map(|occurrence| json!({"at": call(occurrence), "occurrence": occurrence}))
    .collect();
    assert_eq!(created["next_run_at"], expected[0]["at"], "{created}");

    let reader = api.token(READ);
    let (status, page, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/schedules?target_env_id={env}&fires=10"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let row = &page["items"][0];
    for (field, value) in [
        ("max_jitter", json!("2m")),
        ("catchup_window", json!("30m")),
        ("overlap", json!("skip")),
        ("start_at", json!("2030-01-01T01:00:00Z")),
        ("end_at", Value::Null),
        ("pause_on_failure", json!(true)),
        ("remaining_runs", json!(3)),
    ] {
        assert_eq!(row[field], value, "{field}: {row}");
    }
    let description = row["description"].as_str().unwrap();
    for words in [
        "Every 15 minutes (UTC)",
        "each call up to 2m after its instant (jitter)",
        "a missed fire runs only within 30m of its instant",
        "starting 2030-01-01 01:00:00 UTC",
        "3 runs left",
        "pauses when a job lands in the dead-letter queue",
    ] {
        assert!(description.contains(words), "{words:?} in {description}");
    }
    // Three runs left: three calls, though ten were asked for.
    let upcoming: Vec<Value> = row["upcoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fire| json!({"at": fire["at"], "occurrence": fire["occurrence"]}))
        .collect();
    assert_eq!(upcoming, expected, "{row}");

    // The preview with the schedule's policies and id lists the same calls, from now (as a
    // schedule created now) or from just before its next call.
    let next: DateTime<Utc> = created["next_run_at"].as_str().unwrap().parse().unwrap();
    let just_before = (next - Duration::milliseconds(1)).to_rfc3339();
    for after in [None, Some(just_before.as_str())] {
        let mut query = format!(
            "/v1/admin/preview?target_env_id={env}&cron={}&timezone=UTC&max_jitter=2m\
             &start_at={}&remaining_runs=3&schedule_id={id}&count=10",
            super::enc("*/15 * * * *"),
            super::enc("2030-01-01T01:00:00Z"),
        );
        if let Some(after) = after {
            query.push_str(&format!("&after={}", super::enc(after)));
        }
        let (status, preview, _) = api.call(Method::GET, &query, Some(&reader), None).await;
        assert_eq!(status, StatusCode::OK, "{preview}");
        assert_eq!(preview["max_jitter"], "2m");
        assert_eq!(preview["schedule_id"], json!(id));
        let fires: Vec<Value> = preview["fires"]
            .as_array()
            .unwrap()
            .iter()
            .map(|fire| json!({"at": fire["at"], "occurrence": fire["occurrence"]}))
            .collect();
        assert_eq!(fires, expected, "after {after:?}: {preview}");
    }
    // Without a schedule id (a schedule not created yet) the fires are the occurrences.
    let (status, unseeded, _) = api
        .call(
            Method::GET,
            &format!(
                "/v1/admin/preview?target_env_id={env}&cron={}&max_jitter=2m&start_at={}&count=2",
                super::enc("*/15 * * * *"),
                super::enc("2030-01-01T01:00:00Z"),
            ),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{unseeded}");
    assert_eq!(unseeded["max_jitter"], "2m");
    assert_eq!(unseeded["schedule_id"], Value::Null);
    let fires: Vec<Value> = unseeded["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fire| json!({"at": fire["at"], "occurrence": fire["occurrence"]}))
        .collect();
    assert_eq!(
        fires,
        [
            json!({"at": "2030-01-01T01:00:00Z", "occurrence": null}),
            json!({"at": "2030-01-01T01:15:00Z", "occurrence": null}),
        ]
    );
    // Each problem is named by its field, the jitter checked against the interval.
    let (status, problem, _) = api
        .call(
            Method::GET,
            &format!(
                "/v1/admin/preview?target_env_id={env}&cron={}&max_jitter=20m\
                 &schedule_id=nope&after=later&remaining_runs=two",
                super::enc("*/15 * * * *")
            ),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    let mut named = fields(&problem);
    named.sort();
    assert_eq!(
        named,
        ["after", "max_jitter", "remaining_runs", "schedule_id"],
        "{problem}"
    );

    // The overview's next fire is the stored call, with its occurrence.
    let (status, overview, _) = api
        .call(
            Method::GET,
            &format!("/v1/admin/overview?target_env_id={env}"),
            Some(&reader),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{overview}");
    let fire = &overview["next_fires"][0]["fire"];
    assert_eq!(fire["at"], created["next_run_at"], "{overview}");
    assert_eq!(fire["occurrence"], "2030-01-01T01:00:00Z", "{overview}");
}
