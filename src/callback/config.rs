//! Proxy-back settings: [`CallbackArgs`] (flags, or the `SENTIN8_CRON_*` variables they name)
//! and the [`DispatchConfig`] they convert to, checked as a whole in that one conversion:
//! tokens, timeouts, the egress policy, the result cap and where the signing key comes from.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::egress::{EgressConfigError, EgressPolicy};
use super::failure::DEFAULT_RESULT_CAP;
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
/// `SENTIN8_CRON_TARGET_ALLOW`: the egress allow list.
pub const ENV_TARGET_ALLOW: &str = "SENTIN8_CRON_TARGET_ALLOW";
/// `SENTIN8_CRON_PLATFORM_DOMAIN`: the default egress policy is `https://*.{domain}`.
pub const ENV_PLATFORM_DOMAIN: &str = "SENTIN8_CRON_PLATFORM_DOMAIN";
/// `SENTIN8_CRON_SIGNING_KEY_FILE`: the PEM key signed calls are signed with.
pub const ENV_SIGNING_KEY_FILE: &str = "SENTIN8_CRON_SIGNING_KEY_FILE";
/// `SENTIN8_CRON_SIGNING_KEY_PREVIOUS_FILE`: previous keys, still published.
pub const ENV_SIGNING_KEY_PREVIOUS_FILE: &str = "SENTIN8_CRON_SIGNING_KEY_PREVIOUS_FILE";
/// `SENTIN8_CRON_SIGNING_ISSUER`: the `iss` of signed calls.
pub const ENV_SIGNING_ISSUER: &str = "SENTIN8_CRON_SIGNING_ISSUER";
/// `SENTIN8_CRON_RESULT_MAX_BYTES`: the cap on a stored job result.
pub const ENV_RESULT_MAX_BYTES: &str = "SENTIN8_CRON_RESULT_MAX_BYTES";
/// `SENTIN8_CRON_M2M_RESOURCE_PARAM`: the token request parameter naming the target (RFC 8707).
pub const ENV_RESOURCE_PARAM: &str = "SENTIN8_CRON_M2M_RESOURCE_PARAM";
/// `SENTIN8_CRON_M2M_AUDIENCE_PARAM`: the token request parameter some IdPs use instead.
pub const ENV_AUDIENCE_PARAM: &str = "SENTIN8_CRON_M2M_AUDIENCE_PARAM";

/// The issuer of signed calls when none is configured. A constant rather than a listen
/// address: `serve` and `tick` must sign with the same issuer, and a bind address is not a URL
/// receivers know.
pub const DEFAULT_SIGNING_ISSUER: &str = "sentin8-cron";

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
    #[error("{setting}: {source}")]
    Egress {
        setting: &'static str,
        source: EgressConfigError,
    },
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
    /// The form field naming the target origin a token is requested for (RFC 8707
    /// `resource`); `None` sends none.
    pub resource_param: Option<String>,
    /// A second form field with the same origin, for IdPs that call it `audience`.
    pub audience_param: Option<String>,
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

/// Where the key signing proxy-back calls comes from (loaded at start-up by
/// [`call_signer`](super::setup::call_signer)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSettings {
    /// The current key (PKCS#8 PEM); required outside development mode.
    pub key_file: Option<PathBuf>,
    /// Previous keys: published, no longer signing.
    pub previous_files: Vec<PathBuf>,
    /// The `iss` claim.
    pub issuer: String,
}

impl Default for SigningSettings {
    fn default() -> Self {
        Self {
            key_file: None,
            previous_files: Vec::new(),
            issuer: DEFAULT_SIGNING_ISSUER.to_owned(),
        }
    }
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
    /// Which targets may be called and which addresses connected to.
    pub egress: EgressPolicy,
    /// The most bytes of a response body stored as a job's result (a marker beyond).
    pub result_cap: usize,
    pub signing: SigningSettings,
}

impl Default for DispatchConfig {
    /// No token, and an egress policy that allows nothing: every call is refused until the
    /// allow list (or development mode) says otherwise.
    fn default() -> Self {
        Self {
            token: TokenSettings::None,
            job_timeout: DEFAULT_JOB_TIMEOUT,
            ca_file: None,
            user_agent: default_user_agent(),
            egress: EgressPolicy::parse(&[], None, false).unwrap_or_else(|_| unreachable!()),
            result_cap: DEFAULT_RESULT_CAP,
            signing: SigningSettings::default(),
        }
    }
}

/// The egress allow list alone: shared by the commands that call targets (through
/// [`CallbackArgs`]) and `enroll`, which checks the targets it writes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Egress")]
pub struct TargetAllowArgs {
    /// Targets proxy-back may call: comma-separated [scheme://]host[/prefix][:port] entries
    /// (*.svc.example.com, https://billing.internal:8443, http://127.0.0.1:9000, 10.0.0.0/8);
    /// https only unless an entry names http.
    #[arg(long, env = ENV_TARGET_ALLOW, value_name = "ENTRIES", value_delimiter = ',')]
    pub target_allow: Vec<String>,
}

/// The proxy-back settings of the commands that call services back (`serve`, `tick`).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Proxy-back")]
pub struct CallbackArgs {
    /// OAuth2 token endpoint of the M2M client-credentials token used for proxy-back.
    #[arg(long, env = ENV_TOKEN_URL, value_name = "URL", hide_env_values = true)]
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
    /// Token request parameter naming the target origin (RFC 8707); empty sends none.
    #[arg(long, env = ENV_RESOURCE_PARAM, value_name = "NAME", default_value = "resource")]
    pub m2m_resource_param: String,
    /// Second token request parameter with the target origin, for IdPs that name it so;
    /// empty sends none.
    #[arg(long, env = ENV_AUDIENCE_PARAM, value_name = "NAME", default_value = "audience")]
    pub m2m_audience_param: String,
    #[command(flatten)]
    pub egress: TargetAllowArgs,
    /// Platform domain: without --target-allow, targets under https://*.{domain} are allowed.
    #[arg(long, env = ENV_PLATFORM_DOMAIN, value_name = "DOMAIN")]
    pub platform_domain: Option<String>,
    /// Largest target response stored as a job's result, in bytes (a marker is stored beyond).
    #[arg(long, env = ENV_RESULT_MAX_BYTES, value_name = "BYTES", default_value_t = DEFAULT_RESULT_CAP as u64, value_parser = clap::value_parser!(u64).range(1..=1024 * 1024))]
    pub result_max_bytes: u64,
    /// PKCS#8 PEM private key (Ed25519 or P-256) proxy-back calls are signed with; required
    /// unless in development mode (embedded store, no authentication), which keeps a
    /// generated key beside the database.
    #[arg(long, env = ENV_SIGNING_KEY_FILE, value_name = "PATH")]
    pub signing_key_file: Option<PathBuf>,
    /// Previous signing keys, still published at /.well-known/jwks.json so calls signed before
    /// a rotation verify (repeat the flag or separate with commas).
    #[arg(long, env = ENV_SIGNING_KEY_PREVIOUS_FILE, value_name = "PATH", value_delimiter = ',')]
    pub signing_key_previous_file: Vec<PathBuf>,
    /// Issuer (iss) of signed calls; set it to the URL receivers know this service by.
    #[arg(long, env = ENV_SIGNING_ISSUER, value_name = "ISSUER", default_value = DEFAULT_SIGNING_ISSUER)]
    pub signing_issuer: String,
}

/// A setting's flag and variable, as errors name them.
fn setting(var: &'static str) -> &'static str {
    match var {
        ENV_TOKEN_URL => "--m2m-token-url (SENTIN8_CRON_M2M_TOKEN_URL)",
        ENV_CLIENT_ID => "--m2m-client-id (SENTIN8_CRON_M2M_CLIENT_ID)",
        ENV_CLIENT_SECRET => "--m2m-client-secret (SENTIN8_CRON_M2M_CLIENT_SECRET)",
        ENV_TARGET_ALLOW => "--target-allow (SENTIN8_CRON_TARGET_ALLOW)",
        ENV_PLATFORM_DOMAIN => "--platform-domain (SENTIN8_CRON_PLATFORM_DOMAIN)",
        ENV_SIGNING_KEY_FILE => "--signing-key-file (SENTIN8_CRON_SIGNING_KEY_FILE)",
        ENV_SIGNING_KEY_PREVIOUS_FILE => {
            "--signing-key-previous-file (SENTIN8_CRON_SIGNING_KEY_PREVIOUS_FILE)"
        }
        ENV_SIGNING_ISSUER => "--signing-issuer (SENTIN8_CRON_SIGNING_ISSUER)",
        _ => var,
    }
}

impl TryFrom<&CallbackArgs> for DispatchConfig {
    type Error = ConfigError;

    /// [`DispatchConfig::from_args`] outside development mode.
    fn try_from(args: &CallbackArgs) -> Result<Self, ConfigError> {
        Self::from_args(args, false)
    }
}

impl DispatchConfig {
    /// Checks the settings together: OAuth2 wins over the static token, and a partial OAuth2
    /// configuration is an error rather than a silent fall back to the dev token. `dev_mode`
    /// (embedded store, no authentication) lets the egress policy allow loopback.
    pub fn from_args(args: &CallbackArgs, dev_mode: bool) -> Result<Self, ConfigError> {
        let egress = egress_policy(
            &args.egress,
            given(&args.platform_domain).as_deref(),
            dev_mode,
        )?;
        let key_file = args
            .signing_key_file
            .clone()
            .filter(|p| !p.as_os_str().is_empty());
        let previous_files: Vec<PathBuf> = args
            .signing_key_previous_file
            .iter()
            .filter(|p| !p.as_os_str().is_empty())
            .cloned()
            .collect();
        if key_file.is_none() && !previous_files.is_empty() {
            return Err(ConfigError::Incomplete {
                missing: setting(ENV_SIGNING_KEY_FILE),
                present: setting(ENV_SIGNING_KEY_PREVIOUS_FILE),
            });
        }
        let issuer = args.signing_issuer.trim();
        if issuer.is_empty() {
            return Err(ConfigError::InvalidUrl {
                var: setting(ENV_SIGNING_ISSUER),
                reason: "must not be empty".into(),
            });
        }
        Ok(Self {
            token: token_settings(args)?,
            job_timeout: args.job_timeout,
            ca_file: args.ca_file.clone().filter(|p| !p.as_os_str().is_empty()),
            user_agent: default_user_agent(),
            egress,
            result_cap: usize::try_from(args.result_max_bytes).unwrap_or(DEFAULT_RESULT_CAP),
            signing: SigningSettings {
                key_file,
                previous_files,
                issuer: issuer.to_owned(),
            },
        })
    }
}

/// The egress policy of `allow` (or the platform domain's default); errors name the setting.
pub fn egress_policy(
    allow: &TargetAllowArgs,
    platform_domain: Option<&str>,
    dev_mode: bool,
) -> Result<EgressPolicy, ConfigError> {
    EgressPolicy::parse(&allow.target_allow, platform_domain, dev_mode).map_err(|source| {
        let setting = match source {
            EgressConfigError::PlatformDomain { .. } => setting(ENV_PLATFORM_DOMAIN),
            _ => setting(ENV_TARGET_ALLOW),
        };
        ConfigError::Egress { setting, source }
    })
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
        let param = |name: &str| Some(name.trim().to_owned()).filter(|n| !n.is_empty());
        return Ok(TokenSettings::OAuth2(OAuth2Settings {
            token_url,
            client_id,
            client_secret,
            scope: given(&args.m2m_scope),
            resource_param: param(&args.m2m_resource_param),
            audience_param: param(&args.m2m_audience_param),
        }));
    }

    Ok(match Secret::given(&args.static_token) {
        Some(token) => TokenSettings::Static(token),
        None => TokenSettings::None,
    })
}

#[cfg(test)]
mod tests;
