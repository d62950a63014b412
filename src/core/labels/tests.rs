use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    let map = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Labels::validate("labels", map).expect("valid labels")
}

fn selector(text: &str) -> LabelSelector {
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
}

#[test]
fn keys_and_values_follow_the_kubernetes_rules() {
    for key in [
        "team",
        "a",
        "app.kubernetes.io/name",
        "x-y_z.1",
        "example.com/tier",
    ] {
        assert_eq!(check_key(key), Ok(()), "{key}");
    }
    for key in [
        "",
        "-team",
        "team-",
        "te am",
        "Example.com/x",
        "/x",
        "a/",
        "a/b/c",
        "ü",
    ] {
        assert!(check_key(key).is_err(), "{key:?} should be refused");
    }
    assert!(check_key(&"k".repeat(64)).is_err());
    assert_eq!(check_key(&"k".repeat(63)), Ok(()));
    for value in ["", "billing", "v1.2", "A_b-c"] {
        assert_eq!(check_value(value), Ok(()), "{value:?}");
    }
    for value in ["-x", "x.", "a b", "a=b", "a,b"] {
        assert!(check_value(value).is_err(), "{value:?} should be refused");
    }
}

#[test]
fn a_refusal_names_the_label_and_the_reason() {
    let map = BTreeMap::from([
        ("team".to_owned(), "billing".to_owned()),
        ("bad key".to_owned(), "x".to_owned()),
        ("tier".to_owned(), "-gold".to_owned()),
    ]);
    let errors = Labels::validate("labels", map).unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["labels.bad key", "labels.tier"]);
    assert!(errors[1].message.contains("begin and end"), "{}", errors[1]);
    let too_many = (0..=MAX_LABELS).map(|i| (format!("k{i}"), String::new()));
    let errors = Labels::validate("labels", too_many.collect()).unwrap_err();
    assert_eq!(errors[0].field, "labels");
}

#[test]
fn merges_set_remove_and_keep() {
    let parsed = labels(&[("team", "billing"), ("tier", ""), ("env", "prod")]);
    assert_eq!(parsed.to_string(), "env=prod,team=billing,tier=");
    let merged = parsed
        .merged(
            "labels",
            &BTreeMap::from([
                ("tier".to_owned(), None),
                ("team".to_owned(), Some("payments".to_owned())),
            ]),
        )
        .unwrap();
    assert_eq!(merged.to_string(), "env=prod,team=payments");
}

#[test]
fn every_operator_matches_as_in_kubernetes() {
    let billing = labels(&[("team", "billing"), ("tier", "gold")]);
    let bare = labels(&[]);
    let cases = [
        ("", true, true),
        ("team", true, false),
        ("!team", false, true),
        ("team=billing", true, false),
        ("team==billing", true, false),
        ("team!=billing", false, true),
        ("team!=ops", true, true),
        ("tier in (gold, silver)", true, false),
        ("tier notin (gold)", false, true),
        ("tier notin (bronze)", true, true),
        ("team=billing,tier in (silver)", false, false),
        ("team = billing , tier in(gold)", true, false),
        ("team=", false, false),
    ];
    for (text, on_billing, on_bare) in cases {
        let s = selector(text);
        assert_eq!(s.matches(&billing), on_billing, "{text:?} on billing");
        assert_eq!(s.matches(&bare), on_bare, "{text:?} on no labels");
    }
    assert!(selector("tier=").matches(&labels(&[("tier", "")])));
}

#[test]
fn a_bad_selector_says_where_and_why() {
    for (text, position, fragment) in [
        ("team=bill ing", 11, "expected ','"),
        ("team in gold", 9, "'('"),
        ("team in (gold", 14, "not closed"),
        ("=x", 1, "label key"),
        ("team,", 6, "found the end"),
        ("team ~ x", 6, "expected '='"),
        ("team=-x", 6, "begin and end"),
        ("Bad.Prefix/x", 1, "DNS subdomain"),
        ("index (a)", 7, "expected '='"),
    ] {
        let error = text.parse::<LabelSelector>().unwrap_err();
        assert_eq!(error.position, position, "{text:?}: {error}");
        assert!(error.message.contains(fragment), "{text:?}: {error}");
    }
    let long = vec!["a"; selector::MAX_REQUIREMENTS + 1].join(",");
    assert!(long.parse::<LabelSelector>().is_err());
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("team".to_owned()),
        Just("tier".to_owned()),
        Just("example.com/owner".to_owned()),
        "[a-z][a-z0-9]{0,3}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z0-9]{1,3}",
        "[A-Z][a-z_.-]{0,3}[0-9]"
    ]
}

fn any_labels() -> impl Strategy<Value = Labels> {
    prop::collection::btree_map(key(), value(), 0..5)
        .prop_map(|map| Labels::validate("labels", map).expect("generated labels are valid"))
}

fn any_op() -> impl Strategy<Value = SelectorOp> {
    let set = || prop::collection::btree_set(value(), 1..4);
    prop_oneof![
        Just(SelectorOp::Exists),
        Just(SelectorOp::NotExists),
        value().prop_map(SelectorOp::Equals),
        value().prop_map(SelectorOp::NotEquals),
        set().prop_map(SelectorOp::In),
        set().prop_map(SelectorOp::NotIn),
    ]
}

fn any_selector() -> impl Strategy<Value = LabelSelector> {
    prop::collection::vec((key(), any_op()), 0..4).prop_map(|parts| {
        LabelSelector::new(
            parts
                .into_iter()
                .map(|(key, op)| Requirement { key, op })
                .collect(),
        )
    })
}

proptest! {
    #[test]
    fn the_canonical_form_parses_back_to_the_same_selector(s in any_selector()) {
        let text = s.to_string();
        prop_assert_eq!(text.parse::<LabelSelector>(), Ok(s), "{}", text);
    }

    #[test]
    fn a_selector_matches_when_every_requirement_does(s in any_selector(), l in any_labels()) {
        let each = s.requirements().iter().all(|r| {
            LabelSelector::new(vec![r.clone()]).matches(&l)
        });
        prop_assert_eq!(s.matches(&l), each);
    }

    #[test]
    fn negations_are_complements(k in key(), v in value(), l in any_labels()) {
        let one = |op| LabelSelector::new(vec![Requirement { key: k.clone(), op }]);
        let set = std::collections::BTreeSet::from([v.clone()]);
        prop_assert_ne!(one(SelectorOp::Exists).matches(&l), one(SelectorOp::NotExists).matches(&l));
        prop_assert_ne!(
            one(SelectorOp::Equals(v.clone())).matches(&l),
            one(SelectorOp::NotEquals(v.clone())).matches(&l)
        );
        prop_assert_ne!(one(SelectorOp::In(set.clone())).matches(&l), one(SelectorOp::NotIn(set)).matches(&l));
        prop_assert_eq!(
            one(SelectorOp::Equals(v.clone())).matches(&l),
            one(SelectorOp::In([v].into())).matches(&l)
        );
    }

    #[test]
    fn no_text_makes_the_parser_panic(text in "[a-z=!,() .\\-/in]{0,40}") {
        let _ = text.parse::<LabelSelector>();
    }
}
