//! What enroll refuses, and that a refusal or a failure part way writes nothing.

use std::collections::{HashMap, HashSet};

use sentin8_cron::core::events;
use sentin8_cron::core::store::{AuditQuery, ScheduleQuery};
use serde_json::json;

use super::{Db, Enroll, THREE};

pub async fn one_bad_entry_aborts_everything(db: Db) {
    let t = Enroll::new(db);
    let file = t.write(
        "billing.yaml",
        r#"
schedules:
  - schedule_type: billing.fine
    cron: "0 6 * * *"
  - schedule_type: billing.bad-cron
    cron: "61 * * * *"
  - schedule_type: billing.also-fine
    run_at: "2099-01-01T00:00:00Z"
  - schedule_type: billing.bad-zone
    cron: "0 6 * * *"
    timezone: Mars/Olympus
    colour: blue
"#,
    );
    let run = t.enroll(&["--file", &file]).await.invalid();
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("billing.yaml:5:5: schedule #2 (billing.bad-cron): cron: "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("billing.yaml:9:5: schedule #4 (billing.bad-zone): "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("colour: unknown field"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("timezone: "), "{}", run.stderr);
    assert!(
        run.stderr.contains("2 of 4 schedules in ")
            && run.stderr.contains("are invalid; nothing was enrolled"),
        "{}",
        run.stderr
    );

    let run = t
        .enroll(&["--file", &file, "--output", "json"])
        .await
        .invalid();
    let report = run.json();
    assert_eq!(report["valid"], false);
    let indexes: Vec<(u64, &str)> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["schedule_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(indexes, [(1, "billing.bad-cron"), (3, "billing.bad-zone")]);
    let located: Vec<(u64, u64, u64)> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["entry"].as_u64().unwrap(),
                e["line"].as_u64().unwrap(),
                e["column"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(located, [(2, 5, 5), (4, 9, 5)]);

    // For CI: one GitHub Actions annotation per entry, at the entry, with the dry run too.
    let run = t
        .enroll(&["--file", &file, "--dry-run", "--output", "github"])
        .await
        .invalid();
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    assert!(
        lines[0].starts_with(&format!(
            "::error file={},line=5,col=5::schedule #2 (billing.bad-cron): cron: ",
            file.replace(':', "%3A").replace(',', "%2C")
        )),
        "{}",
        run.stdout
    );
    assert!(
        lines[1].contains(",line=9,col=5::schedule #4 (billing.bad-zone): "),
        "{}",
        run.stdout
    );

    // Nothing was written, not even the valid entries.
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());
    assert!(t.audit().await.is_empty());

    // Unusable targets and domains are refused before anything is read.
    let good = t.write("good.yaml", THREE);
    let run = t
        .enroll(&[
            "--file",
            &good,
            "--base-url",
            "https://svc:hunter2@billing.internal",
        ])
        .await
        .invalid();
    assert!(
        run.stderr
            .contains("target_config.baseUrl: must not carry credentials"),
        "{}",
        run.stderr
    );
    let run = t
        .enroll(&[
            "--file",
            &good,
            "--platform-domain",
            "apps.example.test/evil",
        ])
        .await
        .invalid();
    assert!(run.stderr.contains("platform_domain: "), "{}", run.stderr);
    let env = t.env.to_string();
    let run = t
        .run(&[
            "enroll",
            "--env",
            &env,
            "--domain",
            "bill ing",
            "--file",
            &good,
            "--base-url",
            "https://billing.internal",
        ])
        .await
        .invalid();
    assert!(run.stderr.contains("domain: must be"), "{}", run.stderr);
    assert!(t.schedules().await.is_empty());

    // Usage errors are clap's (exit code 2): one document source, one target.
    for args in [
        vec!["--file", good.as_str(), "--from-command", "true"],
        vec!["--file", good.as_str(), "--command-timeout", "5s"],
        vec![
            "--file",
            good.as_str(),
            "--base-url",
            "https://a",
            "--platform-domain",
            "b",
        ],
    ] {
        let run = t.enroll(&args).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("cannot be used with"), "{}", run.stderr);
    }

    // Credentials cannot come in through the document either: it has no target_config.
    let sneaky = t.write(
        "sneaky.yaml",
        "schedules:\n  - schedule_type: x\n    cron: \"@daily\"\n    target_config: { baseUrl: \"https://a\" }\n",
    );
    let run = t.enroll(&["--file", &sneaky]).await.invalid();
    assert!(
        run.stderr.contains("target_config: unknown field"),
        "{}",
        run.stderr
    );
    assert!(t.schedules().await.is_empty());
}

pub async fn base_urls_the_callback_cannot_use_are_refused(db: Db) {
    let t = Enroll::new(db);
    let good = t.write("good.yaml", THREE);
    for (base_url, problem) in [
        // Once accepted here ("1 created"), then every fire failed "invalid baseUrl".
        ("http://127.0.0.1:99999", "invalid port number"),
        (
            "ftp://billing.internal",
            "scheme \"ftp\" is not http or https",
        ),
        (
            "http://billing.internal/\r\nX-Evil: 1",
            "control characters",
        ),
        ("http://billing.internal\n", "control characters"),
        ("http://svc@billing.internal", "must not carry credentials"),
        (
            "http://billing.internal/?x=1",
            "must not have a query or fragment",
        ),
    ] {
        let run = t
            .enroll(&["--file", &good, "--base-url", base_url, "--output", "json"])
            .await
            .invalid();
        let report = run.json();
        assert_eq!(report["valid"], false, "{base_url:?}");
        let problems = report["problems"].as_array().expect("problems");
        assert_eq!(problems.len(), 1, "{base_url:?}: {problems:?}");
        assert_eq!(
            problems[0]["field"], "target_config.baseUrl",
            "{base_url:?}"
        );
        let message = problems[0]["message"].as_str().unwrap();
        assert!(message.contains(problem), "{base_url:?}: {message}");
        assert!(!run.stdout.contains("created"), "{}", run.stdout);
    }
    // The text output names the field too.
    let run = t
        .enroll(&["--file", &good, "--base-url", "http://127.0.0.1:99999"])
        .await
        .invalid();
    assert!(
        run.stderr.contains("target_config.baseUrl: "),
        "{}",
        run.stderr
    );
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());

    // The same base URL is accepted once it is one the callback can use.
    t.enroll(&["--file", &good, "--base-url", "http://127.0.0.1:9999"])
        .await
        .ok();
    assert_eq!(t.schedules().await.len(), 3);
}

/// Enroll applies the egress policy `serve` does: with no allow list, the platform domain's
/// services only; an allow list replaces that default.
pub async fn targets_outside_the_egress_policy_are_refused(db: Db) {
    let t = Enroll::new(db);
    let good = t.write("good.yaml", THREE);
    let platform_only = [("SENTIN8_CRON_TARGET_ALLOW", "")];
    for base_url in [
        "https://169.254.169.254",
        "https://10.0.0.1:6379",
        "https://0x0a000001",
        "https://attacker.example",
    ] {
        let env = t.env.to_string();
        let args = [
            "enroll",
            "--env",
            &env,
            "--domain",
            "billing",
            "--file",
            &good,
            "--base-url",
            base_url,
            "--output",
            "json",
        ];
        let run = t.run_with(&args, &platform_only).await.invalid();
        let problems = run.json()["problems"].clone();
        assert_eq!(
            problems[0]["field"], "target_config.baseUrl",
            "{base_url}: {problems}"
        );
    }
    assert!(t.schedules().await.is_empty());
    // The platform domain's own services pass without an allow list...
    let env = t.env.to_string();
    let args = [
        "enroll",
        "--env",
        &env,
        "--domain",
        "billing",
        "--file",
        &good,
        "--platform-domain",
        "apps.example.test",
    ];
    t.run_with(&args, &platform_only).await.ok();
    assert_eq!(t.schedules().await.len(), 3);
    // `serve`'s platform domain setting counts for a base URL given as such, as it does for
    // serve: the same service named by --base-url passes with it and is refused without it.
    let named = [
        "enroll",
        "--env",
        &env,
        "--domain",
        "billing",
        "--file",
        &good,
        "--base-url",
        "https://billing.apps.example.test",
        "--dry-run",
    ];
    t.run_with(&named, &platform_only).await.invalid();
    t.run_with(
        &named,
        &[
            ("SENTIN8_CRON_TARGET_ALLOW", ""),
            ("SENTIN8_CRON_PLATFORM_DOMAIN", "apps.example.test"),
        ],
    )
    .await
    .ok();
    // ...and an allow list that does not name them refuses them.
    let run = t
        .run_with(
            &args,
            &[("SENTIN8_CRON_TARGET_ALLOW", "https://billing.internal")],
        )
        .await
        .invalid();
    assert!(
        run.stderr.contains("target_config.baseUrl: "),
        "{}",
        run.stderr
    );
}

/// Makes the database refuse the outbox event of `billing.poison`, as a stand-in for any
/// failure in the middle of an enrollment.
async fn poison_events(owner_url: &str) {
    use sqlx::{Connection, Executor};
    if owner_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(owner_url).await.unwrap();
        conn.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON outbox \
             WHEN json_extract(NEW.payload, '$.schedule_type') = 'billing.poison' \
             BEGIN SELECT RAISE(ABORT, 'poisoned event'); END",
        )
        .await
        .unwrap();
    } else {
        let mut conn = sqlx::PgConnection::connect(owner_url).await.unwrap();
        conn.execute(
            "CREATE FUNCTION cron.poison() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN \
               IF NEW.payload->>'schedule_type' = 'billing.poison' THEN \
                 RAISE EXCEPTION 'poisoned event'; \
               END IF; \
               RETURN NEW; \
             END $$",
        )
        .await
        .unwrap();
        conn.execute(
            "CREATE TRIGGER poison BEFORE INSERT ON cron.outbox \
             FOR EACH ROW EXECUTE FUNCTION cron.poison()",
        )
        .await
        .unwrap();
    }
}

pub async fn a_failure_part_way_writes_nothing(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    t.enroll(&["--file", &file]).await.ok();
    let before = t.schedules().await;
    poison_events(&t.owner_url).await;

    // An update, a create, a prune, and then a create whose event the database refuses.
    let changed = THREE
        .replace("cron: \"0 6 * * *\"", "cron: \"0 9 * * *\"")
        .split("  - schedule_type: billing.cutover")
        .next()
        .unwrap()
        .to_owned()
        + "  - schedule_type: billing.new\n    cron: \"@daily\"\n"
        + "  - schedule_type: billing.poison\n    cron: \"@hourly\"\n";
    let file = t.write("billing.yaml", &changed);
    let run = t.enroll(&["--file", &file, "--prune"]).await.failed();
    assert!(
        run.stderr
            .contains("enrollment failed; nothing was written"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(t.schedules().await, before);
    assert_eq!(t.outbox().await.len(), 3);
    assert_eq!(t.audit().await.len(), 3);

    // Without the poisoned entry the same change goes through.
    let healthy = changed.replace("billing.poison", "billing.fine");
    let file = t.write("billing.yaml", &healthy);
    let run = t.enroll(&["--file", &file, "--prune"]).await.ok();
    assert!(
        run.stdout
            .contains("2 created, 1 updated, 1 unchanged, 1 pruned"),
        "{}",
        run.stdout
    );
}

/// A file of more schedules than are written in one go (a thousand): a refusal in the last
/// part writes nothing of the parts before it; without it every schedule is written with its
/// event and its audit entry, each once.
pub async fn a_large_file_is_written_whole_or_not_at_all(db: Db) {
    const COUNT: usize = 2_100;
    let t = Enroll::new(db);
    poison_events(&t.owner_url).await;
    let declarations = |last: &str| {
        let mut entries: Vec<_> = (0..COUNT - 1)
            .map(|i| json!({"schedule_type": format!("billing.part-{i:04}"), "cron": "@daily"}))
            .collect();
        entries.push(json!({"schedule_type": last, "cron": "@hourly"}));
        json!({ "schedules": entries }).to_string()
    };
    let file = t.write("large.json", &declarations("billing.poison"));
    let run = t.enroll(&["--file", &file]).await.failed();
    assert!(
        run.stderr
            .contains("enrollment failed; nothing was written"),
        "{}",
        run.stderr
    );
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());
    assert!(t.audit().await.is_empty());

    let file = t.write("large.json", &declarations("billing.fine"));
    let report = t
        .enroll(&["--file", &file, "--output", "json"])
        .await
        .ok()
        .json();
    let changes = report["changes"].as_array().unwrap();
    assert_eq!(changes.len(), COUNT);
    assert!(
        changes.iter().all(|c| c["action"] == "created"),
        "{changes:?}"
    );
    assert_eq!(changes[0]["schedule_type"], "billing.part-0000");
    assert_eq!(changes[COUNT - 1]["schedule_type"], "billing.fine");
    let reported: HashSet<String> = changes
        .iter()
        .map(|c| c["schedule_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reported.len(), COUNT, "an id a schedule");

    let mut tx = t.store.tenant_begin(t.env).await.unwrap();
    let mut stored = HashSet::new();
    let mut after = None;
    loop {
        let page = tx
            .schedule_list(&ScheduleQuery {
                after,
                limit: 500,
                ..ScheduleQuery::default()
            })
            .await
            .unwrap();
        after = page.last().map(|s| s.id);
        stored.extend(page.iter().map(|s| s.id.to_string()));
        if page.len() < 500 {
            break;
        }
    }
    assert_eq!(stored, reported);
    let mut events = HashMap::new();
    let mut seq = 0;
    loop {
        let page = tx.outbox_list(seq, 500).await.unwrap();
        for event in &page {
            assert_eq!(event.event_type, events::SCHEDULE_CREATED);
            let schedule = event.schedule_id.unwrap().to_string();
            *events.entry(schedule).or_insert(0) += 1;
        }
        match page.last() {
            Some(last) => seq = last.seq,
            None => break,
        }
    }
    assert_eq!(events.len(), COUNT);
    assert!(events.values().all(|&n| n == 1), "one event a schedule");
    assert!(events.keys().all(|id| reported.contains(id)));
    let mut audited = HashSet::new();
    let mut before = None;
    loop {
        let page = tx
            .audit_query(&AuditQuery {
                before,
                limit: 500,
                ..AuditQuery::default()
            })
            .await
            .unwrap();
        for entry in &page {
            assert_eq!(entry.action, "schedule.create");
            assert!(
                audited.insert(entry.resource_id.clone()),
                "one entry a schedule"
            );
        }
        match page.last() {
            Some(last) => before = Some(last.id),
            None => break,
        }
    }
    assert_eq!(audited, reported);
}
