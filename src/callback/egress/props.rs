//! Property: however an IP literal is spelled, the decision is the one for its address.

use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;

use super::*;

fn policy(entries: &[&str], domain: Option<&str>, dev: bool) -> EgressPolicy {
    let entries: Vec<String> = entries.iter().map(|s| (*s).to_owned()).collect();
    EgressPolicy::parse(&entries, domain, dev).unwrap()
}

/// The decision the test policy below must reach for an IPv4 address, written independently
/// of the implementation: only 127.0.0.1 over http on port 9000 is named; everything else is
/// refused (IP literals never match the wildcard).
fn expected_v4(addr: u32, scheme: &str, port: u16) -> bool {
    addr == 0x7f00_0001 && scheme == "http" && port == 9000
}

fn spell_v4(addr: u32, style: u8, upper: bool) -> String {
    let [a, b, c, d] = addr.to_be_bytes();
    let s = match style % 7 {
        0 => format!("{a}.{b}.{c}.{d}"),
        1 => format!("{addr}"),
        2 => format!("0x{addr:x}"),
        3 => format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
        // a.b.c16 and a.b24: the short forms.
        4 => format!("{a}.{b}.{}", u32::from(c) << 8 | u32::from(d)),
        5 => format!("{a}.{}", addr & 0x00ff_ffff),
        _ => format!("0x{a:x}.{b}.0{c:o}.{d}"),
    };
    if upper { s.to_uppercase() } else { s }
}

fn spell_v6(addr: u32, style: u8, upper: bool) -> String {
    let [a, b, c, d] = addr.to_be_bytes();
    let hi = u32::from(a) << 8 | u32::from(b);
    let lo = u32::from(c) << 8 | u32::from(d);
    let s = match style % 6 {
        0 => format!("[::ffff:{a}.{b}.{c}.{d}]"),
        1 => format!("[::ffff:{hi:x}:{lo:x}]"),
        2 => format!("[0:0:0:0:0:ffff:{hi:x}:{lo:x}]"),
        3 => format!("[::{a}.{b}.{c}.{d}]"),
        4 => format!("[64:ff9b::{hi:x}:{lo:x}]"),
        _ => format!("[2002:{hi:x}:{lo:x}::1]"),
    };
    if upper { s.to_uppercase() } else { s }
}

fn interesting_v4() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0x7f00_0001u32),
        Just(0x7f00_0002),
        Just(0x0a00_0001),
        Just(0xa9fe_a9fe),
        Just(0xc0a8_0101),
        Just(0x6440_0001),
        Just(0x0000_0000),
        Just(0xffff_ffff),
        Just(0x0808_0808),
        any::<u32>(),
    ]
}

fn test_policy() -> EgressPolicy {
    policy(
        &["*.svc.example.com", "http://127.0.0.1:9000"],
        Some("ignored.example"),
        false,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ipv4_spellings_decide_by_the_address(
        addr in interesting_v4(),
        style in 0u8..7,
        upper in any::<bool>(),
        https in any::<bool>(),
        port in prop_oneof![Just(None), Just(Some(9000u16)), Just(Some(80)), Just(Some(443)), any::<u16>().prop_map(Some)],
        userinfo in prop_oneof![Just(""), Just("user@"), Just("u:p@"), Just("svc.example.com@")],
        trailing_dot in any::<bool>(),
    ) {
        let p = test_policy();
        let scheme = if https { "https" } else { "http" };
        let host = spell_v4(addr, style, upper);
        let dot = if trailing_dot { "." } else { "" };
        let port_text = port.map(|p| format!(":{p}")).unwrap_or_default();
        let raw = format!("{scheme}://{userinfo}{host}{dot}{port_text}/base");
        let url = Url::parse(&raw).unwrap();
        // The url crate normalizes every spelling to the address.
        prop_assert_eq!(url.host(), Some(Host::Ipv4(Ipv4Addr::from(addr))), "{}", raw);
        let effective_port = port.unwrap_or(if https { 443 } else { 80 });
        let decision = p.check_url(&url);
        if !userinfo.is_empty() {
            prop_assert_eq!(decision, Err(EgressDenied::Credentials), "{}", raw);
        } else {
            prop_assert_eq!(decision.is_ok(), expected_v4(addr, scheme, effective_port), "{}", raw);
            if let Err(EgressDenied::RefusedAddress { addr: refused, class }) = decision {
                prop_assert_eq!(refused, IpAddr::V4(Ipv4Addr::from(addr)));
                prop_assert_eq!(class, classify_v4(Ipv4Addr::from(addr)));
                prop_assert!(!class.is_public());
            }
            // A refused class is never reported as merely "not allowed", and vice versa.
            if let Err(EgressDenied::NotAllowed { .. }) = decision {
                prop_assert!(classify_v4(Ipv4Addr::from(addr)).is_public(), "{}", raw);
            }
        }
    }

    #[test]
    fn ipv6_forms_of_refused_ipv4_addresses_are_refused(
        addr in interesting_v4(),
        style in 0u8..6,
        upper in any::<bool>(),
    ) {
        let p = test_policy();
        let host = spell_v6(addr, style, upper);
        let raw = format!("https://{host}/");
        let url = Url::parse(&raw).unwrap();
        let v4 = Ipv4Addr::from(addr);
        let decision = p.check_url(&url);
        // No entry names an IPv6 literal, so every one is refused; the reason must be the
        // embedded address's class when that class is refused.
        prop_assert!(decision.is_err(), "{}", raw);
        let Some(Host::Ipv6(v6)) = url.host() else {
            return Err(TestCaseError::fail(format!("{raw} is not IPv6")));
        };
        let class = classify_v6(v6);
        if !classify_v4(v4).is_public() {
            prop_assert!(!class.is_public(), "{}", raw);
            prop_assert!(matches!(decision, Err(EgressDenied::RefusedAddress { .. })), "{}", raw);
        }
        // And a name resolving to the form is refused for the same reason.
        let named = Url::parse("https://a.svc.example.com").unwrap();
        prop_assert_eq!(
            p.check_addr(&named, IpAddr::V6(v6)).is_ok(),
            class.is_public(),
            "{}", raw
        );
        if !classify_v4(v4).is_public() {
            prop_assert!(p.check_addr(&named, IpAddr::V6(v6)).is_err(), "{}", raw);
        }
    }

    #[test]
    fn name_spellings_decide_by_the_normalized_name(
        label in "[a-z][a-z0-9]{0,10}",
        upper in any::<bool>(),
        trailing_dot in any::<bool>(),
        suffix in prop_oneof![
            Just((".svc.example.com", true)),
            Just((".SVC.Example.COM", true)),
            Just((".svc.example.com.attacker.example", false)),
            Just(("svc.example.com", false)),
            Just((".svc-example.com", false)),
            Just((".example.com", false)),
        ],
    ) {
        let p = test_policy();
        let host = if upper { label.to_uppercase() } else { label.clone() };
        let dot = if trailing_dot { "." } else { "" };
        let raw = format!("https://{host}{}{dot}/", suffix.0);
        let url = Url::parse(&raw).unwrap();
        prop_assert_eq!(p.check_url(&url).is_ok(), suffix.1, "{}", raw);
        // The same decision for http is always a refusal (https only).
        let http = Url::parse(&raw.replacen("https", "http", 1)).unwrap();
        prop_assert!(p.check_url(&http).is_err());
    }
}
