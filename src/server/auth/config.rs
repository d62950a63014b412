//! Authentication settings: [`AuthArgs`] (flags, or the `SENTIN8_CRON_*` variables they name)
//! and the [`AuthConfig`] they convert to, checked as a whole in that one conversion (one mode
//! only, issuer and audience in JWKS mode, secret length, leeway bounds).
//!
//! | variable | meaning |
//! | --- | --- |
//! | `SENTIN8_CRON_JWKS_URL` | JWK set URL (http or https): JWKS mode |
//! | `SENTIN8_CRON_JWT_HS256_SECRET` | shared secret, at least 32 bytes: HS256 mode |
//! | `SENTIN8_CRON_JWT_ISSUER` | required `iss`; mandatory in JWKS mode |
//! | `SENTIN8_CRON_JWT_AUDIENCE` | required `aud` member; mandatory in JWKS mode |
//! | `SENTIN8_CRON_JWT_LEEWAY` | clock skew allowed on `exp`/`nbf` (default `30s`, at most `5m`) |
//! | `SENTIN8_CRON_JWT_SCOPE_CLAIM` | scope claim name (default `scope`; `scp` is read when it is absent) |
//! | `SENTIN8_CRON_JWT_ENVS_CLAIM` | environments claim name (default `envs`) |

use std::fmt;
use std::time::Duration;

use jsonwebtoken::DecodingKey;
use reqwest::Url;

use super::{
    DEFAULT_ENVS_CLAIM, DEFAULT_LEEWAY, DEFAULT_SCOPE_CLAIM, MAX_LEEWAY, MIN_HS256_SECRET_BYTES,
};
use crate::callback::Secret;
use crate::util::duration::parse_duration;
use crate::util::setting::{given, or_default};

/// `SENTIN8_CRON_JWKS_URL`: where to fetch the JWK set (JWKS mode).
pub const ENV_JWKS_URL: &str = "SENTIN8_CRON_JWKS_URL";
/// `SENTIN8_CRON_JWT_HS256_SECRET`: the shared HS256 secret (shared secret mode).
pub const ENV_HS256_SECRET: &str = "SENTIN8_CRON_JWT_HS256_SECRET";
/// `SENTIN8_CRON_JWT_ISSUER`: the only accepted `iss`.
pub const ENV_ISSUER: &str = "SENTIN8_CRON_JWT_ISSUER";
/// `SENTIN8_CRON_JWT_AUDIENCE`: the audience `aud` must name.
pub const ENV_AUDIENCE: &str = "SENTIN8_CRON_JWT_AUDIENCE";
/// `SENTIN8_CRON_JWT_LEEWAY`: clock skew tolerated on `exp` and `nbf`.
pub const ENV_LEEWAY: &str = "SENTIN8_CRON_JWT_LEEWAY";
/// `SENTIN8_CRON_JWT_SCOPE_CLAIM`: the claim holding the scopes.
pub const ENV_SCOPE_CLAIM: &str = "SENTIN8_CRON_JWT_SCOPE_CLAIM";
/// `SENTIN8_CRON_JWT_ENVS_CLAIM`: the claim holding the granted environment ids.
pub const ENV_ENVS_CLAIM: &str = "SENTIN8_CRON_JWT_ENVS_CLAIM";

/// Why the authentication settings are unusable. Raised at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthConfigError {
    #[error("set only one of {JWKS_URL} and {HS256_SECRET}")]
    BothModes,
    #[error("{var}: {reason}")]
    InvalidUrl { var: &'static str, reason: String },
    #[error("{missing} is required when {present} is set")]
    Incomplete {
        missing: &'static str,
        present: &'static str,
    },
    #[error("{var}: must be at least {min} bytes")]
    SecretTooShort { var: &'static str, min: usize },
    #[error("{var} is set but neither {JWKS_URL} nor {HS256_SECRET} is")]
    NoMode { var: &'static str },
}

/// A validated HS256 secret (at least [`MIN_HS256_SECRET_BYTES`]). `Debug` hides it.
#[derive(Clone)]
pub struct Hs256Key(pub(super) DecodingKey);

impl Hs256Key {
    /// Checks the secret's length and prepares the key.
    pub fn new(secret: &[u8]) -> Result<Self, AuthConfigError> {
        let short = AuthConfigError::SecretTooShort {
            var: HS256_SECRET,
            min: MIN_HS256_SECRET_BYTES,
        };
        if secret.len() < MIN_HS256_SECRET_BYTES {
            return Err(short);
        }
        DecodingKey::from_secret(secret)
            .map(Self)
            .map_err(|_| short)
    }
}

impl fmt::Debug for Hs256Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hs256Key(<redacted>)")
    }
}

/// Where verification keys come from.
#[derive(Clone)]
pub enum KeySource {
    /// A JWK set fetched over HTTP(S).
    Jwks { url: Url },
    /// A shared HS256 secret.
    Hs256(Hs256Key),
}

impl fmt::Debug for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Jwks { url } => {
                let mut shown = url.clone();
                if shown.password().is_some() {
                    let _ = shown.set_password(Some("redacted"));
                }
                f.debug_struct("Jwks")
                    .field("url", &shown.as_str())
                    .finish()
            }
            KeySource::Hs256(key) => f.debug_tuple("Hs256").field(key).finish(),
        }
    }
}

/// What a verified token's claims must satisfy, and where its grants are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRules {
    /// The only accepted `iss`; unchecked when `None`.
    pub issuer: Option<String>,
    /// The audience `aud` must be or contain; unchecked (and `aud` ignored) when `None`.
    pub audience: Option<String>,
    /// Clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
    /// The scope claim; [`FALLBACK_SCOPE_CLAIM`] is read when it is absent.
    pub scope_claim: String,
    /// The environments claim.
    pub envs_claim: String,
}

impl Default for ClaimRules {
    fn default() -> Self {
        Self {
            issuer: None,
            audience: None,
            leeway: DEFAULT_LEEWAY,
            scope_claim: DEFAULT_SCOPE_CLAIM.to_owned(),
            envs_claim: DEFAULT_ENVS_CLAIM.to_owned(),
        }
    }
}

/// How bearer tokens are verified. Build it with [`AuthConfig::from_lookup`], which enforces
/// the rules (one mode only, issuer and audience in JWKS mode, secret length, leeway bounds).
#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub keys: KeySource,
    pub rules: ClaimRules,
}

/// The authentication settings of `serve`: JWKS or HS256 mode, and what the claims must be.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "API authentication")]
pub struct AuthArgs {
    /// JWK set URL: authenticate API callers with JWTs verified against it.
    #[arg(long, env = ENV_JWKS_URL, value_name = "URL", hide_env_values = true)]
    pub jwks_url: Option<String>,
    /// Shared HS256 secret (at least 32 bytes): authenticate API callers with it instead.
    #[arg(long, env = ENV_HS256_SECRET, value_name = "SECRET", hide_env_values = true, value_parser = Secret::parse)]
    pub jwt_hs256_secret: Option<Secret>,
    /// The only accepted JWT issuer (iss); required with --jwks-url.
    #[arg(long, env = ENV_ISSUER, value_name = "ISS")]
    pub jwt_issuer: Option<String>,
    /// The audience (aud) a JWT must name; required with --jwks-url.
    #[arg(long, env = ENV_AUDIENCE, value_name = "AUD")]
    pub jwt_audience: Option<String>,
    /// Clock skew tolerated on exp and nbf (at most 5m).
    #[arg(long, env = ENV_LEEWAY, value_name = "DURATION", default_value = "30s", value_parser = leeway)]
    pub jwt_leeway: Duration,
    /// JWT claim holding the scopes (scp is read when it is absent).
    #[arg(long, env = ENV_SCOPE_CLAIM, value_name = "CLAIM", default_value = DEFAULT_SCOPE_CLAIM)]
    pub jwt_scope_claim: String,
    /// JWT claim holding the granted environment ids.
    #[arg(long, env = ENV_ENVS_CLAIM, value_name = "CLAIM", default_value = DEFAULT_ENVS_CLAIM)]
    pub jwt_envs_claim: String,
}

/// How errors name the settings: flag and variable.
const JWKS_URL: &str = "--jwks-url (SENTIN8_CRON_JWKS_URL)";
const HS256_SECRET: &str = "--jwt-hs256-secret (SENTIN8_CRON_JWT_HS256_SECRET)";
const ISSUER: &str = "--jwt-issuer (SENTIN8_CRON_JWT_ISSUER)";
const AUDIENCE: &str = "--jwt-audience (SENTIN8_CRON_JWT_AUDIENCE)";

/// A clap value parser: a duration of at most [`MAX_LEEWAY`].
fn leeway(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration (examples: 30s, 2m, 500ms)"))?;
    if d > MAX_LEEWAY {
        return Err(format!("must be at most {}s", MAX_LEEWAY.as_secs()));
    }
    Ok(d)
}

impl AuthConfig {
    /// The configuration `args` describe, checked as a whole. `Ok(None)` when no token
    /// verification is configured at all: whether to fall back to a development token is the
    /// caller's decision. An issuer or audience without a mode is an error, so a
    /// half-configured deployment never silently runs without verification.
    pub fn from_args(args: &AuthArgs) -> Result<Option<Self>, AuthConfigError> {
        let issuer = given(&args.jwt_issuer);
        let audience = given(&args.jwt_audience);

        let keys = match (given(&args.jwks_url), Secret::given(&args.jwt_hs256_secret)) {
            (Some(_), Some(_)) => return Err(AuthConfigError::BothModes),
            (Some(url), None) => {
                let url = parse_jwks_url(&url)?;
                for (value, var) in [(&issuer, ISSUER), (&audience, AUDIENCE)] {
                    if value.is_none() {
                        return Err(AuthConfigError::Incomplete {
                            missing: var,
                            present: JWKS_URL,
                        });
                    }
                }
                KeySource::Jwks { url }
            }
            (None, Some(secret)) => KeySource::Hs256(Hs256Key::new(secret.expose().as_bytes())?),
            (None, None) => {
                let orphans = [(ISSUER, issuer.is_some()), (AUDIENCE, audience.is_some())];
                if let Some((var, _)) = orphans.iter().find(|(_, set)| *set) {
                    return Err(AuthConfigError::NoMode { var });
                }
                return Ok(None);
            }
        };

        Ok(Some(Self {
            keys,
            rules: ClaimRules {
                issuer,
                audience,
                leeway: args.jwt_leeway,
                scope_claim: or_default(&args.jwt_scope_claim, DEFAULT_SCOPE_CLAIM),
                envs_claim: or_default(&args.jwt_envs_claim, DEFAULT_ENVS_CLAIM),
            },
        }))
    }
}

fn parse_jwks_url(raw: &str) -> Result<Url, AuthConfigError> {
    let invalid = |reason: String| AuthConfigError::InvalidUrl {
        var: JWKS_URL,
        reason,
    };
    let url = Url::parse(raw).map_err(|e| invalid(format!("not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("must be an http or https URL".into()));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("has no host".into()));
    }
    Ok(url)
}
