//! Flags of `schedules create|patch` as a user types them: a bound removed with `none`, a
//! switch given alone, and a duration without its unit refused before anything is sent.

use std::sync::Arc;

use sentin8_cron::core::store::Store;
use serde_json::Value;

use super::cli;
use crate::api::Api;

pub async fn bounds_clear_with_none_switches_stand_alone_and_durations_need_units(
    store: Arc<dyn Store>,
) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = format!("{}/billing", api.target.url());
    let run = |args: Vec<&str>| {
        let (api, token) = (&api, &token);
        let args: Vec<String> = args.into_iter().map(str::to_owned).collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli(api, token, &args, None).await
        }
    };
    let created = run(vec![
        "schedules",
        "create",
        "--env",
        &env,
        "--domain",
        "billing",
        "--type",
        "flags.bounded",
        "--cron",
        "0 * * * *",
        "--base-url",
        &base,
        "--end-at",
        "2031-01-01T00:00:00Z",
        "--remaining-runs",
        "5",
        "--pause-on-failure",
        "--after-completion",
        "delete",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(created["end_at"], "2031-01-01T00:00:00Z", "{created}");
    assert_eq!(created["after_completion"], "delete", "{created}");
    assert_eq!(created["remaining_runs"], 5, "{created}");
    assert_eq!(
        created["pause_on_failure"], true,
        "a bare switch means true: {created}"
    );
    let id = created["id"].as_str().unwrap().to_owned();

    let patched = run(vec![
        "schedules",
        "patch",
        &id,
        "--env",
        &env,
        "--end-at",
        "none",
        "--remaining-runs",
        "none",
        "--pause-on-failure",
        "false",
        "--after-completion",
        "keep",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(patched["end_at"], Value::Null, "{patched}");
    assert_eq!(patched["remaining_runs"], Value::Null, "{patched}");
    assert_eq!(patched["pause_on_failure"], false, "{patched}");
    assert_eq!(patched["after_completion"], "keep", "{patched}");

    let interval = run(vec![
        "schedules",
        "create",
        "--env",
        &env,
        "--domain",
        "billing",
        "--type",
        "flags.interval",
        "--every",
        "90s",
        "--phase",
        "15s",
        "--base-url",
        &base,
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(interval["cron"], "@every 90s phase 15s", "{interval}");
    assert_eq!(interval["every"], "1m30s", "{interval}");

    let bare = run(vec![
        "schedules",
        "patch",
        &id,
        "--env",
        &env,
        "--catchup-window",
        "90",
    ])
    .await;
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert!(
        bare.stderr.contains("give a unit: 90s, 90m"),
        "{}",
        bare.stderr
    );
    let fine = run(vec![
        "schedules",
        "patch",
        &id,
        "--env",
        &env,
        "--catchup-window",
        "90s",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(fine["catchup_window"], "1m30s", "{fine}");

    // A pause says why; the answer (and `schedules get`) shows it.
    let paused = run(vec![
        "schedules",
        "pause",
        &id,
        "--env",
        &env,
        "--note",
        "freeze until the 3rd",
        "-o",
        "json",
    ])
    .await
    .json();
    assert_eq!(
        paused["paused"]["reason"], "freeze until the 3rd",
        "{paused}"
    );
    let read = run(vec!["schedules", "get", &id, "--env", &env, "-o", "json"])
        .await
        .json();
    assert_eq!(read["paused"]["reason"], "freeze until the 3rd", "{read}");
}
