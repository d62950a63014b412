//! sentin8-cron's own registration: what the service is, which routes it serves with which
//! scope, which events it emits, which environment variables configure it, and which schedules
//! it wants (none). `sentin8-cron --print-registration` prints it as JSON; its `schedules`
//! section alone is a declaration document that `enroll --from-command` reads.
//!
//! The route table is derived from the API's OpenAPI document, which the router is built from,
//! so the registration cannot drift from what `serve` answers; the configuration list is read
//! from the command line's definition, so it cannot drift from what the binary accepts.

use serde::Serialize;
use serde_json::Value;

use clap::CommandFactory as _;

use crate::core::decl::ScheduleDecl;
use crate::core::events;

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

/// One setting: an environment variable the binary reads, and the flag that overrides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigVar {
    pub name: String,
    /// The command-line flag, e.g. `--database-url`.
    pub flag: String,
    pub description: String,
    /// The value used when neither the flag nor the variable is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Whether the value is (or may contain) a credential that belongs in a secret store; its
    /// value is never shown in `--help`.
    pub secret: bool,
}

/// Every setting of every subcommand, read from the command line's own definition (so a
/// setting's name, help and default are written once), in order of first appearance, each
/// once.
pub fn configuration() -> Vec<ConfigVar> {
    let mut vars: Vec<ConfigVar> = Vec::new();
    collect(&crate::cmd::Cli::command(), &mut vars);
    vars
}

/// Settings of the operator commands (which server to call, with which token, about which
/// environment by default): they configure the client, not the service, so they are not part
/// of its registration.
pub const CLIENT_SETTINGS: [&str; 3] = [
    "SENTIN8_CRON_SERVER",
    "SENTIN8_CRON_API_TOKEN",
    "SENTIN8_CRON_ENV",
];

fn collect(command: &clap::Command, vars: &mut Vec<ConfigVar>) {
    for arg in command.get_arguments() {
        let Some(name) = arg.get_env().and_then(|name| name.to_str()) else {
            continue;
        };
        if CLIENT_SETTINGS.contains(&name) || vars.iter().any(|var| var.name == name) {
            continue;
        }
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|value| value.to_string_lossy().into_owned())
            .collect();
        vars.push(ConfigVar {
            name: name.to_owned(),
            flag: arg
                .get_long()
                .map(|long| format!("--{long}"))
                .unwrap_or_default(),
            description: arg
                .get_help()
                .map(|help| help.to_string())
                .unwrap_or_default(),
            default: (!defaults.is_empty()).then(|| defaults.join(",")),
            secret: arg.is_hide_env_values_set(),
        });
    }
    for sub in command.get_subcommands() {
        collect(sub, vars);
    }
}

/// The configuration as a Markdown table (variable, flag, meaning, default): the one in
/// README.md, which a test keeps equal to this.
pub fn configuration_table() -> String {
    let mut table = String::from("| variable | flag | meaning | default |\n|---|---|---|---|\n");
    for var in configuration() {
        let default = var
            .default
            .as_deref()
            .map_or_else(|| "—".to_owned(), |d| format!("`{d}`"));
        table.push_str(&format!(
            "| `{}` | `{}` | {} | {} |\n",
            var.name,
            var.flag,
            var.description.replace('|', "\\|"),
            default
        ));
    }
    table
}

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
        configuration: configuration(),
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
        "configuration" => Section::Configuration(configuration()),
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

    /// A service's registration declares its schedules in this section's shape, and `enroll
    /// --from-command` reads it: every policy field a declaration has is printed and read back.
    #[test]
    fn a_schedules_section_carries_the_policy_fields() {
        use crate::core::decl::validate_declarations;
        use crate::core::policies::Overlap;
        use chrono::{TimeZone, Utc};

        let declared = ScheduleDecl {
            schedule_type: "billing.rollup".to_owned(),
            cron: Some("*/15 * * * *".to_owned()),
            overlap: Some(Overlap::BufferOne),
            catchup_window: Some("10m".to_owned()),
            max_jitter: Some("30s".to_owned()),
            start_at: Some("2031-01-01T00:00:00Z".to_owned()),
            end_at: Some("2032-01-01T00:00:00Z".to_owned()),
            pause_on_failure: Some(true),
            remaining_runs: Some(12),
            ..ScheduleDecl::default()
        };
        let text = serde_json::to_string(&Section::Schedules(vec![declared.clone()])).unwrap();
        let file = parse_declarations(&text, DeclFormat::Json).unwrap();
        assert_eq!(file.schedules, [declared], "{text}");
        let now = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let spec = &validate_declarations(&file, now).unwrap()[0];
        assert_eq!(spec.policies.overlap, Overlap::BufferOne);
        assert_eq!(spec.policies.catchup_window.as_secs(), 600);
        assert_eq!(spec.policies.max_jitter.as_secs(), 30);
        assert!(spec.policies.pause_on_failure);
        assert_eq!(spec.remaining_runs, Some(12));
        assert_eq!(
            spec.policies.end_at,
            Some(Utc.with_ymd_and_hms(2032, 1, 1, 0, 0, 0).unwrap())
        );
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
        let vars = configuration();
        let mut seen = std::collections::HashSet::new();
        for var in &vars {
            assert!(var.name.starts_with("SENTIN8_CRON_"), "{var:?}");
            assert!(seen.insert(var.name.clone()), "{} listed twice", var.name);
            assert!(var.flag.starts_with("--"), "{var:?}");
            assert!(
                !var.description.is_empty() && !var.description.contains('\n'),
                "{var:?}"
            );
        }
        assert!(vars.len() > 20, "{vars:?}");
    }

    /// A setting flattened into several subcommands is one definition: the same flag, help,
    /// default and secrecy wherever it appears.
    #[test]
    fn a_setting_reads_the_same_in_every_subcommand() {
        fn walk(command: &clap::Command, seen: &mut Vec<ConfigVar>) {
            let mut here = Vec::new();
            collect(command, &mut here);
            for var in here {
                match seen.iter().find(|s| s.name == var.name) {
                    Some(first) => assert_eq!(first, &var, "{}", command.get_name()),
                    None => seen.push(var),
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, seen);
            }
        }
        walk(&crate::cmd::Cli::command(), &mut Vec::new());
    }

    #[test]
    fn defaults_and_secrets_come_from_the_flags() {
        let vars = configuration();
        let find = |name: &str| {
            vars.iter()
                .find(|var| var.name == name)
                .unwrap_or_else(|| panic!("{name} in {vars:?}"))
        };
        let database = find("SENTIN8_CRON_DATABASE_URL");
        assert_eq!(database.flag, "--database-url");
        assert_eq!(
            database.default.as_deref(),
            Some(crate::store::DEFAULT_DATABASE_URL)
        );
        assert!(database.secret);
        assert_eq!(
            find("SENTIN8_CRON_JOB_TIMEOUT").default.as_deref(),
            Some("30s")
        );
        assert_eq!(find("SENTIN8_CRON_BUS_URL").default.as_deref(), Some("log"));
        assert_eq!(find("SENTIN8_CRON_JWKS_URL").default, None);
        for secret in [
            "SENTIN8_CRON_M2M_CLIENT_SECRET",
            "SENTIN8_CRON_TOKEN",
            "SENTIN8_CRON_JWT_HS256_SECRET",
            "SENTIN8_CRON_WEBHOOK_SECRET",
        ] {
            assert!(find(secret).secret, "{secret}");
        }
        assert!(!find("SENTIN8_CRON_LISTEN").secret);
        // A URL may carry a password, a token or a client secret: its value is never shown.
        for url in vars
            .iter()
            .filter(|v| v.name.ends_with("_URL") || v.flag == "--server")
        {
            assert!(url.secret, "{} shows its value in --help", url.name);
        }
    }

    #[test]
    fn the_readme_table_is_the_generated_one() {
        let readme = include_str!("../README.md");
        let table = configuration_table();
        assert!(
            readme.contains(&table),
            "README.md's configuration table is out of date; replace it with:\n{table}"
        );
    }
}
