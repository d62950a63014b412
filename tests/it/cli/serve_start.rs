//! How `serve` starts: it binds before it opens the database or prints anything, prints the
//! port it bound, says where its embedded database is, and tells connections closed at its
//! limit in one warning per interval.

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

use super::conventions::binary;
use super::{run, stderr, stdout};

#[test]
fn serve_binds_before_it_opens_or_prints_anything() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let output = run(&["serve", "--database-url", &url, "--listen", &address]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!("error: cannot listen on {address}")),
        "{}",
        stderr(&output)
    );
    assert_eq!(stdout(&output), "", "no token, no URL");
    assert!(!dir.path().join("serve.db").exists(), "not migrated");

    let bare = run(&["serve", "--database-url", &url, "--listen", "8081"]);
    assert_eq!(bare.status.code(), Some(1));
    assert!(
        stderr(&bare).contains("127.0.0.1:8081"),
        "{}",
        stderr(&bare)
    );
    assert!(stderr(&bare).contains("0.0.0.0:8081"), "{}", stderr(&bare));
}

#[test]
fn serve_prints_the_port_it_bound() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let mut child = binary()
        .args(["serve", "--database-url", &url, "--listen", "127.0.0.1:0"])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut printed = Vec::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        let done = line.starts_with("listening on ");
        printed.push(std::mem::take(&mut line));
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let listening = printed.last().unwrap().trim().to_owned();
    let port: u16 = listening.rsplit(':').next().unwrap().parse().unwrap();
    assert!(
        listening.starts_with("listening on http://127.0.0.1:"),
        "{listening}"
    );
    assert_ne!(port, 0);
    let curl = printed.iter().find(|l| l.contains("curl")).unwrap();
    assert!(
        curl.contains(&format!("http://127.0.0.1:{port}/v1/health")),
        "{curl}"
    );
}

/// `serve` logs the absolute path of its embedded database, and says when it created it.
#[test]
fn serve_logs_where_its_embedded_database_is() {
    let dir = tempfile::tempdir().unwrap();
    let logged = || {
        let (child, _) = listening(
            &[
                "serve",
                "--database-url",
                "sqlite://cron.db",
                "--listen",
                "127.0.0.1:0",
            ],
            dir.path(),
        );
        stopped(child)
    };
    let path = dir.path().canonicalize().unwrap().join("cron.db");
    let first = logged();
    assert!(
        first.contains(&format!(
            "created a new embedded database at {}",
            path.display()
        )),
        "{first}"
    );
    let second = logged();
    assert!(
        second.contains(&format!("embedded database {}", path.display())),
        "{second}"
    );
    assert!(!second.contains("created a new"), "{second}");
}

/// Connections closed at the limit are told in one warning per interval, with their counts,
/// not one line each: a flood of 60 connections against a cap of 4 writes one (each new one
/// closes a waiting one, or is refused if the others are busy).
#[test]
fn connections_closed_at_the_limit_are_one_warning_with_their_count() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let (child, line) = listening(
        &[
            "serve",
            "--database-url",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            "4",
        ],
        dir.path(),
    );
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_owned();
    // Held open: every one after the cap closes an earlier one, or is closed itself.
    let held: Vec<_> = (0..60)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    // The listener accepts (and closes) them in its own time: give it a moment, bounded.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let err = stopped(child);
    drop(held);
    let told: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("connection limit reached"))
        .collect();
    assert_eq!(told.len(), 1, "one line for the flood: {err}");
    assert!(
        told[0].contains("refused=1 gave_way=0") || told[0].contains("refused=0 gave_way=1"),
        "the first is told at once: {}",
        told[0]
    );
}

/// `serve` with `args`, run in `dir` with its default logging, once it prints the line it
/// listens on (returned).
pub(super) fn listening(args: &[&str], dir: &std::path::Path) -> (std::process::Child, String) {
    let mut child = binary()
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 && !line.starts_with("listening on ") {
        line.clear();
    }
    (child, line)
}

/// Stops a `serve` started by [`listening`] and returns what it wrote on standard error.
pub(super) fn stopped(mut child: std::process::Child) -> String {
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// A `serve` shaped as the deployment examples are (tokens checked, calls signed, no M2M token
/// source) is healthy: signed calls without a token are a configuration like any other, not a
/// reason to report `degraded` for ever.
#[test]
fn signed_calls_without_a_token_source_are_healthy() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("serve.db").display());
    let key = crate::support::signing_key(dir.path());
    let secret = "a-shared-secret-of-at-least-thirty-two-bytes!";
    let (child, line) = listening(
        &[
            "serve",
            "--database-url",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--jwt-hs256-secret",
            secret,
            "--signing-key-file",
            &key,
        ],
        dir.path(),
    );
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_owned();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let err = stopped(child);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}\n{err}");
    assert!(answer.contains(r#""status":"ok""#), "{answer}\n{err}");
}
