//! URLs in messages: credentials never shown; loopback hosts recognised.

use std::net::IpAddr;

use reqwest::Url;

/// Hides the password of a URL for messages (`postgres://u:***@h/db`); the user stays visible.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Hides the whole userinfo of a URL (user, password or token) for messages
/// (`nats://***@bus:4222`).
pub fn hide_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// Whether the URL's host is `localhost` (any case) or a loopback address.
pub fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_passwords_only() {
        assert_eq!(redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
    }

    #[test]
    fn hide_userinfo_hides_users_and_tokens() {
        assert_eq!(hide_userinfo("nats://u:pw@bus:4222"), "nats://***@bus:4222");
        assert_eq!(
            hide_userinfo("nats://token@bus:4222"),
            "nats://***@bus:4222"
        );
        assert_eq!(hide_userinfo("nats://bus:4222"), "nats://bus:4222");
        assert_eq!(hide_userinfo("bus@4222"), "bus@4222");
    }

    #[test]
    fn loopback_hosts() {
        for yes in [
            "http://localhost/x",
            "http://LocalHost:8/x",
            "http://127.0.0.1/x",
            "http://127.9.9.9/x",
            "http://[::1]:9/x",
        ] {
            assert!(is_loopback(&Url::parse(yes).unwrap()), "{yes}");
        }
        for no in [
            "http://example.com/x",
            "http://10.0.0.1/x",
            "http://[::2]/x",
        ] {
            assert!(!is_loopback(&Url::parse(no).unwrap()), "{no}");
        }
    }
}
