use chrono::{Duration, TimeZone};
use serde_json::json;

use super::*;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::ScheduleDecl;
use crate::core::timing::Timing;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap()
}

fn target(url: &str) -> Target {
    Target::from_stored(json!({ "baseUrl": url }))
}

fn cron(schedule_type: &str, expression: &str) -> ScheduleDecl {
    ScheduleDecl {
        schedule_type: schedule_type.to_owned(),
        cron: Some(expression.to_owned()),
        ..ScheduleDecl::default()
    }
}

fn spec(decl: &ScheduleDecl) -> ScheduleSpec {
    decl.validate(now()).expect("valid declaration")
}

/// A schedule as `insert_schedule` would have stored it a day ago, then advanced once.
fn stored(decl: &ScheduleDecl, url: &str) -> Schedule {
    let created = now() - Duration::days(1);
    let spec = decl.validate(created).unwrap();
    let blank = Schedule {
        id: ScheduleId::new(),
        env_id: EnvId::new(),
        domain: "billing".to_owned(),
        schedule_type: String::new(),
        // Replaced by the spec's.
        timing: Timing::Once { run_at: created },
        target: target(url),
        payload: json!({}),
        status: ScheduleStatus::Active,
        next_run_at: None,
        last_run_at: None,
        retry_count: 0,
        max_retries: 3,
        policies: Default::default(),
        remaining_runs: None,
        labels: Default::default(),
        exclude: Default::default(),
        created_at: created,
        updated_at: created,
        created_by: "tester".to_owned(),
        updated_by: "tester".to_owned(),
    };
    let mut schedule = ops::with_spec(&blank, &spec);
    // An odd instant the timing would never produce, so "kept" is told from "recomputed".
    schedule.next_run_at = Some(now() + Duration::seconds(17));
    schedule
}

const URL: &str = "https://billing.apps.example.com";

fn actions(steps: &[Step]) -> Vec<(String, Action, Vec<&'static str>)> {
    steps
        .iter()
        .map(|step| {
            let change = step.planned_change();
            (change.schedule_type, change.action, change.changed_fields)
        })
        .collect()
}

#[test]
fn new_declarations_are_created_with_their_first_fire() {
    let hourly = cron("a.hourly", "0 * * * *");
    let steps = plan(&[], &[spec(&hourly)], &target(URL), false, now()).unwrap();
    let [Step::Create { spec, next_run_at }] = steps.as_slice() else {
        panic!("{steps:?}")
    };
    assert_eq!(spec.schedule_type, "a.hourly");
    assert_eq!(*next_run_at, Some(now() + Duration::hours(1)));
    assert_eq!(steps[0].planned_change().schedule_id, None);
}

#[test]
fn identical_declarations_are_kept() {
    let decl = ScheduleDecl {
        payload: Some(json!({"ledger": "eu", "n": 2})),
        timezone: Some("Europe/Berlin".to_owned()),
        ..cron("a.daily", "0 6 * * *")
    };
    let current = stored(&decl, URL);
    let steps = plan(
        std::slice::from_ref(&current),
        &[spec(&decl)],
        &target(URL),
        true,
        now(),
    )
    .unwrap();
    assert_eq!(steps, vec![Step::Keep(Box::new(current.clone()))]);
    let change = steps[0].planned_change();
    assert_eq!(change.schedule_id, Some(current.id));
    assert_eq!(change.next_run_at, current.next_run_at);
}

#[test]
fn a_cron_change_recomputes_the_next_fire() {
    let before = cron("a.job", "0 6 * * *");
    let current = stored(&before, URL);
    let after = cron("a.job", "30 12 * * *");
    let steps = plan(
        std::slice::from_ref(&current),
        &[spec(&after)],
        &target(URL),
        false,
        now(),
    )
    .unwrap();
    let [
        Step::Update {
            updated,
            changed_fields,
            ..
        },
    ] = steps.as_slice()
    else {
        panic!("{steps:?}")
    };
    assert_eq!(changed_fields, &["cron"]);
    assert_eq!(updated.timing.cron_expression(), Some("30 12 * * *"));
    assert_eq!(updated.next_run_at, Some(now() + Duration::minutes(30)));
    // Bookkeeping is the writer's business, not the plan's.
    assert_eq!(updated.id, current.id);
    assert_eq!(updated.created_at, current.created_at);
}

#[test]
fn payload_retries_and_target_changes_keep_the_next_fire() {
    let before = ScheduleDecl {
        payload: Some(json!({"a": 1})),
        ..cron("a.job", "0 6 * * *")
    };
    let current = stored(&before, URL);
    let after = ScheduleDecl {
        payload: Some(json!({"a": 2})),
        max_retries: Some(7),
        ..before.clone()
    };
    let steps = plan(
        std::slice::from_ref(&current),
        &[spec(&after)],
        &target("https://elsewhere.example.com"),
        false,
        now(),
    )
    .unwrap();
    let [
        Step::Update {
            updated,
            changed_fields,
            ..
        },
    ] = steps.as_slice()
    else {
        panic!("{steps:?}")
    };
    assert_eq!(changed_fields, &["payload", "max_retries", "target_config"]);
    assert_eq!(updated.next_run_at, current.next_run_at);
    assert_eq!(updated.payload, json!({"a": 2}));
    assert_eq!(updated.max_retries, 7);
    assert_eq!(
        updated.target.config(),
        &json!({"baseUrl": "https://elsewhere.example.com"})
    );
}

#[test]
fn a_label_change_is_an_update_that_keeps_the_next_fire() {
    let labelled = |pairs: &[(&str, &str)]| ScheduleDecl {
        labels: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..cron("a.job", "0 6 * * *")
    };
    let current = stored(&labelled(&[("team", "billing")]), URL);
    let after = labelled(&[("team", "ops"), ("tier", "gold")]);
    let steps = plan(
        std::slice::from_ref(&current),
        &[spec(&after)],
        &target(URL),
        false,
        now(),
    )
    .unwrap();
    let [
        Step::Update {
            updated,
            changed_fields,
            ..
        },
    ] = steps.as_slice()
    else {
        panic!("{steps:?}")
    };
    assert_eq!(changed_fields, &["labels"]);
    assert_eq!(updated.labels.to_string(), "team=ops,tier=gold");
    assert_eq!(updated.next_run_at, current.next_run_at);
}

#[test]
fn every_timing_field_counts_as_a_timing_change() {
    let base = cron("a.job", "30 2 * * *");
    let variants = [
        (
            ScheduleDecl {
                timezone: Some("America/New_York".to_owned()),
                ..base.clone()
            },
            vec!["timezone"],
        ),
        (
            ScheduleDecl {
                on_dst_gap: Some(OnDstGap::Skip),
                ..base.clone()
            },
            vec!["on_dst_gap"],
        ),
        (
            ScheduleDecl {
                on_dst_repeat: Some(OnDstRepeat::Twice),
                ..base.clone()
            },
            vec!["on_dst_repeat"],
        ),
        (
            ScheduleDecl {
                cron: None,
                run_at: Some("2031-01-01T00:00:00Z".to_owned()),
                ..base.clone()
            },
            vec!["cron", "run_at"],
        ),
    ];
    for (decl, expected) in variants {
        let current = stored(&base, URL);
        let steps = plan(
            std::slice::from_ref(&current),
            &[spec(&decl)],
            &target(URL),
            false,
            now(),
        )
        .unwrap();
        let Step::Update {
            updated,
            changed_fields,
            ..
        } = &steps[0]
        else {
            panic!("{decl:?}: {steps:?}")
        };
        assert_eq!(changed_fields, &expected, "{decl:?}");
        assert_ne!(updated.next_run_at, current.next_run_at, "{decl:?}");
        assert_eq!(
            updated.next_run_at,
            spec(&decl).first_fire_after(now(), updated.id)
        );
    }
}

#[test]
fn a_paused_schedule_stays_paused_and_a_completed_one_shot_runs_again() {
    let before = cron("a.job", "0 6 * * *");
    let mut paused = stored(&before, URL);
    paused.status = ScheduleStatus::Paused;
    let after = cron("a.job", "0 7 * * *");
    let steps = plan(
        &[paused.clone()],
        &[spec(&after)],
        &target(URL),
        false,
        now(),
    )
    .unwrap();
    let Step::Update { updated, .. } = &steps[0] else {
        panic!("{steps:?}")
    };
    assert_eq!(updated.status, ScheduleStatus::Paused);

    let once = ScheduleDecl {
        schedule_type: "a.once".to_owned(),
        run_at: Some("2030-01-01T13:00:00Z".to_owned()),
        ..ScheduleDecl::default()
    };
    let mut completed = stored(&once, URL);
    completed.status = ScheduleStatus::Completed;
    completed.next_run_at = None;
    let again = ScheduleDecl {
        run_at: Some("2030-02-01T00:00:00Z".to_owned()),
        ..once
    };
    let steps = plan(&[completed], &[spec(&again)], &target(URL), false, now()).unwrap();
    let Step::Update { updated, .. } = &steps[0] else {
        panic!("{steps:?}")
    };
    assert_eq!(updated.status, ScheduleStatus::Active);
    assert_eq!(
        updated.next_run_at,
        Some(Utc.with_ymd_and_hms(2030, 2, 1, 0, 0, 0).unwrap())
    );
}

#[test]
fn undeclared_schedules_are_pruned_only_when_asked() {
    let kept = cron("b.kept", "0 6 * * *");
    let gone_z = stored(&cron("z.gone", "0 6 * * *"), URL);
    let gone_c = stored(&cron("c.gone", "0 6 * * *"), URL);
    let current = vec![gone_z.clone(), stored(&kept, URL), gone_c.clone()];
    let fresh = cron("a.new", "0 6 * * *");
    let specs = [spec(&fresh), spec(&kept)];

    let steps = plan(&current, &specs, &target(URL), false, now()).unwrap();
    assert_eq!(
        actions(&steps),
        vec![
            ("a.new".to_owned(), Action::Created, vec![]),
            ("b.kept".to_owned(), Action::Unchanged, vec![]),
            ("c.gone".to_owned(), Action::Undeclared, vec![]),
            ("z.gone".to_owned(), Action::Undeclared, vec![]),
        ]
    );
    assert_eq!(steps[2].planned_change().next_run_at, gone_c.next_run_at);

    let steps = plan(&current, &specs, &target(URL), true, now()).unwrap();
    assert_eq!(
        actions(&steps)
            .into_iter()
            .map(|(t, a, _)| (t, a))
            .collect::<Vec<_>>(),
        vec![
            ("a.new".to_owned(), Action::Created),
            ("b.kept".to_owned(), Action::Unchanged),
            ("c.gone".to_owned(), Action::Pruned),
            ("z.gone".to_owned(), Action::Pruned),
        ]
    );
    assert_eq!(steps[3], Step::Prune(Box::new(gone_z)));
    assert_eq!(steps[3].planned_change().next_run_at, None);
}

#[test]
fn numbers_compare_by_value_and_instants_to_the_microsecond() {
    let decl = ScheduleDecl {
        payload: Some(json!({"n": 100, "list": [1.5, {"x": 0}]})),
        ..cron("a.job", "0 6 * * *")
    };
    let mut current = stored(&decl, URL);
    // What a database that normalises numbers might hand back.
    current.payload = serde_json::from_str(r#"{"list": [1.50, {"x": 0.0}], "n": 1e2}"#).unwrap();
    let steps = plan(&[current], &[spec(&decl)], &target(URL), false, now()).unwrap();
    assert!(matches!(steps[0], Step::Keep(_)), "{steps:?}");

    let once = ScheduleDecl {
        schedule_type: "a.once".to_owned(),
        run_at: Some("2031-01-01T00:00:00.123456789Z".to_owned()),
        ..ScheduleDecl::default()
    };
    let mut current = stored(&once, URL);
    if let Timing::Once { run_at } = &mut current.timing {
        *run_at = run_at.trunc_subsecs(6);
    }
    let steps = plan(&[current], &[spec(&once)], &target(URL), false, now()).unwrap();
    assert!(matches!(steps[0], Step::Keep(_)), "{steps:?}");

    assert!(!same_json(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    assert!(!same_json(&json!([1, 2]), &json!([2, 1])));
    assert!(!same_json(&json!(1), &json!("1")));
    assert!(same_json(&json!(u64::MAX), &json!(u64::MAX)));
    assert!(!same_json(&json!(-1), &json!(u64::MAX)));
}

#[test]
fn the_target_comes_from_a_base_url_or_the_platform_domain() {
    assert_eq!(
        target_config("billing", Some("http://127.0.0.1:9000/api"), None).unwrap(),
        target("http://127.0.0.1:9000/api")
    );
    assert_eq!(
        target_config("billing", None, Some("apps.example.com")).unwrap(),
        target("https://billing.apps.example.com")
    );
    assert_eq!(
        target_config("billing", None, Some("localhost:8443")).unwrap(),
        target("https://billing.localhost:8443")
    );
    let fields = |result: Result<Target, Vec<FieldError>>| {
        result
            .unwrap_err()
            .into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        fields(target_config("billing", None, None)),
        ["base_url: a base URL or a platform domain is required"]
    );
    assert_eq!(
        fields(target_config("billing", Some("https://x"), Some("y"))),
        ["base_url: give either a base URL or a platform domain, not both"]
    );
    for bad in [
        "",
        "a/b",
        "user@host",
        "-x.com",
        "x.com:0",
        "x.com:http",
        "a b",
    ] {
        let errors = fields(target_config("billing", None, Some(bad)));
        assert!(
            errors[0].starts_with("platform_domain: "),
            "{bad}: {errors:?}"
        );
    }
    let errors = fields(target_config("billing", Some("https://u:p@x.com"), None));
    assert!(errors[0].contains("credentials"), "{errors:?}");
    for bad in [
        "billing.internal",
        "http://127.0.0.1:99999",
        "ftp://billing.internal",
        "http://billing.internal/\r\n",
        "http://user@billing.internal",
    ] {
        let errors = fields(target_config("billing", Some(bad), None));
        assert_eq!(errors.len(), 1, "{bad:?}: {errors:?}");
        assert!(
            errors[0].starts_with("target_config.baseUrl: "),
            "{errors:?}"
        );
    }
}
