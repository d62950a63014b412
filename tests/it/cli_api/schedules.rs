//! `schedules list|get|create|patch|pause|resume|trigger|delete` against a running service.

use std::sync::Arc;

use sentin8_cron::core::store::Store;
use serde_json::json;

use super::cli;
use crate::api::{Api, READ};

pub async fn schedules_are_managed_from_the_command_line(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = format!("{}/billing", api.target.url());

    // Create from flags.
    let created = cli(
        &api,
        &token,
        &[
            "schedules",
            "create",
            "--env",
            &env,
            "--domain",
            "billing",
            "--type",
            "billing.nightly",
            "--cron",
            "0 2 * * *",
            "--tz",
            "Europe/London",
            "--payload",
            r#"{"report":"nightly"}"#,
            "--max-retries",
            "2",
            "--on-dst-gap",
            "skip",
            "--base-url",
            &base,
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(created["env_id"], json!(env));
    assert_eq!(created["domain"], "billing");
    assert_eq!(created["schedule_type"], "billing.nightly");
    assert_eq!(created["kind"], "cron");
    assert_eq!(created["cron"], "0 2 * * *");
    assert_eq!(created["timezone"], "Europe/London");
    assert_eq!(created["on_dst_gap"], "skip");
    assert_eq!(created["payload"], json!({"report": "nightly"}));
    assert_eq!(created["max_retries"], 2);
    assert_eq!(created["target_config"], json!({"baseUrl": base}));
    assert_eq!(created["status"], "active");
    assert_eq!(created["next_run_at"], "2030-01-01T02:00:00Z");
    let id = created["id"].as_str().unwrap().to_owned();

    // Create from a JSON document on standard input (`-f -`).
    let document = json!({
        "domain": "billing",
        "schedule_type": "billing.once",
        "run_at": "2030-06-01T12:00:00Z",
        "target_config": {"baseUrl": base},
    })
    .to_string();
    let once = cli(
        &api,
        &token,
        &[
            "schedules",
            "create",
            "--env",
            &env,
            "-f",
            "-",
            "-o",
            "json",
        ],
        Some(&document),
    )
    .await
    .json();
    assert_eq!(once["kind"], "once");
    assert_eq!(once["run_at"], "2030-06-01T12:00:00Z");
    assert_eq!(once["cron"], json!(null));
    assert_eq!(once["timezone"], "UTC");
    let once_id = once["id"].as_str().unwrap().to_owned();

    // List: JSON items, and plain columns whose first field is the id.
    let listed = cli(
        &api,
        &token,
        &["schedules", "list", "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str(), once_id.as_str()]);
    let table = cli(&api, &token, &["schedules", "list", "--env", &env], None).await;
    let lines: Vec<&str> = table.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{}", table.stdout);
    assert!(lines[0].starts_with("id "), "{}", lines[0]);
    assert!(lines[0].contains("next_run_at"), "{}", lines[0]);
    assert!(lines[1].starts_with(&id), "{}", lines[1]);
    assert!(
        lines[1].contains("0 2 * * * (Europe/London)"),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("2030-01-01T02:00:00Z"), "{}", lines[1]);
    assert!(
        lines[2].contains("once at 2030-06-01T12:00:00Z"),
        "{}",
        lines[2]
    );
    assert!(!table.stdout.contains(['│', '┆', '─']), "no box drawing");
    let bare = cli(
        &api,
        &token,
        &["schedules", "list", "--env", &env, "--no-headers"],
        None,
    )
    .await;
    let first: Vec<&str> = bare
        .ok()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(first, [id.as_str(), once_id.as_str()]);
    let domain_only = cli(
        &api,
        &token,
        &[
            "schedules",
            "list",
            "--env",
            &env,
            "--domain",
            "other",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(domain_only["items"], json!([]));

    // Get: YAML, and the wide table with the target.
    let yaml = cli(
        &api,
        &token,
        &["schedules", "get", &id, "--env", &env, "-o", "yaml"],
        None,
    )
    .await;
    assert!(
        yaml.ok().contains("schedule_type: billing.nightly"),
        "{}",
        yaml.stdout
    );
    assert!(
        yaml.stdout.contains(&format!("id: {id}")),
        "{}",
        yaml.stdout
    );
    let wide = cli(
        &api,
        &token,
        &["schedules", "get", &id, "--env", &env, "-o", "wide"],
        None,
    )
    .await;
    assert!(wide.ok().contains(&base), "{}", wide.stdout);
    assert!(wide.stdout.lines().next().unwrap().contains("target"));

    // Patch from flags and from a YAML document on standard input.
    let patched = cli(
        &api,
        &token,
        &[
            "schedules",
            "patch",
            &id,
            "--env",
            &env,
            "--cron",
            "30 3 * * *",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(patched["cron"], "30 3 * * *");
    assert_eq!(patched["timezone"], "Europe/London");
    assert_eq!(patched["next_run_at"], "2030-01-01T03:30:00Z");
    let patched = cli(
        &api,
        &token,
        &[
            "schedules",
            "patch",
            &id,
            "--env",
            &env,
            "-f",
            "-",
            "-o",
            "json",
        ],
        Some("max_retries: 5\npayload:\n  report: weekly\n"),
    )
    .await
    .json();
    assert_eq!(patched["max_retries"], 5);
    assert_eq!(patched["payload"], json!({"report": "weekly"}));
    assert_eq!(patched["cron"], "30 3 * * *");

    // Pause, resume, trigger.
    let paused = cli(
        &api,
        &token,
        &["schedules", "pause", &id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(paused["status"], "paused");
    assert_eq!(paused["id"], json!(id));
    // A paused schedule's trigger is refused, with the way out.
    let refused = cli(
        &api,
        &token,
        &["schedules", "trigger", &id, "--env", &env],
        None,
    )
    .await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("is paused"), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("sentin8-cron schedules resume"),
        "{}",
        refused.stderr
    );
    let text = cli(
        &api,
        &token,
        &["schedules", "resume", &id, "--env", &env],
        None,
    )
    .await;
    assert_eq!(
        text.ok().trim(),
        format!("resumed schedule {id} (billing.nightly); status active")
    );
    let job = cli(
        &api,
        &token,
        &["schedules", "trigger", &id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(job["schedule_id"], json!(id));
    assert_eq!(job["env_id"], json!(env));
    assert_eq!(job["status"], "pending");
    assert_eq!(job["attempt"], 0);
    // Paused again, its pending job is held by the pause (the wide table says so).
    cli(
        &api,
        &token,
        &["schedules", "pause", &id, "--env", &env],
        None,
    )
    .await
    .ok();
    let wide = cli(
        &api,
        &token,
        &[
            "jobs",
            "list",
            "--env",
            &env,
            "--schedule",
            &id,
            "-o",
            "wide",
        ],
        None,
    )
    .await;
    let table = wide.ok();
    assert!(
        table
            .lines()
            .next()
            .unwrap()
            .trim_end()
            .ends_with("held_by_pause   backfill"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .trim_end()
            .ends_with("true            false"),
        "held by the pause, not a backfill: {table}"
    );
    cli(
        &api,
        &token,
        &["schedules", "resume", &id, "--env", &env],
        None,
    )
    .await
    .ok();

    // Delete: the schedule is gone from the list.
    let deleted = cli(
        &api,
        &token,
        &["schedules", "delete", &once_id, "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(deleted["status"], "deleted");
    let listed = cli(
        &api,
        &token,
        &["schedules", "list", "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(listed["items"][0]["id"], json!(id));
}

pub async fn refused_requests_say_why_with_their_exit_status(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = api.target.url();

    // Invalid input: 3, every field named once.
    let invalid = cli(
        &api,
        &token,
        &[
            "schedules",
            "create",
            "--env",
            &env,
            "--domain",
            "billing",
            "--type",
            "bad",
            "--cron",
            "61 * * * *",
            "--base-url",
            &base,
        ],
        None,
    )
    .await;
    assert_eq!(invalid.code, 3, "{}", invalid.stderr);
    assert!(invalid.stderr.contains("(400)"), "{}", invalid.stderr);
    assert!(invalid.stderr.contains("cron"), "{}", invalid.stderr);
    assert_eq!(invalid.stderr.lines().count(), 1, "{}", invalid.stderr);
    assert_eq!(invalid.stdout, "");

    // Not found: a runtime failure, 1.
    let missing = uuid::Uuid::now_v7().to_string();
    let run = cli(
        &api,
        &token,
        &["schedules", "get", &missing, "--env", &env],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with(&format!("error: {} refused the request (404)", api.base)),
        "{}",
        run.stderr
    );

    // A read-only token cannot write; a bad token is refused as such.
    let reader = api.token(READ);
    let run = cli(
        &api,
        &reader,
        &["schedules", "pause", &missing, "--env", &env],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("(403)"), "{}", run.stderr);
    let run = cli(
        &api,
        "not-a-token",
        &["schedules", "list", "--env", &env],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("(401)"), "{}", run.stderr);

    // Flags win over the environment variables.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let server = format!("http://127.0.0.1:{port}");
    let run = cli(
        &api,
        &token,
        &["schedules", "list", "--env", &env, "--server", &server],
        None,
    )
    .await;
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim(),
        format!("error: cannot reach {server}: connection refused")
    );
}

pub async fn policies_and_backfill_from_the_command_line(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let base = format!("{}/billing", api.target.url());
    let created = cli(
        &api,
        &token,
        &[
            "schedules",
            "create",
            "--env",
            &env,
            "--domain",
            "billing",
            "--type",
            "billing.hourly",
            "--cron",
            "0 * * * *",
            "--overlap",
            "buffer_one",
            "--catchup-window",
            "15m",
            "--max-jitter",
            "90s",
            "--end-at",
            "2030-02-01T00:00:00Z",
            "--pause-on-failure",
            "true",
            "--remaining-runs",
            "24",
            "--base-url",
            &base,
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(created["overlap"], "buffer_one");
    assert_eq!(created["catchup_window"], "15m");
    assert_eq!(created["max_jitter"], "1m30s");
    assert_eq!(created["end_at"], "2030-02-01T00:00:00Z");
    assert_eq!(created["pause_on_failure"], true);
    assert_eq!(created["remaining_runs"], 24);
    let description = created["description"].as_str().unwrap();
    assert!(
        description.contains("up to 1m30s after its instant"),
        "{description}"
    );
    assert!(description.contains("24 runs left"), "{description}");
    let next: chrono::DateTime<chrono::Utc> =
        created["next_run_at"].as_str().unwrap().parse().unwrap();
    let occurrence: chrono::DateTime<chrono::Utc> = "2030-01-01T01:00:00Z".parse().unwrap();
    assert!(
        next >= occurrence && next < occurrence + chrono::Duration::seconds(90),
        "the call lies within the jitter after its occurrence: {next}"
    );
    let id = created["id"].as_str().unwrap().to_owned();

    // A policy the server refuses names its field.
    let refused = cli(
        &api,
        &token,
        &[
            "schedules",
            "patch",
            &id,
            "--env",
            &env,
            "--max-jitter",
            "2h",
        ],
        None,
    )
    .await;
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("max_jitter"), "{}", refused.stderr);

    // Backfill the two hours before the service's clock (2030-01-01T00:00Z): two
    // occurrences, one started, the other waits its turn.
    let backfilled = cli(
        &api,
        &token,
        &[
            "schedules",
            "backfill",
            &id,
            "--env",
            &env,
            "--from",
            "2029-12-31T22:00:00Z",
            "--to",
            "2029-12-31T23:59:00Z",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(backfilled["occurrences"], 2);
    assert_eq!(backfilled["started"], 1);
    let jobs = backfilled["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["status"], "pending");
    assert_eq!(jobs[1]["status"], "buffered");
    assert!(jobs.iter().all(|j| j["backfill"] == true));
    // A range that reaches into the future is refused, naming `to`.
    let refused = cli(
        &api,
        &token,
        &[
            "schedules",
            "backfill",
            &id,
            "--env",
            &env,
            "--from",
            "2029-12-31T22:00:00Z",
            "--to",
            "2030-06-01T00:00:00Z",
        ],
        None,
    )
    .await;
    assert_ne!(refused.code, 0);
    assert!(refused.stderr.contains("to: "), "{}", refused.stderr);
}
