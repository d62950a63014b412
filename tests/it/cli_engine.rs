//! The engine's commands end to end: the real binary against a SQLite file and a real HTTP
//! target on 127.0.0.1.

use std::sync::Arc;

use chrono::{Duration, Utc};
use sentin8_cron::core::clock::{Clock, SystemClock};
use sentin8_cron::core::decl::ScheduleDecl;
use sentin8_cron::core::model::{EnvId, Schedule};
use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};
use sentin8_cron::core::store::Store;
use sentin8_cron::core::target::Target;
use sentin8_cron::store::{self, ConnectOptions};
use serde_json::{Value, json};

use crate::raw_http::{RawServer, Recorded, Reply};

pub struct Cli {
    pub dir: tempfile::TempDir,
    pub url: String,
    pub store: Arc<dyn Store>,
}

impl Cli {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("cron.db").display());
        store::migrate(&url, false).await.unwrap();
        let store = store::connect(&url, &ConnectOptions::default())
            .await
            .unwrap();
        Self { dir, url, store }
    }

    pub async fn run(&self, args: &[&str]) -> (i32, String, String) {
        self.run_logging(args, "error").await
    }

    /// [`Cli::run`] with the log filter `rust_log` (`RUST_LOG`).
    pub async fn run_logging(&self, args: &[&str], rust_log: &str) -> (i32, String, String) {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
            .args(args)
            .env("SENTIN8_CRON_DATABASE_URL", &self.url)
            .env("SENTIN8_CRON_TOKEN", "dev-m2m-token")
            .env("RUST_LOG", rust_log)
            .current_dir(self.dir.path())
            .output()
            .await
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// A schedule that has been due for a few minutes.
    pub async fn overdue_schedule(&self, env: EnvId, base_url: &str, max_retries: u32) -> Schedule {
        let created = SystemClock.now() - Duration::minutes(10);
        let spec = ScheduleDecl {
            schedule_type: "cleanup".into(),
            cron: Some("*/5 * * * *".into()),
            max_retries: Some(max_retries),
            ..ScheduleDecl::default()
        }
        .validate(created)
        .unwrap();
        Ops::new(self.store.clone())
            .schedule_create(
                env,
                CreateSchedule {
                    domain: "ops".into(),
                    spec,
                    target: Target::validate(&json!({"baseUrl": base_url})).unwrap(),
                },
                &Actor {
                    name: "tester".into(),
                    correlation_id: None,
                    now: created,
                },
            )
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn tick_once_fires_due_schedules_through_the_binary() {
    let cli = Cli::new().await;
    let target = RawServer::start(|_: &Recorded| Reply::json(200, json!({"cleaned": 3}))).await;
    let env = EnvId::new();
    let schedule = cli.overdue_schedule(env, &target.url(), 3).await;
    assert!(schedule.next_run_at.unwrap() < Utc::now());

    let (code, stdout, stderr) = cli
        .run(&["tick", "--once", "--dry-run", "--output", "json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["would_fire"][0]["schedule_id"], json!(schedule.id));
    assert!(target.requests().is_empty(), "a dry run fires nothing");

    let (code, stdout, stderr) = cli.run(&["tick", "--once", "--output", "json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["due"], 1);
    assert_eq!(summary["fired"], 1);
    assert_eq!(summary["succeeded"], 1);
    let calls = target.requests();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].bearer(), Some("dev-m2m-token"));
    assert_eq!(calls[0].json()["schedule_id"], json!(schedule.id));

    let (code, stdout, _) = cli.run(&["tick", "--once"]).await;
    assert_eq!(code, 0);
    assert!(stdout.contains("landed in DLQ"), "{stdout}");
    assert_eq!(target.requests().len(), 1, "nothing is due any more");

    let env_text = env.to_string();
    let (code, stdout, _) = cli
        .run(&["jobs", "list", "--env", &env_text, "--output", "json"])
        .await;
    assert_eq!(code, 0);
    let jobs: Value = serde_json::from_str(&stdout).unwrap();
    let jobs = jobs["items"].as_array().unwrap();
    let fired = jobs.iter().find(|j| j["status"] == "succeeded").unwrap();
    assert_eq!(fired["result"], json!({"cleaned": 3}));
    // The schedule was overdue by more than one occurrence: the ones nobody fired are on the
    // record as one skipped job, with the first, the last and the count.
    let missed = jobs.iter().find(|j| j["status"] == "skipped").unwrap();
    assert!(missed["missed"]["count"].as_u64().unwrap() >= 1, "{missed}");
    assert!(missed["missed"]["first"].is_string(), "{missed}");
}

#[tokio::test]
async fn failed_jobs_reach_the_dlq_and_republish_from_the_cli() {
    let cli = Cli::new().await;
    let target = RawServer::start(|_: &Recorded| Reply::status(500)).await;
    let env = EnvId::new();
    cli.overdue_schedule(env, &target.url(), 0).await;

    // The tick did its work but a call failed: its own exit status, 3.
    let (code, stdout, stderr) = cli.run(&["tick", "--once", "--output", "json"]).await;
    assert_eq!(code, 3, "{stderr}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["dead_lettered"], 1);

    let (code, stdout, _) = cli.run(&["dlq", "list", "--output", "json"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    let entry = &listed["items"][0];
    assert_eq!(entry["last_error"], "proxy-back status 500");
    let id = entry["id"].as_str().unwrap().to_owned();

    // One entry, and its job, from the database.
    let env_text = env.to_string();
    let (code, stdout, stderr) = cli
        .run(&["dlq", "get", &id, "--env", &env_text, "-o", "json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let one: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(&one, entry);
    let job_id = entry["job_id"].as_str().unwrap().to_owned();
    let (code, stdout, stderr) = cli
        .run(&["jobs", "get", &job_id, "--env", &env_text, "-o", "json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let job: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(job["id"], entry["job_id"]);
    assert_eq!(job["status"], "failed");
    assert_eq!(job["error"], "proxy-back status 500");

    let (code, _, stderr) = cli.run(&["dlq", "republish", &id]).await;
    assert_ne!(code, 0, "the environment is required");
    assert!(stderr.contains("--env"), "{stderr}");

    let (code, stdout, stderr) = cli
        .run(&["dlq", "republish", &id, "--env", &env_text])
        .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("republished"), "{stdout}");
    let (code, stdout, stderr) = cli.run(&["dlq", "list"]).await;
    assert_eq!(code, 0);
    assert_eq!(stdout, "", "an empty list prints no rows");
    assert!(stderr.contains("no dead-letter entries found"), "{stderr}");

    // The republished job runs on the next tick.
    cli.run(&["tick", "--once"]).await;
    assert_eq!(target.requests().len(), 2);
}

#[tokio::test]
async fn unknown_database_schemes_get_an_actionable_error() {
    let cli = Cli::new().await;
    let (code, _, stderr) = cli
        .run(&["tick", "--once", "--database-url", "mysql://x/y"])
        .await;
    assert_eq!(code, 1);
    assert!(
        stderr.contains("unsupported database URL scheme \"mysql\""),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_database_url_s_secrets_never_reach_the_output() {
    let cli = Cli::new().await;
    // Nothing listens on port 9: every command fails, naming the database it could not reach.
    // The driver's own log lines included: it would print parameters it does not read with
    // their values (`sslpassword`, a mis-cased `PassWord`).
    let url = "postgres://cron:MARK-USERINFO@127.0.0.1:9/cron?sslmode=disable\
               &password=MARK-QUERY&sslpassword=MARK-SSL&PassWord=MARK-CASE";
    let commands = [
        vec!["migrate", "--database-url", url],
        vec!["migrate", "--status", "--database-url", url],
        vec![
            "dlq",
            "list",
            "--env",
            "00000000-0000-0000-0000-000000000001",
            "--database-url",
            url,
        ],
    ];
    for (args, rust_log) in commands
        .iter()
        .flat_map(|args| ["error", "info", "debug"].map(|level| (args, level)))
    {
        let (code, stdout, stderr) = cli.run_logging(args, rust_log).await;
        assert_ne!(code, 0, "{args:?}: {stdout}{stderr}");
        let shown = format!("{stdout}{stderr}");
        assert!(
            !shown.contains("MARK-"),
            "{args:?} (RUST_LOG={rust_log}) showed a secret: {shown}"
        );
        assert!(
            shown.contains("127.0.0.1:9"),
            "{args:?} names the database: {shown}"
        );
    }
}
