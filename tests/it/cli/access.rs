//! The README's "Access for a team", followed with the real binary: `token issue` signs a
//! token with the secret `serve` checks, `whoami` shows what the server reads from it, and the
//! token is authorised where it says and refused elsewhere; the command refuses in JWKS mode,
//! without a secret, and for a read or write token that names no environment.

use super::conventions::binary;
use super::serve_start::{listening, stopped};
use super::{stderr, stdout};
use crate::support::signing_key;

const SECRET: &str = "a-team-secret-of-at-least-thirty-two-bytes!!";

fn with_secret(args: &[&str]) -> std::process::Output {
    binary()
        .args(args)
        .env("SENTIN8_CRON_JWT_HS256_SECRET", SECRET)
        .output()
        .expect("the binary runs")
}

#[test]
fn a_token_issued_for_a_team_is_read_back_and_authorised_where_it_says() {
    let env = uuid::Uuid::now_v7().to_string();
    let other = uuid::Uuid::now_v7().to_string();
    let issued = with_secret(&[
        "token",
        "issue",
        "--sub",
        "ci-deploy",
        "--scope",
        "write",
        "--env",
        &env,
        "--ttl",
        "1h",
    ]);
    assert_eq!(issued.status.code(), Some(0), "{}", stderr(&issued));
    let token = stdout(&issued).trim().to_owned();
    assert_eq!(
        token.split('.').count(),
        3,
        "a JWT alone on stdout: {token}"
    );
    assert!(
        stderr(&issued).contains("sentin8:cron:write for ci-deploy"),
        "{}",
        stderr(&issued)
    );

    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let key = signing_key(dir.path());
    let (child, line) = listening(
        &[
            "serve",
            "--database-url",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--jwt-hs256-secret",
            SECRET,
            "--signing-key-file",
            &key,
        ],
        dir.path(),
    );
    let server = line.trim().trim_start_matches("listening on ").to_owned();
    let as_ci = |args: &[&str]| {
        binary()
            .args(args)
            .env("SENTIN8_CRON_SERVER", &server)
            .env("SENTIN8_CRON_API_TOKEN", &token)
            .output()
            .expect("the binary runs")
    };

    let me = as_ci(&["whoami", "-o", "json"]);
    let listed = as_ci(&["schedules", "list", "--env", &env, "-o", "json"]);
    let elsewhere = as_ci(&["schedules", "list", "--env", &other]);
    let table = as_ci(&["whoami"]);
    let log = stopped(child);

    assert_eq!(me.status.code(), Some(0), "{}\n{log}", stderr(&me));
    let me: serde_json::Value = serde_json::from_slice(&me.stdout).unwrap();
    assert_eq!(me["subject"], "ci-deploy", "{me}");
    assert_eq!(
        me["scopes"],
        serde_json::json!(["sentin8:cron:write"]),
        "{me}"
    );
    assert_eq!(me["environments"], serde_json::json!([env]), "{me}");
    assert_eq!(me["all_environments"], false, "{me}");
    assert!(me["expires_at"].is_string(), "{me}");
    assert!(stdout(&table).contains("ci-deploy"), "{}", stdout(&table));
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_ne!(
        elsewhere.status.code(),
        Some(0),
        "another environment is refused"
    );
    assert!(stderr(&elsewhere).contains("403"), "{}", stderr(&elsewhere));
}

#[test]
fn token_issue_refuses_what_it_cannot_sign_truthfully() {
    let env = uuid::Uuid::now_v7().to_string();
    let base = [
        "token",
        "issue",
        "--sub",
        "x",
        "--scope",
        "read",
        "--env",
        env.as_str(),
    ];

    let no_secret = binary().args(base).output().unwrap();
    assert_eq!(no_secret.status.code(), Some(2), "{}", stderr(&no_secret));
    assert!(
        stderr(&no_secret).contains("SENTIN8_CRON_JWT_HS256_SECRET"),
        "{}",
        stderr(&no_secret)
    );

    let jwks = binary()
        .args(base)
        .env(
            "SENTIN8_CRON_JWKS_URL",
            "https://id.example.com/.well-known/jwks.json",
        )
        .env("SENTIN8_CRON_JWT_ISSUER", "https://id.example.com")
        .env("SENTIN8_CRON_JWT_AUDIENCE", "sentin8-cron")
        .output()
        .unwrap();
    assert_eq!(jwks.status.code(), Some(2), "{}", stderr(&jwks));
    assert!(
        stderr(&jwks).contains("identity provider"),
        "{}",
        stderr(&jwks)
    );

    let nowhere = with_secret(&["token", "issue", "--sub", "x", "--scope", "write"]);
    assert_eq!(nowhere.status.code(), Some(2), "{}", stderr(&nowhere));
    assert!(
        stderr(&nowhere).contains("give --env"),
        "{}",
        stderr(&nowhere)
    );

    let admin = with_secret(&[
        "token", "issue", "--sub", "ops", "--scope", "admin", "-o", "json",
    ]);
    assert_eq!(admin.status.code(), Some(0), "{}", stderr(&admin));
    let issued: serde_json::Value = serde_json::from_slice(&admin.stdout).unwrap();
    assert_eq!(issued["all_environments"], true, "{issued}");

    let forever = with_secret(&[
        "token", "issue", "--sub", "x", "--scope", "read", "--env", &env, "--ttl", "400d",
    ]);
    assert_eq!(forever.status.code(), Some(2), "{}", stderr(&forever));
}
