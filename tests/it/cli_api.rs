//! The operator commands end to end: the real binary talking to a running service (the real
//! `Service` on 127.0.0.1 port 0 over a real store, real HS256 tokens), on SQLite and
//! PostgreSQL, with `-o json` output checked field by field.

use std::process::Stdio;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::api::Api;

mod apply;
mod calendars;
mod describe;
mod dlq;
mod flags;
mod labels;
mod lifecycle_endpoints;
mod next_fires;
mod overlap_modes;
mod paging;
mod schedules;

pub use apply::*;
pub use calendars::*;
pub use describe::*;
pub use dlq::*;
pub use flags::*;
pub use labels::*;
pub use lifecycle_endpoints::*;
pub use next_fires::*;
pub use overlap_modes::*;
pub use paging::*;
pub use schedules::*;

/// What one run of the binary printed, and how it ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Standard output as JSON; the run must have succeeded.
    pub fn json(&self) -> Value {
        assert_eq!(
            self.code, 0,
            "stderr: {}\nstdout: {}",
            self.stderr, self.stdout
        );
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}", self.stdout))
    }

    /// The run succeeded; its standard output.
    pub fn ok(&self) -> &str {
        assert_eq!(
            self.code, 0,
            "stderr: {}\nstdout: {}",
            self.stderr, self.stdout
        );
        &self.stdout
    }
}

/// Runs the binary against `api` with `token` (given through the environment variables, as an
/// operator's shell would), feeding `stdin` when given.
/// Creates, through the CLI, a schedule in environment A whose calls go to `base_url` and that
/// lands in the dead-letter queue at its first failure; returns its id.
pub async fn create_doomed(api: &Api, token: &str, base_url: &str) -> String {
    let env = api.env_a.to_string();
    let created = cli(
        api,
        token,
        &[
            "schedules",
            "create",
            "--env",
            &env,
            "--domain",
            "billing",
            "--type",
            "doomed",
            "--cron",
            "0 2 * * *",
            "--max-retries",
            "0",
            "--base-url",
            base_url,
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    created["id"].as_str().unwrap().to_owned()
}

pub async fn cli(api: &Api, token: &str, args: &[&str], stdin: Option<&str>) -> Run {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(args)
        .env("SENTIN8_CRON_SERVER", &api.base)
        .env("SENTIN8_CRON_API_TOKEN", token)
        .env("RUST_LOG", "error")
        .env("NO_COLOR", "1")
        .env_remove("SENTIN8_CRON_DATABASE_URL")
        .env_remove("SENTIN8_CRON_ENV")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let output = child.wait_with_output().await.unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[macro_export]
macro_rules! cli_api_suite {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use $crate::cli_api as suite;
            $crate::cli_api_suite!(@tests $make;
                schedules_are_managed_from_the_command_line,
                describe_shows_a_schedule_at_a_glance,
                labels_and_bulk_actions_from_the_command_line,
                policies_and_backfill_from_the_command_line,
                overlap_modes_and_a_backfills_own_policy_from_the_command_line,
                calendars_from_the_command_line,
                refused_requests_say_why_with_their_exit_status,
                apply_shows_the_enroll_plan_and_converges,
                apply_dry_run_agrees_with_the_server,
                jobs_and_the_dlq_through_the_api_from_the_command_line,
                dlq_discard_through_the_api,
                audit_list_through_the_api,
                next_fires_lists_the_calls_the_server_makes,
                lists_keep_the_cursor_go_on_from_it_and_read_all,
                bounds_clear_with_none_switches_stand_alone_and_durations_need_units,
            );
        }
    };
    (@tests $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((store, _guard)) = $make.await else { return };
                suite::$name(store).await;
            }
        )+
    };
}
