//! README's tour, run literally: the commands of its first `sh` block, in order, by bash in a
//! fresh folder, with the built binary on `PATH` as `sentin8-cron`. Only the two ports are
//! changed (to free ones, so the test never collides with anything on 8080 or 9000). It
//! passes when the echo target prints the triggered call with a signature that verifies and
//! the command line lists the schedule and its job.

use std::io::{BufRead as _, Read};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The whole tour's bound: building nothing, it takes a few seconds.
const OVERALL: Duration = Duration::from_secs(90);

/// The first ```sh block after the tour's heading.
fn tour_commands(readme: &str) -> String {
    let tour = &readme[readme.find("## A short tour").expect("README has a tour")..];
    let start = tour.find("```sh\n").expect("the tour has a sh block") + "```sh\n".len();
    let end = start + tour[start..].find("\n```").expect("the block ends");
    tour[start..end].to_owned()
}

/// Whether the command line's tables are there: the schedule list's header and its row (the
/// schedule's type and timing), and the job list's header with a row under it.
fn cli_listed(text: &str) -> bool {
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let schedules = lines
        .iter()
        .any(|w| w.contains(&"dunning") && w.contains(&"active") && w.contains(&"MON-FRI"));
    let jobs_header = lines.iter().position(|w| {
        w.first() == Some(&"id") && w.contains(&"attempt") && w.contains(&"scheduled_for")
    });
    let job_row = jobs_header.is_some_and(|at| lines.get(at + 1).is_some_and(|w| w.len() >= 4));
    schedules && job_row
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_readme_tour_fires_a_call_at_the_echo_target() {
    for tool in ["bash", "curl", "jq", "openssl"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            crate::support::skip(
                crate::support::Needs::TourTools,
                &format!("the tour uses {tool}, which is not installed"),
            );
            return;
        }
    }
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let commands = tour_commands(&readme);
    assert!(commands.contains("sentin8-cron echo-target"), "{commands}");
    assert!(commands.contains("/trigger"), "{commands}");
    let (api, target) = (free_port(), free_port());
    let script = commands
        .replace("8080", &api.to_string())
        .replace("9000", &target.to_string());

    let folder = tempfile::tempdir().unwrap();
    let bin = folder.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sentin8-cron"), bin.join("sentin8-cron"))
        .unwrap();
    let work = folder.path().join("tour");
    std::fs::create_dir(&work).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let mut child = std::process::Command::new("bash")
        .args(["-eu", "-o", "pipefail", "-c", &script])
        .current_dir(&work)
        .env_clear()
        .env("PATH", path)
        .env("HOME", folder.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the background processes it starts end with it.
        .process_group(0)
        .spawn()
        .unwrap();
    let output = Arc::new(Mutex::new(String::new()));
    let mut readers = Vec::new();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let output = output.clone();
        readers.push(std::thread::spawn(move || {
            // Whole lines only: the two streams share one buffer, and a line of one must not
            // be cut by a piece of the other (the checks below read tables line by line).
            let mut lines = std::io::BufReader::new(stream);
            let mut line = Vec::new();
            while let Ok(1..) = lines.read_until(b'\n', &mut line) {
                output
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&line));
                line.clear();
            }
        }));
    }

    let started = Instant::now();
    let arrived = loop {
        let text = output.lock().unwrap().clone();
        if (text.contains("answered 200") && cli_listed(&text)) || started.elapsed() > OVERALL {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let script_status = child.try_wait().unwrap();
    // Ends the tour's background processes (serve, echo-target) with their group.
    let _ = Command::new("kill")
        .args(["-TERM", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.wait();
    drop(readers);

    assert!(
        arrived.contains("── POST /v1/internal/schedules/run"),
        "no call arrived at the echo target; the tour printed:\n{arrived}"
    );
    for expected in [
        "signature: valid",
        "authorization: (none)",
        "\"schedule_type\": \"dunning\"",
        "\"channel\": \"email\"",
        "idempotency-key: schedule:",
        // The schedule's timing in words, printed by the tour's jq line.
        "At 02:30, Monday through Friday (America/New_York)",
    ] {
        assert!(
            arrived.contains(expected),
            "missing {expected:?} in:\n{arrived}"
        );
    }
    assert!(
        cli_listed(&arrived),
        "the command line did not list the schedule and its job:\n{arrived}"
    );
    if let Some(status) = script_status {
        assert!(status.success(), "the tour's commands failed:\n{arrived}");
    }
}
