//! URLs in messages: credentials never shown; loopback hosts recognised.

use std::net::IpAddr;

use reqwest::Url;

use super::conninfo;

/// What the name of a query parameter that carries a secret contains, compared without case:
/// libpq's `password` and `sslpassword`, and every common spelling of a token, a client secret,
/// a key or a signature (`access_token`, `client_secret`, `apiKey`, `sig`, ...). Hiding a value
/// that was not secret costs a reader little; showing one that was cannot be undone.
const SECRET_PARTS: [&str; 8] = [
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "sig",
];

/// Hides the secrets of a URL for messages and logs: the password of its user info
/// (`postgres://u:***@h/db`; the user stays visible) and the value of every query parameter
/// that carries one (`?sslmode=require&password=***`); a URL naming several hosts
/// (`postgres://u:pw@a:5432,b:5433/db`) alike. In libpq's keyword form (`host=a password=pw`)
/// the values of those keywords are hidden, and a keyword form that does not parse is not shown
/// at all. Text that is not quite a URL is handled too: whatever stands before an `@` with no
/// scheme is hidden whole.
pub fn redact(url: &str) -> String {
    if conninfo::is_conninfo(url) {
        return redact_conninfo(url);
    }
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
                Some((name, _)) if is_secret(name) => format!("{name}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
}

fn is_secret(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_PARTS.iter().any(|part| name.contains(part))
}

/// [`redact`] for the keyword form: each secret value (quotes included) becomes `***`.
fn redact_conninfo(text: &str) -> String {
    let Ok(pairs) = conninfo::parse(text) else {
        return "(a connection string that does not parse; not shown)".to_owned();
    };
    let mut shown = String::with_capacity(text.len());
    let mut from = 0;
    for pair in pairs.iter().filter(|p| is_secret(&p.keyword)) {
        shown.push_str(&text[from..pair.value_span.start]);
        shown.push_str("***");
        from = pair.value_span.end;
    }
    shown.push_str(&text[from..]);
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
    fn every_spelling_of_a_secret_parameter_is_hidden_and_plain_ones_are_shown() {
        for name in [
            "password",
            "PassWord",
            "sslpassword",
            "passwd",
            "pwd",
            "token",
            "access_token",
            "client_secret",
            "Client_Secret",
            "secret",
            "api_key",
            "apiKey",
            "X-Api-Key",
            "auth",
            "authorization",
            "credentials",
            "sig",
            "signature",
        ] {
            let shown = redact(&format!("https://h/p?{name}=MARK&mode=x"));
            assert_eq!(shown, format!("https://h/p?{name}=***&mode=x"), "{name}");
        }
        for name in [
            "sslmode",
            "application_name",
            "target_session_attrs",
            "connect_timeout",
        ] {
            let url = format!("postgres://h/db?{name}=shown");
            assert_eq!(redact(&url), url, "{name}");
        }
    }

    #[test]
    fn redact_hides_secrets_of_multi_host_urls_and_keyword_strings() {
        let marker = "SEKRET-MARKER";
        for url in [
            format!("postgres://u:{marker}@a:5432,b:5433/db?target_session_attrs=read-write"),
            format!("postgresql://u:{marker}@[::1]:5432,b/db"),
            format!("postgres://u@a,b/db?target_session_attrs=any&password={marker}"),
            format!("host=a,b port=5432,5433 user=u password={marker} dbname=cron"),
            format!("host=a password = '{marker} with spaces' dbname=cron"),
            format!("host=a PASSWORD='it\\'s {marker}' sslpassword={marker}"),
            format!("host=a password='{marker}"),
        ] {
            let shown = redact(&url);
            assert!(!shown.contains(marker), "{url} -> {shown}");
        }
        // The hosts and everything else stay readable.
        assert_eq!(
            redact("postgres://u:pw@a:5432,b:5433/db?target_session_attrs=read-write"),
            "postgres://u:***@a:5432,b:5433/db?target_session_attrs=read-write"
        );
        assert_eq!(
            redact("host=a,b port=5432,5433 password='p w' dbname=cron"),
            "host=a,b port=5432,5433 password=*** dbname=cron"
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
