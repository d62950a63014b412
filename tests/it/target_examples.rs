//! The example targets of `examples/targets/` (Python, Node.js, Go), each run as a target
//! author would run it, against a real `sentin8-cron serve` (the embedded store, in
//! development mode, which calls loopback targets). A triggered schedule's call, signed with
//! an ES256 key, must verify and succeed; calls the test signs itself with the published
//! Ed25519 key check the refusals: a replayed token, a tampered body, another audience, an
//! expired token, an unpublished key and a missing signature are each answered 401.
//!
//! Without a language's toolchain its test skips with a notice, unless
//! `SENTIN8_CRON_REQUIRE_TARGET_TOOLCHAINS=1`. Loopback only; every wait is bounded, and the
//! processes are killed when the test ends, however it ends.

use std::io::{BufRead as _, Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine as _;
use sentin8_cron::callback::signing::{CallClaims, CallSigner, SigningKey};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{Needs, skip, unavailable};

/// How long a process may take to say it listens (a Go build included).
const START: Duration = Duration::from_secs(180);
/// How long the triggered job may take to be recorded.
const JOB: Duration = Duration::from_secs(30);
const DEV_TOKEN: &str = "s8c_dev_target_examples_0123456789abcdef0123";
const RUN_PATH: &str = "/v1/internal/schedules/run";

#[derive(Debug, Clone, Copy)]
enum Example {
    Python,
    Node,
    Go,
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/targets")
}

/// Whether `program args...` runs and exits 0.
fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl Example {
    fn name(self) -> &'static str {
        match self {
            Example::Python => "Python",
            Example::Node => "Node.js",
            Example::Go => "Go",
        }
    }

    /// Why the example cannot run here, if it cannot.
    fn missing(self) -> Option<String> {
        let found = match self {
            Example::Python => succeeds("python3", &["-c", "import cryptography"]),
            Example::Node => succeeds(
                "node",
                &[
                    "-e",
                    "process.exit(+process.versions.node.split('.')[0] >= 20 ? 0 : 1)",
                ],
            ),
            Example::Go => succeeds("go", &["version"]),
        };
        let needs = match self {
            Example::Python => "python3 with the cryptography package",
            Example::Node => "node 20 or later",
            Example::Go => "go",
        };
        (!found).then(|| format!("the {} example target needs {needs}", self.name()))
    }

    /// The command that runs the example (the Go one is built into `dir` first).
    fn command(self, dir: &Path) -> Command {
        let examples = examples_dir();
        match self {
            Example::Python => {
                let mut command = Command::new("python3");
                command.arg(examples.join("python/target.py"));
                command
            }
            Example::Node => {
                let mut command = Command::new("node");
                command.arg(examples.join("node/target.mjs"));
                command
            }
            Example::Go => {
                let binary = dir.join("go-target");
                let mut build = Command::new("go");
                build
                    .args(["build", "-o"])
                    .arg(&binary)
                    .arg(".")
                    .current_dir(examples.join("go"))
                    // The standard library only: nothing is ever downloaded.
                    .env("GOPROXY", "off")
                    .env("GOTOOLCHAIN", "local");
                let mut built = Running::spawn(&mut build, "go build");
                assert!(
                    built.wait_exit(START) == Some(true),
                    "the Go example did not build:\n{}",
                    built.output()
                );
                Command::new(binary)
            }
        }
    }
}

/// A child process whose standard output and error are collected; killed when dropped.
struct Running {
    name: &'static str,
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Running {
    fn spawn(command: &mut Command, name: &'static str) -> Running {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        let streams: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().unwrap()),
            Box::new(child.stderr.take().unwrap()),
        ];
        for stream in streams {
            let output = output.clone();
            std::thread::spawn(move || {
                // Whole lines only: the two streams share one buffer, and a line of one
                // must not be cut by a piece of the other.
                let mut lines = std::io::BufReader::new(stream);
                let mut line = Vec::new();
                while let Ok(1..) = lines.read_until(b'\n', &mut line) {
                    output
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push_str(&String::from_utf8_lossy(&line));
                    line.clear();
                }
            });
        }
        Running {
            name,
            child,
            output,
        }
    }

    fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits (bounded) for a line starting with `prefix` and returns the rest of it.
    fn line_after(&mut self, prefix: &str, within: Duration) -> String {
        let started = Instant::now();
        loop {
            let mut output = self.output();
            // Complete lines only: a line may arrive in pieces.
            output.truncate(output.rfind('\n').map_or(0, |end| end + 1));
            if let Some(line) = output.lines().find_map(|l| l.strip_prefix(prefix)) {
                return line.trim().to_owned();
            }
            let exited = self.child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && started.elapsed() < within,
                "{} printed no {prefix:?} line ({}):\n{output}",
                self.name,
                exited.map_or("timed out".to_owned(), |s| s.to_string()),
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (bounded) for the process to exit; whether it succeeded, `None` on time-out.
    fn wait_exit(&mut self, within: Duration) -> Option<bool> {
        let started = Instant::now();
        while started.elapsed() < within {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the readers take the last output.
                std::thread::sleep(Duration::from_millis(100));
                return Some(status.success());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pem(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        lines.join("\n")
    )
}

/// A key file only its owner may read, as `serve` wants it.
fn write_private(path: &Path, pem: &str) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    file.write_all(pem.as_bytes()).unwrap();
}

/// `serve` on a fresh embedded database, signing with a new P-256 key (ES256) and still
/// publishing an Ed25519 one as a previous key; returns it, its base URL and the Ed25519 key.
fn start_serve(dir: &Path) -> (Running, String, SigningKey) {
    let es256 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .unwrap();
    let es256_path = dir.join("es256.pem");
    write_private(&es256_path, &pem(es256.as_ref()));
    let (ed25519, ed25519_pem) = SigningKey::generate_ed25519().unwrap();
    let ed25519_path = dir.join("ed25519.pem");
    write_private(&ed25519_path, &ed25519_pem);

    let database = format!("sqlite://{}", dir.join("cron.db").display());
    let mut command = Command::new(env!("CARGO_BIN_EXE_sentin8-cron"));
    command
        .args([
            "serve",
            "--database-url",
            &database,
            "--listen",
            "127.0.0.1:0",
        ])
        .env("SENTIN8_CRON_DEV_TOKEN", DEV_TOKEN)
        .env("SENTIN8_CRON_SIGNING_KEY_FILE", &es256_path)
        .env("SENTIN8_CRON_SIGNING_KEY_PREVIOUS_FILE", &ed25519_path)
        .env("NO_COLOR", "1");
    let mut serve = Running::spawn(&mut command, "sentin8-cron serve");
    let base = serve.line_after("listening on ", START);
    (serve, base, ed25519)
}

/// A call to the target's run path: its status and answer.
async fn post(
    http: &reqwest::Client,
    origin: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, String) {
    let mut request = http
        .post(format!("{origin}{RUN_PATH}"))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(token) = token {
        request = request.header("sentin8-signature", token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

async fn example_target_verifies_signed_calls(example: Example) {
    if let Some(why) = example.missing() {
        // The harness prints the first skip's notice; later languages add their own line.
        let first = unavailable(Needs::TargetToolchains).is_none();
        skip(Needs::TargetToolchains, &why);
        if !first {
            let _ = std::io::stderr()
                .lock()
                .write_all(format!("\nSKIPPED: {why}\n\n").as_bytes());
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (serve, api, ed25519) = start_serve(dir.path());
    let mut command = example.command(dir.path());
    command
        .env("LISTEN", "127.0.0.1:0")
        .env("JWKS_URL", format!("{api}/.well-known/jwks.json"))
        .env_remove("ORIGIN")
        .env_remove("ISSUER");
    let mut target = Running::spawn(&mut command, example.name());
    let origin = target.line_after("listening on ", START);
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    // A schedule aimed at the example, run now: its call is signed ES256 by `serve`.
    let env = Uuid::now_v7();
    let schedule: Value = http
        .post(format!("{api}/v1/schedules"))
        .bearer_auth(DEV_TOKEN)
        .json(&json!({
            "target_env_id": env, "domain": "examples", "schedule_type": "verify",
            "cron": "0 0 1 1 *", "timezone": "UTC", "payload": {"example": example.name()},
            "max_retries": 0, "target_config": {"baseUrl": origin},
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schedule_id = schedule["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{schedule}"));
    let triggered: Value = http
        .post(format!(
            "{api}/v1/schedules/{schedule_id}/trigger?target_env_id={env}"
        ))
        .bearer_auth(DEV_TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job_id = triggered["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{triggered}"));
    let started = Instant::now();
    let job = loop {
        let job: Value = http
            .get(format!("{api}/v1/jobs/{job_id}?target_env_id={env}"))
            .bearer_auth(DEV_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if matches!(job["status"].as_str(), Some("succeeded" | "failed")) || started.elapsed() > JOB
        {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        job["status"],
        "succeeded",
        "{}: {job:#}\ntarget printed:\n{}\nserve printed:\n{}",
        example.name(),
        target.output(),
        serve.output()
    );
    assert!(
        target
            .output()
            .contains(&format!("200 job {job_id} of schedule {schedule_id}")),
        "{}",
        target.output()
    );

    // Calls the test signs itself with the published Ed25519 key.
    let signer = CallSigner::new("sentin8-cron", ed25519, Vec::new()).unwrap();
    let run_url = url::Url::parse(&format!("{origin}{RUN_PATH}")).unwrap();
    let now = chrono::Utc::now().timestamp();
    let sign = |signer: &CallSigner, url: &url::Url, body: &[u8], iat: i64| {
        let id = Uuid::now_v7();
        let claims = CallClaims::for_call(url, env, id, id, body, iat).unwrap();
        signer.sign(&claims).unwrap()
    };
    let body = br#"{"attempt": 1, "payload": {"from": "the test"}}"#;

    let token = sign(&signer, &run_url, body, now);
    assert_eq!(post(&http, &origin, Some(&token), body).await.0, 200);
    let (status, why) = post(&http, &origin, Some(&token), body).await;
    assert_eq!(
        (status, why.contains("replay")),
        (401, true),
        "replayed: {why}"
    );

    let token = sign(&signer, &run_url, body, now);
    let tampered = br#"{"attempt": 1, "payload": {"from": "someone else"}}"#;
    let (status, why) = post(&http, &origin, Some(&token), tampered).await;
    assert_eq!(
        (status, why.contains("body_sha256")),
        (401, true),
        "tampered: {why}"
    );

    let elsewhere = url::Url::parse(&format!("http://127.0.0.1:1{RUN_PATH}")).unwrap();
    let (status, why) = post(
        &http,
        &origin,
        Some(&sign(&signer, &elsewhere, body, now)),
        body,
    )
    .await;
    assert_eq!(
        (status, why.contains("audience")),
        (401, true),
        "other aud: {why}"
    );

    let expired = sign(&signer, &run_url, body, now - 600);
    let (status, why) = post(&http, &origin, Some(&expired), body).await;
    assert_eq!(
        (status, why.contains("expired")),
        (401, true),
        "expired: {why}"
    );

    let stranger = CallSigner::generate_dev("sentin8-cron").unwrap();
    let (status, why) = post(
        &http,
        &origin,
        Some(&sign(&stranger, &run_url, body, now)),
        body,
    )
    .await;
    assert_eq!(
        (status, why.contains("unknown key")),
        (401, true),
        "unpublished key: {why}"
    );

    let (status, why) = post(&http, &origin, None, body).await;
    assert_eq!(
        (status, why.contains("Sentin8-Signature")),
        (401, true),
        "unsigned: {why}"
    );

    // Each line is printed before its answer is sent, but read from the pipe a little later.
    let started = Instant::now();
    let counts = |printed: &str| {
        (
            printed.matches("\n200 job ").count(),
            printed.matches("\n401 ").count(),
        )
    };
    while counts(&target.output()) != (2, 6) && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let printed = target.output();
    assert_eq!(counts(&printed), (2, 6), "{printed}");
    drop(target);
    drop(serve);
}

#[tokio::test]
async fn the_python_example_target_verifies_signed_calls() {
    example_target_verifies_signed_calls(Example::Python).await;
}

#[tokio::test]
async fn the_node_example_target_verifies_signed_calls() {
    example_target_verifies_signed_calls(Example::Node).await;
}

#[tokio::test]
async fn the_go_example_target_verifies_signed_calls() {
    example_target_verifies_signed_calls(Example::Go).await;
}
