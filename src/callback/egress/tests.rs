use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;
use std::sync::Arc;

use reqwest::dns::Resolve as _;

use super::*;

fn policy(entries: &[&str], domain: Option<&str>, dev: bool) -> EgressPolicy {
    let entries: Vec<String> = entries.iter().map(|s| (*s).to_owned()).collect();
    EgressPolicy::parse(&entries, domain, dev).unwrap()
}

fn platform() -> EgressPolicy {
    policy(&[], Some("svc.example.com"), false)
}

fn check(p: &EgressPolicy, url: &str) -> Result<(), EgressDenied> {
    p.check_url(&Url::parse(url).unwrap())
}

#[test]
fn every_example_from_the_issue_is_refused_by_the_platform_default() {
    let p = platform();
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "https://169.254.169.254",
        "http://[fd00:ec2::254]",
        "https://[fd00:ec2::254]",
        "http://metadata.google.internal/computeMetadata/v1",
        "https://metadata.google.internal",
        "http://10.0.0.1:6379",
        "https://10.0.0.1:6379",
        "http://localhost:5432",
        "https://localhost:5432",
        "http://2130706433",
        "https://2130706433",
        "http://0x7f000001",
        "https://0x7f000001",
        "http://[::ffff:127.0.0.1]",
        "https://[::ffff:127.0.0.1]",
        "https://attacker.example",
        "http://attacker.example",
    ] {
        let err = check(&p, url).unwrap_err();
        let text = err.to_string();
        assert!(!text.is_empty(), "{url}");
    }
    // The address forms name their class, so the field error says why.
    assert_eq!(
        check(&p, "https://169.254.169.254").unwrap_err(),
        EgressDenied::RefusedAddress {
            addr: IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
            class: AddrClass::Metadata
        }
    );
    assert_eq!(
        check(&p, "https://0x7f000001").unwrap_err(),
        EgressDenied::RefusedAddress {
            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            class: AddrClass::Loopback
        }
    );
    assert_eq!(
        check(&p, "https://[::ffff:127.0.0.1]").unwrap_err(),
        EgressDenied::RefusedAddress {
            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            class: AddrClass::Loopback
        }
    );
    assert_eq!(
        check(&p, "https://[fd00:ec2::254]").unwrap_err(),
        EgressDenied::RefusedAddress {
            addr: "fd00:ec2::254".parse().unwrap(),
            class: AddrClass::Metadata
        }
    );
    assert_eq!(
        check(&p, "https://attacker.example")
            .unwrap_err()
            .to_string(),
        "https://attacker.example:443 is not allowed by the egress policy"
    );
}

#[test]
fn the_platform_default_allows_https_below_the_domain_only() {
    let p = platform();
    check(&p, "https://billing.svc.example.com").unwrap();
    check(&p, "https://a.b.svc.example.com/base/").unwrap();
    check(&p, "https://BILLING.SVC.EXAMPLE.COM.").unwrap();
    check(&p, "https://billing.svc.example.com:443").unwrap();
    for url in [
        "http://billing.svc.example.com",
        "https://svc.example.com",
        "https://billing.svc.example.com:8443",
        "https://billingsvc.example.com",
        "https://svc.example.com.attacker.example",
        "ftp://billing.svc.example.com",
    ] {
        assert!(check(&p, url).is_err(), "{url}");
    }
    assert!(matches!(
        check(&p, "ftp://billing.svc.example.com"),
        Err(EgressDenied::Scheme { .. })
    ));
}

#[test]
fn no_entries_and_no_domain_allow_nothing() {
    let p = policy(&[], None, false);
    assert!(p.is_empty());
    assert!(check(&p, "https://billing.svc.example.com").is_err());
    assert!(check(&p, "https://8.8.8.8").is_err());
}

#[test]
fn entries_with_schemes_ports_and_addresses() {
    let p = policy(
        &[
            "*.svc.example.com",
            "https://billing.internal:8443",
            "http://127.0.0.1:9000",
            "https://10.20.0.0/16:*",
            "http://[fd12::1]:8080",
        ],
        Some("ignored.example"),
        false,
    );
    check(&p, "https://x.svc.example.com").unwrap();
    check(&p, "https://billing.internal:8443").unwrap();
    assert!(check(&p, "https://billing.internal").is_err());
    assert!(check(&p, "http://billing.internal:8443").is_err());
    check(&p, "http://127.0.0.1:9000").unwrap();
    check(&p, "http://2130706433:9000").unwrap();
    check(&p, "http://[::ffff:7f00:1]:9000").unwrap();
    assert!(check(&p, "http://127.0.0.1:9001").is_err());
    assert!(check(&p, "https://127.0.0.1:9000").is_err());
    assert!(check(&p, "http://127.0.0.2:9000").is_err());
    check(&p, "https://10.20.3.4:6379").unwrap();
    assert!(check(&p, "https://10.21.3.4").is_err());
    check(&p, "http://[FD12::1]:8080").unwrap();
    // The platform default applies only without entries.
    assert!(check(&p, "https://a.ignored.example").is_err());
}

#[test]
fn explicit_names_unlock_reserved_names_but_wildcards_do_not() {
    let p = policy(&["*.internal", "http://localhost:9000"], None, false);
    assert_eq!(
        check(&p, "https://metadata.google.internal").unwrap_err(),
        EgressDenied::ReservedName {
            host: "metadata.google.internal".into()
        }
    );
    check(&p, "https://billing.internal").unwrap();
    check(&p, "http://localhost:9000").unwrap();
    let p = policy(&["https://metadata.google.internal"], None, false);
    check(&p, "https://metadata.google.internal").unwrap();
}

#[test]
fn userinfo_is_refused_even_for_allowed_hosts() {
    let p = platform();
    for url in [
        "https://user@billing.svc.example.com",
        "https://user:pw@billing.svc.example.com",
        "https://:pw@billing.svc.example.com",
    ] {
        assert_eq!(
            check(&p, url).unwrap_err(),
            EgressDenied::Credentials,
            "{url}"
        );
    }
    // userinfo cannot smuggle another host: the host is what follows '@'.
    assert_eq!(
        check(&p, "https://billing.svc.example.com@169.254.169.254").unwrap_err(),
        EgressDenied::Credentials
    );
}

#[test]
fn idna_and_lookalike_spellings_are_normalized() {
    let p = platform();
    check(&p, "https://bücher.svc.example.com").unwrap();
    check(&p, "https://xn--bcher-kva.svc.example.com").unwrap();
    // Full-width dots and letters are mapped by IDNA to the ASCII name they spell.
    check(&p, "https://billing\u{ff0e}svc\u{ff0e}example\u{ff0e}com").unwrap();
    assert!(check(&p, "https://ａｔｔａｃｋｅｒ.example").is_err());
    // Full-width digits spell 127.0.0.1 once normalized.
    assert_eq!(
        check(&p, "https://１２７.０.０.１").unwrap_err(),
        EgressDenied::RefusedAddress {
            addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            class: AddrClass::Loopback
        }
    );
}

#[test]
fn dev_mode_allows_loopback_only() {
    let p = policy(&[], None, true);
    for url in [
        "http://localhost:8080",
        "https://localhost",
        "http://127.0.0.1:3000",
        "http://127.1:3000",
        "http://[::1]:3000",
        "http://app.localhost:3000",
    ] {
        check(&p, url).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
    for url in [
        "http://169.254.169.254",
        "http://10.0.0.1:6379",
        "http://[fd00:ec2::254]",
        "https://attacker.example",
        "http://0.0.0.0:8080",
    ] {
        assert!(check(&p, url).is_err(), "{url}");
    }
    let u = Url::parse("http://localhost:8080").unwrap();
    p.check_addr(&u, IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
    assert!(p.check_addr(&u, "10.0.0.1".parse().unwrap()).is_err());
}

#[test]
fn addresses_are_checked_after_resolution() {
    let p = policy(
        &[
            "*.svc.example.com",
            "https://10.8.0.0/16",
            "https://192.0.2.10",
        ],
        None,
        false,
    );
    let u = Url::parse("https://billing.svc.example.com").unwrap();
    p.check_addr(&u, "93.184.215.14".parse().unwrap()).unwrap();
    p.check_addr(&u, "2606:4700::1".parse().unwrap()).unwrap();
    p.check_addr(&u, "10.8.1.2".parse().unwrap()).unwrap();
    p.check_addr(&u, "::ffff:10.8.1.2".parse().unwrap())
        .unwrap();
    for refused in [
        "127.0.0.1",
        "10.9.0.1",
        "169.254.169.254",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",
        "::127.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::1",
        "100.64.0.1",
        "0.0.0.0",
        "::",
        "fe80::1",
        "ff02::1",
        "255.255.255.255",
        // An IP entry names its literal host, not whatever a name resolves to.
        "192.0.2.10",
    ] {
        let addr: IpAddr = refused.parse().unwrap();
        assert!(
            matches!(
                p.check_addr(&u, addr),
                Err(EgressDenied::RefusedAddress { .. })
            ),
            "{refused}"
        );
    }
    // An IP-literal URL connects only to itself.
    let lit = Url::parse("https://192.0.2.10").unwrap();
    p.check_addr(&lit, "192.0.2.10".parse().unwrap()).unwrap();
    assert!(matches!(
        p.check_addr(&lit, "192.0.2.11".parse().unwrap()),
        Err(EgressDenied::AddressMismatch { .. })
    ));
    // A URL the policy refuses is refused whatever the address.
    let other = Url::parse("https://attacker.example").unwrap();
    assert!(
        p.check_addr(&other, "93.184.215.14".parse().unwrap())
            .is_err()
    );
}

#[test]
fn address_classes() {
    let cases: &[(&str, AddrClass)] = &[
        ("8.8.8.8", AddrClass::Public),
        ("1.1.1.1", AddrClass::Public),
        ("0.0.0.0", AddrClass::Unspecified),
        ("0.1.2.3", AddrClass::Unspecified),
        ("127.0.0.1", AddrClass::Loopback),
        ("127.255.255.254", AddrClass::Loopback),
        ("10.0.0.1", AddrClass::Private),
        ("172.16.0.1", AddrClass::Private),
        ("172.31.255.255", AddrClass::Private),
        ("172.32.0.1", AddrClass::Public),
        ("192.168.1.1", AddrClass::Private),
        ("100.64.0.1", AddrClass::SharedCgnat),
        ("100.127.255.255", AddrClass::SharedCgnat),
        ("100.128.0.1", AddrClass::Public),
        ("169.254.169.254", AddrClass::Metadata),
        ("168.63.129.16", AddrClass::Metadata),
        ("169.254.1.1", AddrClass::LinkLocal),
        ("192.0.2.1", AddrClass::Documentation),
        ("198.51.100.1", AddrClass::Documentation),
        ("203.0.113.1", AddrClass::Documentation),
        ("198.18.0.1", AddrClass::Reserved),
        ("224.0.0.1", AddrClass::Multicast),
        ("239.255.255.250", AddrClass::Multicast),
        ("240.0.0.1", AddrClass::Reserved),
        ("255.255.255.255", AddrClass::Broadcast),
        ("::", AddrClass::Unspecified),
        ("::1", AddrClass::Loopback),
        ("::ffff:127.0.0.1", AddrClass::Loopback),
        ("::ffff:169.254.169.254", AddrClass::Metadata),
        ("::ffff:8.8.8.8", AddrClass::Public),
        ("::ffff:0:10.0.0.1", AddrClass::Private),
        ("::10.0.0.1", AddrClass::Private),
        ("::8.8.8.8", AddrClass::Reserved),
        ("64:ff9b::7f00:1", AddrClass::Loopback),
        ("64:ff9b::808:808", AddrClass::Public),
        ("64:ff9b:1::1", AddrClass::Private),
        ("2002:a9fe:a9fe::1", AddrClass::Metadata),
        ("2002:0808:0808::1", AddrClass::Public),
        ("2001::1", AddrClass::Reserved),
        ("2001:db8::1", AddrClass::Documentation),
        ("3fff::1", AddrClass::Documentation),
        ("100::1", AddrClass::Reserved),
        ("fc00::1", AddrClass::UniqueLocal),
        ("fd00:ec2::254", AddrClass::Metadata),
        ("fd00:ec2::253", AddrClass::UniqueLocal),
        ("fe80::1", AddrClass::LinkLocal),
        ("fec0::1", AddrClass::Private),
        ("ff02::1", AddrClass::Multicast),
        ("2606:4700::1111", AddrClass::Public),
        ("4000::1", AddrClass::Reserved),
    ];
    for (addr, class) in cases {
        assert_eq!(classify(addr.parse().unwrap()), *class, "{addr}");
    }
}

#[test]
fn bad_entries_are_configuration_errors() {
    for entry in [
        "ftp://a.example",
        "https://",
        "https://a.example:0",
        "https://a.example:70000",
        "https://a.example:x",
        "https://user@a.example",
        "https://a.example/path",
        "*",
        "*.",
        "a.*.example",
        "https://10.0.0.0/33",
        "https://[fd00::]/129",
        "https://[::1",
        "a.example?x",
    ] {
        assert!(
            EgressPolicy::parse(&[entry.to_owned()], None, false).is_err(),
            "{entry}"
        );
    }
    assert!(matches!(
        EgressPolicy::parse(&[], Some("bad domain!"), false),
        Err(EgressConfigError::PlatformDomain { .. })
    ));
    // Lists in one string, blanks ignored.
    let p = EgressPolicy::parse(
        &[
            "*.a.example, https://b.example:8443 ".to_owned(),
            String::new(),
        ],
        None,
        false,
    )
    .unwrap();
    check(&p, "https://x.a.example").unwrap();
    check(&p, "https://b.example:8443").unwrap();
}

#[test]
fn explicit_origins_are_told_apart_from_wildcards() {
    let p = policy(
        &[
            "*.svc.example.com",
            "http://127.0.0.1:9000",
            "https://billing.internal",
            "http://10.1.2.3:*",
        ],
        None,
        false,
    );
    let named = |u: &str| p.names_origin_explicitly(&Url::parse(u).unwrap());
    assert!(named("http://127.0.0.1:9000"));
    assert!(named("https://billing.internal/x"));
    assert!(!named("https://a.svc.example.com"));
    assert!(!named("http://127.0.0.1:9001"));
    // A host named exactly with a wildcard port names no origin.
    assert!(!named("http://10.1.2.3:8080"));
}

#[tokio::test]
async fn the_resolver_refuses_a_name_that_resolves_to_loopback() {
    let p = Arc::new(policy(&["http://localhost:*"], None, false));
    // The URL check passes (an entry names localhost), but its addresses are loopback.
    check(&p, "http://localhost:5432").unwrap();
    let resolver = EgressResolver::new(Arc::clone(&p));
    let err = resolver
        .resolve(reqwest::dns::Name::from_str("localhost").unwrap())
        .await
        .err()
        .expect("loopback addresses must be dropped");
    let denied = err.downcast_ref::<EgressDenied>().expect("an EgressDenied");
    assert_eq!(
        denied,
        &EgressDenied::NoAllowedAddress {
            host: "localhost".into()
        }
    );

    // Without an entry naming it, the name itself is refused before any lookup.
    let resolver = EgressResolver::new(Arc::new(platform()));
    let err = resolver
        .resolve(reqwest::dns::Name::from_str("localhost").unwrap())
        .await
        .err()
        .unwrap();
    assert!(matches!(
        err.downcast_ref::<EgressDenied>(),
        Some(EgressDenied::ReservedName { .. })
    ));

    // Development mode keeps loopback.
    let resolver = EgressResolver::new(Arc::new(policy(&[], None, true)));
    let addrs: Vec<_> = resolver
        .resolve(reqwest::dns::Name::from_str("localhost").unwrap())
        .await
        .unwrap()
        .collect();
    assert!(!addrs.is_empty());
    assert!(addrs.iter().all(|a| a.ip().is_loopback()));
}

#[tokio::test]
async fn a_client_built_for_egress_never_connects_to_a_refused_address() {
    // A listener on loopback that would accept the call: the client must not reach it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = Arc::new(policy(&["http://localhost:*"], None, false));
    let client = egress_client_builder(Arc::clone(&p)).build().unwrap();
    let err = client
        .get(format!("http://localhost:{port}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        super::super::failure::classify_error(&err),
        super::super::failure::FailureClass::Configuration
    );
    let accepted =
        tokio::time::timeout(std::time::Duration::from_millis(100), listener.accept()).await;
    assert!(accepted.is_err(), "the refused address was connected to");
}

#[test]
fn filter_resolved_keeps_only_permitted_addresses() {
    let p = platform();
    let addrs = [
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        SocketAddr::from((Ipv4Addr::new(93, 184, 215, 14), 0)),
        SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
    ];
    assert_eq!(
        p.filter_resolved("billing.svc.example.com", addrs).unwrap(),
        [SocketAddr::from((Ipv4Addr::new(93, 184, 215, 14), 0))]
    );
    assert!(p.filter_resolved("billing.svc.example.com", []).is_err());
    assert!(
        p.filter_resolved("metadata.google.internal.", [addrs[1]])
            .is_err()
    );
}

#[test]
fn ipv6_network_entries_cover_literals_and_resolved_addresses() {
    let p = policy(&["*.svc.example.com", "https://[fd12::]/16:*"], None, false);
    check(&p, "https://[fd12:3::1]:8443").unwrap();
    check(&p, "https://[FD12::5]").unwrap();
    assert!(check(&p, "https://[fd13::1]").is_err());
    assert!(check(&p, "http://[fd12::1]").is_err());
    let u = Url::parse("https://a.svc.example.com").unwrap();
    p.check_addr(&u, "fd12::9".parse().unwrap()).unwrap();
    assert!(p.check_addr(&u, "fd00:ec2::254".parse().unwrap()).is_err());
    assert_eq!(
        p.filter_resolved(
            "a.svc.example.com",
            [
                SocketAddr::from(("fd12::9".parse::<IpAddr>().unwrap(), 0)),
                SocketAddr::from(("fe80::1".parse::<IpAddr>().unwrap(), 0)),
            ]
        )
        .unwrap()
        .len(),
        1
    );
}
