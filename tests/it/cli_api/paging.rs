//! List commands page as the API does: `-o json` keeps `next_cursor`, `--cursor` goes on from
//! it, `--all` reads to the end, and a table cut short says how to go on.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use sentin8_cron::core::store::Store;
use serde_json::Value;

use super::cli;
use crate::api::Api;

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

pub async fn lists_keep_the_cursor_go_on_from_it_and_read_all(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let mut created = Vec::new();
    for n in 0..5 {
        let body = api.new_schedule(api.env_a, &format!("paged.{n}"));
        let path = format!("/v1/schedules?target_env_id={env}");
        let (status, schedule, _) = api
            .call(Method::POST, &path, Some(&token), Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{schedule}");
        created.push(schedule["id"].as_str().unwrap().to_owned());
    }
    let list = |extra: &[&str]| {
        let mut args = vec!["schedules", "list", "--env", &env, "-o", "json"];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let (api, token) = (&api, &token);
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli(api, token, &args, None).await
        }
    };

    let first = run(list(&["--limit", "2"])).await.json();
    assert_eq!(ids(&first).len(), 2);
    let cursor = first["next_cursor"].as_str().expect("cut short: a cursor");
    let second = run(list(&["--limit", "2", "--cursor", cursor]))
        .await
        .json();
    let third = run(list(&["--cursor", second["next_cursor"].as_str().unwrap()]))
        .await
        .json();
    assert_eq!(third["next_cursor"], Value::Null, "the end of the list");
    let mut seen = [ids(&first), ids(&second), ids(&third)].concat();
    seen.sort();
    created.sort();
    assert_eq!(seen, created, "each once, across the pages");

    let all = run(list(&["--all"])).await.json();
    assert_eq!(ids(&all).len(), 5);
    assert_eq!(all["next_cursor"], Value::Null);

    // A table cut short says how to go on, on stderr.
    let table = run(vec![
        "schedules".into(),
        "list".into(),
        "--env".into(),
        env.clone(),
        "--limit".into(),
        "3".into(),
    ])
    .await;
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(table.stderr.contains("--cursor "), "{}", table.stderr);

    let refused = run(list(&["--all", "--limit", "2"])).await;
    assert_eq!(
        refused.code, 2,
        "--all and --limit together: {}",
        refused.stderr
    );
}
