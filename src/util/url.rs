//! URLs in messages: credentials never shown; loopback hosts recognised.

use std::net::IpAddr;

use reqwest::Url;

/// Query parameters that carry a secret in connection URLs (libpq's `password` and
/// `sslpassword`, and the common token names), compared without case.
const SECRET_PARAMS: [&str; 6] = [
    "password",
    "sslpassword",
    "token",
    "secret",
    "access_token",
    "api_key",
];

/// Hides the secrets of a URL for messages and logs: the password of its user info
/// (`postgres://u:***@h/db`; the user stays visible) and the value of every query parameter
/// that carries one (`?sslmode=require&password=***`). Text that is not quite a URL is handled
/// too: whatever stands before an `@` with no scheme is hidden whole.
pub fn redact(url: &str) -> String {
    // The user info first, up to the last `@` (a raw `?` or `/` in a password must not hide
    // it from the split); then the query of what follows.
    let (mut shown, rest) = match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let shown = match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***@", &url[..scheme_end + 3]),
                None => url[..=at].to_owned(),
            };
            (shown, &url[at + 1..])
        }
        (None, Some(at)) => ("***@".to_owned(), &url[at + 1..]),
        _ => (String::new(), url),
    };
    let (head, query) = match rest.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (rest, None),
    };
    shown.push_str(head);
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _))
                    if SECRET_PARAMS
                        .iter()
                        .any(|secret| name.eq_ignore_ascii_case(secret)) =>
                {
                    format!("{name}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
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
    fn redact_hides_a_secret_in_every_position() {
        let marker = "SEKRET-MARKER";
        for url in [
            format!("postgres://u:{marker}@h/db"),
            format!("postgres://u@h/db?password={marker}"),
            format!("postgres://h/db?sslmode=require&PASSWORD={marker}&application_name=x"),
            format!("postgres://h/db?sslpassword={marker}"),
            format!("http://h:8080/x?token={marker}"),
            format!("http://h/?secret={marker}&api_key={marker}&access_token={marker}"),
            format!("u:{marker}@h:8080"),
            format!("postgres://u:{marker}@h/db?password={marker}"),
            // A raw `?` or `/` in a password (not percent-encoded) is still the password's.
            format!("postgres://u:a?b/{marker}@h/db"),
        ] {
            let shown = redact(&url);
            assert!(!shown.contains(marker), "{url} -> {shown}");
        }
        // What is not secret stays, in order.
        assert_eq!(
            redact("postgres://u:pw@h:5432/db?sslmode=require&password=pw&application_name=a"),
            "postgres://u:***@h:5432/db?sslmode=require&password=***&application_name=a"
        );
        assert_eq!(
            redact("postgres://h/db?sslmode=disable"),
            "postgres://h/db?sslmode=disable"
        );
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
