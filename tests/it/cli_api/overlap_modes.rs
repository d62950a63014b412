//! The overlap modes from the command line: a schedule created under `buffer_all` and one
//! under `cancel_other`, and a backfill that names its own overlap policy.

use std::sync::Arc;

use sentin8_cron::core::store::Store;

use super::cli;
use crate::api::Api;

pub async fn overlap_modes_and_a_backfills_own_policy_from_the_command_line(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = format!("{}/billing", api.target.url());
    let create = |schedule_type: &'static str, overlap: &'static str| {
        let (env, base, token, api) = (&env, &base, &token, &api);
        async move {
            let args = [
                "schedules",
                "create",
                "--env",
                env,
                "--domain",
                "billing",
                "--type",
                schedule_type,
                "--cron",
                "0 * * * *",
                "--overlap",
                overlap,
                "--base-url",
                base,
                "-o",
                "json",
            ];
            cli(api, token, &args, None).await
        }
    };
    let ledger = create("ledger.close-hour", "buffer_all").await.json();
    assert_eq!(ledger["overlap"], "buffer_all");
    let description = ledger["description"].as_str().unwrap();
    assert!(description.contains("one after another"), "{description}");
    let sync = create("catalog.sync", "cancel_other").await.json();
    assert_eq!(sync["overlap"], "cancel_other");
    let refused = create("catalog.other", "queue").await;
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("overlap"), "{}", refused.stderr);

    let id = ledger["id"].as_str().unwrap().to_owned();
    let backfill = |overlap: &'static str, output: &'static str| {
        let (env, id, token, api) = (&env, &id, &token, &api);
        async move {
            let args = [
                "schedules",
                "backfill",
                id,
                "--env",
                env,
                "--from",
                "2029-12-31T20:00:00Z",
                "--to",
                "2029-12-31T23:00:00Z",
                "--overlap",
                overlap,
                "-o",
                output,
            ];
            cli(api, token, &args, None).await
        }
    };
    // Four occurrences under `skip`: the oldest runs, three are skipped on the record.
    let done = backfill("skip", "json").await.json();
    assert_eq!(
        (
            &done["occurrences"],
            &done["started"],
            &done["skipped"],
            &done["overlap"]
        ),
        (&4.into(), &1.into(), &3.into(), &"skip".into())
    );
    let statuses: Vec<&str> = done["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["pending", "skipped", "skipped", "skipped"]);
    // The table says what happened in words.
    let told = backfill("allow_all", "table").await;
    assert_eq!(told.code, 0, "{}", told.stderr);
    assert!(
        told.stdout.contains("under allow_all") && told.stdout.contains("0 skipped"),
        "{}",
        told.stdout
    );
    // `cancel_other` cannot be a backfill's, and the refusal names the field.
    let refused = backfill("cancel_other", "json").await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("overlap") && refused.stderr.contains("cancel_other"),
        "{}",
        refused.stderr
    );
}
