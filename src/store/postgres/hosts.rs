//! The hosts a PostgreSQL database URL names. sqlx connects to one host, so a list (libpq's
//! `postgres://u@a:5432,b:5433/db` or `host=a,b port=5432,5433 ...`) is read here into one
//! set of connect options per host, each what a URL naming that host alone would give, and
//! `target_session_attrs` into the rule for picking among them.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

use crate::util::conninfo::{self, ConninfoError};

/// Which host a connection may go to (libpq's `target_session_attrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttrs {
    /// The first host that accepts a connection (libpq's default).
    Any,
    /// The first host that accepts writes: not a standby, not read-only.
    ReadWrite,
}

/// Why a PostgreSQL database URL cannot be used; each names the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatabaseUrlError {
    /// What sqlx refused in the URL of one host.
    #[error("invalid PostgreSQL URL: {0}")]
    Url(String),
    /// A keyword-form string that does not parse.
    #[error("invalid PostgreSQL connection string: {0}")]
    Conninfo(#[from] ConninfoError),
    /// A `target_session_attrs` this build does not implement.
    #[error(
        "target_session_attrs: {0:?} is not supported; use read-write (the writable host) or \
         any (the first host that answers)"
    )]
    UnsupportedAttrs(String),
    /// A `target_session_attrs` libpq does not know either.
    #[error("target_session_attrs: unknown value {0:?}; use read-write or any")]
    UnknownAttrs(String),
    /// `a,,b`.
    #[error("host: the host list {0:?} has an empty entry")]
    EmptyHost(String),
    /// The keyword form without `host`.
    #[error("host: missing; name the database's hosts (host=a,b)")]
    MissingHost,
    /// Neither one port for all hosts nor one per host.
    #[error("port: {ports} ports for {hosts} hosts; give one port for all, or one per host")]
    PortCount { ports: usize, hosts: usize },
    /// A list in a URL's query, where sqlx would take it for one name.
    #[error(
        "{0}: a list of hosts goes in the URL's host part (postgres://user@a:5432,b:5432/db), \
         not in its query"
    )]
    ListInQuery(String),
    /// A keyword the keyword form does not take here.
    #[error(
        "{0}: not a setting sentin8-cron reads from a connection string (it reads host, port, \
         user, password, dbname, sslmode, sslrootcert, sslcert, sslkey, options and \
         target_session_attrs)"
    )]
    UnknownKeyword(String),
}

/// One host of the list, with the options that connect to it.
#[derive(Debug, Clone)]
pub struct Host {
    /// `host:port` (or the socket directory), for messages; never a credential.
    pub label: String,
    pub options: PgConnectOptions,
}

/// The hosts of a URL, in the order given, and how to pick among them.
#[derive(Debug, Clone)]
pub struct HostList {
    pub hosts: Vec<Host>,
    pub attrs: SessionAttrs,
}

impl HostList {
    /// Reads a PostgreSQL URL (one host or several) or a keyword-form string. Every host's
    /// options carry this service's application name and `search_path`.
    pub fn parse(url: &str) -> Result<Self, DatabaseUrlError> {
        let (urls, attrs) = if conninfo::is_conninfo(url) {
            keyword_form(url)?
        } else {
            url_form(url)?
        };
        let hosts = urls
            .iter()
            .map(|one| {
                let options = PgConnectOptions::from_str(one)
                    .map_err(|e| DatabaseUrlError::Url(e.to_string()))?
                    .application_name("sentin8-cron")
                    .options([("search_path", "cron")]);
                Ok(Host {
                    label: label(&options),
                    options,
                })
            })
            .collect::<Result<_, DatabaseUrlError>>()?;
        Ok(Self { hosts, attrs })
    }

    /// One host and no rule to check: connections go straight to it, as they always did.
    pub fn is_single(&self) -> bool {
        self.hosts.len() == 1 && self.attrs == SessionAttrs::Any
    }
}

fn label(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(dir) => dir.display().to_string(),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}

fn parse_attrs(value: &str) -> Result<SessionAttrs, DatabaseUrlError> {
    match value {
        "any" => Ok(SessionAttrs::Any),
        "read-write" => Ok(SessionAttrs::ReadWrite),
        "read-only" | "primary" | "standby" | "prefer-standby" => {
            Err(DatabaseUrlError::UnsupportedAttrs(value.to_owned()))
        }
        other => Err(DatabaseUrlError::UnknownAttrs(other.to_owned())),
    }
}

/// `scheme://[userinfo@]host[:port][,host[:port]...][/db][?query]`: one URL per host, the
/// rest of the text kept as it was (a single host with no `target_session_attrs` is the URL
/// itself, untouched).
fn url_form(url: &str) -> Result<(Vec<String>, SessionAttrs), DatabaseUrlError> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return Ok((vec![url.to_owned()], SessionAttrs::Any));
    };
    let rest = &url[scheme_end..];
    // As the URL parser does: the authority ends at the path, query or fragment, and the
    // user info at its last `@`.
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let hosts_start = authority.rfind('@').map_or(0, |at| at + 1);
    let head = &url[..scheme_end + hosts_start];
    let host_list = &authority[hosts_start..];
    let tail = &rest[authority_end..];

    let (path, query, fragment) = split_tail(tail);
    let mut attrs = SessionAttrs::Any;
    let mut attrs_given = false;
    let mut kept = Vec::new();
    let mut unknown = Vec::new();
    for pair in query.iter().flat_map(|q| q.split('&')) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !pair.is_empty() && !is_driver_param(name) && name != "target_session_attrs" {
            unknown.push(decoded(name));
            continue;
        }
        if name == "target_session_attrs" {
            attrs = parse_attrs(value)?;
            attrs_given = true;
            continue;
        }
        if (name == "host" || name == "hostaddr" || name == "port")
            && (value.contains(',') || value.to_ascii_lowercase().contains("%2c"))
        {
            return Err(DatabaseUrlError::ListInQuery(name.to_owned()));
        }
        kept.push(pair);
    }
    if !unknown.is_empty() {
        // The driver would log each one's value (`sslpassword=...` is a secret): it never
        // sees them, and this says which were left out without their values.
        tracing::warn!(
            parameters = ?unknown,
            "ignoring connect parameters the PostgreSQL driver does not read (values not shown)"
        );
    }
    if !host_list.contains(',') && !attrs_given && unknown.is_empty() {
        return Ok((vec![url.to_owned()], attrs));
    }
    let mut tail = path.to_owned();
    if !kept.is_empty() {
        tail.push('?');
        tail.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        tail.push('#');
        tail.push_str(fragment);
    }
    let mut urls = Vec::new();
    for host in host_list.split(',') {
        if host.is_empty() && host_list.contains(',') {
            return Err(DatabaseUrlError::EmptyHost(host_list.to_owned()));
        }
        urls.push(format!("{head}{host}{tail}"));
    }
    Ok((urls, attrs))
}

/// The query parameters sqlx's PostgreSQL driver reads; it ignores any other with a log line
/// that carries the value.
const DRIVER_PARAMS: [&str; 18] = [
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
    "statement-cache-capacity",
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "application_name",
    "options",
];

fn is_driver_param(raw_name: &str) -> bool {
    DRIVER_PARAMS.contains(&decoded(raw_name).as_str())
}

/// A query parameter's name as the driver reads it (percent-decoded, `+` as a space).
fn decoded(raw_name: &str) -> String {
    url::form_urlencoded::parse(raw_name.as_bytes())
        .next()
        .map(|(name, _)| name.into_owned())
        .unwrap_or_default()
}

/// A URL's path, query and fragment (the text after its authority).
fn split_tail(tail: &str) -> (&str, Option<&str>, Option<&str>) {
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (tail, None),
    };
    match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query), fragment),
        None => (before_fragment, None, fragment),
    }
}

/// The keyword form, as one URL per host: the host and port in the authority, every other
/// setting as a query parameter sqlx reads.
fn keyword_form(text: &str) -> Result<(Vec<String>, SessionAttrs), DatabaseUrlError> {
    let mut hosts = None;
    let mut ports = None;
    let mut attrs = SessionAttrs::Any;
    let mut params: Vec<(&'static str, String)> = Vec::new();
    for pair in conninfo::parse(text)? {
        let value = pair.value;
        let name: &'static str = match pair.keyword.as_str() {
            "host" | "hostaddr" => {
                hosts = Some(value);
                continue;
            }
            "port" => {
                ports = Some(value);
                continue;
            }
            "target_session_attrs" => {
                attrs = parse_attrs(&value)?;
                continue;
            }
            "user" => "user",
            "password" => "password",
            "dbname" => "dbname",
            "sslmode" => "sslmode",
            "sslrootcert" => "sslrootcert",
            "sslcert" => "sslcert",
            "sslkey" => "sslkey",
            "options" => "options",
            other => return Err(DatabaseUrlError::UnknownKeyword(other.to_owned())),
        };
        // libpq lets a later pair win.
        params.retain(|(known, _)| *known != name);
        params.push((name, value));
    }
    let hosts = hosts
        .filter(|h| !h.is_empty())
        .ok_or(DatabaseUrlError::MissingHost)?;
    let hosts: Vec<&str> = hosts.split(',').collect();
    if hosts.iter().any(|h| h.is_empty()) {
        return Err(DatabaseUrlError::EmptyHost(hosts.join(",")));
    }
    let ports: Vec<&str> = match &ports {
        Some(ports) if !ports.is_empty() => ports.split(',').collect(),
        _ => Vec::new(),
    };
    if ports.len() > 1 && ports.len() != hosts.len() {
        return Err(DatabaseUrlError::PortCount {
            ports: ports.len(),
            hosts: hosts.len(),
        });
    }
    let query: Vec<String> = params
        .iter()
        .map(|(name, value)| format!("{name}={}", encode(value)))
        .collect();
    let urls = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let mut url = String::from("postgres://");
            url.push_str(&match host {
                h if h.starts_with('/') => encode(h),
                h if h.contains(':') => format!("[{h}]"),
                h => encode(h),
            });
            if let Some(port) = ports.get(i).or(ports.first()).filter(|p| !p.is_empty()) {
                url.push(':');
                url.push_str(&encode(port));
            }
            url.push('/');
            if !query.is_empty() {
                url.push('?');
                url.push_str(&query.join("&"));
            }
            url
        })
        .collect();
    Ok((urls, attrs))
}

/// Percent-encodes everything but unreserved characters, so any value survives the URL.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> (Vec<String>, SessionAttrs) {
        let list = HostList::parse(url).unwrap();
        (
            list.hosts.into_iter().map(|h| h.label).collect(),
            list.attrs,
        )
    }

    #[test]
    fn a_single_host_url_is_read_as_before() {
        let list = HostList::parse("postgres://u:pw@db.example:6432/cron?sslmode=disable").unwrap();
        assert!(list.is_single());
        let options = &list.hosts[0].options;
        assert_eq!(list.hosts[0].label, "db.example:6432");
        assert_eq!(options.get_username(), "u");
        assert_eq!(options.get_database(), Some("cron"));
        assert_eq!(options.get_application_name(), Some("sentin8-cron"));
        assert_eq!(options.get_options(), Some("-c search_path=cron"));
    }

    #[test]
    fn a_url_lists_hosts_in_order_with_their_ports() {
        let url = "postgres://u:pw@a:5432,b:5433,[::1]:5434,c/cron?sslmode=disable&\
                   target_session_attrs=read-write";
        let list = HostList::parse(url).unwrap();
        assert!(!list.is_single());
        assert_eq!(list.attrs, SessionAttrs::ReadWrite);
        let labels: Vec<&str> = list.hosts.iter().map(|h| h.label.as_str()).collect();
        assert_eq!(labels, ["a:5432", "b:5433", "[::1]:5434", "c:5432"]);
        for host in &list.hosts {
            assert_eq!(host.options.get_username(), "u");
            assert_eq!(host.options.get_database(), Some("cron"));
            assert!(matches!(
                host.options.get_ssl_mode(),
                sqlx::postgres::PgSslMode::Disable
            ));
        }
        assert_eq!(
            hosts("postgresql://a,b/cron"),
            (vec!["a:5432".into(), "b:5432".into()], SessionAttrs::Any)
        );
    }

    #[test]
    fn parameters_the_driver_does_not_read_never_reach_it() {
        // The driver would log `sslpassword`'s value; a mis-cased `PassWord` is not `password`.
        let (urls, attrs) = url_form(
            "postgres://u:pw@db/cron?sslpassword=MARK-1&sslmode=disable&PassWord=MARK-2&\
             ssl%6dode=require&application_name=x",
        )
        .unwrap();
        assert_eq!(attrs, SessionAttrs::Any);
        assert_eq!(
            urls,
            ["postgres://u:pw@db/cron?sslmode=disable&ssl%6dode=require&application_name=x"]
        );
        let (urls, _) =
            url_form("postgres://a,b/cron?token=MARK-3&target_session_attrs=any").unwrap();
        assert_eq!(urls, ["postgres://a/cron", "postgres://b/cron"]);
        // A URL with nothing unknown is handed on as given.
        let given = "postgres://u:pw@db/cron?sslmode=disable&options=-c%20x%3Dy";
        assert_eq!(url_form(given).unwrap().0, [given]);
        let list =
            HostList::parse("postgres://u@db/cron?sslpassword=MARK&sslmode=disable").unwrap();
        assert!(matches!(
            list.hosts[0].options.get_ssl_mode(),
            sqlx::postgres::PgSslMode::Disable
        ));
    }

    #[test]
    fn one_host_with_read_write_is_checked_too() {
        let list = HostList::parse("postgres://a/cron?target_session_attrs=read-write").unwrap();
        assert_eq!(list.hosts.len(), 1);
        assert!(!list.is_single());
        let list = HostList::parse("postgres://a/cron?target_session_attrs=any").unwrap();
        assert!(list.is_single());
    }

    #[test]
    fn the_keyword_form_reads_host_and_port_lists() {
        let list = HostList::parse(
            "host=a,b port=5432,5433 user=svc password='p w' dbname=cron \
             target_session_attrs=read-write sslmode=disable",
        )
        .unwrap();
        assert_eq!(list.attrs, SessionAttrs::ReadWrite);
        let labels: Vec<&str> = list.hosts.iter().map(|h| h.label.as_str()).collect();
        assert_eq!(labels, ["a:5432", "b:5433"]);
        for host in &list.hosts {
            assert_eq!(host.options.get_username(), "svc");
            assert_eq!(host.options.get_database(), Some("cron"));
        }
        // One port for all hosts, and a socket directory.
        assert_eq!(
            hosts("host=a,b port=6000 dbname=cron").0,
            ["a:6000", "b:6000"]
        );
        assert_eq!(
            hosts("host=/run/postgresql dbname=cron").0,
            ["/run/postgresql"]
        );
    }

    #[test]
    fn mistakes_are_refused_naming_the_field() {
        let err = |url: &str| HostList::parse(url).unwrap_err().to_string();
        for (url, field) in [
            (
                "postgres://a,b/db?target_session_attrs=primary",
                "target_session_attrs",
            ),
            (
                "postgres://a,b/db?target_session_attrs=prefer-standby",
                "target_session_attrs",
            ),
            (
                "postgres://a,b/db?target_session_attrs=sideways",
                "target_session_attrs",
            ),
            ("postgres://a,,b/db", "host"),
            ("postgres:///db?host=a,b", "host"),
            ("host=a,b port=1,2,3", "port"),
            ("host=a,,b", "host"),
            ("port=5432 dbname=cron", "host"),
            ("host=a connect_timeout=10", "connect_timeout"),
            ("host=a dbname", "dbname"),
        ] {
            let text = err(url);
            assert!(text.contains(field), "{url}: {text}");
        }
        assert!(err("postgres://a,b/db?target_session_attrs=primary").contains("\"primary\""));
    }
}
