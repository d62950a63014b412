//! Zone rules past 2099 and the choice of tz database (`--tzdir`).

use serde_json::{Value, json};

use super::{run, stderr, stdout};

fn tz_fixture(name: &str) -> String {
    format!("{}/tests/fixtures/tz/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn first_fires(args: &[&str]) -> Vec<String> {
    let output = run(args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    stdout(&output).lines().map(str::to_owned).collect()
}

#[test]
fn zone_rules_continue_after_2099() {
    // New York is on daylight time in July 2100 by the zone's own rule.
    let july = first_fires(&[
        "next-fires",
        "0 12 * 7 *",
        "--tz",
        "America/New_York",
        "--after",
        "2100-06-30T00:00:00Z",
        "-n",
        "1",
        "--output",
        "json",
    ]);
    let report: Value = serde_json::from_str(&july.join("\n")).unwrap();
    assert_eq!(
        report["fires"],
        json!([{"utc": "2100-07-01T16:00:00Z", "local": "2100-07-01T12:00:00-04:00", "dst": null}])
    );
    // 02:30 on the second Sunday of March is in the gap every year, after 2099 too.
    let skipped = run(&[
        "next-fires",
        "30 2 * 3 SUN#2",
        "--tz",
        "America/New_York",
        "--on-dst-gap",
        "skip",
        "--after",
        "2098-01-01T00:00:00Z",
        "-n",
        "3",
    ]);
    assert_eq!(skipped.status.code(), Some(0), "{}", stderr(&skipped));
    assert!(
        stdout(&skipped).contains("never fires"),
        "{}",
        stdout(&skipped)
    );
}

#[test]
fn tzdir_chooses_the_rules() {
    let version = run(&["--version", "--tzdir", &tz_fixture("new")]);
    assert!(version.status.success(), "{}", stderr(&version));
    assert!(
        stdout(&version).ends_with("tz database fixture-new (directory)\n"),
        "{}",
        stdout(&version)
    );
    // Noon on 20 March: standard time by the older rules, daylight time by the newer.
    let noon = |dir: &str| {
        first_fires(&[
            "next-fires",
            "0 12 20 3 *",
            "--tz",
            "America/New_York",
            "--after",
            "2030-01-01T00:00:00Z",
            "-n",
            "1",
            "--output",
            "text",
            "--tzdir",
            &tz_fixture(dir),
        ])
    };
    assert_eq!(noon("old"), ["2030-03-20T17:00:00Z"]);
    assert_eq!(noon("new"), ["2030-03-20T16:00:00Z"]);
    // Only the directory's zones exist (and UTC).
    let elsewhere = run(&[
        "validate-expr",
        "@daily",
        "--tz",
        "Europe/London",
        "--tzdir",
        &tz_fixture("new"),
    ]);
    assert_eq!(elsewhere.status.code(), Some(3), "{}", stdout(&elsewhere));
    let missing = run(&["--version", "--tzdir", &tz_fixture("nope")]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("cannot read the time-zone directory"),
        "{}",
        stderr(&missing)
    );
}
