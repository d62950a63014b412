//! Calendars from the command line: written from entries and from an iCalendar file, shown,
//! declared in a document `schedules apply` applies before the schedules that name them,
//! kept while named; and `next-fires` marking what its exclusions cover.

use std::sync::Arc;

use sentin8_cron::core::store::Store;

use super::cli;
use crate::api::Api;

const ICS: &str = "BEGIN:VCALENDAR\nVERSION:2.0\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20301225\n\
RRULE:FREQ=YEARLY\nSUMMARY:Christmas Day\nEND:VEVENT\nBEGIN:VEVENT\nDTSTART;VALUE=DATE:20300527\n\
RRULE:FREQ=YEARLY;BYMONTH=5;BYDAY=-1MO\nSUMMARY:Memorial Day\nEND:VEVENT\nEND:VCALENDAR\n";

const DOCUMENT: &str = r#"
calendars:
  freeze:
    description: year-end freeze
    entries:
      - { spec: "2030-12-20..2031-01-02", note: freeze }
schedules:
  - schedule_type: payroll.export
    cron: "0 9 * * MON-FRI"
    timezone: America/New_York
    exclude: [freeze, us-holidays]
"#;

pub async fn calendars_from_the_command_line(store: Arc<dyn Store>) {
    let api = Api::start(store).await;
    let token = api.writer();
    let env = api.env_a.to_string();
    let dir = tempfile::tempdir().unwrap();
    let ics = dir.path().join("us-holidays.ics");
    std::fs::write(&ics, ICS).unwrap();
    let ics = ics.to_str().unwrap();

    let put = cli(
        &api,
        &token,
        &[
            "calendars",
            "put",
            "us-holidays",
            "--env",
            &env,
            "--ical",
            ics,
            "--description",
            "US",
        ],
        None,
    )
    .await;
    assert_eq!(
        put.ok().trim(),
        "calendar us-holidays written with 2 entries"
    );
    let shown = cli(
        &api,
        &token,
        &["calendars", "get", "us-holidays", "--env", &env],
        None,
    )
    .await;
    let table = shown.ok();
    assert!(table.starts_with("us-holidays: US"), "{table}");
    assert!(
        table.contains("* * 25 12 *") && table.contains("Christmas Day"),
        "{table}"
    );
    assert!(
        table.contains("* * * 5 MONL") && table.contains("Memorial Day"),
        "{table}"
    );
    // A bad entry is refused naming it, with the exit status of invalid input.
    let bad = cli(
        &api,
        &token,
        &[
            "calendars",
            "put",
            "bad",
            "--env",
            &env,
            "--entry",
            "2030-12-25",
            "--entry",
            "soon=x",
        ],
        None,
    )
    .await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("entries[1].spec"), "{}", bad.stderr);

    // A document's calendars are applied before its schedules, which name them.
    let document = dir.path().join("payroll.yaml");
    std::fs::write(&document, DOCUMENT).unwrap();
    let document = document.to_str().unwrap();
    let base = format!("{}/payroll", api.target.url());
    let apply = |dry: bool| {
        let (env, base, token, api) = (&env, &base, &token, &api);
        async move {
            let mut args = vec![
                "schedules",
                "apply",
                "-f",
                document,
                "--env",
                env,
                "--domain",
                "payroll",
                "--base-url",
                base,
            ];
            if dry {
                args.push("--dry-run");
            }
            cli(api, token, &args, None).await
        }
    };
    let dry = apply(true).await;
    assert!(
        dry.ok().contains("calendar freeze: would be created"),
        "{}",
        dry.stdout
    );
    let applied = apply(false).await;
    assert!(
        applied.ok().contains("calendar freeze: created"),
        "{}",
        applied.stdout
    );
    let again = apply(false).await;
    assert!(
        again.ok().contains("calendar freeze: unchanged"),
        "{}",
        again.stdout
    );
    let listed = cli(
        &api,
        &token,
        &["calendars", "list", "--env", &env, "-o", "json"],
        None,
    )
    .await
    .json();
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["freeze", "us-holidays"]);
    let schedules = cli(
        &api,
        &token,
        &[
            "schedules",
            "list",
            "--env",
            &env,
            "--domain",
            "payroll",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(
        schedules["items"][0]["exclude"],
        serde_json::json!(["freeze", "us-holidays"])
    );
    // Named, it stays.
    let refused = cli(
        &api,
        &token,
        &["calendars", "delete", "freeze", "--env", &env],
        None,
    )
    .await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("remove it from their exclude"),
        "{}",
        refused.stderr
    );
    // A patch replaces the list; then the calendar goes.
    let id = schedules["items"][0]["id"].as_str().unwrap();
    let patched = cli(
        &api,
        &token,
        &[
            "schedules",
            "patch",
            id,
            "--env",
            &env,
            "--exclude",
            "us-holidays",
            "--exclude",
            "* * * * SAT,SUN",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    assert_eq!(
        patched["exclude"],
        serde_json::json!(["us-holidays", "* * * * SAT,SUN"])
    );
    let removed = cli(
        &api,
        &token,
        &["calendars", "delete", "freeze", "--env", &env],
        None,
    )
    .await;
    assert_eq!(removed.ok().trim(), "calendar freeze removed");

    // next-fires marks what the exclusions cover, read on the zone's clock.
    let fires = cli(
        &api,
        &token,
        &[
            "next-fires",
            "0 9 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2030-12-23T00:00:00Z",
            "-n",
            "4",
            "--ical",
            ics,
            "--exclude",
            "2030-12-26",
            "-o",
            "json",
        ],
        None,
    )
    .await
    .json();
    let excluded: Vec<Option<&str>> = fires["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["excluded"].as_str())
        .collect();
    assert_eq!(
        excluded,
        [
            None,
            None,
            Some("us-holidays: * * 25 12 * (Christmas Day)"),
            Some("2030-12-26"),
        ]
    );
    let text = cli(
        &api,
        &token,
        &[
            "next-fires",
            "0 9 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2030-12-23T00:00:00Z",
            "-n",
            "4",
            "--ical",
            ics,
            "-o",
            "text",
        ],
        None,
    )
    .await;
    // Calls only: the 25th is not one.
    assert_eq!(text.ok().lines().count(), 3, "{}", text.stdout);
    assert!(!text.stdout.contains("2030-12-25"), "{}", text.stdout);
}
