//! sentin8-cron's own registration: what the service is, which routes it serves with which
//! scope, which events it emits, which environment variables configure it, and which schedules
//! it wants (none). `sentin8-cron --print-registration` prints it as JSON; its `schedules`
//! section alone is a declaration document that `enroll --from-command` reads.
//!
//! The route table is derived from the API's OpenAPI document, which the router is built from,
//! so the registration cannot drift from what `serve` answers.

use serde::Serialize;
use serde_json::Value;

use crate::callback::config as dispatch_config;
use crate::core::decl::ScheduleDecl;
use crate::core::events;
use crate::server::auth;

/// The service's name.
pub const NAME: &str = env!("CARGO_PKG_NAME");
/// The service's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The sections of the registration, in document order.
pub const SECTIONS: &[&str] = &[
    "name",
    "version",
    "routes",
    "events",
    "configuration",
    "schedules",
];

/// The whole registration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Registration {
    pub name: &'static str,
    pub version: &'static str,
    pub routes: Vec<Route>,
    pub events: Vec<&'static str>,
    pub configuration: Vec<ConfigVar>,
    pub schedules: Vec<ScheduleDecl>,
}

/// One route of the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// Upper case: `GET`, `POST`, ...
    pub method: String,
    /// With `{name}` placeholders, as in the OpenAPI document.
    pub path: String,
    /// The bearer scope the route requires (space-separated if several); `None` for the
    /// unauthenticated operational routes.
    pub scope: Option<String>,
}

/// One environment variable the binary reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConfigVar {
    pub name: &'static str,
    pub description: &'static str,
    /// Whether the value is (or may contain) a credential that belongs in a secret store.
    pub secret: bool,
}

const fn var(name: &'static str, description: &'static str) -> ConfigVar {
    ConfigVar {
        name,
        description,
        secret: false,
    }
}

const fn secret(name: &'static str, description: &'static str) -> ConfigVar {
    ConfigVar {
        name,
        description,
        secret: true,
    }
}

/// Every `SENTIN8_CRON_*` variable the binary reads. A test checks that every such name in the
/// source appears here.
pub const CONFIGURATION: &[ConfigVar] = &[
    secret(
        "SENTIN8_CRON_DATABASE_URL",
        "Database: postgres://user@host/db or sqlite://path (default sqlite://sentin8-cron.db).",
    ),
    var(
        "SENTIN8_CRON_DB_POOL_SIZE",
        "Most pooled PostgreSQL connections (default 10).",
    ),
    var(
        "SENTIN8_CRON_LISTEN",
        "Address the HTTP API listens on (default 127.0.0.1:8080).",
    ),
    var(
        "SENTIN8_CRON_TLS_CERT",
        "PEM certificate chain file: serve HTTPS (with SENTIN8_CRON_TLS_KEY).",
    ),
    var(
        "SENTIN8_CRON_TLS_KEY",
        "PEM private key file of SENTIN8_CRON_TLS_CERT.",
    ),
    var(
        "SENTIN8_CRON_DRAIN_TIMEOUT",
        "Time in-flight requests and the in-flight tick get after SIGTERM (default 30s).",
    ),
    var(
        "SENTIN8_CRON_LOG_FORMAT",
        "Log line format of serve: pretty or json (default pretty).",
    ),
    var(
        "SENTIN8_CRON_BUS_URL",
        "Where the outbox relay publishes events: nats://host:port (JetStream), https://... \
         (signed webhook) or log (default log).",
    ),
    var(
        "SENTIN8_CRON_BUS_SUBJECT_PREFIX",
        "NATS subject prefix of relayed events (default sentin8.cron).",
    ),
    var(
        "SENTIN8_CRON_BUS_STREAM",
        "JetStream stream the relay publishes into, created when missing (default SENTIN8_CRON).",
    ),
    secret(
        "SENTIN8_CRON_WEBHOOK_SECRET",
        "Signing secret of the webhook bus (Standard Webhooks, whsec_... or raw).",
    ),
    var(
        "SENTIN8_CRON_RELAY_MAX_ATTEMPTS",
        "Failed publishes of one event before it is parked for an operator (default 10).",
    ),
    var(
        "SENTIN8_CRON_OUTBOX_RETENTION",
        "How long relayed events stay in the outbox before they are deleted (default 7d).",
    ),
    var(
        "SENTIN8_CRON_TICK_INTERVAL",
        "Safety poll: the ticker wakes at least this often (default 60s).",
    ),
    var(
        "SENTIN8_CRON_BATCH_SIZE",
        "Due schedules fetched per batch (default 50).",
    ),
    var(
        "SENTIN8_CRON_CONCURRENCY",
        "Proxy-back calls in flight at once (default 32).",
    ),
    var(
        "SENTIN8_CRON_RETRY_BASE",
        "Backoff before the first retry, doubling with every retry (default 60s).",
    ),
    var(
        "SENTIN8_CRON_RETRY_CAP",
        "Longest backoff between retries (default 3600s).",
    ),
    var(
        dispatch_config::ENV_TOKEN_URL,
        "OAuth2 token endpoint of the M2M client-credentials token used for proxy-back.",
    ),
    var(
        dispatch_config::ENV_CLIENT_ID,
        "OAuth2 client id of the M2M token.",
    ),
    secret(
        dispatch_config::ENV_CLIENT_SECRET,
        "OAuth2 client secret of the M2M token.",
    ),
    var(
        dispatch_config::ENV_SCOPE,
        "Space-separated scopes requested with the M2M token (optional).",
    ),
    secret(
        dispatch_config::ENV_STATIC_TOKEN,
        "Static proxy-back bearer token, for development only.",
    ),
    var(
        dispatch_config::ENV_JOB_TIMEOUT,
        "Timeout of one proxy-back call, token fetch included (default 30s).",
    ),
    var(
        dispatch_config::ENV_CA_FILE,
        "PEM bundle trusted for proxy-back in addition to the platform roots.",
    ),
    var(
        auth::ENV_JWKS_URL,
        "JWK set URL: authenticate API callers with JWTs verified against it.",
    ),
    secret(
        auth::ENV_HS256_SECRET,
        "Shared HS256 secret (at least 32 bytes): authenticate API callers with it instead.",
    ),
    var(
        auth::ENV_ISSUER,
        "The only accepted JWT issuer (iss); required with SENTIN8_CRON_JWKS_URL.",
    ),
    var(
        auth::ENV_AUDIENCE,
        "The audience (aud) a JWT must name; required with SENTIN8_CRON_JWKS_URL.",
    ),
    var(
        auth::ENV_LEEWAY,
        "Clock skew tolerated on exp and nbf (default 30s, at most 5m).",
    ),
    var(
        auth::ENV_SCOPE_CLAIM,
        "JWT claim holding the scopes (default scope; scp is read when it is absent).",
    ),
    var(
        auth::ENV_ENVS_CLAIM,
        "JWT claim holding the granted environment ids (default envs).",
    ),
];

/// The schedules sentin8-cron itself wants. None: its own periodic work (ticking, retries, the
/// outbox relay) runs inside `serve`.
pub fn own_schedules() -> Vec<ScheduleDecl> {
    Vec::new()
}

/// Why a registration document could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error("unknown section {0:?} (valid sections: {valid})", valid = SECTIONS.join(", "))]
    UnknownSection(String),
}

/// The route table: every operation of the API's OpenAPI document with its bearer scope,
/// ordered by path, then method.
pub fn routes() -> Vec<Route> {
    let document = serde_json::to_value(crate::server::openapi()).unwrap_or(Value::Null);
    let mut routes = Vec::new();
    let Some(paths) = document.get("paths").and_then(Value::as_object) else {
        return routes;
    };
    for (path, item) in paths {
        let Some(item) = item.as_object() else {
            continue;
        };
        for (method, operation) in item {
            if !is_http_method(method) {
                continue;
            }
            routes.push(Route {
                method: method.to_ascii_uppercase(),
                path: path.clone(),
                scope: scope_of(operation),
            });
        }
    }
    routes.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
    routes
}

fn is_http_method(name: &str) -> bool {
    matches!(
        name,
        "get" | "put" | "post" | "delete" | "options" | "head" | "patch" | "trace"
    )
}

/// The scopes of an operation's `security` requirements, space-separated.
fn scope_of(operation: &Value) -> Option<String> {
    let requirements = operation.get("security")?.as_array()?;
    let mut scopes: Vec<&str> = Vec::new();
    for requirement in requirements {
        let Some(schemes) = requirement.as_object() else {
            continue;
        };
        for scope in schemes.values().filter_map(Value::as_array).flatten() {
            if let Some(scope) = scope.as_str()
                && !scopes.contains(&scope)
            {
                scopes.push(scope);
            }
        }
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

/// The whole registration.
pub fn registration() -> Registration {
    Registration {
        name: NAME,
        version: VERSION,
        routes: routes(),
        events: events::ALL.to_vec(),
        configuration: CONFIGURATION.to_vec(),
        schedules: own_schedules(),
    }
}

/// One section of the registration. It serializes as `{"<section>": value}`: the
/// `schedules` section is then a declaration document.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Section {
    Name(&'static str),
    Version(&'static str),
    Routes(Vec<Route>),
    Events(Vec<&'static str>),
    Configuration(Vec<ConfigVar>),
    Schedules(Vec<ScheduleDecl>),
}

/// The section called `name` (one of [`SECTIONS`]).
pub fn section(name: &str) -> Result<Section, RegistrationError> {
    Ok(match name {
        "name" => Section::Name(NAME),
        "version" => Section::Version(VERSION),
        "routes" => Section::Routes(routes()),
        "events" => Section::Events(events::ALL.to_vec()),
        "configuration" => Section::Configuration(CONFIGURATION.to_vec()),
        "schedules" => Section::Schedules(own_schedules()),
        other => return Err(RegistrationError::UnknownSection(other.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::decl::{DeclFormat, DeclarationFile, parse_declarations};
    use crate::server::policy::{SCOPE_READ, SCOPE_WRITE};

    #[test]
    fn every_section_is_printable_alone_and_matches_the_whole() {
        let whole = serde_json::to_value(registration()).unwrap();
        let mut keys: Vec<&str> = whole
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sections = SECTIONS.to_vec();
        keys.sort_unstable();
        sections.sort_unstable();
        assert_eq!(keys, sections);
        for name in SECTIONS {
            let single = serde_json::to_value(section(name).unwrap()).unwrap();
            let object = single.as_object().unwrap();
            assert_eq!(object.len(), 1, "{name}");
            assert_eq!(object[*name], whole[*name], "{name}");
        }
    }

    #[test]
    fn the_schedules_section_is_a_declaration_document() {
        let text = serde_json::to_string(&section("schedules").unwrap()).unwrap();
        assert_eq!(text, r#"{"schedules":[]}"#);
        let file = parse_declarations(&text, DeclFormat::Json).unwrap();
        assert_eq!(file, DeclarationFile::default());
    }

    #[test]
    fn unknown_sections_list_the_valid_ones() {
        let err = section("secrets").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown section \"secrets\" (valid sections: name, version, routes, events, \
             configuration, schedules)"
        );
    }

    #[test]
    fn routes_carry_their_scopes() {
        let routes = routes();
        let find = |method: &str, path: &str| {
            routes
                .iter()
                .find(|r| r.method == method && r.path == path)
                .unwrap_or_else(|| panic!("{method} {path} in {routes:?}"))
        };
        assert_eq!(
            find("POST", "/v1/schedules").scope.as_deref(),
            Some(SCOPE_WRITE)
        );
        assert_eq!(
            find("GET", "/v1/schedules/{id}").scope.as_deref(),
            Some(SCOPE_READ)
        );
        assert_eq!(find("GET", "/v1/health").scope, None);
        assert_eq!(find("GET", "/metrics").scope, None);
        for route in &routes {
            assert!(route.path.starts_with('/'), "{route:?}");
            match route.method.as_str() {
                "GET" => assert_ne!(route.scope.as_deref(), Some(SCOPE_WRITE), "{route:?}"),
                _ => assert_eq!(route.scope.as_deref(), Some(SCOPE_WRITE), "{route:?}"),
            }
        }
        let mut sorted = routes.clone();
        sorted.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
        sorted.dedup();
        assert_eq!(sorted, routes);
    }

    #[test]
    fn configuration_names_are_unique_and_described() {
        let mut seen = std::collections::HashSet::new();
        for var in CONFIGURATION {
            assert!(var.name.starts_with("SENTIN8_CRON_"), "{var:?}");
            assert!(seen.insert(var.name), "{} listed twice", var.name);
            assert!(!var.description.is_empty() && !var.description.contains('\n'));
        }
    }
}
