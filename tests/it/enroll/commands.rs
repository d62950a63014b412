//! Documents read from a command's output.

use std::time::{Duration as StdDuration, Instant};

use sentin8_cron::core::model::ScheduleStatus;

use super::{Db, Enroll, Run, THREE};

pub async fn documents_from_commands(db: Db) {
    let t = Enroll::new(db);

    let run = t
        .enroll(&[
            "--from-command",
            "sh -c 'echo starting; echo broken config >&2; exit 3'",
        ])
        .await
        .failed();
    assert!(
        run.stderr.contains("failed (exit status: 3)") && run.stderr.contains("  broken config"),
        "{}",
        run.stderr
    );

    let run = t
        .enroll(&["--from-command", "echo this is not a declaration document"])
        .await
        .invalid();
    assert!(
        run.stderr.contains(
            "the output of `echo this is not a declaration document`: not a valid declaration \
             document: the top level must be an object"
        ),
        "{}",
        run.stderr
    );
    let run = t
        .enroll(&["--from-command", "printf '{\"schedules\": ['"])
        .await
        .invalid();
    assert!(run.stderr.contains("invalid JSON"), "{}", run.stderr);

    let started = Instant::now();
    let run = t
        .enroll(&["--from-command", "sleep 30", "--command-timeout", "1s"])
        .await
        .failed();
    assert!(
        run.stderr
            .contains("`sleep 30` did not finish within 1s; it was stopped"),
        "{}",
        run.stderr
    );
    assert!(started.elapsed() < StdDuration::from_secs(20));

    let run = t
        .enroll(&["--from-command", "no-such-program-for-enroll --x"])
        .await
        .failed();
    assert!(
        run.stderr
            .contains("cannot run `no-such-program-for-enroll --x`"),
        "{}",
        run.stderr
    );
    let run = t
        .enroll(&["--from-command", "cat a.yaml | jq ."])
        .await
        .failed();
    assert!(run.stderr.contains("sh -c"), "{}", run.stderr);
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());

    // The command sees none of enroll's secrets (the database URL here) and no other variable
    // (USER) unless it is passed by name.
    let reveal = "sh -c 'if [ -n \"${SENTIN8_CRON_DATABASE_URL+x}\" ]; then db=seen; else db=hidden; fi; \
                  printf \"schedules:\\n  - schedule_type: billing.db-%s-user-%s\\n    cron: \\\"0 3 * * *\\\"\\n\" \
                  \"$db\" \"${USER:-none}\"'";
    let seen = |run: &Run| -> Vec<String> {
        run.json()["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["schedule_type"].as_str().unwrap().to_owned())
            .collect()
    };
    let run = t
        .enroll(&["--from-command", reveal, "--dry-run", "--output", "json"])
        .await
        .ok();
    assert_eq!(seen(&run), ["billing.db-hidden-user-none"]);
    let run = t
        .enroll(&[
            "--from-command",
            reveal,
            "--pass-env",
            "USER",
            "--pass-env",
            "SENTIN8_CRON_DATABASE_URL",
            "--dry-run",
            "--output",
            "json",
        ])
        .await
        .ok();
    assert_eq!(seen(&run), ["billing.db-seen-user-tester"]);

    // A command that prints a valid document.
    let file = t.write("billing.yaml", THREE);
    let line = format!("sh -c 'cat \"{file}\"'");
    let run = t.enroll(&["--from-command", &line]).await.ok();
    assert!(run.stdout.contains("3 created"), "{}", run.stdout);
    assert_eq!(t.schedules().await.len(), 3);

    // sentin8-cron's own registration declares no schedules: pruning against it empties the
    // domain.
    let own = format!(
        "{} --print-registration --section=schedules",
        env!("CARGO_BIN_EXE_sentin8-cron")
    );
    let run = t
        .enroll(&["--from-command", &own, "--output", "json"])
        .await
        .ok();
    let report = run.json();
    assert!(
        report["changes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["action"] == "undeclared"),
        "{report}"
    );
    let run = t.enroll(&["--from-command", &own, "--prune"]).await.ok();
    assert!(run.stdout.contains("3 pruned"), "{}", run.stdout);
    assert!(
        t.schedules()
            .await
            .values()
            .all(|s| s.status == ScheduleStatus::Deleted)
    );
}
