//! A client generated from the served document by a standard generator
//! (openapi-python-client) creates, lists, patches, pauses, resumes, triggers and backfills a
//! schedule and reads its jobs against the real server, each answer decoded as the typed
//! success the document promised (`tests/fixtures/generated_client_walk.py`).

use std::sync::Arc;
use std::time::Duration;

use chrono::SecondsFormat;
use reqwest::{Method, StatusCode};
use sentin8_cron::core::clock::Clock as _;
use sentin8_cron::core::store::Store;

use crate::api::Api;
use crate::support::{Needs, skip};

const BOUND: Duration = Duration::from_secs(180);

pub async fn a_generated_client_walks_a_schedule_through_its_life(store: Arc<dyn Store>) {
    let installed = std::process::Command::new("openapi-python-client")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        skip(Needs::ApiTools, "openapi-python-client is not installed");
        return;
    }
    let api = Api::start(store).await;
    let (status, document, _) = api.call(Method::GET, "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.json");
    std::fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();

    let generated = tokio::process::Command::new("openapi-python-client")
        .args(["generate", "--meta", "none", "--path"])
        .arg(&path)
        .arg("--output-path")
        .arg(dir.path().join("client"))
        .kill_on_drop(true)
        .output();
    let generated = tokio::time::timeout(BOUND, generated)
        .await
        .expect("the generator ended in time")
        .expect("the generator runs");
    assert!(
        generated.status.success(),
        "generation failed:\n{}{}",
        String::from_utf8_lossy(&generated.stdout),
        String::from_utf8_lossy(&generated.stderr)
    );

    let walk = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/generated_client_walk.py"
    );
    let now = api.clock.now().to_rfc3339_opts(SecondsFormat::Secs, true);
    let walked = tokio::process::Command::new("python3")
        .arg(walk)
        .arg(&api.base)
        .arg(api.writer())
        .arg(api.env_a.to_string())
        .arg(format!("{}/billing", api.target.url()))
        .arg(now)
        .env("PYTHONPATH", dir.path())
        .kill_on_drop(true)
        .output();
    let walked = tokio::time::timeout(BOUND, walked)
        .await
        .expect("the walk ended in time")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&walked.stdout);
    assert!(
        walked.status.success() && stdout.contains("walk: ok"),
        "the generated client's walk failed:\n{stdout}{}",
        String::from_utf8_lossy(&walked.stderr)
    );
}
