//! Labels through the API: declared on create, merged by a patch, shown, selected by
//! `label_selector`, and acted on in bulk with a dry run and a count to confirm.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use crate::api::Api;

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i["id"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

pub async fn labels_are_declared_selected_and_acted_on_in_bulk(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a;
    let create = |schedule_type: String, labels: Value| {
        let mut body = api.new_schedule(env, &schedule_type);
        body["labels"] = labels;
        body
    };
    let mut billing = Vec::new();
    for i in 0..11 {
        let tier = if i < 3 { "gold" } else { "silver" };
        let body = create(format!("b{i}"), json!({"team": "billing", "tier": tier}));
        let (status, created, _) = api
            .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["labels"]["team"], "billing", "{created}");
        billing.push(created["id"].as_str().unwrap().to_owned());
    }
    let body = create("ops".into(), json!({"team": "ops"}));
    let (_, ops, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    let ops_id = ops["id"].as_str().unwrap().to_owned();

    // Bad labels are refused by the label, and nothing is created.
    let body = create(
        "bad".into(),
        json!({"bad key": "x", "tier": "-gold", "n": 5}),
    );
    let (status, problem, _) = api
        .call(Method::POST, "/v1/schedules", Some(&token), Some(body))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "labels", "{problem}");
    let body = create("bad".into(), json!({"bad key": "x", "tier": "-gold"}));
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
    assert_eq!(fields, ["labels.bad key", "labels.tier"], "{problem}");

    let list = |selector: &str| {
        let query = format!(
            "/v1/schedules?target_env_id={env}&label_selector={}",
            urlencode(selector)
        );
        let api = &api;
        let token = token.clone();
        async move { api.call(Method::GET, &query, Some(&token), None).await }
    };
    let (status, page, _) = list("team=billing").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(ids(&page), billing);
    let (_, page, _) = list("tier in (gold),team").await;
    assert_eq!(ids(&page), billing[..3]);
    let (_, page, _) = list("tier notin (gold, silver)").await;
    assert_eq!(ids(&page), std::slice::from_ref(&ops_id));
    let (status, problem, _) = list("team=bill ing").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "label_selector", "{problem}");
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("at character 11"),
        "{problem}"
    );

    // A patch merges: null removes a label, one not named is kept.
    let (status, patched, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{ops_id}?target_env_id={env}"),
            Some(&token),
            Some(json!({"labels": {"team": null, "owner": "ann"}})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["labels"], json!({"owner": "ann"}));
    let (_, page, _) = list("owner=ann,!team").await;
    assert_eq!(ids(&page), std::slice::from_ref(&ops_id));

    let bulk = |body: Value| {
        let api = &api;
        let token = token.clone();
        async move {
            api.call(
                Method::POST,
                &format!("/v1/schedules/bulk?target_env_id={env}"),
                Some(&token),
                Some(body),
            )
            .await
        }
    };
    // Three: no confirmation needed.
    let (status, done, _) = bulk(json!({"action": "pause", "label_selector": "tier=gold"})).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(
        (done["matched"].as_u64(), done["changed"].as_u64()),
        (Some(3), Some(3))
    );
    assert!(
        done["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["outcome"] == "paused")
    );
    // Eleven: refused without the count, listed by a dry run, done with it.
    let (status, problem, _) =
        bulk(json!({"action": "pause", "label_selector": "team=billing"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "confirm", "{problem}");
    let (status, plan, _) = bulk(json!({
        "action": "pause", "label_selector": "team=billing", "dry_run": true
    }))
    .await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    assert_eq!(
        (plan["matched"].as_u64(), plan["changed"].as_u64()),
        (Some(11), Some(8))
    );
    let (_, page, _) = list("team=billing").await;
    let active = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "active")
        .count();
    assert_eq!(active, 8, "a dry run changes nothing");
    let (status, problem, _) = bulk(json!({
        "action": "pause", "label_selector": "team=billing", "confirm": 12
    }))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a wrong count: {problem}");
    let (status, done, _) = bulk(json!({
        "action": "pause", "label_selector": "team=billing", "confirm": 11,
        "note": "billing freeze"
    }))
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["changed"], 8, "{done}");
    let unchanged = done["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["outcome"] == "unchanged")
        .count();
    assert_eq!(unchanged, 3, "{done}");
    let (_, read, _) = api
        .call(
            Method::GET,
            &format!("/v1/schedules/{}?target_env_id={env}", billing[10]),
            Some(&token),
            None,
        )
        .await;
    assert_eq!(read["paused"]["reason"], "billing freeze", "{read}");
    // One audit entry per schedule paused.
    let (_, audit, _) = api
        .call(
            Method::GET,
            &format!("/v1/audit?target_env_id={env}&limit=100"),
            Some(&token),
            None,
        )
        .await;
    let pauses = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "schedule.pause")
        .count();
    assert_eq!(pauses, 11, "{audit}");

    // A trigger is refused where it does not apply and done where it does.
    let (_, done, _) = bulk(json!({"action": "trigger", "label_selector": "owner"})).await;
    assert_eq!(done["items"][0]["outcome"], "triggered", "{done}");
    assert!(done["items"][0]["job_id"].is_string(), "{done}");
    let (_, again, _) = bulk(json!({"action": "trigger", "label_selector": "owner"})).await;
    assert_eq!(again["items"][0]["outcome"], "refused", "{again}");
    assert!(
        again["items"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("open job")
    );
    let (_, paused, _) = bulk(json!({"action": "trigger", "label_selector": "tier=gold"})).await;
    assert_eq!(
        paused["changed"], 0,
        "paused schedules run nothing: {paused}"
    );

    // An empty selector, or a bad action, is refused by its field.
    let (status, problem, _) = bulk(json!({"action": "delete", "label_selector": ""})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "label_selector", "{problem}");
    let (status, problem, _) = bulk(json!({"action": "explode", "label_selector": "a"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "action", "{problem}");

    // Delete, then resume what is left in one go.
    let (_, done, _) = bulk(json!({"action": "delete", "label_selector": "owner=ann"})).await;
    assert_eq!(done["items"][0]["outcome"], "deleted", "{done}");
    let (_, page, _) = list("owner").await;
    assert_eq!(ids(&page), Vec::<String>::new());
    let (_, done, _) = bulk(json!({
        "action": "resume", "label_selector": "team", "confirm": 11
    }))
    .await;
    assert_eq!(done["changed"], 11, "{done}");

    // `"labels": null` removes them all (a merge patch of the whole member).
    let (status, cleared, _) = api
        .call(
            Method::PATCH,
            &format!("/v1/schedules/{}?target_env_id={env}", billing[0]),
            Some(&token),
            Some(json!({"labels": null})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{cleared}");
    assert_eq!(cleared["labels"], json!({}));
    let (_, page, _) = list("team").await;
    assert_eq!(ids(&page), billing[1..]);

    // Another environment's token sees none of them.
    let (_, page, _) = api
        .call(
            Method::GET,
            &format!(
                "/v1/schedules?target_env_id={}&label_selector=team",
                api.env_b
            ),
            Some(&api.token(crate::api::READ)),
            None,
        )
        .await;
    assert_eq!(ids(&page), Vec::<String>::new());
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
