//! `sentin8-cron enroll` end to end: the real binary against a real database (a SQLite file, or
//! a fresh PostgreSQL database reached as the service role), checked through the store: rows,
//! outbox events and audit entries. Run on both backends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use sentin8_cron::core::model::{AuditEntry, EnvId, OutboxEvent, Schedule, ScheduleStatus};
use sentin8_cron::core::store::{ScheduleQuery, Store};
use serde_json::{Value, json};

mod calendars;
mod commands;
mod files;
mod refusals;

pub use calendars::*;
pub use commands::*;
pub use files::*;
pub use refusals::*;

pub(crate) const BILLING_EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/billing.schedules.yaml"
);

/// The targets the enroll tests write, allowed by name, as an operator's allow list would.
const TEST_TARGETS: &str =
    "https://*.apps.example.test,https://billing.internal,http://127.0.0.1:*,http://10.0.0.7:8081";

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

    /// Refused as invalid input (exit status 3).
    #[track_caller]
    pub fn invalid(self) -> Self {
        assert_eq!(
            self.code, 3,
            "stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Failed at run time (exit status 1).
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
            // The egress policy of these tests' targets; the policy's own test replaces it.
            .env("SENTIN8_CRON_TARGET_ALLOW", TEST_TARGETS)
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
    // The counts agree with the changes listed; `declared` is checked where the document's
    // size is known.
    let count = |action: &str| {
        report["changes"]
            .as_array()
            .expect("changes")
            .iter()
            .filter(|c| c["action"] == action)
            .count()
    };
    for action in ["created", "updated", "unchanged", "pruned", "undeclared"] {
        assert_eq!(
            report["counts"][action],
            count(action),
            "{action}: {report}"
        );
    }
    assert!(report["declared"].is_u64(), "{report}");
    let object = report.as_object_mut().expect("a report");
    object.remove("counts");
    object.remove("declared");
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

pub(crate) fn event_types(events: &[OutboxEvent]) -> Vec<(String, String)> {
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

pub(crate) const THREE: &str = r#"
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
                targets_outside_the_egress_policy_are_refused,
                documents_from_commands,
                a_failure_part_way_writes_nothing,
                a_large_file_is_written_whole_or_not_at_all,
                declared_calendars_are_enrolled_before_the_schedules_that_name_them,
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
