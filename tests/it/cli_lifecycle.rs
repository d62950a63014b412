//! The life-cycle commands end to end through the real binary: the attempts in `jobs list`,
//! `dlq discard` and `audit list`.

use sentin8_cron::core::model::EnvId;
use serde_json::Value;

use crate::cli_engine::Cli;
use crate::raw_http::{RawServer, Recorded, Reply};

#[tokio::test]
async fn attempts_discard_and_the_audit_journal_from_the_cli() {
    let cli = Cli::new().await;
    let target = RawServer::start(|_: &Recorded| Reply::status(502)).await;
    let env = EnvId::new();
    let env_text = env.to_string();
    let schedule = cli.overdue_schedule(env, &target.url(), 0).await;
    let (code, _, stderr) = cli.run(&["tick", "--once"]).await;
    assert_eq!(code, 0, "{stderr}");

    let (code, stdout, stderr) = cli
        .run(&["jobs", "list", "--env", &env_text, "--output", "json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let jobs: Value = serde_json::from_str(&stdout).unwrap();
    let attempt = &jobs["jobs"][0]["attempts"][0];
    assert_eq!(attempt["attempt"], 1);
    assert_eq!(attempt["outcome"], "failed");
    assert_eq!(attempt["http_status"], 502);
    let (_, table, _) = cli.run(&["jobs", "list", "--env", &env_text]).await;
    assert!(table.contains("#1 failed 502 status"), "{table}");

    let (_, stdout, _) = cli.run(&["dlq", "list", "--output", "json"]).await;
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let id = listed["entries"][0]["id"].as_str().unwrap().to_owned();
    let (code, _, stderr) = cli.run(&["dlq", "discard", &id]).await;
    assert_ne!(code, 0, "the environment is required");
    assert!(stderr.contains("--env"), "{stderr}");
    let (code, stdout, stderr) = cli.run(&["dlq", "discard", &id, "--env", &env_text]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("discarded"), "{stdout}");
    let (_, stdout, _) = cli.run(&["dlq", "list"]).await;
    assert!(stdout.contains("empty"), "{stdout}");
    let (code, _, _) = cli.run(&["dlq", "discard", &id, "--env", &env_text]).await;
    assert_ne!(code, 0, "already discarded");

    let schedule_text = schedule.id.to_string();
    let (code, stdout, stderr) = cli
        .run(&[
            "audit",
            "list",
            "--env",
            &env_text,
            "--schedule",
            &schedule_text,
            "--output",
            "json",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let journal: Value = serde_json::from_str(&stdout).unwrap();
    let actions: Vec<&str> = journal["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["dlq.discard", "schedule.create"], "newest first");
    let (code, table, _) = cli.run(&["audit", "list", "--env", &env_text]).await;
    assert_eq!(code, 0);
    assert!(table.contains("dlq.discard"), "{table}");
    let other = EnvId::new().to_string();
    let (_, empty, _) = cli.run(&["audit", "list", "--env", &other]).await;
    assert!(empty.contains("no audit entries"), "{empty}");
}
