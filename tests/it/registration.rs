//! `sentin8-cron --print-registration`: the binary's self-description agrees with what `serve`
//! answers and with the configuration the source reads.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use reqwest::Method;
use sentin8_cron::registration;
use serde_json::{Value, json};

use crate::api::Api;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn json_out(output: &Output) -> Value {
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on standard output")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// (METHOD, path, scope) of every operation of an OpenAPI document.
fn operations(document: &Value) -> BTreeSet<(String, String, Option<String>)> {
    let mut operations = BTreeSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let scopes: Vec<&str> = operation["security"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|requirement| requirement["bearer"].as_array())
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            operations.insert((
                method.to_uppercase(),
                path.clone(),
                (!scopes.is_empty()).then(|| scopes.join(" ")),
            ));
        }
    }
    operations
}

fn registered(routes: &Value) -> BTreeSet<(String, String, Option<String>)> {
    routes
        .as_array()
        .expect("routes")
        .iter()
        .map(|route| {
            (
                route["method"].as_str().unwrap().to_owned(),
                route["path"].as_str().unwrap().to_owned(),
                route["scope"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_routes_are_the_served_openapi_operations() {
    let mut api = Api::start(crate::support::sqlite_store().await).await;
    let (status, served, _) = api.call(Method::GET, "/v1/openapi.json", None, None).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    api.stop().await.unwrap();

    let printed = json_out(&run(&["--print-registration"]));
    let routes = registered(&printed["routes"]);
    assert_eq!(routes, operations(&served));
    assert_eq!(routes.len(), printed["routes"].as_array().unwrap().len());
    assert!(routes.contains(&(
        "POST".to_owned(),
        "/v1/schedules".to_owned(),
        Some("sentin8:cron:write".to_owned())
    )));
    assert!(routes.contains(&("GET".to_owned(), "/v1/health".to_owned(), None)));
    for (method, path, scope) in [
        ("DELETE", "/v1/dlq/{id}", "sentin8:cron:write"),
        ("GET", "/v1/audit", "sentin8:cron:read"),
    ] {
        assert!(
            routes.contains(&(method.to_owned(), path.to_owned(), Some(scope.to_owned()))),
            "{method} {path} is registered with {scope}"
        );
    }
    for event in [
        "io.sentin8.cron.dlq.discarded.v1",
        "io.sentin8.cron.schedule.triggered.v1",
    ] {
        assert!(
            printed["events"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(event)),
            "{event} is registered"
        );
    }
    let variables: Vec<&str> = printed["configuration"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|var| var["name"].as_str())
        .collect();
    for name in [
        "SENTIN8_CRON_JOB_RETENTION",
        "SENTIN8_CRON_AUDIT_RETENTION",
        "SENTIN8_CRON_HEALTH_BUS_UNREACHABLE_AFTER",
        "SENTIN8_CRON_HEALTH_OUTBOX_BACKLOG_AGE",
    ] {
        assert!(variables.contains(&name), "{name} is registered");
    }
}

#[test]
fn the_registration_describes_the_binary() {
    let printed = json_out(&run(&["--print-registration"]));
    let keys: Vec<&str> = printed
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = registration::SECTIONS.to_vec();
    let mut sorted = keys.clone();
    expected.sort_unstable();
    sorted.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(printed["name"], "sentin8-cron");
    assert_eq!(printed["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        printed["events"],
        json!(sentin8_cron::core::events::ALL.to_vec())
    );
    assert_eq!(printed["schedules"], json!([]));
    let database = printed["configuration"]
        .as_array()
        .unwrap()
        .iter()
        .find(|var| var["name"] == "SENTIN8_CRON_DATABASE_URL")
        .expect("the database URL is registered");
    assert_eq!(database["secret"], true);
    assert!(
        database["description"]
            .as_str()
            .unwrap()
            .contains("sqlite://")
    );
}

#[test]
fn sections_print_alone() {
    let output = run(&["--print-registration", "--section=schedules"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "{\n  \"schedules\": []\n}\n"
    );
    let whole = json_out(&run(&["--print-registration"]));
    for section in registration::SECTIONS {
        let single = json_out(&run(&["--print-registration", "--section", section]));
        assert_eq!(
            single,
            json!({ *section: whole[*section].clone() }),
            "{section}"
        );
    }

    let output = run(&["--print-registration", "--section", "secrets"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("[possible values: name, version, routes, events, configuration, schedules]"),
        "{}",
        stderr(&output)
    );
    let output = run(&["--section", "routes"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--print-registration"),
        "{}",
        stderr(&output)
    );
    let output = run(&["--print-registration", "jobs", "list"]);
    assert_eq!(output.status.code(), Some(2));
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("Usage: sentin8-cron"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains("enroll"), "{}", stderr(&output));
}

/// Every `SENTIN8_CRON_[A-Z0-9_]+` name anywhere under `src/`.
fn names_in_source(dir: &Path, names: &mut BTreeSet<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("readable source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            names_in_source(&path, names);
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable source file");
        let file = path.display().to_string();
        let prefix = "SENTIN8_CRON_";
        let mut rest = text.as_str();
        while let Some(at) = rest.find(prefix) {
            let tail = &rest[at + prefix.len()..];
            let len = tail
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(tail.len());
            let suffix = tail[..len].trim_end_matches('_');
            if !suffix.is_empty() {
                names.insert((format!("{prefix}{suffix}"), file.clone()));
            }
            rest = &tail[len..];
        }
    }
}

/// The variables of the client settings (`--server`, `--token`) of any subcommand.
fn client_settings_of(command: &clap::Command) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = command
        .get_arguments()
        .filter(|arg| matches!(arg.get_long(), Some("server" | "token" | "env")))
        .filter_map(|arg| arg.get_env()?.to_str().map(str::to_owned))
        .collect();
    for sub in command.get_subcommands() {
        names.extend(client_settings_of(sub));
    }
    names
}

#[test]
fn every_configuration_variable_in_the_source_is_registered() {
    let mut found = BTreeSet::new();
    names_in_source(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    let configuration = registration::configuration();
    let registered: BTreeSet<&str> = configuration.iter().map(|var| var.name.as_str()).collect();
    // The client's own settings are settings of the operator commands, outside the registration.
    let client = client_settings_of(&<sentin8_cron::cmd::Cli as clap::CommandFactory>::command());
    assert_eq!(
        client,
        BTreeSet::from(registration::CLIENT_SETTINGS.map(str::to_owned))
    );
    let missing: Vec<&(String, String)> = found
        .iter()
        .filter(|(name, _)| !registered.contains(name.as_str()) && !client.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "read in the source but not a setting of any subcommand: {missing:?}"
    );
    // And nothing registered that the source no longer mentions (outside the registration).
    let used: BTreeSet<&str> = found
        .iter()
        .filter(|(_, file)| !file.ends_with("registration.rs"))
        .map(|(name, _)| name.as_str())
        .collect();
    let stale: Vec<&&str> = registered
        .iter()
        .filter(|name| !used.contains(**name))
        .collect();
    assert!(stale.is_empty(), "registered but never read: {stale:?}");
    assert!(found.len() > 20, "the scan found the variables: {found:?}");
}

/// `serve` takes every setting, and its help shows each once, with its variable and default;
/// a secret's value never appears.
#[test]
fn serve_help_shows_every_setting_once_and_hides_secrets() {
    let output = Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(["serve", "--help"])
        .env(
            "SENTIN8_CRON_JWT_HS256_SECRET",
            "hs256-secret-value-not-for-help",
        )
        .env(
            "SENTIN8_CRON_M2M_CLIENT_SECRET",
            "client-secret-not-for-help",
        )
        .env(
            "SENTIN8_CRON_DATABASE_URL",
            "postgres://svc:pw-not-for-help@db/cron?sslpassword=ssl-not-for-help",
        )
        .env("SENTIN8_CRON_TOKEN", "static-token-not-for-help")
        .env("SENTIN8_CRON_LISTEN", "127.0.0.1:9999")
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let help = String::from_utf8_lossy(&output.stdout);
    let configuration = registration::configuration();
    // The operator commands' own settings (which server to call, with which token) configure
    // the client, not the service: they are not in its registration.
    for client_only in ["SENTIN8_CRON_SERVER", "SENTIN8_CRON_API_TOKEN"] {
        assert!(
            configuration.iter().all(|var| var.name != client_only),
            "{client_only} is the client's setting"
        );
    }
    for var in &configuration {
        assert_eq!(
            // The name whole: `SENTIN8_CRON_MAX_CONNECTIONS` is also the start of another.
            help.matches(&format!("[env: {}]", var.name)).count()
                + help.matches(&format!("[env: {}=", var.name)).count(),
            1,
            "{} in {help}",
            var.name
        );
        assert_eq!(
            help.matches(&format!("{} <", var.flag)).count(),
            1,
            "{} in {help}",
            var.flag
        );
        if let Some(default) = &var.default {
            assert!(
                help.contains(&format!("[default: {default}]")),
                "{}: {default} in {help}",
                var.name
            );
        }
    }
    assert!(!help.contains("not-for-help"), "{help}");
    assert!(
        help.contains("[env: SENTIN8_CRON_JWT_HS256_SECRET]"),
        "{help}"
    );
    // Values that are not secret are shown.
    assert!(
        help.contains("[env: SENTIN8_CRON_LISTEN=127.0.0.1:9999]"),
        "{help}"
    );
}

/// `serve` reads the relay's settings too, and checks them (naming flag and variable, never
/// showing credentials) before it opens or binds anything.
#[test]
fn serve_checks_the_bus_settings_before_starting() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let output = run(&[
        "serve",
        "--database-url",
        &url,
        "--listen",
        "127.0.0.1:0",
        "--bus-url",
        "kafka://user:pw-not-shown@k:9092",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(err.contains("--bus-url (SENTIN8_CRON_BUS_URL)"), "{err}");
    assert!(!err.contains("pw-not-shown"), "{err}");
    assert!(
        !dir.path().join("serve.db").exists(),
        "nothing was opened before the settings were checked"
    );
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// Outside development mode `serve` signs calls with a configured key: without one it stops
/// before opening anything, naming the setting.
#[test]
fn serve_requires_a_signing_key_outside_development_mode() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let output = run(&[
        "serve",
        "--database-url",
        &url,
        "--listen",
        "127.0.0.1:0",
        "--jwt-hs256-secret",
        "an-hs256-secret-for-tests-only-0123456789",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("--signing-key-file (SENTIN8_CRON_SIGNING_KEY_FILE)"),
        "{err}"
    );
    assert!(!dir.path().join("serve.db").exists());
    assert!(!dir.path().join("serve.db-signing-key.pem").exists());
}

/// `tick` reads the authentication settings as `serve` does: a deployment that authenticates
/// its API is not development mode for `tick` either, so it needs the signing key `serve`
/// publishes (and applies the same egress policy), even on the embedded store.
#[test]
fn tick_follows_serve_out_of_development_mode() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("tick.db").display());
    let output = Command::new(env!("CARGO_BIN_EXE_sentin8-cron"))
        .args(["tick", "--once", "--database-url", &url])
        .env(
            "SENTIN8_CRON_JWT_HS256_SECRET",
            "an-hs256-secret-for-tests-only-0123456789",
        )
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("--signing-key-file (SENTIN8_CRON_SIGNING_KEY_FILE)"),
        "{err}"
    );
    assert!(!dir.path().join("tick.db").exists());
    assert!(!dir.path().join("tick.db-signing-key.pem").exists());
}
