//! The deployment files of `deploy/`: the systemd unit passes `systemd-analyze verify` (and
//! its offline security review) where systemd's tools are installed; the compose file parses
//! and passes only settings the service has to it; the container image runs as a non-root
//! user. No container engine is needed: nothing is built or started here.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn deploy(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(name)
}

fn settings() -> BTreeSet<String> {
    sentin8_cron::registration::registration()
        .configuration
        .into_iter()
        .map(|var| var.name)
        .collect()
}

/// Says past the harness's capture that a check could not run here.
fn notice(text: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("\nSKIPPED: {text}\n\n").as_bytes());
}

#[test]
fn the_systemd_unit_verifies() {
    let unit = std::fs::read_to_string(deploy("sentin8-cron.service")).unwrap();
    // Every variable it sets is a setting of the service.
    let known = settings();
    for line in unit.lines().filter(|l| l.starts_with("Environment=")) {
        let name = line["Environment=".len()..].split('=').next().unwrap();
        assert!(known.contains(name), "{name} is not a setting: {line}");
    }
    for needed in [
        "DynamicUser=yes",
        "StateDirectory=sentin8-cron",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "EnvironmentFile=/etc/sentin8-cron/sentin8-cron.env",
    ] {
        assert!(unit.lines().any(|l| l == needed), "missing {needed}");
    }

    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        notice("the systemd unit was not verified: systemd-analyze is not installed");
        return;
    }
    // Verified as installed, with this build's binary in place of the installed one (verify
    // checks that ExecStart names an executable).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentin8-cron.service");
    std::fs::write(
        &path,
        unit.replace(
            "/usr/local/bin/sentin8-cron",
            env!("CARGO_BIN_EXE_sentin8-cron"),
        ),
    )
    .unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "systemd-analyze verify: {said}");
    // Unknown or malformed settings are warnings only: none may name the unit.
    let about_unit: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("sentin8-cron.service"))
        .collect();
    assert!(about_unit.is_empty(), "systemd-analyze verify: {said}");

    // The offline security review (systemd 250 and later) rates it well below "MEDIUM" (5.0).
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(&path)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&security.stdout);
    if report.contains("Overall exposure level") {
        assert!(security.status.success(), "exposure above 2.0:\n{report}");
    } else {
        notice("the systemd unit's security review needs systemd 250 or later");
    }
}

#[test]
fn the_compose_file_parses_and_passes_real_settings() {
    let text = std::fs::read_to_string(deploy("compose.yaml")).unwrap();
    let compose: Value = serde_saphyr::from_str(&text).expect("compose.yaml is YAML");
    let services = compose["services"].as_object().expect("services");
    for name in ["postgres", "nats", "migrate", "sentin8-cron"] {
        assert!(services.contains_key(name), "no {name} service");
    }
    let known = settings();
    for (name, service) in services {
        if let Some(environment) = service["environment"].as_object() {
            for variable in environment
                .keys()
                .filter(|k| k.starts_with("SENTIN8_CRON_"))
            {
                assert!(
                    known.contains(variable),
                    "{name}: {variable} is not a setting"
                );
            }
        }
    }
    let serve = &services["sentin8-cron"];
    assert_eq!(serve["command"], serde_json::json!(["serve"]));
    let url = serve["environment"]["SENTIN8_CRON_DATABASE_URL"]
        .as_str()
        .unwrap();
    assert!(
        url.starts_with("postgres://sentin8_cron_service:"),
        "serve connects as the service role, under row-level security: {url}"
    );
    assert!(
        serve["environment"]["SENTIN8_CRON_BUS_URL"]
            .as_str()
            .is_some_and(|bus| bus.starts_with("nats://")),
        "{serve}"
    );
    let nats = services["nats"]["command"].as_array().unwrap();
    assert!(nats.iter().any(|a| a == "-js"), "JetStream is on: {nats:?}");
    // The image is built from this repository's Containerfile.
    let build = &services["migrate"]["build"];
    let context = deploy("").join(build["context"].as_str().unwrap());
    assert!(
        context
            .join(build["dockerfile"].as_str().unwrap())
            .is_file()
    );
    // No secret is written in the file: each comes from the environment.
    for (name, service) in services {
        if let Some(environment) = service["environment"].as_object() {
            for (variable, value) in environment {
                let secret = ["PASSWORD", "SECRET", "TOKEN"]
                    .iter()
                    .any(|s| variable.contains(s));
                let value = value.as_str().unwrap_or_default();
                assert!(
                    !secret || value.starts_with("${"),
                    "{name}: {variable} is written in the file"
                );
            }
        }
    }
}

#[test]
fn the_container_image_runs_as_a_non_root_user() {
    let text = std::fs::read_to_string(deploy("Containerfile")).unwrap();
    let stages: Vec<&str> = text.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage");
    let user = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("a USER");
    assert!(!["root", "0"].contains(&user.trim()), "{user}");
    assert!(text.contains("cargo install --locked --path ."), "{text}");
}
