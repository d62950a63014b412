//! Enrolling declaration files: first runs, re-runs, changes, pruning and dry runs.

use chrono::{DateTime, Duration, Timelike, Utc};
use sentin8_cron::core::events;
use sentin8_cron::core::model::ScheduleStatus;
use sentin8_cron::core::ops::{Actor, Ops};
use serde_json::json;

use super::{BILLING_EXAMPLE, Db, Enroll, THREE, event_types, normalise_report};

pub async fn enrolls_a_file_and_re_enrolling_changes_nothing(db: Db) {
    let t = Enroll::new(db);
    let run = t.enroll(&["--file", BILLING_EXAMPLE]).await.ok();
    assert_eq!(
        t.normalise(&run.stdout),
        "\
domain billing in environment <env>: 5 declared; 5 created, 0 updated, 0 unchanged, 0 pruned
action    schedule_type                     changed   next_run_at
created   billing.invoice-run               -         YYYY-MM-DDTHH:MM:SSZ
created   billing.dunning-reminders         -         YYYY-MM-DDTHH:MM:SSZ
created   billing.usage-rollup              -         YYYY-MM-DDTHH:MM:SSZ
created   billing.card-expiry-scan          -         YYYY-MM-DDTHH:MM:SSZ
created   billing.legacy-gateway-shutdown   -         YYYY-MM-DDTHH:MM:SSZ
"
    );

    let schedules = t.schedules().await;
    assert_eq!(schedules.len(), 5);
    for schedule in schedules.values() {
        assert_eq!(schedule.domain, "billing");
        assert_eq!(schedule.status, ScheduleStatus::Active);
        assert_eq!(
            schedule.target.config(),
            &json!({"baseUrl": "https://billing.apps.example.test"})
        );
        assert_eq!(schedule.created_by, "enroll:tester");
        assert!(schedule.next_run_at.unwrap() > Utc::now() - Duration::minutes(1));
    }
    let invoice = &schedules["billing.invoice-run"];
    assert_eq!(invoice.timing.cron_expression(), Some("0 6 1 * *"));
    assert_eq!(invoice.timing.timezone(), Some("Europe/Berlin"));
    assert_eq!(invoice.payload, json!({"ledger": "eu", "dry_run": false}));
    assert_eq!(invoice.max_retries, 5);

    let outbox = t.outbox().await;
    assert_eq!(outbox.len(), 5);
    for event in &outbox {
        assert_eq!(event.event_type, events::SCHEDULE_CREATED);
        assert_eq!(event.payload["actor"], "enroll:tester");
        assert_eq!(event.payload["domain"], "billing");
    }
    let audit = t.audit().await;
    assert_eq!(audit.len(), 5);
    assert!(
        audit
            .iter()
            .all(|a| a.action == "schedule.create" && a.actor == "enroll:tester")
    );

    // Again, as JSON: everything is unchanged and nothing is written.
    let run = t
        .enroll(&["--file", BILLING_EXAMPLE, "--output", "json"])
        .await
        .ok();
    let report = run.json();
    for change in report["changes"].as_array().unwrap() {
        let schedule = &schedules[change["schedule_type"].as_str().unwrap()];
        assert_eq!(change["schedule_id"], json!(schedule.id));
        assert_eq!(change["next_run_at"], json!(schedule.next_run_at));
    }
    assert_eq!(
        normalise_report(report),
        json!({
            "env_id": "<env>",
            "domain": "billing",
            "dry_run": false,
            "changes": [
                {"schedule_type": "billing.invoice-run", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.dunning-reminders", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.usage-rollup", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.card-expiry-scan", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.legacy-gateway-shutdown", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
            ]
        })
    );
    assert_eq!(t.schedules().await, schedules, "no row was written");
    assert_eq!(t.outbox().await.len(), 5, "no event was written");
    assert_eq!(t.audit().await.len(), 5, "no audit entry was written");

    // The same declarations as JSON from a command are the same declarations.
    let json_file = t.write(
        "billing.json",
        &serde_json::to_string(&serde_json::json!({"schedules": [
            {"schedule_type": "billing.usage-rollup", "cron": "*/15 * * * *", "max_retries": 1}
        ]}))
        .unwrap(),
    );
    let line = format!("cat '{json_file}'");
    let run = t
        .enroll(&["--from-command", &line, "--output", "json"])
        .await
        .ok();
    let actions: Vec<(String, String)> = run.json()["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["schedule_type"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("billing.usage-rollup", "unchanged"),
            ("billing.card-expiry-scan", "undeclared"),
            ("billing.dunning-reminders", "undeclared"),
            ("billing.invoice-run", "undeclared"),
            ("billing.legacy-gateway-shutdown", "undeclared"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(t.outbox().await.len(), 5);
}

pub async fn changes_update_only_what_changed(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    t.enroll(&["--file", &file]).await.ok();
    let before = t.schedules().await;
    let nightly = &before["billing.nightly"];
    let reminders = &before["billing.reminders"];

    // Pause one: enroll does not resume it.
    Ops::new(t.store.clone())
        .schedule_pause(
            t.env,
            reminders.id,
            &Actor {
                name: "operator".into(),
                correlation_id: None,
                now: Utc::now(),
            },
            None,
        )
        .await
        .unwrap();
    let events_before = t.outbox().await.len();
    let audit_before = t.audit().await.len();

    let changed = THREE
        .replace("cron: \"0 6 * * *\"", "cron: \"30 7 * * *\"")
        .replace("{ channel: email }", "{ channel: sms }");
    let file = t.write("billing.yaml", &changed);
    let started = Utc::now();
    let run = t
        .enroll(&["--file", &file, "--output", "json", "--actor", "deploy-bot"])
        .await
        .ok();
    assert_eq!(
        normalise_report(run.json()),
        json!({
            "env_id": "<env>",
            "domain": "billing",
            "dry_run": false,
            "changes": [
                {"schedule_type": "billing.nightly", "action": "updated", "changed_fields": ["cron"], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.reminders", "action": "updated", "changed_fields": ["payload"], "schedule_id": "<id>", "next_run_at": "<time>"},
                {"schedule_type": "billing.cutover", "action": "unchanged", "changed_fields": [], "schedule_id": "<id>", "next_run_at": "<time>"},
            ]
        })
    );

    let after = t.schedules().await;
    // The cron change moved the next fire to the new expression's.
    let moved = &after["billing.nightly"];
    assert_eq!(moved.id, nightly.id);
    assert_eq!(moved.timing.cron_expression(), Some("30 7 * * *"));
    let next = moved.next_run_at.unwrap();
    assert_eq!((next.hour(), next.minute(), next.second()), (7, 30, 0));
    assert!(
        next > started && next <= started + Duration::days(1),
        "{next}"
    );
    assert_eq!(moved.updated_by, "deploy-bot");
    assert!(moved.updated_at > nightly.updated_at);
    // The payload change kept the next fire, and the pause.
    let kept = &after["billing.reminders"];
    assert_eq!(kept.payload, json!({"channel": "sms"}));
    assert_eq!(kept.next_run_at, reminders.next_run_at);
    assert_eq!(kept.status, ScheduleStatus::Paused);
    // The identical one was not written.
    assert_eq!(after["billing.cutover"], before["billing.cutover"]);

    let outbox = t.outbox().await;
    let new_events = &outbox[events_before..];
    assert_eq!(
        event_types(new_events),
        [
            (events::SCHEDULE_UPDATED, "billing.nightly"),
            (events::SCHEDULE_UPDATED, "billing.reminders"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(new_events[0].payload["next_run_at"], json!(next));
    assert_eq!(new_events[0].payload["actor"], "deploy-bot");
    assert_eq!(new_events[1].payload["status"], "paused");
    let audit = t.audit().await;
    let new_audit = &audit[audit_before..];
    assert_eq!(new_audit.len(), 2);
    assert!(
        new_audit
            .iter()
            .all(|a| a.action == "schedule.update" && a.actor == "deploy-bot")
    );
    assert_eq!(
        new_audit[0].before.as_ref().unwrap()["cron_expr"],
        "0 6 * * *"
    );
    assert_eq!(
        new_audit[0].after.as_ref().unwrap()["cron_expr"],
        "30 7 * * *"
    );

    // A new base URL is a target change only: the next fires stay.
    let run = t
        .enroll(&[
            "--file",
            &file,
            "--base-url",
            "http://10.0.0.7:8081/billing",
        ])
        .await
        .ok();
    assert!(
        run.stdout.contains("0 created, 3 updated, 0 unchanged"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("target_config"), "{}", run.stdout);
    for (schedule_type, schedule) in t.schedules().await {
        assert_eq!(schedule.next_run_at, after[&schedule_type].next_run_at);
        assert_eq!(
            schedule.target.config(),
            &json!({"baseUrl": "http://10.0.0.7:8081/billing"})
        );
    }
}

pub async fn undeclared_schedules_are_pruned_only_when_asked(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    t.enroll(&["--file", &file]).await.ok();
    let cutover = t.schedule("billing.cutover").await;
    let two = THREE
        .split("  - schedule_type: billing.cutover")
        .next()
        .unwrap()
        .to_owned();
    let file = t.write("billing.yaml", &two);

    let run = t.enroll(&["--file", &file]).await.ok();
    assert_eq!(
        t.normalise(&run.stdout),
        "\
domain billing in environment <env>: 2 declared; 0 created, 0 updated, 2 unchanged, 0 pruned
action       schedule_type       changed   next_run_at
unchanged    billing.nightly     -         YYYY-MM-DDTHH:MM:SSZ
unchanged    billing.reminders   -         YYYY-MM-DDTHH:MM:SSZ
undeclared   billing.cutover     -         YYYY-MM-DDTHH:MM:SSZ
would be pruned: 1 (run with --prune)
"
    );
    assert_eq!(t.schedule("billing.cutover").await, cutover);
    assert_eq!(t.outbox().await.len(), 3);

    let run = t
        .enroll(&["--file", &file, "--prune", "--output", "json"])
        .await
        .ok();
    let report = run.json();
    assert_eq!(
        report["changes"][2],
        json!({
            "schedule_type": "billing.cutover",
            "action": "pruned",
            "changed_fields": [],
            "schedule_id": cutover.id,
            "next_run_at": null,
        })
    );
    let pruned = t.schedule("billing.cutover").await;
    assert_eq!(pruned.status, ScheduleStatus::Deleted);
    assert_eq!(pruned.next_run_at, None);
    let outbox = t.outbox().await;
    assert_eq!(
        event_types(&outbox[3..]),
        [(
            events::SCHEDULE_DELETED.to_owned(),
            "billing.cutover".to_owned()
        )]
    );
    assert_eq!(outbox[3].payload["actor"], "enroll:tester");
    let audit = t.audit().await;
    assert_eq!(audit.len(), 4);
    assert_eq!(audit[3].action, "schedule.delete");
    assert_eq!(audit[3].resource_id, cutover.id.to_string());

    // Pruned is gone: declaring it again creates a new schedule.
    let file = t.write("billing.yaml", THREE);
    let run = t
        .enroll(&["--file", &file, "--prune", "--output", "json"])
        .await
        .ok();
    assert_eq!(run.json()["changes"][2]["action"], "created");
    assert_ne!(t.schedule("billing.cutover").await.id, cutover.id);
}

pub async fn dry_runs_write_nothing(db: Db) {
    let t = Enroll::new(db);
    let file = t.write("billing.yaml", THREE);
    let run = t
        .enroll(&["--file", &file, "--dry-run", "--output", "json"])
        .await
        .ok();
    assert_eq!(
        normalise_report(run.json()),
        json!({
            "env_id": "<env>",
            "domain": "billing",
            "dry_run": true,
            "changes": [
                {"schedule_type": "billing.nightly", "action": "created", "changed_fields": [], "schedule_id": null, "next_run_at": "<time>"},
                {"schedule_type": "billing.reminders", "action": "created", "changed_fields": [], "schedule_id": null, "next_run_at": "<time>"},
                {"schedule_type": "billing.cutover", "action": "created", "changed_fields": [], "schedule_id": null, "next_run_at": "<time>"},
            ]
        })
    );
    assert!(t.schedules().await.is_empty());
    assert!(t.outbox().await.is_empty());
    assert!(t.audit().await.is_empty());

    t.enroll(&["--file", &file]).await.ok();
    let before = t.schedules().await;
    let changed = THREE.replace("cron: \"0 6 * * *\"", "cron: \"0 8 * * *\"");
    let only_nightly = changed
        .split("  - schedule_type: billing.reminders")
        .next()
        .unwrap()
        .to_owned();
    let file = t.write("billing.yaml", &only_nightly);
    let run = t
        .enroll(&["--file", &file, "--dry-run", "--prune"])
        .await
        .ok();
    assert_eq!(
        t.normalise(&run.stdout),
        "\
dry run: domain billing in environment <env>: 1 declared; would be 0 created, 1 updated, 0 unchanged, 2 pruned
action    schedule_type       changed   next_run_at
updated   billing.nightly     cron      YYYY-MM-DDTHH:MM:SSZ
pruned    billing.cutover     -         -
pruned    billing.reminders   -         -
dry run: nothing was written
"
    );
    let report = t
        .enroll(&["--file", &file, "--dry-run", "--output", "json"])
        .await
        .ok()
        .json();
    let next: DateTime<Utc> = serde_json::from_value(report["changes"][0]["next_run_at"].clone())
        .expect("the planned next fire");
    assert_eq!((next.hour(), next.minute()), (8, 0));
    // The counts match the document (one entry) and the plan.
    assert_eq!(report["declared"], 1);
    assert_eq!(
        report["counts"],
        json!({"created": 0, "updated": 1, "unchanged": 0, "pruned": 0, "undeclared": 2})
    );
    assert_eq!(
        report["changes"][0]["schedule_id"],
        json!(before["billing.nightly"].id)
    );
    assert_eq!(t.schedules().await, before);
    assert_eq!(t.outbox().await.len(), 3);
    assert_eq!(t.audit().await.len(), 3);
}
