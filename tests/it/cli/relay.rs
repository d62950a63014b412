//! `relay --once` against a seeded database: the outbox drained to the log, an unreachable bus reported.

use serde_json::Value;

use super::{json_out, run, stderr, stdout};

/// A migrated SQLite database holding `schedules` schedules' creation events.
fn seeded_database(dir: &std::path::Path, name: &str, schedules: usize) -> String {
    use sentin8_cron::core::decl::ScheduleDecl;
    use sentin8_cron::core::model::EnvId;
    use sentin8_cron::core::ops::{Actor, CreateSchedule, Ops};
    use sentin8_cron::core::target::Target;
    use sentin8_cron::store::{ConnectOptions, connect};

    let url = format!("sqlite://{}", dir.join(name).display());
    let migrate = run(&["migrate", "--database-url", &url]);
    assert_eq!(migrate.status.code(), Some(0), "{}", stderr(&migrate));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = connect(&url, &ConnectOptions::default()).await.unwrap();
        let ops = Ops::new(store);
        let now = chrono::Utc::now();
        let actor = Actor {
            name: "cli-test".into(),
            correlation_id: None,
            now,
        };
        for i in 0..schedules {
            let decl = ScheduleDecl {
                schedule_type: format!("report-{i}"),
                cron: Some("0 3 * * *".into()),
                ..ScheduleDecl::default()
            };
            let create = CreateSchedule {
                domain: "billing".into(),
                spec: decl.validate(now).unwrap(),
                target: Target::validate(&serde_json::json!({"baseUrl": "http://127.0.0.1:9"}))
                    .unwrap(),
            };
            ops.schedule_create(EnvId::new(), create, &actor)
                .await
                .unwrap();
        }
    });
    url
}

#[test]
fn relay_once_drains_the_outbox_to_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let url = seeded_database(dir.path(), "relay.db", 3);

    let output = run(&[
        "relay",
        "--once",
        "--database-url",
        &url,
        "--bus-url",
        "log",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json_out(&output);
    assert_eq!(report["bus"], "log");
    assert_eq!(report["relayed"], 3);
    assert_eq!(report["failed"], 0);
    assert_eq!(report["parked"], 0);
    // The log bus wrote each event as a structured record.
    let logged = stderr(&output);
    let records: Vec<Value> = logged
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record["target"] == "sentin8_cron::events")
        .collect();
    assert_eq!(records.len(), 3, "{logged}");
    for record in &records {
        assert_eq!(
            record["fields"]["event_type"],
            "io.sentin8.cron.schedule.created.v1"
        );
        let event: Value =
            serde_json::from_str(record["fields"]["event"].as_str().unwrap()).unwrap();
        assert_eq!(event["id"], record["fields"]["event_id"]);
        assert_eq!(
            event["subject"],
            format!(
                "schedules/{}",
                record["fields"]["schedule_id"].as_str().unwrap()
            )
        );
    }

    let again = run(&[
        "relay",
        "--once",
        "--database-url",
        &url,
        "--bus-url",
        "log",
    ]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let table = stdout(&again);
    assert!(table.contains("relayed"), "{table}");
    assert!(table.contains("parked"), "{table}");
}

#[test]
fn relay_once_reports_an_unreachable_bus() {
    let dir = tempfile::tempdir().unwrap();
    let url = seeded_database(dir.path(), "down.db", 2);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let bus = format!("http://{}/hook", dead.local_addr().unwrap());
    drop(dead);

    let output = run(&["relay", "--once", "--database-url", &url, "--bus-url", &bus]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.contains("the bus was unavailable"), "{table}");

    let output = run(&[
        "relay",
        "--once",
        "--database-url",
        &url,
        "--bus-url",
        &bus,
        "--output",
        "json",
    ]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "in backoff: {}",
        stdout(&output)
    );
    assert_eq!(json_out(&output)["claimed"], 0);

    let bad = run(&[
        "relay",
        "--once",
        "--database-url",
        &url,
        "--bus-url",
        "kafka://k:9092",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("SENTIN8_CRON_BUS_URL"),
        "{}",
        stderr(&bad)
    );
}
