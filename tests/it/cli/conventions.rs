//! The command-line conventions: piped output, closed pipes, exit statuses, standard input,
//! errors a person can act on, and the generated completions and manual page.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use super::{run, stderr, stdout};

mod usage;

pub(super) fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sentin8-cron"));
    command
        .env("RUST_LOG", "error")
        .env_remove("SENTIN8_CRON_DATABASE_URL")
        .env_remove("SENTIN8_CRON_ENV")
        .env_remove("SENTIN8_CRON_SERVER")
        .env_remove("SENTIN8_CRON_API_TOKEN");
    command
}

/// Reads one line of the command's output, closes the pipe, and returns how it ended.
fn first_line_then_close(args: &[&str]) -> (String, Option<i32>, String) {
    let mut child = binary()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    drop(reader);
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (line, status.code(), err)
}

#[test]
fn a_closed_pipe_ends_quietly_with_status_0() {
    let (line, code, err) =
        first_line_then_close(&["next-fires", "* * * * *", "-n", "10000", "-o", "text"]);
    assert!(line.ends_with("Z\n"), "{line}");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
    let (line, code, err) = first_line_then_close(&["--print-registration"]);
    assert_eq!(line, "{\n");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
}

#[test]
fn a_closed_pipe_does_not_hide_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schedules.yaml");
    let mut text = String::from("schedules:\n");
    // Enough output that it cannot all fit in the pipe before the reader closes it.
    for n in 0..2000 {
        text.push_str(&format!(
            "  - schedule_type: bad.n{n}\n    cron: \"61 * * * *\"\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    // Standard error goes to a file: its 2000 lines would fill a pipe nobody reads yet.
    let errors = dir.path().join("stderr");
    let mut child = binary()
        .args([
            "validate-expr",
            "--file",
            &file.display().to_string(),
            "-o",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    drop(reader);
    let code = child.wait().unwrap().code();
    let err = std::fs::read_to_string(&errors).unwrap();
    assert_eq!(line, "{\n");
    assert_eq!(
        code,
        Some(3),
        "the invalid file's status survives the closed pipe: {err}"
    );
    assert!(err.contains("bad.n0"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}

#[test]
fn piped_tables_are_plain_aligned_columns_with_utc_seconds() {
    let output = run(&[
        "next-fires",
        "0 2 * * *",
        "--tz",
        "Europe/London",
        "-n",
        "2",
        "--after",
        "2030-01-01T00:00:00.123456+01:00",
    ]);
    let text = stdout(&output);
    assert!(!text.contains(['│', '┆', '─', '┌']), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "next fires of \"0 2 * * *\" in Europe/London after 2029-12-31T23:00:00Z"
    );
    assert!(lines[1].starts_with("At 02:00 (Europe/London)"), "{text}");
    assert_eq!(
        lines[2].split_whitespace().collect::<Vec<_>>(),
        ["#", "UTC", "local", "DST"]
    );
    assert_eq!(
        lines[3].split_whitespace().collect::<Vec<_>>(),
        ["1", "2030-01-01T02:00:00Z", "2030-01-01T02:00:00+00:00"]
    );
    // Columns line up: every row's second column starts where the header's does.
    let at = lines[2].find("UTC").unwrap();
    assert_eq!(lines[3].find("2030").unwrap(), at);
}

#[test]
fn exit_statuses_tell_usage_runtime_and_invalid_input_apart() {
    assert_eq!(run(&["validate-expr", "@daily"]).status.code(), Some(0));
    assert_eq!(run(&["validate-expr", "61 * * * *"]).status.code(), Some(3));
    assert_eq!(
        run(&["validate-expr", "--no-such-flag"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(&["schedules", "list"]).status.code(),
        Some(2),
        "--env is required"
    );
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("none.db").display());
    let env = uuid::Uuid::now_v7().to_string();
    let runtime = run(&["jobs", "list", "--env", &env, "--database-url", &url]);
    assert_eq!(runtime.status.code(), Some(1), "{}", stderr(&runtime));
}

#[test]
fn usage_errors_of_the_api_commands_exit_2_and_bad_documents_3() {
    let status = |args: &[&str]| {
        let output = binary()
            .args(args)
            .env_remove("SENTIN8_CRON_SERVER")
            .env_remove("SENTIN8_CRON_API_TOKEN")
            .output()
            .unwrap();
        (output.status.code(), stderr(&output))
    };
    let env = uuid::Uuid::now_v7().to_string();
    let id = uuid::Uuid::now_v7().to_string();
    // Nothing below reaches a server: each is refused before any request.
    let server = "http://127.0.0.1:1";
    let (code, err) = status(&["schedules", "list", "--env", &env]);
    assert_eq!(code, Some(2), "no --server: {err}");
    assert!(err.contains("pass --server URL"), "{err}");
    let (code, err) = status(&["schedules", "patch", &id, "--env", &env, "--server", server]);
    assert_eq!(code, Some(2), "nothing to change: {err}");
    assert!(err.contains("nothing to change"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("fields.json");
    std::fs::write(&bad, "{\"cron\": ").unwrap();
    let bad = bad.display().to_string();
    let (code, err) = status(&[
        "schedules",
        "create",
        "--env",
        &env,
        "--server",
        server,
        "-f",
        &bad,
    ]);
    assert_eq!(code, Some(3), "a document that does not parse: {err}");
    assert!(err.contains("is not valid JSON"), "{err}");
    let (code, err) = status(&[
        "schedules",
        "patch",
        &id,
        "--env",
        &env,
        "--server",
        server,
        "-f",
        &bad,
    ]);
    assert_eq!(code, Some(3), "{err}");

    // A missing file is a runtime failure wherever it is read.
    let (code, err) = status(&[
        "schedules",
        "apply",
        "-f",
        "/nonexistent/schedules.yaml",
        "--env",
        &env,
        "--domain",
        "billing",
        "--base-url",
        "https://billing.internal",
        "--server",
        server,
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cannot read /nonexistent/schedules.yaml"),
        "{err}"
    );
}

#[test]
fn a_file_of_dash_is_standard_input() {
    let mut child = binary()
        .args(["validate-expr", "--file", "-", "-o", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"schedules:\n  - schedule_type: a.b\n    cron: \"*/5 * * * *\"\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["valid"], true);
    assert_eq!(report["schedules"], 1);
}

#[test]
fn read_only_commands_never_create_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let env = uuid::Uuid::now_v7().to_string();
    let db = dir.path().join("sentin8-cron.db");
    let in_dir = |args: &[&str]| {
        binary()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let jobs = in_dir(&["jobs", "list", "--env", &env]);
    assert_eq!(jobs.status.code(), Some(1));
    let absolute = std::fs::canonicalize(dir.path())
        .unwrap()
        .join("sentin8-cron.db");
    assert_eq!(
        stderr(&jobs).lines().next().unwrap(),
        format!(
            "error: no database at {}: the file does not exist (check --database-url, or create \
             it with `sentin8-cron migrate --database-url sqlite://{}`)",
            absolute.display(),
            absolute.display()
        )
    );
    assert!(!db.exists());
    let dlq = in_dir(&["dlq", "list"]);
    assert_eq!(dlq.status.code(), Some(1));
    assert!(!db.exists());
    let dry_run = in_dir(&["tick", "--once", "--dry-run"]);
    assert_eq!(dry_run.status.code(), Some(1), "{}", stderr(&dry_run));
    assert!(
        stderr(&dry_run).contains("no database at"),
        "{}",
        stderr(&dry_run)
    );
    assert!(!db.exists(), "tick --dry-run creates nothing");
    let status = in_dir(&["migrate", "--status", "-o", "json"]);
    assert_eq!(status.status.code(), Some(0), "{}", stderr(&status));
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(
        report["migrations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["state"] == "pending")
    );
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .contains("no database at")
    );
    assert!(!db.exists(), "migrate --status changes nothing");
}

#[test]
fn a_refused_connection_is_reported_at_once_with_host_and_cause() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let env = uuid::Uuid::now_v7().to_string();
    let url = format!("postgres://nouser@127.0.0.1:{port}/cron");
    let output = run(&["jobs", "list", "--env", &env, "--database-url", &url]);
    assert_eq!(output.status.code(), Some(1));
    // The refusal itself ended the command, not a pool's acquire timeout: the one line names
    // the refused connection and no timeout.
    assert_eq!(
        stderr(&output).trim(),
        format!("error: cannot connect to PostgreSQL at 127.0.0.1:{port}: connection refused")
    );
    assert!(
        !stderr(&output).contains("timed out"),
        "{}",
        stderr(&output)
    );
    let server = format!("http://127.0.0.1:{port}");
    let output = run(&[
        "schedules",
        "list",
        "--env",
        &env,
        "--server",
        &server,
        "--token",
        "t",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim(),
        format!("error: cannot reach {server}: connection refused")
    );
    let bare = run(&[
        "schedules",
        "list",
        "--env",
        &env,
        "--server",
        "127.0.0.1:8080",
    ]);
    assert_eq!(bare.status.code(), Some(2));
    assert!(
        stderr(&bare).contains("give one such as http://127.0.0.1:8080"),
        "{}",
        stderr(&bare)
    );
}

#[tokio::test]
async fn a_database_error_is_said_once() {
    let Some(db) = crate::support::PgTestDb::create().await else {
        return;
    };
    let url = crate::support::with_user_and_db(&crate::support::admin_url(), "nouser", &db.name);
    let env = uuid::Uuid::now_v7().to_string();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(["jobs", "list", "--env", &env, "--database-url", &url])
        .env("RUST_LOG", "error")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert_eq!(
        err.matches("role \"nouser\" does not exist").count(),
        1,
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn logs_carry_no_colour_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tick.db").display());
    let output = binary()
        .args(["tick", "--database-url", &url, "-vv"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("DEBUG") || err.contains("INFO"),
        "-vv logs: {err}"
    );
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn completions_and_the_manual_page_are_generated() {
    for shell in ["bash", "zsh", "fish"] {
        let output = run(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0));
        let script = stdout(&output);
        assert!(script.contains("schedules"), "{shell}");
        assert!(script.contains("no-headers"), "{shell}");
    }
    let man = run(&["man"]);
    assert_eq!(man.status.code(), Some(0));
    let page = stdout(&man);
    assert!(
        page.starts_with(".ie") || page.contains(".TH sentin8-cron"),
        "{page}"
    );
    assert!(page.contains("schedules"));
}

#[test]
fn every_command_shows_examples_in_its_help() {
    for command in [
        &["schedules", "--help"][..],
        &["schedules", "list", "--help"],
        &["schedules", "apply", "--help"],
        &["jobs", "--help"],
        &["dlq", "--help"],
        &["audit", "--help"],
        &["tick", "--help"],
        &["completions", "--help"],
    ] {
        let output = run(command);
        assert_eq!(output.status.code(), Some(0));
        assert!(stdout(&output).contains("Example"), "{command:?}");
    }
    let top = stdout(&run(&["--help"]));
    assert!(top.contains("Exit status: 0 ok, 1 runtime error, 2 usage error, 3 invalid input"));
    assert!(top.contains("RUST_LOG"));
}
