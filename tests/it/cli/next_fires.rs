//! `next-fires`: the fires an expression makes, as text, a table or JSON, with the
//! daylight-saving adjustments marked; with a jitter, bounds and a schedule id, the calls the
//! server makes; and its errors.

use serde_json::json;

use super::{json_out, run, stderr, stdout};

#[test]
fn next_fires_json_marks_dst_adjustments() {
    let output = run(&[
        "next-fires",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-03-08T12:00:00Z",
        "-n",
        "2",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        json_out(&output),
        json!({
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "description": "At 02:30 (America/New_York); a time skipped when clocks go forward \
                runs when the gap ends, and a time that repeats when clocks go back runs once",
            "after": "2025-03-08T12:00:00Z",
            "fires": [
                {"utc": "2025-03-09T07:00:00Z", "local": "2025-03-09T03:00:00-04:00", "dst": "shifted"},
                {"utc": "2025-03-10T06:30:00Z", "local": "2025-03-10T02:30:00-04:00", "dst": null}
            ]
        })
    );

    let twice = run(&[
        "next-fires",
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--on-dst-repeat",
        "twice",
        "--after",
        "2025-11-01T12:00:00Z",
        "--count",
        "2",
        "--output",
        "json",
    ]);
    let fires = json_out(&twice)["fires"].clone();
    assert_eq!(
        fires,
        json!([
            {"utc": "2025-11-02T05:30:00Z", "local": "2025-11-02T01:30:00-04:00", "dst": null},
            {"utc": "2025-11-02T06:30:00Z", "local": "2025-11-02T01:30:00-05:00", "dst": "repeated"}
        ])
    );

    let skip = run(&[
        "next-fires",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--on-dst-gap",
        "skip",
        "--after",
        "2025-03-08T12:00:00Z",
        "-n",
        "1",
        "--output",
        "text",
    ]);
    assert_eq!(stdout(&skip), "2025-03-10T06:30:00Z\n");
}

#[test]
fn next_fires_text_and_table() {
    let text = run(&[
        "next-fires",
        "*/15 * * * *",
        "--after",
        "2025-01-01T00:07:00+00:00",
        "-n",
        "3",
        "--output",
        "text",
    ]);
    assert_eq!(
        stdout(&text),
        "2025-01-01T00:15:00Z\n2025-01-01T00:30:00Z\n2025-01-01T00:45:00Z\n"
    );
    let table = run(&[
        "next-fires",
        "*/30 * * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-11-02T05:10:00Z",
        "-n",
        "3",
    ]);
    let shown = stdout(&table);
    assert!(shown.contains("2025-11-02T06:00:00Z"), "{shown}");
    assert!(shown.contains("repeated"), "{shown}");
    assert!(!shown.contains("only"), "{shown}");
    assert!(
        shown.contains(
            "Every 30 minutes (America/New_York); across clock changes it keeps to elapsed time"
        ),
        "{shown}"
    );
}

#[test]
fn next_fires_says_when_the_expression_runs_out() {
    let output = run(&["next-fires", "0 0 30 2 *", "-n", "3"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stdout(&output).contains("never fires"),
        "{}",
        stdout(&output)
    );
    let json = run(&[
        "next-fires",
        "0 0 30 2 *",
        "--output",
        "json",
        "--after",
        "2025-01-01T00:00:00Z",
    ]);
    assert_eq!(json_out(&json)["fires"], json!([]));
}

#[test]
fn next_fires_errors() {
    let output = run(&["next-fires", "* * *", "--output", "json"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(
        json_out(&output),
        json!({"valid": false, "errors": [{"field": "cron", "message":
            "expected 5 fields (minute hour day-of-month month day-of-week), or 6 with a second first, got 3"}]})
    );
    let too_many = run(&["next-fires", "* * * * *", "-n", "10001"]);
    assert_eq!(too_many.status.code(), Some(2));
    assert!(
        stderr(&too_many).contains("1..=10000"),
        "{}",
        stderr(&too_many)
    );
    let bad_after = run(&["next-fires", "* * * * *", "--after", "yesterday"]);
    assert_eq!(bad_after.status.code(), Some(2));
    assert!(stderr(&bad_after).contains("RFC 3339"));
}

/// `--jitter` with `--schedule-id`: each call is its occurrence plus the schedule's offset from
/// the core's hash, shown beside the occurrence; text prints the calls.
#[test]
fn next_fires_with_a_jitter_lists_the_schedules_calls() {
    use chrono::{DateTime, Utc};
    use sentin8_cron::core::model::ScheduleId;
    use sentin8_cron::core::policies::jitter_offset;

    let id = "0190b6c4-8f7e-7cc2-9a41-3d1f0c1e2b3a";
    let base = [
        "next-fires",
        "*/15 * * * *",
        "--after",
        "2025-01-01T00:07:00Z",
        "-n",
        "3",
        "--jitter",
        "90s",
    ];
    let json = run(&[&base[..], &["--schedule-id", id, "--output", "json"]].concat());
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let report = json_out(&json);
    assert_eq!(report["max_jitter"], "1m30s");
    assert_eq!(report["schedule_id"], id);
    assert_eq!(
        report["description"],
        "Every 15 minutes (UTC); each call up to 1m30s after its instant (jitter)"
    );
    let seed = ScheduleId(id.parse().unwrap());
    let fires = report["fires"].as_array().unwrap();
    let occurrences: Vec<&str> = fires.iter().map(|f| f["utc"].as_str().unwrap()).collect();
    assert_eq!(
        occurrences,
        [
            "2025-01-01T00:15:00Z",
            "2025-01-01T00:30:00Z",
            "2025-01-01T00:45:00Z"
        ]
    );
    let mut calls = Vec::new();
    for fire in fires {
        let occurrence: DateTime<Utc> = fire["utc"].as_str().unwrap().parse().unwrap();
        let offset = jitter_offset(seed, occurrence, std::time::Duration::from_secs(90));
        let call = occurrence + offset;
        assert_eq!(
            fire["call"],
            call.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        );
        assert_eq!(fire["jitter_ms"], offset.num_milliseconds());
        calls.push(call);
    }
    // The offsets differ by occurrence (a hash, not one delay for the schedule).
    assert!(fires[0]["jitter_ms"] != fires[1]["jitter_ms"], "{report}");

    // Text prints the calls; another seed makes other calls.
    let text = run(&[&base[..], &["--schedule-id", id, "-o", "text"]].concat());
    let expected: String = calls
        .iter()
        .map(|c| {
            format!(
                "{}\n",
                c.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )
        })
        .collect();
    assert_eq!(stdout(&text), expected);
    assert!(stderr(&text).is_empty(), "{}", stderr(&text));
    let nil = run(&[&base[..], &["-o", "text"]].concat());
    assert_ne!(stdout(&nil), expected);
    assert!(stderr(&nil).contains("nil schedule id"), "{}", stderr(&nil));

    // The table shows both instants, and says whose calls they are.
    let table = run(&[&base[..], &["--schedule-id", id]].concat());
    let shown = stdout(&table);
    assert!(
        shown.contains("occurrence (UTC)") && shown.contains("call (UTC)"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("calls of schedule {id}, each up to 1m30s late")),
        "{shown}"
    );
    let row = shown
        .lines()
        .find(|line| line.starts_with("1 "))
        .expect("a first row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "2025-01-01T00:15:00Z");
    assert_eq!(
        cells[2],
        calls[0].to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    );
    let nil_table = stdout(&run(&base));
    assert!(
        nil_table.contains("calls of the nil schedule id"),
        "{nil_table}"
    );
    assert!(
        nil_table.contains("[occurrence, occurrence + 1m30s)"),
        "{nil_table}"
    );

    // Without a jitter the output is what it was: no call column, no seed.
    let plain = json_out(&run(&[
        "next-fires",
        "*/15 * * * *",
        "--after",
        "2025-01-01T00:07:00Z",
        "-n",
        "1",
        "--schedule-id",
        id,
        "-o",
        "json",
    ]));
    assert_eq!(plain.get("schedule_id"), None, "{plain}");
    assert_eq!(
        plain["fires"],
        json!([{"utc": "2025-01-01T00:15:00Z", "local": "2025-01-01T00:15:00+00:00", "dst": null}])
    );
}

#[test]
fn next_fires_keeps_to_the_start_and_the_end() {
    let output = run(&[
        "next-fires",
        "0 * * * *",
        "--after",
        "2025-01-01T00:07:00Z",
        "--start",
        "2025-01-01T03:00:00Z",
        "--end",
        "2025-01-01T05:00:00Z",
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json_out(&output);
    assert_eq!(report["start"], "2025-01-01T03:00:00Z");
    assert_eq!(report["end"], "2025-01-01T05:00:00Z");
    let fires: Vec<&str> = report["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["utc"].as_str().unwrap())
        .collect();
    // The start and the end are themselves allowed occurrences.
    assert_eq!(
        fires,
        [
            "2025-01-01T03:00:00Z",
            "2025-01-01T04:00:00Z",
            "2025-01-01T05:00:00Z"
        ]
    );
    assert_eq!(
        report["description"],
        "At minute 0 past the hour (UTC); from 2025-01-01 03:00:00 UTC until 2025-01-01 \
         05:00:00 UTC"
    );
    let table = stdout(&run(&[
        "next-fires",
        "0 * * * *",
        "--after",
        "2025-01-01T00:07:00Z",
        "--end",
        "2025-01-01T01:00:00Z",
    ]));
    assert!(
        table.contains("only 1 of the 10 requested fires come by --end 2025-01-01T01:00:00Z"),
        "{table}"
    );
    let none = stdout(&run(&[
        "next-fires",
        "0 * * * *",
        "--after",
        "2025-01-01T00:07:00Z",
        "--end",
        "2025-01-01T00:30:00Z",
    ]));
    assert!(
        none.contains("no fires: none after 2025-01-01T00:07:00Z up to --end 2025-01-01T00:30:00Z"),
        "{none}"
    );
}

#[test]
fn next_fires_refuses_a_jitter_longer_than_the_interval_and_bounds_out_of_order() {
    let long = run(&[
        "next-fires",
        "*/15 * * * *",
        "--jitter",
        "20m",
        "-o",
        "json",
    ]);
    assert_eq!(long.status.code(), Some(3));
    assert_eq!(
        json_out(&long),
        json!({"valid": false, "errors": [{"field": "--jitter", "message":
            "20m is longer than the schedule's interval (15m between fires at the shortest): \
             a call must come before the next occurrence"}]})
    );
    assert!(
        stderr(&long).contains("error: --jitter: 20m is longer"),
        "{}",
        stderr(&long)
    );
    // Exactly the interval is allowed, as the API allows it.
    let exact = run(&["next-fires", "*/15 * * * *", "--jitter", "15m", "-n", "1"]);
    assert_eq!(exact.status.code(), Some(0), "{}", stderr(&exact));

    let order = run(&[
        "next-fires",
        "* * * * *",
        "--start",
        "2025-01-02T00:00:00Z",
        "--end",
        "2025-01-01T00:00:00Z",
    ]);
    assert_eq!(order.status.code(), Some(3));
    assert!(
        stderr(&order).contains(
            "error: --end: 2025-01-01T00:00:00Z is not after --start (2025-01-02T00:00:00Z)"
        ),
        "{}",
        stderr(&order)
    );
    for (flag, value, named) in [
        ("--jitter", "soon", "--jitter <DURATION>"),
        ("--schedule-id", "42", "--schedule-id <UUID>"),
        ("--start", "tomorrow", "--start <RFC3339>"),
        ("--end", "2025-13-01", "--end <RFC3339>"),
    ] {
        let bad = run(&["next-fires", "* * * * *", flag, value]);
        assert_eq!(bad.status.code(), Some(2), "{flag}");
        assert!(stderr(&bad).contains(named), "{flag}: {}", stderr(&bad));
    }
}

#[test]
fn next_fires_of_an_interval_keep_to_elapsed_time_across_a_clock_change() {
    // New York springs forward at 2025-03-09T07:00Z: the local times jump an hour, the
    // instants stay 45 minutes apart, 10 minutes past each multiple since the epoch.
    let output = run(&[
        "next-fires",
        "@every 45m phase 10m",
        "--tz",
        "America/New_York",
        "--after",
        "2025-03-09T06:00:00Z",
        "-n",
        "3",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        json_out(&output),
        json!({
            "expression": "@every 45m phase 10m",
            "timezone": "America/New_York",
            "description": "every 45 minutes, from 00:10:00 UTC (America/New_York); across clock \
                changes it keeps to elapsed time",
            "after": "2025-03-09T06:00:00Z",
            "fires": [
                {"utc": "2025-03-09T06:10:00Z", "local": "2025-03-09T01:10:00-05:00", "dst": null},
                {"utc": "2025-03-09T06:55:00Z", "local": "2025-03-09T01:55:00-05:00", "dst": null},
                {"utc": "2025-03-09T07:40:00Z", "local": "2025-03-09T03:40:00-04:00", "dst": null}
            ]
        })
    );
    let bad = run(&["next-fires", "@every 45m phase 1h"]);
    assert_eq!(bad.status.code(), Some(3), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("the phase 1h is not shorter than the period 45m"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn next_fires_of_a_seconds_field_shift_with_their_minute_across_a_gap() {
    // New York springs forward at 2025-03-09T07:00Z (02:00 local does not happen): 02:30:10
    // and 02:30:40 are shifted, with their seconds, to after the gap; the next day has them
    // at their wall time.
    let output = run(&[
        "next-fires",
        "10,40 30 2 * * *",
        "--tz",
        "America/New_York",
        "--after",
        "2025-03-09T06:00:00Z",
        "-n",
        "3",
        "--output",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let json = json_out(&output);
    assert_eq!(
        json["description"],
        "At 02:30:10 and 02:30:40 (America/New_York); a time skipped when clocks go forward runs when the gap ends, and a time that repeats when clocks go back runs once"
    );
    assert_eq!(
        json["fires"],
        json!([
            {"utc": "2025-03-09T07:00:10Z", "local": "2025-03-09T03:00:10-04:00", "dst": "shifted"},
            {"utc": "2025-03-09T07:00:40Z", "local": "2025-03-09T03:00:40-04:00", "dst": "shifted"},
            {"utc": "2025-03-10T06:30:10Z", "local": "2025-03-10T02:30:10-04:00", "dst": null}
        ])
    );
    let valid = run(&["validate-expr", "*/15 * * * * *", "--output", "json"]);
    assert_eq!(valid.status.code(), Some(0), "{}", stderr(&valid));
    assert_eq!(json_out(&valid)["description"], "Every 15 seconds (UTC)");
}
