//! validate-expr and enroll on files: base URLs under the egress policy, every bad entry
//! reported, unreadable files, YAML and JSON reports, GitHub annotations.

use super::*;

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
            "schedules": 5,
            "valid_schedules": 1,
            "invalid_schedules": 4,
            "errors": [
                {"index": 1, "entry": 2, "line": 4, "column": 5, "schedule_type": "broken.cron", "errors": [
                    {"field": "cron", "message": "hour: 25 is out of range 0-23"}]},
                {"index": 2, "entry": 3, "line": 6, "column": 5, "schedule_type": "broken.zone", "errors": [
                    {"field": "timezone", "message": "unknown time zone \"Nowhere/Land\""}]},
                {"index": 3, "entry": 4, "line": 9, "column": 5, "schedule_type": "broken.past", "errors": [
                    {"field": "run_at", "message": "2001-01-01T00:00:00Z is not in the future"}]},
                {"index": 4, "entry": 5, "line": 11, "column": 5, "schedule_type": "fine", "errors": [
                    {"field": "schedule_type", "message": "duplicate schedule_type \"fine\" (first declared as schedule #1)"}]}
            ]
        })
    );

    let table = run(&["validate-expr", "--file", path]);
    assert_eq!(table.status.code(), Some(3));
    let errors = stderr(&table);
    for expected in [
        ":4:5: schedule #2 (broken.cron): cron: hour: 25 is out of range 0-23",
        ":6:5: schedule #3 (broken.zone): timezone: unknown time zone \"Nowhere/Land\"",
        ":9:5: schedule #4 (broken.past): run_at: 2001-01-01T00:00:00Z is not in the future",
        ":11:5: schedule #5 (fine): schedule_type: duplicate",
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

    // A missing file is a runtime failure (1) here as wherever a file is read.
    let missing = run(&["validate-expr", "--file", "/nonexistent/schedules.yaml"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("cannot read /nonexistent/schedules.yaml"));
}

#[test]
fn logging_flags_work_before_and_after_the_subcommand() {
    for args in [
        &["-v", "validate-expr", "@daily"][..],
        &["validate-expr", "@daily", "-v"],
        &["--log-format", "json", "-vv", "validate-expr", "@daily"],
        &["validate-expr", "--log-format", "json", "@daily"],
    ] {
        let output = run(args);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    for args in [
        &["--version", "validate-expr", "@daily"][..],
        &["--print-registration", "validate-expr", "@daily"],
    ] {
        let output = run(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("take no subcommand"),
            "{}",
            stderr(&output)
        );
        assert_eq!(stdout(&output), "");
    }
}

#[test]
fn validate_expr_speaks_yaml_when_asked() {
    let valid = run(&["validate-expr", "@daily", "-o", "yaml"]);
    assert_eq!(valid.status.code(), Some(0), "{}", stderr(&valid));
    assert!(
        stdout(&valid).starts_with("valid: true\n"),
        "{}",
        stdout(&valid)
    );
    let invalid = run(&["validate-expr", "61 * * * *", "-o", "yaml"]);
    assert_eq!(invalid.status.code(), Some(3));
    assert!(
        stdout(&invalid).starts_with("valid: false\n"),
        "{}",
        stdout(&invalid)
    );
    assert!(
        stdout(&invalid).contains("field: cron"),
        "{}",
        stdout(&invalid)
    );
}

#[test]
fn enroll_says_why_an_unparseable_document_is_invalid_in_json_and_yaml() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schedules.json");
    std::fs::write(&file, "{\"schedules\": [").unwrap();
    let enroll = |format: &str| {
        let args = enroll_args(&file, dir.path(), format);
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let output = enroll("json");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["valid"], json!(false));
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("not a valid declaration document"),
        "{report}"
    );
    let output = enroll("yaml");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("valid: false\n"),
        "{}",
        stdout(&output)
    );
    assert!(stdout(&output).contains("error: "), "{}", stdout(&output));
}

#[test]
fn apply_prints_its_invalid_report_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schedules.yaml");
    std::fs::write(
        &file,
        "schedules:\n  - schedule_type: bad.cron\n    cron: \"61 * * * *\"\n",
    )
    .unwrap();
    let env = uuid::Uuid::now_v7().to_string();
    // Invalid input is refused before any request: the server is never reached.
    let output = run(&[
        "schedules",
        "apply",
        "-f",
        &file.display().to_string(),
        "--env",
        &env,
        "--domain",
        "billing",
        "--base-url",
        "http://127.0.0.1:9",
        "--server",
        "http://127.0.0.1:1",
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["valid"], json!(false));
    assert_eq!(
        report["errors"][0]["schedule_type"],
        json!("bad.cron"),
        "{report}"
    );
}

/// `validate-expr --base-url` judges the target by the egress policy `serve` builds from the
/// same settings, and a refusal names the setting that would allow it.
#[test]
fn validate_expr_applies_the_egress_policy_of_serve() {
    let path = example("billing.schedules.yaml");
    let check = |base: &str, settings: &[(&str, &str)], format: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sentin8-cron"));
        for var in [
            "SENTIN8_CRON_TARGET_ALLOW",
            "SENTIN8_CRON_PLATFORM_DOMAIN",
            "SENTIN8_CRON_DATABASE_URL",
            "SENTIN8_CRON_JWKS_URL",
            "SENTIN8_CRON_JWT_HS256_SECRET",
        ] {
            command.env_remove(var);
        }
        command
            .args([
                "validate-expr",
                "--file",
                &path,
                "--base-url",
                base,
                "-o",
                format,
            ])
            .envs(settings.iter().copied())
            .output()
            .expect("the binary runs")
    };
    // The defaults are serve's: development mode, so loopback only.
    for (base, message) in [
        (
            "http://169.254.169.254",
            "169.254.169.254 is a cloud metadata address, which the egress policy does not \
             name: add http://169.254.169.254:80 to SENTIN8_CRON_TARGET_ALLOW",
        ),
        (
            "http://10.0.0.1",
            "add http://10.0.0.1:80 to SENTIN8_CRON_TARGET_ALLOW",
        ),
        (
            "https://billing.example.com",
            "https://billing.example.com:443 is not on the egress allow list: add \
             https://billing.example.com:443 to SENTIN8_CRON_TARGET_ALLOW",
        ),
    ] {
        let output = check(base, &[], "json");
        assert_eq!(output.status.code(), Some(3), "{base}");
        let report = json_out(&output);
        assert_eq!(report["valid"], false);
        assert_eq!(report["schedules"], 5, "every entry is counted");
        assert_eq!(report["problems"][0]["field"], "target_config.baseUrl");
        let text = report["problems"][0]["message"].as_str().unwrap();
        assert!(text.contains(message), "{base}: {text}");
        assert!(
            report["egress_policy"]
                .as_str()
                .unwrap()
                .contains("development mode"),
            "{report}"
        );
        // As a CI annotation on the file.
        let github = check(base, &[], "github");
        assert_eq!(github.status.code(), Some(3));
        let annotation = stdout(&github);
        assert!(
            annotation.starts_with("::error file=")
                && annotation.contains("::target_config.baseUrl: ")
                && annotation.contains(message),
            "{annotation}"
        );
    }
    // The same settings serve reads allow them.
    let allowed = check(
        "http://10.0.0.1",
        &[("SENTIN8_CRON_TARGET_ALLOW", "http://10.0.0.1:80")],
        "table",
    );
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let platform = check(
        "https://billing.svc.example.com",
        &[("SENTIN8_CRON_PLATFORM_DOMAIN", "svc.example.com")],
        "table",
    );
    assert_eq!(platform.status.code(), Some(0), "{}", stderr(&platform));
    // Loopback: allowed in development mode, refused once authentication is configured (as
    // serve refuses it), naming both ways to allow it.
    assert_eq!(
        check("http://127.0.0.1:9000", &[], "table").status.code(),
        Some(0)
    );
    let authenticated = check(
        "http://127.0.0.1:9000",
        &[(
            "SENTIN8_CRON_JWT_HS256_SECRET",
            "0123456789abcdef0123456789abcdef0123",
        )],
        "table",
    );
    assert_eq!(authenticated.status.code(), Some(3));
    let text = stderr(&authenticated);
    assert!(
        text.contains(
            "add http://127.0.0.1:9000 to SENTIN8_CRON_TARGET_ALLOW, or use development mode"
        ),
        "{text}"
    );
    assert!(text.contains("not development mode"), "{text}");
}

/// `-o github`: one workflow command per bad entry, at the entry's line and column, for
/// YAML and JSON alike; a document that does not parse is located where the parser stopped.
#[test]
fn validate_expr_annotates_a_file_for_github() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("bad.schedules.yaml");
    std::fs::write(
        &yaml,
        "schedules:\n  - schedule_type: ok.one\n    cron: \"0 2 * * *\"\n  - schedule_type: bad.minute\n    cron: \"61 * * * *\"\n",
    )
    .unwrap();
    let json_file = dir.path().join("bad.schedules.json");
    std::fs::write(
        &json_file,
        "{\"schedules\": [\n  {\"schedule_type\": \"a\", \"cron\": \"0 0 * * *\"},\n  {\"schedule_type\": \"b\", \"cron\": \"99 0 * * *\"}\n]}\n",
    )
    .unwrap();
    let broken = dir.path().join("broken.schedules.yaml");
    std::fs::write(&broken, "schedules:\n  - [\n").unwrap();
    for (file, expected) in [
        (
            &yaml,
            "line=4,col=5::schedule #2 (bad.minute): cron: minute: 61 is out of range 0-59\n",
        ),
        (
            &json_file,
            "line=3,col=3::schedule #2 (b): cron: minute: 99 is out of range 0-59\n",
        ),
    ] {
        let path = file.to_str().unwrap();
        let output = run(&["validate-expr", "--file", path, "-o", "github"]);
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(
            stdout(&output),
            format!("::error file={},{expected}", path.replace(':', "%3A"))
        );
        let at = expected.split("::").next().unwrap();
        let (line, col) = at.split_once(",col=").unwrap();
        let line = line.trim_start_matches("line=");
        assert!(
            stderr(&output).contains(&format!("{path}:{line}:{col}: schedule #2 (")),
            "{}",
            stderr(&output)
        );
    }
    let output = run(&[
        "validate-expr",
        "--file",
        broken.to_str().unwrap(),
        "-o",
        "github",
    ]);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        stdout(&output).contains(",line=2,col=5::not a valid declaration document: invalid YAML"),
        "{}",
        stdout(&output)
    );
}

/// A declaration's content cannot start a line of its own: under `-o github` such a line
/// would be a workflow command (`::warning::`, `::add-mask::`), on stdout or stderr alike, from
/// any command that reads a declaration (`validate-expr`, `enroll`, `schedules apply`).
#[test]
fn declaration_content_cannot_write_a_workflow_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("forged.schedules.yaml");
    std::fs::write(
        &file,
        "schedules:\n  - schedule_type: \"x\\n::warning::FORGED-TYPE\"\n    cron: \"* * * * *\"\n    \
         timezone: \"Nowhere\\r\\n::warning::FORGED-ZONE\"\n  - schedule_type: ok.one\n    \
         cron: \"61 * * * *\\n::add-mask::FORGED-CRON\"\n",
    )
    .unwrap();
    let path = file.display().to_string();
    for args in [
        ["validate-expr", "--file", &path, "-o", "github"]
            .map(str::to_owned)
            .to_vec(),
        enroll_args(&file, dir.path(), "github"),
        // Through the API: checked here before anything is sent (nothing listens there).
        [
            "schedules",
            "apply",
            "--file",
            &path,
            "--env",
            &uuid::Uuid::now_v7().to_string(),
            "--domain",
            "billing",
            "--base-url",
            "http://127.0.0.1:9",
            "--server",
            "http://127.0.0.1:9",
            "-o",
            "github",
        ]
        .map(str::to_owned)
        .to_vec(),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = run(&args);
        assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
        let all = format!("{}{}", stdout(&output), stderr(&output));
        assert!(
            all.contains("FORGED-TYPE"),
            "the problem is reported: {all}"
        );
        for line in all.lines() {
            assert!(
                !line.contains("FORGED")
                    || line.starts_with("::error ")
                    || line.starts_with("error: "),
                "{} printed a line the document wrote: {line:?}",
                args[0]
            );
        }
    }
}

/// `enroll` of `file` into a fresh environment of a database in `dir` (never created: every
/// file these tests enroll is invalid), with output format `format`.
fn enroll_args(file: &std::path::Path, dir: &std::path::Path, format: &str) -> Vec<String> {
    let db = format!("sqlite://{}", dir.join("none.db").display());
    let env = uuid::Uuid::now_v7().to_string();
    [
        "enroll",
        "--file",
        &file.display().to_string(),
        "--env",
        &env,
        "--domain",
        "billing",
        "--base-url",
        "http://127.0.0.1:9",
        "--database-url",
        &db,
        "-o",
        format,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `enroll --dry-run` of a valid document into an embedded database that does not exist yet
/// plans against an empty one (everything would be created), creates no file, and says so: a
/// CI job can check a declaration before any database exists.
#[test]
fn a_dry_run_without_a_database_plans_against_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = enroll_args(
        std::path::Path::new(&example("billing.schedules.yaml")),
        dir.path(),
        "json",
    );
    args.push("--dry-run".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("the plan is against an empty one"),
        "{}",
        stderr(&output)
    );
    let plan = json_out(&output);
    let counts = &plan["counts"];
    assert!(counts["created"].as_u64().unwrap() >= 2, "{plan}");
    assert_eq!(counts["updated"], 0, "{plan}");
    assert!(
        !dir.path().join("none.db").exists(),
        "no database was created"
    );
}
