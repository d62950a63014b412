//! The life-cycle commands end to end through the real binary, straight from the database:
//! the attempts in `jobs get`, `dlq discard` and `audit list`.

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
    assert_eq!(code, 3, "a tick whose jobs failed exits 3: {stderr}");

    let (code, stdout, stderr) = cli
        .run(&["jobs", "list", "--env", &env_text, "--output", "json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let jobs: Value = serde_json::from_str(&stdout).unwrap();
    // The overdue schedule's missed occurrences are a skipped record beside the failed job.
    let failed = jobs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["status"] == "failed")
        .unwrap_or_else(|| panic!("a failed job: {jobs}"));
    let job_id = failed["id"].as_str().unwrap().to_owned();
    let (code, stdout, stderr) = cli
        .run(&["jobs", "get", &job_id, "--env", &env_text, "-o", "json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let job: Value = serde_json::from_str(&stdout).unwrap();
    let attempt = &job["attempts"][0];
    assert_eq!(attempt["attempt"], 1);
    assert_eq!(attempt["outcome"], "failed");
    assert_eq!(attempt["http_status"], 502);
    assert_eq!(attempt["error_class"], "status");
    let (_, table, _) = cli.run(&["jobs", "get", &job_id, "--env", &env_text]).await;
    let attempt_row = table
        .lines()
        .find(|line| line.starts_with("1 "))
        .unwrap_or_else(|| panic!("an attempts row: {table}"));
    let cells: Vec<&str> = attempt_row.split_whitespace().collect();
    assert_eq!(cells[0], "1", "{table}");
    assert!(
        cells.contains(&"failed") && cells.contains(&"502"),
        "{table}"
    );

    let (_, stdout, _) = cli.run(&["dlq", "list", "--output", "json"]).await;
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let id = listed["items"][0]["id"].as_str().unwrap().to_owned();
    let (code, _, stderr) = cli.run(&["dlq", "discard", &id]).await;
    assert_ne!(code, 0, "the environment is required");
    assert!(stderr.contains("--env"), "{stderr}");
    let (code, stdout, stderr) = cli.run(&["dlq", "discard", &id, "--env", &env_text]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("discarded"), "{stdout}");
    let (_, stdout, _) = cli.run(&["dlq", "list"]).await;
    assert!(stdout.is_empty(), "no entries left: {stdout}");
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
    let actions: Vec<&str> = journal["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["dlq.discard", "schedule.create"], "newest first");
    assert_eq!(journal["next_cursor"], Value::Null, "the whole journal");
    // Read from the database directly, a page at a time: the cursor goes on where it stopped.
    let page = |extra: &[&str]| {
        let mut args = vec![
            "audit",
            "list",
            "--env",
            &env_text,
            "--schedule",
            &schedule_text,
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        args.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let read = |args: Vec<String>| {
        let cli = &cli;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stdout, stderr) = cli.run(&args).await;
            assert_eq!(code, 0, "{stderr}");
            serde_json::from_str::<Value>(&stdout).unwrap()
        }
    };
    let first = read(page(&["--limit", "1"])).await;
    assert_eq!(first["items"][0]["action"], "dlq.discard", "{first}");
    let cursor = first["next_cursor"]
        .as_str()
        .expect("cut short: a cursor")
        .to_owned();
    let rest = read(page(&["--cursor", &cursor])).await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 1, "{rest}");
    assert_eq!(rest["items"][0]["action"], "schedule.create", "{rest}");
    let all = read(page(&["--all"])).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 2, "{all}");
    let (code, _, stderr) = cli
        .run(&[
            "audit",
            "list",
            "--env",
            &env_text,
            "--cursor",
            "not-a-cursor",
        ])
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("is not a cursor"), "{stderr}");
    let (code, table, _) = cli.run(&["audit", "list", "--env", &env_text]).await;
    assert_eq!(code, 0);
    assert!(table.contains("dlq.discard"), "{table}");
    let other = EnvId::new().to_string();
    let (code, empty, _) = cli.run(&["audit", "list", "--env", &other]).await;
    assert_eq!(code, 0);
    assert!(
        empty.is_empty(),
        "another environment's journal is empty: {empty}"
    );
}
