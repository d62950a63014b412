//! `next-fires`: the fires an expression makes, as text, a table or JSON, with the
//! daylight-saving adjustments marked, and its errors.

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
            "expected 5 fields (minute hour day-of-month month day-of-week), got 3"}]})
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
