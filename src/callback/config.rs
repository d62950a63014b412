//! Proxy-back settings: [`CallbackArgs`] (flags, or the `SENTIN8_CRON_*` variables they name)
//! and the [`DispatchConfig`] they convert to, checked as a whole in that one conversion.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::util::duration::positive_duration;
use crate::util::setting::given;

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

    /// A clap value parser: any text is a secret (the settings decide what an empty one means).
    pub fn parse(value: &str) -> Result<Self, std::convert::Infallible> {
        Ok(Self::new(value))
    }

    /// The secret, trimmed; `None` when that leaves nothing.
    pub(crate) fn given(value: &Option<Self>) -> Option<Self> {
        value
            .as_ref()
            .map(|s| s.0.trim())
            .filter(|s| !s.is_empty())
            .map(Self::new)
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

/// The proxy-back settings of the commands that call services back (`serve`, `tick`).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Proxy-back")]
pub struct CallbackArgs {
    /// OAuth2 token endpoint of the M2M client-credentials token used for proxy-back.
    #[arg(long, env = ENV_TOKEN_URL, value_name = "URL")]
    pub m2m_token_url: Option<String>,
    /// OAuth2 client id of the M2M token.
    #[arg(long, env = ENV_CLIENT_ID, value_name = "ID")]
    pub m2m_client_id: Option<String>,
    /// OAuth2 client secret of the M2M token.
    #[arg(long, env = ENV_CLIENT_SECRET, value_name = "SECRET", hide_env_values = true, value_parser = Secret::parse)]
    pub m2m_client_secret: Option<Secret>,
    /// Space-separated scopes requested with the M2M token (optional).
    #[arg(long, env = ENV_SCOPE, value_name = "SCOPES")]
    pub m2m_scope: Option<String>,
    /// Static proxy-back bearer token, for development only (OAuth2 wins when both are set).
    #[arg(long, env = ENV_STATIC_TOKEN, value_name = "TOKEN", hide_env_values = true, value_parser = Secret::parse)]
    pub static_token: Option<Secret>,
    /// Timeout of one proxy-back call, token fetch included.
    #[arg(long, env = ENV_JOB_TIMEOUT, value_name = "DURATION", default_value = "30s", value_parser = positive_duration)]
    pub job_timeout: Duration,
    /// PEM bundle trusted for proxy-back in addition to the platform roots.
    #[arg(long, env = ENV_CA_FILE, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
}

/// A setting's flag and variable, as errors name them.
fn setting(var: &'static str) -> &'static str {
    match var {
        ENV_TOKEN_URL => "--m2m-token-url (SENTIN8_CRON_M2M_TOKEN_URL)",
        ENV_CLIENT_ID => "--m2m-client-id (SENTIN8_CRON_M2M_CLIENT_ID)",
        ENV_CLIENT_SECRET => "--m2m-client-secret (SENTIN8_CRON_M2M_CLIENT_SECRET)",
        _ => var,
    }
}

impl TryFrom<&CallbackArgs> for DispatchConfig {
    type Error = ConfigError;

    /// Checks the settings together: OAuth2 wins over the static token, and a partial OAuth2
    /// configuration is an error rather than a silent fall back to the dev token.
    fn try_from(args: &CallbackArgs) -> Result<Self, ConfigError> {
        Ok(Self {
            token: token_settings(args)?,
            job_timeout: args.job_timeout,
            ca_file: args.ca_file.clone().filter(|p| !p.as_os_str().is_empty()),
            user_agent: default_user_agent(),
        })
    }
}

fn token_settings(args: &CallbackArgs) -> Result<TokenSettings, ConfigError> {
    let url = given(&args.m2m_token_url);
    let id = given(&args.m2m_client_id);
    let secret = Secret::given(&args.m2m_client_secret);

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
        let missing = |var: &'static str| ConfigError::Incomplete {
            missing: setting(var),
            present: setting(present_var),
        };
        let token_url = url.ok_or_else(|| missing(ENV_TOKEN_URL))?;
        let client_id = id.ok_or_else(|| missing(ENV_CLIENT_ID))?;
        let client_secret = secret.ok_or_else(|| missing(ENV_CLIENT_SECRET))?;
        return Ok(TokenSettings::OAuth2(OAuth2Settings {
            token_url,
            client_id,
            client_secret,
            scope: given(&args.m2m_scope),
        }));
    }

    Ok(match Secret::given(&args.static_token) {
        Some(token) => TokenSettings::Static(token),
        None => TokenSettings::None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::setting::parse_flags;

    /// The settings these flags give (the process environment is not read).
    fn config(flags: &[&str]) -> Result<DispatchConfig, ConfigError> {
        let args: CallbackArgs = parse_flags(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        assert!(!format!("{args:?}").contains("hunter2"), "{args:?}");
        DispatchConfig::try_from(&args)
    }

    fn refused(flags: &[&str]) -> String {
        parse_flags::<CallbackArgs>(flags).unwrap_err().to_string()
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let config = config(&[]).unwrap();
        assert_eq!(config.token, TokenSettings::None);
        assert_eq!(config.job_timeout, Duration::from_secs(30));
        assert_eq!(config.ca_file, None);
        assert!(config.user_agent.starts_with("sentin8-cron/"));
        assert_eq!(config, DispatchConfig::default());
    }

    #[test]
    fn job_timeout_is_read_and_validated() {
        let config = config(&["--job-timeout", "500ms"]).unwrap();
        assert_eq!(config.job_timeout, Duration::from_millis(500));

        let err = refused(&["--job-timeout", "abc"]);
        assert!(
            err.contains("--job-timeout")
                && err.contains(r#""abc" is not a duration (examples: 30s, 2m, 500ms)"#),
            "{err}"
        );
        let err = refused(&["--job-timeout", "0s"]);
        assert!(
            err.contains("--job-timeout") && err.contains("must be greater than zero"),
            "{err}"
        );
    }

    #[test]
    fn static_token_is_the_dev_fallback() {
        let config = config(&["--static-token", "dev"]).unwrap();
        assert_eq!(config.token, TokenSettings::Static(Secret::new("dev")));
    }

    #[test]
    fn oauth2_wins_over_the_static_token() {
        let config = config(&[
            "--static-token=dev",
            "--m2m-token-url=https://idp.example/token",
            "--m2m-client-id=cron",
            "--m2m-client-secret=hunter2",
            "--m2m-scope=schedules:run",
            "--ca-file=ca.pem",
        ])
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
        let err = config(&[
            "--static-token=dev",
            "--m2m-token-url=https://idp.example/token",
            "--m2m-client-id=cron",
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--m2m-client-secret (SENTIN8_CRON_M2M_CLIENT_SECRET) is required when \
             --m2m-token-url (SENTIN8_CRON_M2M_TOKEN_URL) is set"
        );

        let err = config(&["--m2m-client-secret=hunter2"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--m2m-token-url (SENTIN8_CRON_M2M_TOKEN_URL) is required when \
             --m2m-client-secret (SENTIN8_CRON_M2M_CLIENT_SECRET) is set"
        );
        assert!(!format!("{err:?}").contains("hunter2"));
    }

    #[test]
    fn empty_values_count_as_unset() {
        let config = config(&["--m2m-token-url=", "--static-token=  ", "--m2m-scope= "]).unwrap();
        assert_eq!(config, DispatchConfig::default());
    }

    #[test]
    fn debug_hides_secrets() {
        let config = config(&[
            "--m2m-token-url=https://idp.example/token",
            "--m2m-client-id=cron",
            "--m2m-client-secret=hunter2-very-secret",
        ])
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
