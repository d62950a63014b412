//! The monitoring shipped in `deploy/`: the Prometheus rules pass their own unit tests under
//! `promtool`, and every metric the rules and the Grafana dashboard name is served by a real
//! `serve` (with the per-environment breakdown on), so neither can drift from the scrape.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Needs, skip};

use super::serve_start::{listening, stopped};

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(path)
}

fn promtool_installed() -> bool {
    std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

#[test]
fn the_alerting_and_recording_rules_pass_their_unit_tests() {
    if !promtool_installed() {
        skip(Needs::ApiTools, "promtool (Prometheus) is not installed");
        return;
    }
    for args in [
        ["check", "rules", "sentin8-cron.rules.yml"],
        ["test", "rules", "sentin8-cron.rules.test.yml"],
    ] {
        let out = std::process::Command::new("promtool")
            .args(args)
            .current_dir(deploy("prometheus"))
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The metric families an expression names (a histogram's `_bucket`, `_sum` and `_count` are
/// its family); recording rules' own names (`sentin8_cron:…`) are not scraped and left out.
fn families(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|token| token.starts_with("sentin8_cron_") || token.starts_with("process_"))
        .map(|token| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| token.strip_suffix(suffix))
                .unwrap_or(token)
                .to_owned()
        })
        .collect()
}

fn dashboard_exprs(dashboard: &serde_json::Value) -> Vec<String> {
    let mut exprs = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(target["expr"].as_str().expect("an expression").to_owned());
        }
    }
    exprs
}

#[tokio::test]
async fn every_metric_the_rules_and_the_dashboard_name_is_in_a_live_scrape() {
    let rules = std::fs::read_to_string(deploy("prometheus/sentin8-cron.rules.yml")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(deploy("grafana/sentin8-cron.dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON");
    let mut named = BTreeSet::new();
    for line in rules.lines() {
        if let Some(expr) = line.trim().strip_prefix("expr:") {
            named.extend(families(expr));
        }
    }
    let from_rules = named.len();
    for expr in dashboard_exprs(&dashboard) {
        named.extend(families(&expr));
    }
    assert!(from_rules >= 10 && named.len() > from_rules, "{named:?}");
    // Every panel reads the dashboard's data source variable, so it imports anywhere.
    for panel in dashboard["panels"].as_array().unwrap() {
        if panel["type"] != "row" {
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{panel}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let (child, line) = listening(
        &[
            "serve",
            "--database-url",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--metrics-env-breakdown",
            "10",
        ],
        dir.path(),
    );
    let server = line.trim().trim_start_matches("listening on ").to_owned();
    let scraped = reqwest::Client::new()
        .get(format!("{server}/metrics"))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    let log = stopped(child);
    let text = scraped
        .unwrap_or_else(|e| panic!("scrape: {e}\n{log}"))
        .text()
        .await
        .unwrap();
    let served: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let missing: Vec<&String> = named
        .iter()
        .filter(|name| !served.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "named by the rules or the dashboard but not served: {missing:?}\nserved: {served:?}"
    );
}
