//! The event schemas as published: `docs/events/` holds exactly the schemas the server serves
//! (regenerate with `SENTIN8_CRON_WRITE_EVENT_SCHEMAS=1 cargo test event_schemas`), and the
//! routes serve the list and each type's schema without a token.

use std::path::PathBuf;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::events::{ALL, schema};

use crate::api::Api;

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/events")
}

fn file_of(event_type: &str) -> PathBuf {
    docs().join(format!("{event_type}.schema.json"))
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap() + "\n"
}

#[test]
fn docs_hold_the_served_schemas_and_nothing_else() {
    let write = std::env::var("SENTIN8_CRON_WRITE_EVENT_SCHEMAS").is_ok_and(|v| v == "1");
    for event_type in ALL {
        let served = pretty(&schema::schema(event_type).unwrap());
        if write {
            std::fs::create_dir_all(docs()).unwrap();
            std::fs::write(file_of(event_type), &served).unwrap();
        }
        let published = std::fs::read_to_string(file_of(event_type)).unwrap_or_default();
        assert!(
            published == served,
            "docs/events/{event_type}.schema.json differs from the served schema; regenerate \
             with SENTIN8_CRON_WRITE_EVENT_SCHEMAS=1 cargo test event_schemas"
        );
    }
    let mut files: Vec<String> = std::fs::read_dir(docs())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".schema.json"))
        .collect();
    files.sort();
    let mut expected: Vec<String> = ALL.iter().map(|t| format!("{t}.schema.json")).collect();
    expected.sort();
    assert_eq!(
        files, expected,
        "a schema for each type, and none for a type not emitted"
    );
}

#[tokio::test]
async fn the_routes_serve_every_schema_without_a_token() {
    let api = Api::start(crate::support::sqlite_store().await).await;
    let (status, index, _) = api
        .call(Method::GET, "/v1/events/schemas", None, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let listed: Vec<&str> = index["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ALL);
    for entry in index["types"].as_array().unwrap() {
        let path = entry["schema"].as_str().unwrap();
        let response = reqwest::get(format!("{}{path}", api.base)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()["content-type"],
            "application/schema+json"
        );
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(Some(body), schema::schema(entry["type"].as_str().unwrap()));
    }
    let (status, problem, _) = api
        .call(
            Method::GET,
            "/v1/events/schemas/sentin8:cron:schedule:completed",
            None,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("/v1/events/schemas lists them"),
        "{problem}"
    );
}
