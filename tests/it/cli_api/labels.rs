//! Labels and bulk actions from the command line: `--label` on create and patch, `-l` on
//! list, and `schedules bulk` with its dry run and its yes.

use std::sync::Arc;

use sentin8_cron::core::store::Store;
use serde_json::json;

use super::cli;
use crate::api::Api;

pub async fn labels_and_bulk_actions_from_the_command_line(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = format!("{}/billing", api.target.url());
    let mut ids = Vec::new();
    for i in 0..12 {
        let schedule_type = format!("b{i}");
        let tier = if i == 0 { "tier=gold" } else { "tier=silver" };
        let created = cli(
            &api,
            &token,
            &[
                "schedules",
                "create",
                "--env",
                &env,
                "--domain",
                "billing",
                "--type",
                &schedule_type,
                "--cron",
                "0 2 * * *",
                "--base-url",
                &base,
                "--label",
                "team=billing",
                "--label",
                tier,
                "-o",
                "json",
            ],
            None,
        )
        .await
        .json();
        assert_eq!(
            created["labels"],
            json!({"team": "billing", "tier": &tier[5..]})
        );
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    // A label flag that is neither KEY=VALUE nor KEY- is a usage error.
    let bad = cli(
        &api,
        &token,
        &[
            "schedules",
            "patch",
            &ids[0],
            "--env",
            &env,
            "--label",
            "team",
        ],
        None,
    )
    .await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);

    let patched = cli(
        &api,
        &token,
        &[
            "schedules",
            "patch",
            &ids[0],
            "--env",
            &env,
            "--label",
            "tier-",
            "--label",
            "canary=",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(patched["labels"], json!({"team": "billing", "canary": ""}));

    let listed = cli(
        &api,
        &token,
        &[
            "schedules",
            "list",
            "--env",
            &env,
            "-l",
            "canary",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    let items = &listed["items"];
    assert_eq!(items.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(items[0]["id"], json!(ids[0]));
    let wide = cli(
        &api,
        &token,
        &[
            "schedules",
            "list",
            "--env",
            &env,
            "-l",
            "canary",
            "-o",
            "wide",
        ],
        None,
    )
    .await;
    assert!(
        wide.ok().contains("canary=,team=billing"),
        "{}",
        wide.stdout
    );
    let refused = cli(
        &api,
        &token,
        &["schedules", "list", "--env", &env, "-l", "tier in gold"],
        None,
    )
    .await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("label_selector"),
        "{}",
        refused.stderr
    );

    // Jobs are listed by their schedules' labels; a selector that does not parse is refused
    // before anything is sent.
    cli(
        &api,
        &token,
        &["schedules", "trigger", &ids[0], "--env", &env],
        None,
    )
    .await
    .ok();
    let jobs = cli(
        &api,
        &token,
        &["jobs", "list", "--env", &env, "-l", "canary", "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(jobs["items"].as_array().map(Vec::len), Some(1), "{jobs}");
    assert_eq!(jobs["items"][0]["schedule_id"], json!(ids[0]));
    let none = cli(
        &api,
        &token,
        &["jobs", "list", "--env", &env, "-l", "!canary", "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(none["items"].as_array().map(Vec::len), Some(0), "{none}");
    let bad = cli(
        &api,
        &token,
        &["dlq", "list", "--env", &env, "-l", "a in"],
        None,
    )
    .await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("'('"), "{}", bad.stderr);

    // Twelve match: a dry run lists them and changes nothing; without --yes (and no
    // terminal to ask) nothing is changed; with it, all are paused.
    let plan = cli(
        &api,
        &token,
        &[
            "schedules",
            "bulk",
            "pause",
            "-l",
            "team=billing",
            "--env",
            &env,
            "--dry-run",
        ],
        None,
    )
    .await;
    let text = plan.ok();
    assert!(
        text.contains("pause: 12 of 12 schedule(s) matching team=billing changed (dry run"),
        "{text}"
    );
    let asked = cli(
        &api,
        &token,
        &[
            "schedules",
            "bulk",
            "pause",
            "-l",
            "team=billing",
            "--env",
            &env,
        ],
        None,
    )
    .await;
    assert_ne!(asked.code, 0, "{}", asked.stdout);
    assert!(
        asked.stderr.contains("12 schedules match") && asked.stderr.contains("--yes"),
        "{}",
        asked.stderr
    );
    let one = cli(
        &api,
        &token,
        &["schedules", "get", &ids[3], "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(one["status"], "active", "nothing paused yet");
    let done = cli(
        &api,
        &token,
        &[
            "schedules",
            "bulk",
            "pause",
            "-l",
            "team=billing",
            "--env",
            &env,
            "--yes",
            "--note",
            "freeze",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(
        (done["matched"].as_u64(), done["changed"].as_u64()),
        (Some(12), Some(12))
    );
    // A few need no yes.
    let resumed = cli(
        &api,
        &token,
        &["schedules", "bulk", "resume", "-l", "canary", "--env", &env],
        None,
    )
    .await;
    assert!(
        resumed
            .ok()
            .contains("resume: 1 of 1 schedule(s) matching canary changed"),
        "{}",
        resumed.stdout
    );
    let resumed = cli(
        &api,
        &token,
        &[
            "schedules",
            "bulk",
            "resume",
            "-l",
            "tier=silver,team",
            "--env",
            &env,
            "--yes",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(resumed["changed"], 11, "{resumed}");
}
