//! The command-line conventions: piped output, closed pipes, exit statuses, standard input,
//! errors a person can act on, and the generated completions and manual page.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use super::{run, stderr, stdout};

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sentin8-cron"));
    command
        .env("RUST_LOG", "error")
        .env_remove("SENTIN8_CRON_DATABASE_URL");
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
    let started = std::time::Instant::now();
    let output = run(&["jobs", "list", "--env", &env, "--database-url", &url]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        stderr(&output).trim(),
        format!("error: cannot connect to PostgreSQL at 127.0.0.1:{port}: connection refused")
    );
    // Not after a pool's 10 s acquire timeout (a bound, not a measurement).
    assert!(started.elapsed() < std::time::Duration::from_secs(8));
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
fn serve_binds_before_it_opens_or_prints_anything() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = run(&["serve", "--database-url", &url, "--listen", &address]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!("error: cannot listen on {address}")),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output), "", "no token, no URL");
    assert!(!dir.path().join("serve.db").exists(), "not migrated");

    let bare = run(&["serve", "--database-url", &url, "--listen", "8081"]);
    assert_eq!(bare.status.code(), Some(1));
    assert!(
        stderr(&bare).contains("127.0.0.1:8081"),
        "{}",
        stderr(&bare)
    );
    assert!(stderr(&bare).contains("0.0.0.0:8081"), "{}", stderr(&bare));
}

#[test]
fn serve_prints_the_port_it_bound() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let mut child = binary()
        .args(["serve", "--database-url", &url, "--listen", "127.0.0.1:0"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut printed = Vec::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        let done = line.starts_with("listening on ");
        printed.push(std::mem::take(&mut line));
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let listening = printed.last().unwrap().trim().to_owned();
    let port: u16 = listening.rsplit(':').next().unwrap().parse().unwrap();
    assert!(
        listening.starts_with("listening on http://127.0.0.1:"),
        "{listening}"
    );
    assert_ne!(port, 0);
    let curl = printed.iter().find(|l| l.contains("curl")).unwrap();
    assert!(
        curl.contains(&format!("http://127.0.0.1:{port}/v1/health")),
        "{curl}"
    );
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
