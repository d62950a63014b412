//! The ecosystem's own checkers against the real server on port 0. schemathesis, the
//! property-based API tester:
//! every operation of the served document through its coverage, fuzzing and stateful phases,
//! every check but one, and not one failure. A document that promised what the server does
//! not do (a parameter in the wrong place, a value it refuses, a response it does not give)
//! fails here.

use std::sync::Arc;
use std::time::Duration;

use sentin8_cron::core::store::Store;
use sentin8_cron::server::listener::ListenerLimits;
use sentin8_cron::server::rate::{Rate, RateSettings};

use crate::api::{ADMIN, Api};
use crate::support::{Needs, skip};

/// The one check left out, and why: it takes any value the schema allows to be acceptable,
/// but the server also checks what a JSON Schema cannot say — a cron expression's grammar, one
/// of `cron` and `run_at`, and whether the deployment's egress allow list admits a `baseUrl` —
/// and refuses those with a 400 naming the field, as it should.
const EXCLUDED_CHECK: &str = "positive_data_acceptance";

/// Bounds the run: examples per operation, and the whole run's time.
const EXAMPLES: &str = "20";
const BOUND: Duration = Duration::from_secs(300);

pub async fn schemathesis_finds_nothing_the_document_and_the_server_disagree_on(
    store: Arc<dyn Store>,
) {
    let installed = std::process::Command::new("st")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        skip(Needs::ApiTools, "schemathesis (`st`) is not installed");
        return;
    }
    // Raw capacity: the rate limits would answer most of its requests 429 (documented, and
    // so not a failure, but nothing tested).
    let limits = ListenerLimits {
        rate: RateSettings {
            per_client: Rate::OFF,
            per_env: Rate::OFF,
        },
        ..ListenerLimits::default()
    };
    let api = Api::start_listening(store, axum::Router::new(), false, None, limits, None).await;
    let token = Api::sign(&api.claims(ADMIN, &[api.env_a]));
    let run = tokio::process::Command::new("st")
        .args([
            "run",
            &format!("{}/v1/openapi.json", api.base),
            "--checks",
            "all",
            "--exclude-checks",
            EXCLUDED_CHECK,
            "--header",
            &format!("Authorization: Bearer {token}"),
            "--max-examples",
            EXAMPLES,
            "--request-timeout",
            "10",
            "--seed",
            "20261205",
            "--no-color",
        ])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(BOUND, run)
        .await
        .expect("schemathesis ended within its bound")
        .expect("schemathesis runs");
    let report = String::from_utf8_lossy(&output.stdout);
    let tail: Vec<&str> = report.lines().rev().take(80).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    assert!(
        output.status.success(),
        "schemathesis found failures:\n{}\n{}",
        tail.join("\n"),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        report.contains("Stateful"),
        "the stateful phase ran: {report}"
    );
}

/// The scrape passes promtool, Prometheus's own checker (names, types, help, units), and
/// carries the build and process metrics every exporter is expected to have, and the API's
/// requests by route template (an unknown path under `unmatched`, not a series of its own).
pub async fn the_scrape_passes_promtool(store: Arc<dyn Store>) {
    let installed = std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        skip(Needs::ApiTools, "promtool (Prometheus) is not installed");
        return;
    }
    let api = Api::start(store).await;
    api.text("/v1/health").await;
    api.text("/v1/no-such-route").await;
    let text = api.text("/metrics").await;
    for name in [
        "sentin8_cron_build_info{",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        r#"sentin8_cron_http_requests_total{route="/v1/health",method="GET",status="2xx"} 1"#,
        r#"sentin8_cron_http_requests_total{route="unmatched",method="GET",status="4xx"} 1"#,
        r#"sentin8_cron_http_request_duration_seconds_count{route="/v1/health",method="GET"} 1"#,
    ] {
        assert!(text.contains(name), "{name} in {text}");
    }
    let mut check = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("promtool runs");
    let mut stdin = check.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, text.as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let output = tokio::time::timeout(Duration::from_secs(60), check.wait_with_output())
        .await
        .expect("promtool ended in time")
        .unwrap();
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool found problems:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
