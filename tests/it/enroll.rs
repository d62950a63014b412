//! `sentin8-cron enroll` end to end: the real binary against a real database (a SQLite file, or
//! a fresh PostgreSQL database reached as the service role), checked through the store: rows,
//! outbox events and audit entries. Run on both backends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Timelike, Utc};
use sentin8_cron::core::events;
use sentin8_cron::core::model::{AuditEntry, EnvId, OutboxEvent, Schedule, ScheduleStatus};
use sentin8_cron::core::ops::{Actor, Ops};
use sentin8_cron::core::store::{ScheduleQuery, Store};
use serde_json::{Value, json};

const BILLING_EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/billing.schedules.yaml"
);

/// A test database as the binary reaches it.
pub struct Db {
    pub store: Arc<dyn Store>,
    /// The URL the binary connects with (PostgreSQL: the service role).
    pub url: String,
    /// A URL that may change the schema (PostgreSQL: the owner), for failure injection.
    pub owner_url: String,
}

pub struct Enroll {
    pub store: Arc<dyn Store>,
    pub url: String,
    pub owner_url: String,
    pub env: EnvId,
    pub dir: tempfile::TempDir,
}

/// The outcome of one run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn failed(self) -> Self {
        assert_eq!(
            self.code, 1,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("not JSON ({err}):\n{}", self.stdout))
    }
}

impl Enroll {
    pub fn new(db: Db) -> Self {
        Self {
            store: db.store,
            url: db.url,
            owner_url: db.owner_url,
            env: EnvId::new(),
            dir: tempfile::tempdir().expect("temporary directory"),
        }
    }

    /// Runs the binary with these arguments.
    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, &[]).await
    }

    /// Runs the binary with these arguments and extra environment variables.
    pub async fn run_with(&self, args: &[&str], vars: &[(&str, &str)]) -> Run {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
            .args(args)
            .env("SENTIN8_CRON_DATABASE_URL", &self.url)
            .env("USER", "tester")
            .env("RUST_LOG", "error")
            .envs(vars.iter().copied())
            .current_dir(self.dir.path())
            .output()
            .await
            .expect("the binary runs");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// `enroll --env <env> --domain billing <args>`, with `--platform-domain apps.example.test`
    /// unless the arguments name a target.
    pub async fn enroll(&self, args: &[&str]) -> Run {
        let env = self.env.to_string();
        let mut all = vec!["enroll", "--env", &env, "--domain", "billing"];
        all.extend_from_slice(args);
        if !args
            .iter()
            .any(|a| a.starts_with("--base-url") || a.starts_with("--platform-domain"))
        {
            all.extend(["--platform-domain", "apps.example.test"]);
        }
        self.run(&all).await
    }

    /// Writes a declaration file into the test's directory.
    pub fn write(&self, name: &str, text: &str) -> String {
        let path: PathBuf = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write the declaration file");
        path.display().to_string()
    }

    /// Every schedule of the environment, deleted ones too, by schedule_type (the live one wins).
    pub async fn schedules(&self) -> BTreeMap<String, Schedule> {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        let all = tx
            .schedule_list(&ScheduleQuery {
                include_deleted: true,
                limit: 1000,
                ..ScheduleQuery::default()
            })
            .await
            .unwrap();
        let mut by_type = BTreeMap::new();
        for schedule in all {
            let live = schedule.status != ScheduleStatus::Deleted;
            let replace = by_type
                .get(&schedule.schedule_type)
                .is_none_or(|known: &Schedule| known.status == ScheduleStatus::Deleted && live);
            if replace {
                by_type.insert(schedule.schedule_type.clone(), schedule);
            }
        }
        by_type
    }

    pub async fn schedule(&self, schedule_type: &str) -> Schedule {
        self.schedules()
            .await
            .remove(schedule_type)
            .unwrap_or_else(|| panic!("no schedule {schedule_type}"))
    }

    pub async fn outbox(&self) -> Vec<OutboxEvent> {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.outbox_list(0, 1000).await.unwrap()
    }

    pub async fn audit(&self) -> Vec<AuditEntry> {
        let mut tx = self.store.tenant_begin(self.env).await.unwrap();
        tx.audit_list(1000).await.unwrap()
    }

    /// The timestamps and ids in `text` replaced by placeholders.
    pub fn normalise(&self, text: &str) -> String {
        normalise_times(&text.replace(&self.env.to_string(), "<env>"))
    }
}

/// Replaces every `YYYY-MM-DDTHH:MM:SSZ` timestamp by that literal placeholder (same width,
/// so tables stay aligned).
pub fn normalise_times(text: &str) -> String {
    const PATTERN: &[u8; 20] = b"0000-00-00T00:00:00Z";
    let mut bytes = text.as_bytes().to_vec();
    let mut i = 0;
    while i + PATTERN.len() <= bytes.len() {
        let window = &bytes[i..i + PATTERN.len()];
        let matches = window.iter().zip(PATTERN).all(|(b, p)| match p {
            b'0' => b.is_ascii_digit(),
            other => b == other,
        });
        if matches {
            bytes[i..i + PATTERN.len()].copy_from_slice(b"YYYY-MM-DDTHH:MM:SSZ");
            i += PATTERN.len();
        } else {
            i += 1;
        }
    }
    String::from_utf8(bytes).expect("ASCII replaced by ASCII")
}

/// An enroll JSON report with ids and times replaced by placeholders (null stays null).
pub fn normalise_report(mut report: Value) -> Value {
    report["env_id"] = json!("<env>");
    for change in report["changes"].as_array_mut().expect("changes") {
        if change["schedule_id"].is_string() {
            change["schedule_id"] = json!("<id>");
        }
        if change["next_run_at"].is_string() {
            change["next_run_at"] = json!("<time>");
        }
    }
    report
}

fn event_types(events: &[OutboxEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e.event_type.clone(),
                e.payload["schedule_type"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

const THREE: &str = r#"
schedules:
  - schedule_type: billing.nightly
    cron: "0 6 * * *"
    payload: { ledger: eu }
  - schedule_type: billing.reminders
    cron: "30 2 * * MON-FRI"
    timezone: America/New_York
    payload: { channel: email }
    max_retries: 5
  - schedule_type: billing.cutover
    run_at: "2099-06-01T00:00:00Z"
"#;

pub async fn enrolls_a_file_and_re_enrolling_changes_nothing(db: Db) {
    let t = Enroll::new(db);
    let run = t.enroll(&["--file", BILLING_EXAMPLE]).await.ok();
    assert_eq!(
        t.normalise(&run.stdout),
        "\
domain billing in environment <env>: 5 created, 0 updated, 0 unchanged, 0 pruned
┌─────────┬─────────────────────────────────┬─────────┬──────────────────────┐
│ action  ┆ schedule_type                   ┆ changed ┆ next run (UTC)       │
╞═════════╪═════════════════════════════════╪═════════╪══════════════════════╡
│ created ┆ billing.invoice-run             ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
│ created ┆ billing.dunning-reminders       ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
│ created ┆ billing.usage-rollup            ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
│ created ┆ billing.card-expiry-scan        ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
│ created ┆ billing.legacy-gateway-shutdown ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
└─────────┴─────────────────────────────────┴─────────┴──────────────────────┘
"
    );

    let schedules = t.schedules().await;
    assert_eq!(schedules.len(), 5);
    for schedule in schedules.values() {
        assert_eq!(schedule.domain, "billing");
        assert_eq!(schedule.status, ScheduleStatus::Active);
        assert_eq!(
            schedule.target.config(),
            &json!({"baseUrl": "https://billing.apps.example.test"})
        );
        assert_eq!(schedule.created_by, "enroll:tester");
        assert!(schedule.next_run_at.unwrap() > Utc::now() - Duration::minutes(1));
    }
    let invoice = &schedules["billing.invoice-run"];
    assert_eq!(invoice.timing.cron_expression(), Some("0 6 1 * *"));
    assert_eq!(invoice.timing.timezone(), Some("Europe/Berlin"));
    assert_eq!(invoice.payload, json!({"ledger": "eu", "dry_run": false}));
    assert_eq!(invoice.max_retries, 5);

    let outbox = t.outbox().await;
    assert_eq!(outbox.len(), 5);
    for event in &outbox {
        assert_eq!(event.event_type, events::SCHEDULE_CREATED);
        assert_eq!(event.payload["actor"], "enroll:tester");
        assert_eq!(event.payload["domain"], "billing");
    }
    let audit = t.audit().await;
    assert_eq!(audit.len(), 5);
    assert!(
        audit
            .iter()
            .all(|a| a.action == "schedule.create" && a.actor == "enroll:tester")
    );

    // Again, as JSON: everything is unchanged and nothing is written.
    let run = t
        .enroll(&["--file", BILLING_EXAMPLE, "--output", "json"])
        .await
        .ok();
    let report = run.json();
    for change in report["changes"].as_array().unwrap() {
        let schedule = &schedules[change["schedule_type"].as_str().unwrap()];
        assert_eq!(change["schedule_id"], json!(schedule.id));
        assert_eq!(change["next_run_at"], json!(schedule.next_run_at));
    }
    assert_eq!(
        normalise_report(report),
        json!({
            "env_id": "<env>",
            "domain": "billing",
            "dry_run": false,
            "changes": [
                {"schedule_type": "billing.invoice-run", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.dunning-reminders", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.usage-rollup", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.card-expiry-scan", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.legacy-gateway-shutdown", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
            ]
        })
    );
    assert_eq!(t.schedules().await, schedules, "no row was written");
    assert_eq!(t.outbox().await.len(), 5, "no event was written");
    assert_eq!(t.audit().await.len(), 5, "no audit entry was written");

    // The same declarations as JSON from a command are the same declarations.
    let json_file = t.write(
        "billing.json",
        &serde_json::to_string(&serde_json::json!({"schedules": [
            {"schedule_type": "billing.usage-rollup", "cron": "*/15 * * * *", "max_retries": 1}
        ]}))
        .unwrap(),
    );
    let line = format!("cat '{json_file}'");
    let run = t
        .enroll(&["--from-command", &line, "--output", "json"])
        .await
        .ok();
    let actions: Vec<(String, String)> = run.json()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["schedule_type"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("billing.usage-rollup", "unchanged"),
            ("billing.card-expiry-scan", "undeclared"),
            ("billing.dunning-reminders", "undeclared"),
            ("billing.invoice-run", "undeclared"),
            ("billing.legacy-gateway-shutdown", "undeclared"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(t.outbox().await.len(), 5);
}

pub async fn changes_update_only_what_changed(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    t.enroll(&["--file", &file]).await.ok();
    let before = t.schedules().await;
    let nightly = &before["billing.nightly"];
    let reminders = &before["billing.reminders"];

    // Pause one: enroll does not resume it.
    Ops::new(t.store.clone())
        .schedule_pause(
            t.env,
            reminders.id,
            &Actor {
                name: "operator".into(),
                correlation_id: None,
                now: Utc::now(),
            },
        )
        .await
        .unwrap();
    let events_before = t.outbox().await.len();
    let audit_before = t.audit().await.len();

    let changed = THREE
        .replace("cron: \"0 6 * * *\"", "cron: \"30 7 * * *\"")
        .replace("{ channel: email }", "{ channel: sms }");
    let file = t.write("billing.yaml", &changed);
    let started = Utc::now();
    let run = t
        .enroll(&["--file", &file, "--output", "json", "--actor", "deploy-bot"])
        .await
        .ok();
    assert_eq!(
        normalise_report(run.json()),
        json!({
            "env_id": "<env>",
            "domain": "billing",
            "dry_run": false,
            "changes": [
                {"schedule_type": "billing.nightly", "action": "updated", "changed_fields": ["cron"], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.reminders", "action": "updated", "changed_fields": ["payload"], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.cutover", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
            ]
        })
    );

    let after = t.schedules().await;
    // The cron change moved the next fire to the new expression's.
    let moved = &after["billing.nightly"];
    assert_eq!(moved.id, nightly.id);
    assert_eq!(moved.timing.cron_expression(), Some("30 7 * * *"));
    let next = moved.next_run_at.unwrap();
    assert_eq!((next.hour(), next.minute(), next.second()), (7, 30, 0));
    assert!(
        next > started && next <= started + Duration::days(1),
        "{next}"
    );
    assert_eq!(moved.updated_by, "deploy-bot");
    assert!(moved.updated_at > nightly.updated_at);
    // The payload change kept the next fire, and the pause.
    let kept = &after["billing.reminders"];
    assert_eq!(kept.payload, json!({"channel": "sms"}));
    assert_eq!(kept.next_run_at, reminders.next_run_at);
    assert_eq!(kept.status, ScheduleStatus::Paused);
    // The identical one was not written.
    assert_eq!(after["billing.cutover"], before["billing.cutover"]);

    let outbox = t.outbox().await;
    let new_events = &outbox[events_before..];
    assert_eq!(
        event_types(new_events),
        [
            (events::SCHEDULE_UPDATED, "billing.nightly"),
            (events::SCHEDULE_UPDATED, "billing.reminders"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(new_events[0].payload["next_run_at"], json!(next));
    assert_eq!(new_events[0].payload["actor"], "deploy-bot");
    assert_eq!(new_events[1].payload["status"], "paused");
    let audit = t.audit().await;
    let new_audit = &audit[audit_before..];
    assert_eq!(new_audit.len(), 2);
    assert!(
        new_audit
            .iter()
            .all(|a| a.action == "schedule.update" && a.actor == "deploy-bot")
    );
    assert_eq!(
        new_audit[0].before.as_ref().unwrap()["cron_expr"],
        "0 6 * * *"
    );
    assert_eq!(
        new_audit[0].after.as_ref().unwrap()["cron_expr"],
        "30 7 * * *"
    );

    // A new base URL is a target change only: the next fires stay.
    let run = t
        .enroll(&[
            "--file",
            &file,
            "--base-url",
            "http://10.0.0.7:8081/billing",
        ])
        .await
        .ok();
    assert!(
        run.stdout.contains("0 created, 3 updated, 0 unchanged"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("target_config"), "{}", run.stdout);
    for (schedule_type, schedule) in t.schedules().await {
        assert_eq!(schedule.next_run_at, after[&schedule_type].next_run_at);
        assert_eq!(
            schedule.target.config(),
            &json!({"baseUrl": "http://10.0.0.7:8081/billing"})
        );
    }
}

pub async fn undeclared_schedules_are_pruned_only_when_asked(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    t.enroll(&["--file", &file]).await.ok();
    let cutover = t.schedule("billing.cutover").await;
    let two = THREE
        .split("  - schedule_type: billing.cutover")
        .next()
        .unwrap()
        .to_owned();
    let file = t.write("billing.yaml", &two);

    let run = t.enroll(&["--file", &file]).await.ok();
    assert_eq!(
        t.normalise(&run.stdout),
        "\
domain billing in environment <env>: 0 created, 0 updated, 2 unchanged, 0 pruned
┌────────────┬───────────────────┬─────────┬──────────────────────┐
│ action     ┆ schedule_type     ┆ changed ┆ next run (UTC)       │
╞════════════╪═══════════════════╪═════════╪══════════════════════╡
│ unchanged  ┆ billing.nightly   ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
│ unchanged  ┆ billing.reminders ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
│ undeclared ┆ billing.cutover   ┆         ┆ YYYY-MM-DDTHH:MM:SSZ │
└────────────┴───────────────────┴─────────┴──────────────────────┘
would be pruned: 1 (run with --prune)
"
    );
    assert_eq!(t.schedule("billing.cutover").await, cutover);
    assert_eq!(t.outbox().await.len(), 3);

    let run = t
        .enroll(&["--file", &file, "--prune", "--output", "json"])
        .await
        .ok();
    let report = run.json();
    assert_eq!(
        report["changes"][2],
        json!({
            "schedule_type": "billing.cutover",
            "action": "pruned",
            "changed_fields": [],
            "schedule_id": cutover.id,
            "next_run_at": null,
        })
    );
    let pruned = t.schedule("billing.cutover").await;
    assert_eq!(pruned.status, ScheduleStatus::Deleted);
    assert_eq!(pruned.next_run_at, None);
    let outbox = t.outbox().await;
    assert_eq!(
        event_types(&outbox[3..]),
        [(
            events::SCHEDULE_DELETED.to_owned(),
            "billing.cutover".to_owned()
        )]
    );
    assert_eq!(outbox[3].payload["actor"], "enroll:tester");
    let audit = t.audit().await;
    assert_eq!(audit.len(), 4);
    assert_eq!(audit[3].action, "schedule.delete");
    assert_eq!(audit[3].resource_id, cutover.id.to_string());

    // Pruned is gone: declaring it again creates a new schedule.
    let file = t.write("billing.yaml", THREE);
    let run = t
        .enroll(&["--file", &file, "--prune", "--output", "json"])
        .await
        .ok();
    assert_eq!(run.json()["changes"][2]["action"], "created");
    assert_ne!(t.schedule("billing.cutover").await.id, cutover.id);
}

pub async fn dry_runs_write_nothing(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    let run = t
        .enroll(&["--file", &file, "--dry-run", "--output", "json"])
        .await
        .ok();
    assert_eq!(
        normalise_report(run.json()),
        json!({
            "env_id": "<env>",
            "domain": "billing",
            "dry_run": true,
            "changes": [
                {"schedule_type": "billing.nightly", "action": "created", "changed_fields": [], "schedule_id": null, "next_run_at": "<time>"},
                {"schedule_type": "billing.reminders", "action": "created", "changed_fields": [], "schedule_id": null, "next_run_at": "<time>"},
                {"schedule_type": "billing.cutover", "action": "created", "changed_fields": [], "schedule_id": null, "next_run_at": "<time>"},
            ]
        })
    );
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());
    assert!(t.audit().await.is_empty());

    t.enroll(&["--file", &file]).await.ok();
    let before = t.schedules().await;
    let changed = THREE.replace("cron: \"0 6 * * *\"", "cron: \"0 8 * * *\"");
    let only_nightly = changed
        .split("  - schedule_type: billing.reminders")
        .next()
        .unwrap()
        .to_owned();
    let file = t.write("billing.yaml", &only_nightly);
    let run = t
        .enroll(&["--file", &file, "--dry-run", "--prune"])
        .await
        .ok();
    assert_eq!(
        t.normalise(&run.stdout),
        "\
dry run: domain billing in environment <env>: 0 created, 1 updated, 0 unchanged, 2 pruned
┌─────────┬───────────────────┬─────────┬──────────────────────┐
│ action  ┆ schedule_type     ┆ changed ┆ next run (UTC)       │
╞═════════╪═══════════════════╪═════════╪══════════════════════╡
│ updated ┆ billing.nightly   ┆ cron    ┆ YYYY-MM-DDTHH:MM:SSZ │
│ pruned  ┆ billing.cutover   ┆         ┆ -                    │
│ pruned  ┆ billing.reminders ┆         ┆ -                    │
└─────────┴───────────────────┴─────────┴──────────────────────┘
dry run: nothing was written
"
    );
    let report = t
        .enroll(&["--file", &file, "--dry-run", "--output", "json"])
        .await
        .ok()
        .json();
    let next: DateTime<Utc> = serde_json::from_value(report["changes"][0]["next_run_at"].clone())
        .expect("the planned next fire");
    assert_eq!((next.hour(), next.minute()), (8, 0));
    assert_eq!(
        report["changes"][0]["schedule_id"],
        json!(before["billing.nightly"].id)
    );
    assert_eq!(t.schedules().await, before);
    assert_eq!(t.outbox().await.len(), 3);
    assert_eq!(t.audit().await.len(), 3);
}

pub async fn one_bad_entry_aborts_everything(db: Db) {
    let t = Enroll::new(db);
    let file = t.write(
        "billing.yaml",
        r#"
schedules:
  - schedule_type: billing.fine
    cron: "0 6 * * *"
  - schedule_type: billing.bad-cron
    cron: "61 * * * *"
  - schedule_type: billing.also-fine
    run_at: "2099-01-01T00:00:00Z"
  - schedule_type: billing.bad-zone
    cron: "0 6 * * *"
    timezone: Mars/Olympus
    colour: blue
"#,
    );
    let run = t.enroll(&["--file", &file]).await.failed();
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("error: schedule #1 (billing.bad-cron): cron: "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("error: schedule #3 (billing.bad-zone): "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("colour: unknown field"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("timezone: "), "{}", run.stderr);
    assert!(
        run.stderr.contains("2 of 4 schedules in ")
            && run.stderr.contains("are invalid; nothing was enrolled"),
        "{}",
        run.stderr
    );

    let run = t
        .enroll(&["--file", &file, "--output", "json"])
        .await
        .failed();
    let report = run.json();
    assert_eq!(report["valid"], false);
    let indexes: Vec<(u64, &str)> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["schedule_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(indexes, [(1, "billing.bad-cron"), (3, "billing.bad-zone")]);

    // Nothing was written, not even the valid entries.
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());
    assert!(t.audit().await.is_empty());

    // Unusable targets and domains are refused before anything is read.
    let good = t.write("good.yaml", THREE);
    let run = t
        .enroll(&[
            "--file",
            &good,
            "--base-url",
            "https://svc:hunter2@billing.internal",
        ])
        .await
        .failed();
    assert!(
        run.stderr
            .contains("target_config.baseUrl: must not carry credentials"),
        "{}",
        run.stderr
    );
    let run = t
        .enroll(&[
            "--file",
            &good,
            "--platform-domain",
            "apps.example.test/evil",
        ])
        .await
        .failed();
    assert!(run.stderr.contains("platform_domain: "), "{}", run.stderr);
    let env = t.env.to_string();
    let run = t
        .run(&[
            "enroll",
            "--env",
            &env,
            "--domain",
            "bill ing",
            "--file",
            &good,
            "--base-url",
            "https://billing.internal",
        ])
        .await
        .failed();
    assert!(run.stderr.contains("domain: must be"), "{}", run.stderr);
    assert!(t.schedules().await.is_empty());

    // Usage errors are clap's (exit code 2): one document source, one target.
    for args in [
        vec!["--file", good.as_str(), "--from-command", "true"],
        vec!["--file", good.as_str(), "--command-timeout", "5s"],
        vec![
            "--file",
            good.as_str(),
            "--base-url",
            "https://a",
            "--platform-domain",
            "b",
        ],
    ] {
        let run = t.enroll(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("cannot be used with"), "{}", run.stderr);
    }

    // Credentials cannot come in through the document either: it has no target_config.
    let sneaky = t.write(
        "sneaky.yaml",
        "schedules:\n  - schedule_type: x\n    cron: \"@daily\"\n    target_config: { baseUrl: \"https://a\" }\n",
    );
    let run = t.enroll(&["--file", &sneaky]).await.failed();
    assert!(
        run.stderr.contains("target_config: unknown field"),
        "{}",
        run.stderr
    );
    assert!(t.schedules().await.is_empty());
}

pub async fn base_urls_the_callback_cannot_use_are_refused(db: Db) {
    let t = Enroll::new(db);
    let good = t.write("good.yaml", THREE);
    for (base_url, problem) in [
        // Once accepted here ("1 created"), then every fire failed "invalid baseUrl".
        ("http://127.0.0.1:99999", "invalid port number"),
        (
            "ftp://billing.internal",
            "scheme \"ftp\" is not http or https",
        ),
        (
            "http://billing.internal/\r\nX-Evil: 1",
            "control characters",
        ),
        ("http://billing.internal\n", "control characters"),
        ("http://svc@billing.internal", "must not carry credentials"),
        (
            "http://billing.internal/?x=1",
            "must not have a query or fragment",
        ),
    ] {
        let run = t
            .enroll(&["--file", &good, "--base-url", base_url, "--output", "json"])
            .await
            .failed();
        let report = run.json();
        assert_eq!(report["valid"], false, "{base_url:?}");
        let problems = report["problems"].as_array().expect("problems");
        assert_eq!(problems.len(), 1, "{base_url:?}: {problems:?}");
        assert_eq!(
            problems[0]["field"], "target_config.baseUrl",
            "{base_url:?}"
        );
        let message = problems[0]["message"].as_str().unwrap();
        assert!(message.contains(problem), "{base_url:?}: {message}");
        assert!(!run.stdout.contains("created"), "{}", run.stdout);
    }
    // The text output names the field too.
    let run = t
        .enroll(&["--file", &good, "--base-url", "http://127.0.0.1:99999"])
        .await
        .failed();
    assert!(
        run.stderr.contains("target_config.baseUrl: "),
        "{}",
        run.stderr
    );
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());

    // The same base URL is accepted once it is one the callback can use.
    t.enroll(&["--file", &good, "--base-url", "http://127.0.0.1:9999"])
        .await
        .ok();
    assert_eq!(t.schedules().await.len(), 3);
}

pub async fn documents_from_commands(db: Db) {
    let t = Enroll::new(db);

    let run = t
        .enroll(&[
            "--from-command",
            "sh -c 'echo starting; echo broken config >&2; exit 3'",
        ])
        .await
        .failed();
    assert!(
        run.stderr.contains("failed (exit status: 3)") && run.stderr.contains("  broken config"),
        "{}",
        run.stderr
    );

    let run = t
        .enroll(&["--from-command", "echo this is not a declaration document"])
        .await
        .failed();
    assert!(
        run.stderr.contains(
            "the output of `echo this is not a declaration document` is not a valid declaration \
             document: the top level must be an object"
        ),
        "{}",
        run.stderr
    );
    let run = t
        .enroll(&["--from-command", "printf '{\"schedules\": ['"])
        .await
        .failed();
    assert!(run.stderr.contains("invalid JSON"), "{}", run.stderr);

    let started = Instant::now();
    let run = t
        .enroll(&["--from-command", "sleep 30", "--command-timeout", "1s"])
        .await
        .failed();
    assert!(
        run.stderr
            .contains("`sleep 30` did not finish within 1s; it was stopped"),
        "{}",
        run.stderr
    );
    assert!(started.elapsed() < StdDuration::from_secs(20));

    let run = t
        .enroll(&["--from-command", "no-such-program-for-enroll --x"])
        .await
        .failed();
    assert!(
        run.stderr
            .contains("cannot run `no-such-program-for-enroll --x`"),
        "{}",
        run.stderr
    );
    let run = t
        .enroll(&["--from-command", "cat a.yaml | jq ."])
        .await
        .failed();
    assert!(run.stderr.contains("sh -c"), "{}", run.stderr);
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());

    // A command that prints a valid document.
    let file = t.write("billing.yaml", THREE);
    let line = format!("sh -c 'cat \"{file}\"'");
    let run = t.enroll(&["--from-command", &line]).await.ok();
    assert!(run.stdout.contains("3 created"), "{}", run.stdout);
    assert_eq!(t.schedules().await.len(), 3);

    // sentin8-cron's own registration declares no schedules: pruning against it empties the
    // domain.
    let own = format!(
        "{} --print-registration --section=schedules",
        env!("CARGO_BIN_EXE_sentin8-cron")
    );
    let run = t
        .enroll(&["--from-command", &own, "--output", "json"])
        .await
        .ok();
    let report = run.json();
    assert!(
        report["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["action"] == "undeclared"),
        "{report}"
    );
    let run = t.enroll(&["--from-command", &own, "--prune"]).await.ok();
    assert!(run.stdout.contains("3 pruned"), "{}", run.stdout);
    assert!(
        t.schedules()
            .await
            .values()
            .all(|s| s.status == ScheduleStatus::Deleted)
    );
}

/// Makes the database refuse the outbox event of `billing.poison`, as a stand-in for any
/// failure in the middle of an enrollment.
async fn poison_events(owner_url: &str) {
    use sqlx::{Connection, Executor};
    if owner_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(owner_url).await.unwrap();
        conn.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON outbox \
             WHEN json_extract(NEW.payload, '$.schedule_type') = 'billing.poison' \
             BEGIN SELECT RAISE(ABORT, 'poisoned event'); END",
        )
        .await
        .unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(owner_url).await.unwrap();
        conn.execute(
            "CREATE FUNCTION cron.poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN \
               IF NEW.payload->>'schedule_type' = 'billing.poison' THEN \
                 RAISE EXCEPTION 'poisoned event'; \
               END IF; \
               RETURN NEW; \
             END $$",
        )
        .await
        .unwrap();
        conn.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON cron.outbox \
             FOR EACH ROW EXECUTE FUNCTION cron.poison()",
        )
        .await
        .unwrap();
    }
}

pub async fn a_failure_part_way_writes_nothing(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    t.enroll(&["--file", &file]).await.ok();
    let before = t.schedules().await;
    poison_events(&t.owner_url).await;

    // An update, a create, a prune, and then a create whose event the database refuses.
    let changed = THREE
        .replace("cron: \"0 6 * * *\"", "cron: \"0 9 * * *\"")
        .split("  - schedule_type: billing.cutover")
        .next()
        .unwrap()
        .to_owned()
        + "  - schedule_type: billing.new\n    cron: \"@daily\"\n"
        + "  - schedule_type: billing.poison\n    cron: \"@hourly\"\n";
    let file = t.write("billing.yaml", &changed);
    let run = t.enroll(&["--file", &file, "--prune"]).await.failed();
    assert!(
        run.stderr
            .contains("enrollment failed; nothing was written"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(t.schedules().await, before);
    assert_eq!(t.outbox().await.len(), 3);
    assert_eq!(t.audit().await.len(), 3);

    // Without the poisoned entry the same change goes through.
    let healthy = changed.replace("billing.poison", "billing.fine");
    let file = t.write("billing.yaml", &healthy);
    let run = t.enroll(&["--file", &file, "--prune"]).await.ok();
    assert!(
        run.stdout
            .contains("2 created, 1 updated, 1 unchanged, 1 pruned"),
        "{}",
        run.stdout
    );
}

#[macro_export]
macro_rules! enroll_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::enroll as suite;
            $crate::enroll_suite!(@tests $make;
                enrolls_a_file_and_re_enrolling_changes_nothing,
                changes_update_only_what_changed,
                undeclared_schedules_are_pruned_only_when_asked,
                dry_runs_write_nothing,
                one_bad_entry_aborts_everything,
                base_urls_the_callback_cannot_use_are_refused,
                documents_from_commands,
                a_failure_part_way_writes_nothing,
            );
        }
    };
    (@tests $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let Some((db, _guard)) = $make.await else { return };
                suite::$name(db).await;
            }
        )+
    };
}
