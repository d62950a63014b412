//! Usage lines that leave out what the environment sets, the environment file, and the
//! manual pages' references.

use super::*;

/// The usage line of a command run with these variables set, from its error and its help.
fn usage_lines(vars: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let mut refused = binary();
    let mut help = binary();
    for (name, value) in vars {
        refused.env(name, value);
        help.env(name, value);
    }
    let refused = refused.args(args).output().unwrap();
    let help = help.args(args).arg("--help").output().unwrap();
    let usage = |text: String| {
        text.lines()
            .find(|line| line.starts_with("Usage:"))
            .unwrap_or_default()
            .to_owned()
    };
    (
        refused.status.code(),
        usage(String::from_utf8_lossy(&refused.stderr).into_owned()),
        usage(String::from_utf8_lossy(&help.stdout).into_owned()),
    )
}

#[test]
fn usage_lines_leave_out_what_the_environment_sets() {
    let env = "0191b6c2-7d1e-7c3a-9a52-3f0c2a9d4e10";
    let server = [
        ("SENTIN8_CRON_SERVER", "http://127.0.0.1:1"),
        ("SENTIN8_CRON_API_TOKEN", "a-token"),
    ];
    // Nothing set: --env is required; --server and --token are options.
    let (code, error, help) = usage_lines(&[], &["schedules", "pause"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        error,
        "Usage: sentin8-cron schedules pause [OPTIONS] --env <ENV_ID> <ID>"
    );
    assert_eq!(help, error);
    // Server and token from the environment: not listed as if they had to be typed.
    let (code, error, help) = usage_lines(&server, &["schedules", "pause"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        error,
        "Usage: sentin8-cron schedules pause [OPTIONS] --env <ENV_ID> <ID>"
    );
    assert_eq!(help, error);
    // The environment too: only the id is left to give.
    let mut all = server.to_vec();
    all.push(("SENTIN8_CRON_ENV", env));
    let (code, error, help) = usage_lines(&all, &["schedules", "pause"]);
    assert_eq!(code, Some(2));
    assert_eq!(error, "Usage: sentin8-cron schedules pause [OPTIONS] <ID>");
    assert_eq!(help, error);
    let (_, error, _) = usage_lines(&all, &["dlq", "get"]);
    assert_eq!(error, "Usage: sentin8-cron dlq get [OPTIONS] <ID>");
    // Another usage error names the same usage line.
    let (code, error, _) = usage_lines(&all, &["audit", "list", "--no-such-flag"]);
    assert_eq!(code, Some(2));
    assert_eq!(error, "Usage: sentin8-cron audit list [OPTIONS]");
}

#[test]
fn the_environment_comes_from_sentin8_cron_env_unless_given() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let target = runtime.block_on(crate::raw_http::RawServer::start(
        |_: &crate::raw_http::Recorded| {
            crate::raw_http::Reply::json(200, serde_json::json!({"items": [], "next_cursor": null}))
        },
    ));
    let from_var = uuid::Uuid::now_v7().to_string();
    let given = uuid::Uuid::now_v7().to_string();
    let list = |extra: &[&str]| {
        binary()
            .env("SENTIN8_CRON_SERVER", target.url())
            .env("SENTIN8_CRON_API_TOKEN", "a-token")
            .env("SENTIN8_CRON_ENV", &from_var)
            .args(["jobs", "list", "--server", &target.url()])
            .args(extra)
            .output()
            .unwrap()
    };
    let output = list(&[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = list(&["--env", &given]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let paths: Vec<String> = target.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(
        paths[0].contains(&format!("target_env_id={from_var}")),
        "{paths:?}"
    );
    assert!(
        paths[1].contains(&format!("target_env_id={given}")),
        "{paths:?}"
    );
    drop(target);
}

/// The `sentin8-cron-COMMAND(N)` pages a manual page refers to.
fn page_references(page: &str) -> Vec<String> {
    let plain = page.replace("\\-", "-");
    let mut found = Vec::new();
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("sentin8-cron-") {
        let tail = &rest[at..];
        let name_end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(tail.len());
        if tail[name_end..].starts_with("(1)") {
            found.push(format!("{}.1", &tail[..name_end]));
        }
        rest = &tail[name_end..];
    }
    found
}

#[test]
fn the_manual_pages_refer_only_to_pages_that_exist() {
    // Printed alone, the main page names its commands and refers to no other page.
    let man = run(&["man"]);
    assert_eq!(man.status.code(), Some(0));
    let page = stdout(&man);
    assert_eq!(page_references(&page), Vec::<String>::new(), "{page}");
    assert!(page.contains("\\fBsentin8\\-cron schedules\\fR"), "{page}");
    assert!(page.contains("man \\-\\-dir"), "{page}");

    // Written to a directory: a page per command, and every reference is one of them.
    let dir = tempfile::tempdir().unwrap();
    let written = run(&["man", "--dir", &dir.path().display().to_string()]);
    assert_eq!(written.status.code(), Some(0), "{}", stderr(&written));
    let files: std::collections::BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(stdout(&written).lines().count(), files.len());
    for name in [
        "sentin8-cron.1",
        "sentin8-cron-schedules.1",
        "sentin8-cron-schedules-pause.1",
        "sentin8-cron-dlq-discard.1",
        "sentin8-cron-man.1",
    ] {
        assert!(files.contains(name), "{name} in {files:?}");
    }
    let mut references = 0;
    for file in &files {
        let page = std::fs::read_to_string(dir.path().join(file)).unwrap();
        for reference in page_references(&page) {
            references += 1;
            assert!(files.contains(&reference), "{file} refers to {reference}");
        }
    }
    assert!(
        references > 20,
        "the pages refer to each other ({references})"
    );
    // A directory that does not exist yet is created, parents included.
    let missing = dir.path().join("share/man/man1");
    let created = run(&["man", "--dir", &missing.display().to_string()]);
    assert_eq!(created.status.code(), Some(0), "{}", stderr(&created));
    assert!(missing.join("sentin8-cron.1").is_file());
    // One that cannot be made is a runtime error naming it.
    let blocked = dir.path().join("sentin8-cron.1").join("below-a-file");
    let refused = run(&["man", "--dir", &blocked.display().to_string()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("below-a-file"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn help_and_errors_never_show_a_url_s_secrets() {
    let mut serve = binary();
    serve
        .args(["serve", "--help"])
        .env(
            "SENTIN8_CRON_JWKS_URL",
            "https://id.example/jwks?secret=MARK-JWKS",
        )
        .env(
            "SENTIN8_CRON_M2M_TOKEN_URL",
            "https://id.example/token?client_secret=MARK-TOKEN",
        )
        .env("SENTIN8_CRON_BUS_URL", "nats://bus:MARK-BUS@127.0.0.1:4222")
        .env(
            "SENTIN8_CRON_DATABASE_URL",
            "postgres://cron:MARK-DB@127.0.0.1/cron",
        );
    let mut remote = binary();
    remote.args(["schedules", "list", "--help"]).env(
        "SENTIN8_CRON_SERVER",
        "https://user:MARK-SERVER@cron.example",
    );
    let mut refused = binary();
    refused.args([
        "schedules",
        "list",
        "--server",
        "https://user:MARK-FLAG@not a host",
    ]);
    for (what, mut command) in [
        ("serve --help", serve),
        ("schedules list --help", remote),
        ("--server refused", refused),
    ] {
        let output = command.output().unwrap();
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!shown.contains("MARK-"), "{what} showed a secret: {shown}");
        assert!(!shown.is_empty(), "{what} said something");
    }
}

#[test]
fn jobs_list_help_names_every_job_status() {
    let output = binary().args(["jobs", "list", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    for status in sentin8_cron::core::model::JobStatus::ALL {
        assert!(
            help.contains(status.as_str()),
            "{status} missing from: {help}"
        );
    }
}
