//! Proxy-back settings, read from the environment through a lookup function so tests never have
//! to mutate the process environment.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// `SENTIN8_CRON_M2M_TOKEN_URL`: the OAuth2 token endpoint.
pub const ENV_TOKEN_URL: &str = "SENTIN8_CRON_M2M_TOKEN_URL";
/// `SENTIN8_CRON_M2M_CLIENT_ID`: the OAuth2 client id.
pub const ENV_CLIENT_ID: &str = "SENTIN8_CRON_M2M_CLIENT_ID";
/// `SENTIN8_CRON_M2M_CLIENT_SECRET`: the OAuth2 client secret.
pub const ENV_CLIENT_SECRET: &str = "SENTIN8_CRON_M2M_CLIENT_SECRET";
/// `SENTIN8_CRON_M2M_SCOPE`: optional space-separated scopes to request.
pub const ENV_SCOPE: &str = "SENTIN8_CRON_M2M_SCOPE";
/// `SENTIN8_CRON_TOKEN`: a static bearer token, for development only.
pub const ENV_STATIC_TOKEN: &str = "SENTIN8_CRON_TOKEN";
/// `SENTIN8_CRON_JOB_TIMEOUT`: the per-call timeout (`30s`, `2m`, `500ms` or plain seconds).
pub const ENV_JOB_TIMEOUT: &str = "SENTIN8_CRON_JOB_TIMEOUT";
/// `SENTIN8_CRON_CA_FILE`: a PEM bundle trusted in addition to the platform roots.
pub const ENV_CA_FILE: &str = "SENTIN8_CRON_CA_FILE";

/// The per-call timeout when none is configured.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(30);

/// The `User-Agent` sent on every proxy-back and token call.
pub fn default_user_agent() -> String {
    format!("sentin8-cron/{}", env!("CARGO_PKG_VERSION"))
}

/// Why the proxy-back settings are unusable. Raised at start-up, never on the call path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}: {value:?} is not a duration (examples: 30s, 2m, 500ms)")]
    InvalidDuration { var: &'static str, value: String },
    #[error("{var}: must be greater than zero")]
    ZeroDuration { var: &'static str },
    #[error("{missing} is required when {present} is set")]
    Incomplete {
        missing: &'static str,
        present: &'static str,
    },
    #[error("{var}: {reason}")]
    InvalidUrl { var: &'static str, reason: String },
    #[error("CA file {path}: {reason}")]
    CaFile { path: String, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// A value that must never appear in logs or error messages. `Debug` and `Display` redact it;
/// [`Secret::expose`] is the one, greppable, way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself. Only for putting it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(\"<redacted>\")")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// OAuth2 client-credentials settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth2Settings {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    /// Space-separated scopes; sent as the `scope` form field when present.
    pub scope: Option<String>,
}

/// Where proxy-back bearer tokens come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TokenSettings {
    /// OAuth2 client credentials: the production setting.
    OAuth2(OAuth2Settings),
    /// A fixed token from `SENTIN8_CRON_TOKEN`. A development fallback only.
    Static(Secret),
    /// Nothing configured: every call fails with `NoTokenSource`.
    #[default]
    None,
}

/// Everything the HTTP dispatcher needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchConfig {
    pub token: TokenSettings,
    /// Bounds one whole call: token fetch, request, 401 retry and reading the body.
    pub job_timeout: Duration,
    /// Extra PEM roots, trusted in addition to the platform's.
    pub ca_file: Option<PathBuf>,
    pub user_agent: String,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            token: TokenSettings::None,
            job_timeout: DEFAULT_JOB_TIMEOUT,
            ca_file: None,
            user_agent: default_user_agent(),
        }
    }
}

impl DispatchConfig {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the settings through `lookup` (a variable name to its value). Empty values count
    /// as unset, so `FOO=` in an env file does not half-configure anything.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |key: &str| {
            lookup(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };

        let job_timeout = match get(ENV_JOB_TIMEOUT) {
            None => DEFAULT_JOB_TIMEOUT,
            Some(raw) => {
                let d = parse_duration(&raw).ok_or_else(|| ConfigError::InvalidDuration {
                    var: ENV_JOB_TIMEOUT,
                    value: raw.clone(),
                })?;
                if d.is_zero() {
                    return Err(ConfigError::ZeroDuration {
                        var: ENV_JOB_TIMEOUT,
                    });
                }
                d
            }
        };

        Ok(Self {
            token: token_settings(&get)?,
            job_timeout,
            ca_file: get(ENV_CA_FILE).map(PathBuf::from),
            user_agent: default_user_agent(),
        })
    }
}

/// OAuth2 wins over the static token; a partial OAuth2 configuration is an error rather than a
/// silent fall back to the dev token.
fn token_settings(get: &impl Fn(&str) -> Option<String>) -> Result<TokenSettings, ConfigError> {
    let url = get(ENV_TOKEN_URL);
    let id = get(ENV_CLIENT_ID);
    let secret = get(ENV_CLIENT_SECRET);

    if url.is_some() || id.is_some() || secret.is_some() {
        let present = [
            (ENV_TOKEN_URL, url.is_some()),
            (ENV_CLIENT_ID, id.is_some()),
            (ENV_CLIENT_SECRET, secret.is_some()),
        ];
        let present_var = present
            .iter()
            .find(|(_, set)| *set)
            .map_or(ENV_TOKEN_URL, |(var, _)| *var);
        let require = |value: Option<String>, var: &'static str| {
            value.ok_or(ConfigError::Incomplete {
                missing: var,
                present: present_var,
            })
        };
        let token_url = require(url, ENV_TOKEN_URL)?;
        let client_id = require(id, ENV_CLIENT_ID)?;
        let client_secret = require(secret, ENV_CLIENT_SECRET)?;
        return Ok(TokenSettings::OAuth2(OAuth2Settings {
            token_url,
            client_id,
            client_secret: Secret::new(client_secret),
            scope: get(ENV_SCOPE),
        }));
    }

    Ok(match get(ENV_STATIC_TOKEN) {
        Some(token) => TokenSettings::Static(Secret::new(token)),
        None => TokenSettings::None,
    })
}

/// Parses a humane duration: plain seconds (`45`), or one or more `<integer><unit>` parts with
/// units `ms`, `s`, `m`, `h`, `d` (`500ms`, `30s`, `2m`, `1m30s`, `7d`). `None` when it is not
/// one.
pub fn parse_duration(input: &str) -> Option<Duration> {
    let s = input.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u64>().ok().map(Duration::from_secs);
    }

    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let (number, tail) = rest.split_at(digits);
        let number: u64 = number.parse().ok()?;
        let unit_len = tail.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = tail.split_at(unit_len);
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.checked_mul(60)?),
            "h" => Duration::from_secs(number.checked_mul(3600)?),
            "d" => Duration::from_secs(number.checked_mul(86_400)?),
            _ => return None,
        };
        total = total.checked_add(part)?;
        rest = tail;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            parse_duration("1d12h"),
            Some(Duration::from_secs(36 * 3600))
        );
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Some(Duration::from_secs(45)));
        assert_eq!(parse_duration(" 10s "), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
    }

    #[test]
    fn non_durations_are_rejected() {
        for bad in [
            "", "abc", "s", "10x", "1.5s", "-5s", "10 s", "ms10", "30S", "5m3",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?} should not parse");
        }
        // Overflow is an error, not a wrap or a panic.
        assert_eq!(parse_duration("99999999999999999999s"), None);
        assert_eq!(parse_duration("18446744073709551615h"), None);
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let config = DispatchConfig::from_lookup(lookup(&[])).unwrap();
        assert_eq!(config.token, TokenSettings::None);
        assert_eq!(config.job_timeout, Duration::from_secs(30));
        assert_eq!(config.ca_file, None);
        assert!(config.user_agent.starts_with("sentin8-cron/"));
        assert_eq!(config, DispatchConfig::default());
    }

    #[test]
    fn job_timeout_is_read_and_validated() {
        let config = DispatchConfig::from_lookup(lookup(&[(ENV_JOB_TIMEOUT, "500ms")])).unwrap();
        assert_eq!(config.job_timeout, Duration::from_millis(500));

        let err = DispatchConfig::from_lookup(lookup(&[(ENV_JOB_TIMEOUT, "abc")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"SENTIN8_CRON_JOB_TIMEOUT: "abc" is not a duration (examples: 30s, 2m, 500ms)"#
        );

        let err = DispatchConfig::from_lookup(lookup(&[(ENV_JOB_TIMEOUT, "0s")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SENTIN8_CRON_JOB_TIMEOUT: must be greater than zero"
        );
    }

    #[test]
    fn static_token_is_the_dev_fallback() {
        let config = DispatchConfig::from_lookup(lookup(&[(ENV_STATIC_TOKEN, "dev")])).unwrap();
        assert_eq!(config.token, TokenSettings::Static(Secret::new("dev")));
    }

    #[test]
    fn oauth2_wins_over_the_static_token() {
        let config = DispatchConfig::from_lookup(lookup(&[
            (ENV_STATIC_TOKEN, "dev"),
            (ENV_TOKEN_URL, "https://idp.example/token"),
            (ENV_CLIENT_ID, "cron"),
            (ENV_CLIENT_SECRET, "hunter2"),
            (ENV_SCOPE, "schedules:run"),
            (ENV_CA_FILE, "ca.pem"),
        ]))
        .unwrap();
        assert_eq!(
            config.token,
            TokenSettings::OAuth2(OAuth2Settings {
                token_url: "https://idp.example/token".into(),
                client_id: "cron".into(),
                client_secret: Secret::new("hunter2"),
                scope: Some("schedules:run".into()),
            })
        );
        assert_eq!(config.ca_file, Some(PathBuf::from("ca.pem")));
    }

    #[test]
    fn partial_oauth2_is_an_error_not_a_fallback() {
        let err = DispatchConfig::from_lookup(lookup(&[
            (ENV_STATIC_TOKEN, "dev"),
            (ENV_TOKEN_URL, "https://idp.example/token"),
            (ENV_CLIENT_ID, "cron"),
        ]))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "SENTIN8_CRON_M2M_CLIENT_SECRET is required when SENTIN8_CRON_M2M_TOKEN_URL is set"
        );

        let err =
            DispatchConfig::from_lookup(lookup(&[(ENV_CLIENT_SECRET, "hunter2")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SENTIN8_CRON_M2M_TOKEN_URL is required when SENTIN8_CRON_M2M_CLIENT_SECRET is set"
        );
        assert!(!format!("{err:?}").contains("hunter2"));
    }

    #[test]
    fn empty_values_count_as_unset() {
        let config = DispatchConfig::from_lookup(lookup(&[
            (ENV_TOKEN_URL, ""),
            (ENV_STATIC_TOKEN, "  "),
            (ENV_JOB_TIMEOUT, ""),
        ]))
        .unwrap();
        assert_eq!(config, DispatchConfig::default());
    }

    #[test]
    fn debug_hides_secrets() {
        let config = DispatchConfig::from_lookup(lookup(&[
            (ENV_TOKEN_URL, "https://idp.example/token"),
            (ENV_CLIENT_ID, "cron"),
            (ENV_CLIENT_SECRET, "hunter2-very-secret"),
        ]))
        .unwrap();
        let shown = format!("{config:?} {config:#?}");
        assert!(!shown.contains("hunter2-very-secret"), "{shown}");
        assert!(shown.contains("<redacted>"));
        // The non-secret parts stay visible, so the output is still useful.
        assert!(shown.contains("idp.example") && shown.contains("cron"));

        let dev = TokenSettings::Static(Secret::new("dev-token-value"));
        assert!(!format!("{dev:?}").contains("dev-token-value"));
        assert_eq!(Secret::new("x").to_string(), "<redacted>");
    }
}
