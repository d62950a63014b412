use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;

const BILLING: &str = include_str!("../../../examples/billing.schedules.yaml");
const REPORTS: &str = include_str!("../../../examples/reports.schedules.json");

fn now() -> DateTime<Utc> {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

fn entry_errors(text: &str, format: DeclFormat) -> Vec<EntryError> {
    match load_declarations(text, format, now()) {
        Err(DeclError::Entries(errors)) => errors,
        other => panic!("expected entry errors, got {other:?}"),
    }
}

fn messages(errors: &EntryError) -> Vec<String> {
    errors.errors.iter().map(ToString::to_string).collect()
}

#[test]
fn example_files_validate() {
    let billing = load_declarations(BILLING, DeclFormat::Yaml, now()).unwrap();
    assert_eq!(billing.len(), 5);
    let dunning = &billing[1];
    assert_eq!(dunning.schedule_type, "billing.dunning-reminders");
    assert_eq!(dunning.cron_expression(), Some("30 2 * * MON-FRI"));
    assert_eq!(dunning.timezone(), Some("America/New_York"));
    assert_eq!(dunning.on_dst_gap(), Some(OnDstGap::Shift));
    assert_eq!(dunning.on_dst_repeat(), Some(OnDstRepeat::Once));
    assert_eq!(dunning.payload.get("channel"), Some(&json!("email")));
    assert_eq!(dunning.max_retries, DEFAULT_MAX_RETRIES);
    let shutdown = &billing[4];
    assert_eq!(
        shutdown.run_at(),
        Some(
            DateTime::parse_from_rfc3339("2099-12-31T23:00:00Z")
                .unwrap()
                .with_timezone(&Utc)
        )
    );
    assert_eq!(shutdown.first_occurrence_after(now()), shutdown.run_at());
    assert_eq!(shutdown.cron_expression(), None);

    let reports = load_declarations(REPORTS, DeclFormat::Json, now()).unwrap();
    assert_eq!(reports.len(), 5);
    assert_eq!(
        reports[0]
            .first_occurrence_after(now())
            .map(|t| t.to_rfc3339()),
        Some("2025-06-02T06:00:00+00:00".to_owned())
    );
    assert_eq!(reports[3].cron_expression(), Some("@hourly"));
    assert_eq!(reports[3].max_retries, 0);
    // The policies an hourly warm-up declares; what it leaves out keeps its default.
    let warmup = &reports[3].policies;
    assert_eq!(warmup.max_jitter, std::time::Duration::from_secs(300));
    assert_eq!(warmup.catchup_window, std::time::Duration::from_secs(900));
    assert_eq!(warmup.overlap, Overlap::Skip);
    assert_eq!(reports[3].remaining_runs, None);
    assert_eq!(reports[0].policies, Policies::default());

    // The two-step API gives the same result.
    let parsed = parse_declarations(REPORTS, DeclFormat::Json).unwrap();
    assert_eq!(validate_declarations(&parsed, now()).unwrap(), reports);
}

#[test]
fn format_is_picked_by_extension_then_by_content() {
    use std::path::Path;
    assert_eq!(
        DeclFormat::detect(Some(Path::new("a.json")), "x: 1"),
        DeclFormat::Json
    );
    assert_eq!(
        DeclFormat::detect(Some(Path::new("a.YML")), "{}"),
        DeclFormat::Yaml
    );
    assert_eq!(
        DeclFormat::detect(Some(Path::new("a.yaml")), "{}"),
        DeclFormat::Yaml
    );
    assert_eq!(
        DeclFormat::detect(Some(Path::new("a.txt")), "  {\"schedules\": []}"),
        DeclFormat::Json
    );
    assert_eq!(DeclFormat::detect(None, "schedules: []"), DeclFormat::Yaml);
}

#[test]
fn every_problem_of_every_entry_is_reported() {
    let text = r#"
schedules:
  - schedule_type: ok.one
    cron: "0 * * * *"
  - schedule_type: bad.cron
    cron: "61 * * * *"
    timezone: Mars/Olympus
    max_retries: 101
  - schedule_type: "bad type!"
    run_at: "2020-01-01T00:00:00Z"
    timezone: UTC
  - schedule_type: bad.both
    cron: "0 0 * * *"
    run_at: "2030-01-01T00:00:00Z"
    payload: [1, 2]
  - schedule_type: bad.never
    cron: "0 0 30 2 *"
    colour: blue
  - cron: "0 0 * * *"
  - schedule_type: ok.one
    run_at: "2030-01-01T00:00:00Z"
  - schedule_type: bad.neither
    on_dst_gap: sideways
    max_retries: -1
"#;
    let errors = entry_errors(text, DeclFormat::Yaml);
    let summary: Vec<(usize, Option<&str>, Vec<String>)> = errors
        .iter()
        .map(|entry| (entry.index, entry.schedule_type.as_deref(), messages(entry)))
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                1,
                Some("bad.cron"),
                vec![
                    "max_retries: 101 is out of range 0-100".to_owned(),
                    r#"timezone: unknown time zone "Mars/Olympus""#.to_owned(),
                    "cron: minute: 61 is out of range 0-59".to_owned(),
                ]
            ),
            (
                2,
                Some("bad type!"),
                vec![
                    "schedule_type: must be 1-128 characters of ASCII letters, digits, '_', '-', '.' and ':'".to_owned(),
                    "timezone: only applies to cron schedules, not to run_at".to_owned(),
                    "run_at: 2020-01-01T00:00:00Z is not in the future".to_owned(),
                ]
            ),
            (
                3,
                Some("bad.both"),
                vec![
                    "payload: must be a JSON object, got a list".to_owned(),
                    "run_at: cannot be combined with cron: give exactly one of cron, every or run_at"
                        .to_owned(),
                ]
            ),
            (
                4,
                Some("bad.never"),
                vec!["colour: unknown field".to_owned(), "cron: no future fire".to_owned()]
            ),
            (
                5,
                None,
                vec![
                    "schedule_type: is required".to_owned(),
                ]
            ),
            (
                6,
                Some("ok.one"),
                vec![r#"schedule_type: duplicate schedule_type "ok.one" (first declared as schedule #1)"#.to_owned()]
            ),
            (
                7,
                Some("bad.neither"),
                vec![
                    // Keys are checked in alphabetical order.
                    "max_retries: -1 is out of range 0-100".to_owned(),
                    r#"on_dst_gap: unknown value "sideways", expected one of: shift, skip"#.to_owned(),
                    "cron: one of cron, every or run_at is required".to_owned(),
                ]
            ),
        ]
    );
    assert_eq!(
        errors[3].to_string(),
        "schedule #5 (bad.never): colour: unknown field; cron: no future fire"
    );
}

#[test]
fn parse_reports_structural_problems_only() {
    let text = r#"{"schedules": [{"schedule_type": "a", "cron": 5}, {"schedule_type": "b", "cron": "61 * * * *"}]}"#;
    match parse_declarations(text, DeclFormat::Json) {
        Err(DeclError::Entries(errors)) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].index, 0);
            assert_eq!(
                messages(&errors[0]),
                ["cron: must be a string, got a number"]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn payload_must_be_a_small_object() {
    let mut decl = ScheduleDecl {
        schedule_type: "big".to_owned(),
        cron: Some("0 0 * * *".to_owned()),
        payload: Some(json!({ "blob": "x".repeat(MAX_PAYLOAD_BYTES) })),
        ..ScheduleDecl::default()
    };
    let errors = decl.validate(now()).unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "payload");
    assert!(
        errors[0]
            .message
            .starts_with("serialized size 65547 bytes exceeds"),
        "{}",
        errors[0]
    );

    decl.payload = Some(json!("text"));
    assert_eq!(
        decl.validate(now()).unwrap_err(),
        [FieldError::new(
            "payload",
            "must be a JSON object, got a string"
        )]
    );
    decl.payload = None;
    let spec = decl.validate(now()).unwrap();
    assert!(spec.payload.is_empty());
    assert_eq!(spec.timezone(), Some("UTC"));
}

#[test]
fn schedule_type_rules() {
    let decl = |schedule_type: &str| ScheduleDecl {
        schedule_type: schedule_type.to_owned(),
        cron: Some("@daily".to_owned()),
        ..ScheduleDecl::default()
    };
    for good in ["a", "billing.invoice-run", "x:y_z-1.2", &"a".repeat(128)] {
        assert!(decl(good).validate(now()).is_ok(), "{good}");
    }
    for bad in ["", "has space", "ünicode", "a/b", &"a".repeat(129)] {
        let errors = decl(bad).validate(now()).unwrap_err();
        assert_eq!(errors[0].field, "schedule_type", "{bad}");
    }
}

#[test]
fn run_at_must_be_a_future_rfc3339_time() {
    let decl = |run_at: &str| ScheduleDecl {
        schedule_type: "once".to_owned(),
        run_at: Some(run_at.to_owned()),
        ..ScheduleDecl::default()
    };
    assert_eq!(
        decl("tomorrow").validate(now()).unwrap_err(),
        [FieldError::new(
            "run_at",
            r#""tomorrow" is not an RFC 3339 timestamp"#
        )]
    );
    assert_eq!(
        decl("2025-06-01T12:00:00Z").validate(now()).unwrap_err(),
        [FieldError::new(
            "run_at",
            "2025-06-01T12:00:00Z is not in the future"
        )]
    );
    let spec = decl("2025-06-01T14:00:01+02:00").validate(now()).unwrap();
    assert_eq!(
        spec.first_occurrence_after(now()).unwrap().to_rfc3339(),
        "2025-06-01T12:00:01+00:00"
    );
    assert_eq!(spec.first_occurrence_after(spec.run_at().unwrap()), None);
}

#[test]
fn syntax_errors_carry_positions() {
    match parse_declarations("{\n  \"schedules\": [\n    {,\n  ]\n}", DeclFormat::Json) {
        Err(DeclError::Json { line, .. }) => assert_eq!(line, 3),
        other => panic!("{other:?}"),
    }
    match parse_declarations("schedules:\n  - a: [1, 2\n  - b\n", DeclFormat::Yaml) {
        Err(DeclError::Yaml { line, message, .. }) => {
            assert!(line.is_some(), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse_declarations("[]", DeclFormat::Json),
        Err(DeclError::NotAnObject)
    );
    assert_eq!(
        parse_declarations("{}", DeclFormat::Json),
        Err(DeclError::MissingSchedules)
    );
    assert_eq!(
        parse_declarations("schedules: {}\n", DeclFormat::Yaml),
        Err(DeclError::SchedulesNotAList)
    );
    assert_eq!(
        parse_declarations("schedules: []\nversion: 2\n", DeclFormat::Yaml)
            .unwrap_err()
            .to_string(),
        r#"unknown top-level key "version" (expected "schedules" and "calendars")"#
    );
    assert_eq!(
        parse_declarations("schedules: []\n", DeclFormat::Yaml),
        Ok(DeclarationFile::default())
    );
}

#[test]
fn declarations_use_the_api_field_names_with_serde() {
    let decl: ScheduleDecl = serde_json::from_value(json!({
        "schedule_type": "a",
        "cron": "0 0 * * *",
        "timezone": "Europe/London",
        "on_dst_gap": "skip",
        "on_dst_repeat": "twice",
        "max_retries": 7,
        "payload": {"k": 1}
    }))
    .unwrap();
    assert_eq!(decl.on_dst_gap, Some(OnDstGap::Skip));
    assert_eq!(decl.on_dst_repeat, Some(OnDstRepeat::Twice));
    let spec = decl.validate(now()).unwrap();
    assert_eq!(spec.on_dst_gap(), Some(OnDstGap::Skip));
    assert!(serde_json::from_value::<ScheduleDecl>(json!({"schedule_type": "a", "x": 1})).is_err());
}

#[test]
fn policy_fields_are_validated_with_located_errors() {
    let text = r#"
schedules:
  - schedule_type: a
    cron: "*/5 * * * *"
    overlap: queue
  - schedule_type: b
    cron: "*/5 * * * *"
    max_jitter: 6m
    catchup_window: 0s
  - schedule_type: c
    cron: "0 * * * *"
    start_at: 2026-01-01T00:00:00Z
    end_at: 2025-12-31T00:00:00Z
  - schedule_type: d
    run_at: 2026-01-01T00:00:00Z
    remaining_runs: 3
    pause_on_failure: true
  - schedule_type: e
    cron: "0 * * * *"
    remaining_runs: 0
    max_jitter: soon
"#;
    let errors = entry_errors(text, DeclFormat::Yaml);
    let by_entry: Vec<Vec<String>> = errors.iter().map(messages).collect();
    let expected = "skip buffer_one allow_all buffer_all cancel_other)";
    let queue = format!("overlap: unknown value \"queue\" (expected one of: {expected}");
    assert_eq!(by_entry[0], [queue]);
    assert_eq!(by_entry[1].len(), 2, "{:?}", by_entry[1]);
    assert_eq!(by_entry[1][0], "catchup_window: 0s is out of range 1s-366d");
    assert!(
        by_entry[1][1].starts_with("max_jitter: 6m is longer than the schedule's interval (5m"),
        "{:?}",
        by_entry[1]
    );
    assert_eq!(
        by_entry[2],
        ["end_at: 2025-12-31T00:00:00+00:00 is not after start_at (2026-01-01T00:00:00+00:00)"]
    );
    assert_eq!(
        by_entry[3],
        [
            "pause_on_failure: only applies to cron schedules, not to run_at",
            "remaining_runs: only applies to cron schedules, not to run_at"
        ]
    );
    assert_eq!(
        by_entry[4],
        [
            "max_jitter: \"soon\" is not a duration (examples: 30s, 5m, 1h)",
            "remaining_runs: 0 is out of range 1-1000000"
        ]
    );
}

#[test]
fn policies_default_and_a_jitter_up_to_the_interval_is_accepted() {
    let decl = ScheduleDecl {
        schedule_type: "ok".into(),
        cron: Some("*/5 * * * *".into()),
        max_jitter: Some("5m".into()),
        overlap: Some(Overlap::BufferOne),
        remaining_runs: Some(12),
        ..ScheduleDecl::default()
    };
    let spec = decl.validate(now()).unwrap();
    assert_eq!(
        spec.policies.max_jitter,
        std::time::Duration::from_secs(300)
    );
    assert_eq!(spec.policies.overlap, Overlap::BufferOne);
    assert_eq!(
        spec.policies.catchup_window,
        crate::core::policies::DEFAULT_CATCHUP_WINDOW
    );
    assert_eq!(spec.remaining_runs, Some(12));
    let plain = ScheduleDecl {
        max_jitter: None,
        overlap: None,
        remaining_runs: None,
        ..decl
    };
    assert_eq!(
        plain.validate(now()).unwrap().policies,
        crate::core::policies::Policies::default()
    );
}

#[test]
fn labels_are_declared_as_strings_under_the_label_rules() {
    let billing = load_declarations(BILLING, DeclFormat::Yaml, now()).unwrap();
    assert_eq!(billing[0].labels.to_string(), "team=billing,tier=gold");
    assert!(billing[1].labels.is_empty());
    let text = r#"
schedules:
  - schedule_type: a
    cron: "0 * * * *"
    labels: { tier: 1, ok: "x", "bad key": "y" }
  - schedule_type: b
    cron: "0 * * * *"
    labels: [team]
"#;
    let errors = entry_errors(text, DeclFormat::Yaml);
    // Every problem at once: the value's type, and the key's rule.
    assert_eq!(
        messages(&errors[0]),
        [
            "labels.tier: must be a string (quote it), got a number",
            "labels.bad key: key name \"bad key\" may hold only ASCII letters, digits, '-', '_' \
             and '.'"
        ]
    );
    assert_eq!(
        messages(&errors[1]),
        ["labels: must be an object of key: value, got a list"]
    );
    let text =
        "schedules:\n  - schedule_type: a\n    cron: '0 * * * *'\n    labels: {\"bad key\": y}\n";
    let errors = entry_errors(text, DeclFormat::Yaml);
    assert_eq!(errors[0].errors[0].field, "labels.bad key");
}

#[test]
fn after_completion_delete_needs_a_schedule_that_completes() {
    let text = r#"
schedules:
  - schedule_type: forever
    cron: "0 * * * *"
    after_completion: delete
  - schedule_type: later
    cron: "0 * * * *"
    after_completion: eventually
  - schedule_type: counted
    cron: "0 * * * *"
    remaining_runs: 3
    after_completion: delete
  - schedule_type: bounded
    cron: "0 * * * *"
    end_at: 2031-01-01T00:00:00Z
    after_completion: delete
  - schedule_type: once
    run_at: 2031-01-01T00:00:00Z
    after_completion: delete
"#;
    let errors = entry_errors(text, DeclFormat::Yaml);
    let by_type: Vec<(usize, Vec<String>)> =
        errors.iter().map(|e| (e.index, messages(e))).collect();
    assert_eq!(
        by_type,
        [
            (
                0,
                vec![
                    "after_completion: delete applies to a schedule that completes: a one-shot \
                     (run_at), or a cron schedule with end_at or remaining_runs"
                        .to_owned()
                ]
            ),
            (
                1,
                vec![
                    "after_completion: unknown value \"eventually\" (expected one of: keep delete)"
                        .to_owned()
                ]
            ),
        ]
    );
    let valid = text.split("  - schedule_type: counted").nth(1).unwrap();
    let specs = load_declarations(
        &format!("schedules:\n  - schedule_type: counted{valid}"),
        DeclFormat::Yaml,
        now(),
    )
    .unwrap();
    assert!(
        specs
            .iter()
            .all(|s| s.policies.after_completion == AfterCompletion::Delete),
        "{specs:?}"
    );
    assert_eq!(specs.len(), 3);
}

#[test]
fn intervals_are_declared_with_every_and_phase_and_checked_by_field() {
    let text = r#"
schedules:
  - schedule_type: both
    cron: "* * * * *"
    every: 90s
  - schedule_type: phase-alone
    cron: "* * * * *"
    phase: 15s
  - schedule_type: long-phase
    every: 1m
    phase: 1m
  - schedule_type: fraction
    every: 1500ms
  - schedule_type: jitter
    every: 20s
    max_jitter: 30s
  - schedule_type: ok
    every: 90s
    phase: 15s
    max_jitter: 90s
  - schedule_type: as-expression
    cron: "@every 1h phase 15m"
"#;
    let errors = entry_errors(text, DeclFormat::Yaml);
    let by_index: Vec<(usize, Vec<String>)> =
        errors.iter().map(|e| (e.index, messages(e))).collect();
    assert_eq!(
        by_index,
        [
            (
                0,
                vec![
                    "cron: cannot be combined with every: give exactly one of cron, every or \
                     run_at"
                        .to_owned()
                ]
            ),
            (1, vec!["phase: only applies with every".to_owned()]),
            (
                2,
                vec!["phase: the phase 1m is not shorter than the period 1m".to_owned()]
            ),
            (
                3,
                vec!["every: the period \"1500ms\" is not a whole number of seconds".to_owned()]
            ),
            (
                4,
                vec![
                    "max_jitter: 30s is longer than the schedule's interval (20s): a call must \
                     come before the next occurrence"
                        .to_owned()
                ]
            ),
        ]
    );
    let valid: String = text
        .split("  - schedule_type: ok")
        .nth(1)
        .map(|rest| format!("schedules:\n  - schedule_type: ok{rest}"))
        .unwrap();
    let specs = load_declarations(&valid, DeclFormat::Yaml, now()).unwrap();
    let expressions: Vec<Option<&str>> = specs.iter().map(|s| s.timing.cron_expression()).collect();
    assert_eq!(
        expressions,
        [Some("@every 1m30s phase 15s"), Some("@every 1h phase 15m")]
    );
    // 2025-06-01T12:00:00Z is a multiple of 90 s; the next instant is 15 s past it.
    assert_eq!(
        specs[0].timing.next_after(now()).unwrap().unwrap(),
        now() + chrono::Duration::seconds(15)
    );
}
