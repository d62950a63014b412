//! `schedules apply -f FILE`: the declaration format and plan of `enroll`, through the API.

use std::sync::Arc;

use sentin8_cron::core::store::Store;
use serde_json::{Value, json};

use super::cli;
use crate::api::Api;
use crate::cli::example;

fn actions(report: &Value) -> Vec<(String, String)> {
    report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["schedule_type"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

pub async fn apply_shows_the_enroll_plan_and_converges(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = format!("{}/billing", api.target.url());
    let file = example("billing.schedules.yaml");
    let apply = |extra: &[&str]| {
        let mut args: Vec<String> = [
            "schedules",
            "apply",
            "--env",
            &env,
            "--domain",
            "billing",
            "--base-url",
            &base,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let run = |args: Vec<String>, stdin: Option<String>| {
        let api = &api;
        let token = &token;
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            cli(api, token, &refs, stdin.as_deref()).await
        }
    };

    // A dry run shows the plan and writes nothing.
    let plan = run(apply(&["-f", &file, "--dry-run", "-o", "json"]), None)
        .await
        .json();
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["domain"], "billing");
    assert_eq!(plan["env_id"], json!(env));
    assert_eq!(
        actions(&plan),
        [
            "billing.invoice-run",
            "billing.dunning-reminders",
            "billing.usage-rollup",
            "billing.card-expiry-scan",
            "billing.legacy-gateway-shutdown"
        ]
        .map(|t| (t.to_owned(), "created".to_owned()))
    );
    let listed = run(
        vec![
            "schedules".into(),
            "list".into(),
            "--env".into(),
            env.clone(),
            "-o".into(),
            "json".into(),
        ],
        None,
    )
    .await
    .json();
    assert_eq!(listed["items"], json!([]), "a dry run writes nothing");

    // Applying creates them, with the server's ids and next runs; the table reads as enroll's.
    let table = run(apply(&["-f", &file]), None).await;
    let text = table.ok();
    assert!(
        text.starts_with(&format!(
            "domain billing in environment {env}: 5 declared; 5 created, 0 updated, 0 unchanged, \
             0 pruned\n"
        )),
        "{text}"
    );
    assert!(text.contains("action    schedule_type"), "{text}");
    let listed = run(
        vec![
            "schedules".into(),
            "list".into(),
            "--env".into(),
            env.clone(),
            "-o".into(),
            "json".into(),
        ],
        None,
    )
    .await
    .json();
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    let invoice = items
        .iter()
        .find(|s| s["schedule_type"] == "billing.invoice-run")
        .unwrap();
    assert_eq!(invoice["cron"], "0 6 1 * *");
    assert_eq!(invoice["timezone"], "Europe/Berlin");
    assert_eq!(
        invoice["payload"],
        json!({"ledger": "eu", "dry_run": false})
    );
    assert_eq!(invoice["max_retries"], 5);
    assert_eq!(invoice["target_config"], json!({"baseUrl": base}));

    // Again: nothing changes.
    let again = run(apply(&["-f", &file, "-o", "json"]), None).await.json();
    assert!(
        actions(&again).iter().all(|(_, a)| a == "unchanged"),
        "{again}"
    );

    // A changed document from standard input: one update (naming its fields; a label no
    // longer declared is removed), one pruned.
    let changed = std::fs::read_to_string(&file)
        .unwrap()
        .replace("\"0 6 1 * *\"", "\"0 7 1 * *\"")
        .replace("      tier: gold\n", "      owner: ann\n");
    let trimmed = changed
        .split("  # One-shot: retire the legacy payment gateway.")
        .next()
        .unwrap()
        .to_owned();
    let report = run(apply(&["-f", "-", "--prune", "-o", "json"]), Some(trimmed))
        .await
        .json();
    let changes = report["changes"].as_array().unwrap();
    assert_eq!(changes[0]["schedule_type"], "billing.invoice-run");
    assert_eq!(changes[0]["action"], "updated");
    assert_eq!(changes[0]["changed_fields"], json!(["cron", "labels"]));
    assert_eq!(changes[0]["schedule_id"], invoice["id"]);
    assert_eq!(
        changes[4]["schedule_type"],
        "billing.legacy-gateway-shutdown"
    );
    assert_eq!(changes[4]["action"], "pruned");
    let listed = run(
        vec![
            "schedules".into(),
            "list".into(),
            "--env".into(),
            env.clone(),
            "-o".into(),
            "json".into(),
        ],
        None,
    )
    .await
    .json();
    assert_eq!(listed["items"].as_array().unwrap().len(), 4);
    let invoice = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["schedule_type"] == "billing.invoice-run")
        .unwrap()
        .clone();
    assert_eq!(invoice["cron"], "0 7 1 * *");
    assert_eq!(
        invoice["labels"],
        json!({"owner": "ann", "team": "billing"})
    );

    // An invalid document is refused before the server is asked: 3, nothing written.
    let invalid = run(
        apply(&["-f", "-"]),
        Some("schedules:\n  - schedule_type: billing.bad\n    cron: \"99 * * * *\"\n".into()),
    )
    .await;
    assert_eq!(invalid.code, 3, "{}", invalid.stderr);
    assert!(invalid.stderr.contains("billing.bad"), "{}", invalid.stderr);
    assert!(
        invalid.stderr.contains("standard input"),
        "{}",
        invalid.stderr
    );

    // A refused step stops the run, and the JSON report says so (exit 1, not a success).
    let reader = api.token(crate::api::READ);
    let args = apply(&["-f", "-", "-o", "json"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let refused = cli(
        &api,
        &reader,
        &refs,
        Some("schedules:\n  - schedule_type: billing.new-one\n    cron: \"0 3 * * *\"\n"),
    )
    .await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    let report: Value = serde_json::from_str(&refused.stdout).unwrap();
    assert!(
        report["stopped"]["error"]
            .as_str()
            .unwrap()
            .contains("(403)"),
        "{report}"
    );
}

/// A dry run asks the server's egress policy about the target, so it fails exactly where the
/// real run would; the summary counts what the document declares; errors are located.
pub async fn apply_dry_run_agrees_with_the_server(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let file = example("billing.schedules.yaml");
    let apply = |base: &str, extra: &[&str]| {
        let mut args: Vec<String> = [
            "schedules",
            "apply",
            "--env",
            &env,
            "--domain",
            "billing",
            "--base-url",
            base,
            "-f",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    let run = |args: Vec<String>, stdin: Option<&'static str>| {
        let api = &api;
        let token = &token;
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            cli(api, token, &refs, stdin).await
        }
    };

    // Refused by the server's policy: the dry run and the real run alike, naming the setting.
    for extra in [&["--dry-run"][..], &[][..]] {
        let mut args = apply("http://10.0.0.1", &[&file]);
        args.extend(extra.iter().map(|a| a.to_string()));
        let refused = run(args, None).await;
        assert_eq!(refused.code, 3, "{extra:?}: {}", refused.stderr);
        assert!(
            refused
                .stderr
                .contains("add http://10.0.0.1:80 to SENTIN8_CRON_TARGET_ALLOW"),
            "{}",
            refused.stderr
        );
        assert!(
            !refused.stdout.contains("nothing is declared"),
            "{}",
            refused.stdout
        );
    }
    let github = run(
        apply("http://10.0.0.1", &[&file, "--dry-run", "-o", "github"]),
        None,
    )
    .await;
    assert_eq!(github.code, 3);
    assert!(
        github.stdout.starts_with("::error file=")
            && github
                .stdout
                .contains("::target_config.baseUrl: 10.0.0.1 is a private address"),
        "{}",
        github.stdout
    );
    let listed = run(
        vec![
            "schedules".into(),
            "list".into(),
            "--env".into(),
            env.clone(),
            "-o".into(),
            "json".into(),
        ],
        None,
    )
    .await
    .json();
    assert_eq!(listed["items"], json!([]), "nothing was written");

    // Accepted: the summary counts the document's entries and the plan.
    let base = format!("{}/billing", api.target.url());
    let plan = run(apply(&base, &[&file, "--dry-run"]), None).await;
    assert!(
        plan.ok().starts_with(&format!(
            "dry run: domain billing in environment {env}: 5 declared; would be 5 created, \
             0 updated, 0 unchanged, 0 pruned\n"
        )),
        "{}",
        plan.stdout
    );
    let plan = run(apply(&base, &[&file, "--dry-run", "-o", "json"]), None)
        .await
        .json();
    assert_eq!(plan["declared"], 5);
    assert_eq!(
        plan["counts"],
        json!({"created": 5, "updated": 0, "unchanged": 0, "pruned": 0, "undeclared": 0})
    );

    // An invalid entry is located in the document, and annotated for CI.
    let bad = run(
        apply(&base, &["-", "--dry-run", "-o", "github"]),
        Some("schedules:\n  - schedule_type: billing.ok\n    cron: \"0 3 * * *\"\n  - schedule_type: billing.bad\n    cron: \"99 * * * *\"\n"),
    )
    .await;
    assert_eq!(bad.code, 3, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("standard input:4:5: schedule #2 (billing.bad): cron: minute: 99"),
        "{}",
        bad.stderr
    );
    assert_eq!(
        bad.stdout,
        "::error::schedule #2 (billing.bad): cron: minute: 99 is out of range 0-59\n"
    );
}
