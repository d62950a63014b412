//! Authentication: turns an `Authorization: Bearer ...` header into a [`Principal`], or into
//! an [`AuthError`] that answers `401` with a `WWW-Authenticate` challenge (RFC 6750).
//!
//! Three [`Authenticator`]s:
//!
//! - [`JwksAuthenticator`]: JWTs signed with RS256, ES256 or EdDSA (Ed25519), verified against
//!   keys fetched from a JWK set URL. Keys are cached; a token naming an unknown `kid` makes it
//!   fetch the set again, at most once per [`JWKS_REFETCH_INTERVAL`]; a cache older than
//!   [`JWKS_MAX_AGE`] is refreshed on next use (and kept if the refresh fails).
//! - [`SharedSecretAuthenticator`]: JWTs signed with HS256 and a shared secret.
//! - [`DevTokenAuthenticator`]: one random token generated at start-up, for development.
//!
//! JWT rules, in both JWT modes: the token's `alg` must be one the mode accepts and match the
//! key's type (`none` and, in JWKS mode, every HMAC algorithm are refused before any key is
//! looked at); `exp` is required, `nbf` honoured when present, both judged against the injected
//! [`Clock`] with a small leeway; `iss` and `aud` are checked when configured (JWKS mode
//! requires both to be configured); `sub` is required. Scopes come from the scope claim (a
//! space-separated string or an array of strings); environments from the envs claim (an array
//! of environment UUIDs; one malformed entry rejects the token). The admin scope grants every
//! environment.
//!
//! The code is split by concern: [`config`] (settings and their checks), [`claims`] (JWT
//! verification shared by both JWT modes, and the principal a token yields), [`hs256`] (the
//! shared-secret mode), [`jwks`] (the JWK set fetch and cache) and [`dev`] (the development
//! token).

pub mod claims;
pub mod config;
pub mod dev;
pub mod hs256;
pub mod jwks;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::StatusCode;

use crate::core::clock::Clock;
use crate::core::model::EnvId;
use crate::util::url::is_loopback;

pub use config::{
    AuthArgs, AuthConfig, AuthConfigError, ClaimRules, ENV_AUDIENCE, ENV_ENVS_CLAIM,
    ENV_HS256_SECRET, ENV_ISSUER, ENV_JWKS_URL, ENV_LEEWAY, ENV_SCOPE_CLAIM, Hs256Key, KeySource,
};
pub use dev::{DevTokenAuthenticator, DevTokenError, MIN_FIXED_TOKEN_LEN};
pub use hs256::SharedSecretAuthenticator;
pub use jwks::{JwksAuthenticator, JwksError};

/// The realm named in every challenge.
pub const REALM: &str = "sentin8-cron";
/// Leeway on `exp` and `nbf` when none is configured.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// The largest leeway accepted; more would make expiry meaningless.
pub const MAX_LEEWAY: Duration = Duration::from_secs(300);
/// The scope claim read when none is configured.
pub const DEFAULT_SCOPE_CLAIM: &str = "scope";
/// The array-valued scope claim read when the configured one is absent.
pub const FALLBACK_SCOPE_CLAIM: &str = "scp";
/// The environments claim read when none is configured.
pub const DEFAULT_ENVS_CLAIM: &str = "envs";
/// The shortest HS256 secret accepted (RFC 7518 §3.2: at least the hash size).
pub const MIN_HS256_SECRET_BYTES: usize = 32;
/// The least time between two fetches of the JWK set.
pub const JWKS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// How long fetched keys are used before the set is fetched again.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(600);
/// Bounds one JWK set fetch, body included.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest JWK set document read.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;
/// The longest bearer token looked at.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The prefix of development tokens, so they are recognisable (and greppable) when leaked.
pub const DEV_TOKEN_PREFIX: &str = "s8c_dev_";

/// Who is calling, and what their token grants. Small: a handful of short strings and ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's `sub`.
    pub subject: String,
    /// Every scope the token carries, known to the policy or not.
    pub scopes: BTreeSet<String>,
    /// The environments the token names; [`EnvGrant::All`] for admins.
    pub envs: EnvGrant,
    /// Authenticated with the development token.
    pub dev: bool,
    /// When the token expires (its `exp`); `None` for the development token, which lives as
    /// long as its process.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Principal {
    /// Whether the token carries `scope` literally (no implication; see the policy module).
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.contains(scope)
    }
}

/// The environments a principal is granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvGrant {
    /// Every environment, present and future.
    All,
    /// Exactly these.
    Some(BTreeSet<EnvId>),
}

impl EnvGrant {
    /// No environment at all.
    pub fn none() -> Self {
        EnvGrant::Some(BTreeSet::new())
    }

    /// Whether `env` is granted.
    pub fn contains(&self, env: EnvId) -> bool {
        match self {
            EnvGrant::All => true,
            EnvGrant::Some(envs) => envs.contains(&env),
        }
    }
}

/// Why a request is not authenticated. Every variant answers `401 Unauthorized` with the
/// challenge [`AuthError::www_authenticate`] builds. `Display` is for logs; neither it nor the
/// challenge ever contains the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("no bearer token presented")]
    MissingToken,
    #[error("authorization scheme is not bearer")]
    UnsupportedScheme,
    #[error("malformed bearer token")]
    Malformed,
    #[error("token algorithm not accepted")]
    UnsupportedAlgorithm,
    #[error("token signing key not known")]
    UnknownKey,
    #[error("signing keys unavailable")]
    KeysUnavailable,
    #[error("token signature does not verify")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("token issuer not accepted")]
    WrongIssuer,
    #[error("token audience not accepted")]
    WrongAudience,
    #[error("token claim {claim} missing or invalid")]
    InvalidClaim { claim: String },
    #[error("token not recognised")]
    Unrecognised,
}

impl AuthError {
    /// Always `401 Unauthorized`.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::UNAUTHORIZED
    }

    /// The RFC 6750 error code: none when no token was presented (missing, or another scheme),
    /// `invalid_token` otherwise.
    pub fn error_code(&self) -> Option<&'static str> {
        match self {
            AuthError::MissingToken | AuthError::UnsupportedScheme => None,
            _ => Some("invalid_token"),
        }
    }

    /// A generic description for the caller: names the kind of problem, never a value.
    pub fn description(&self) -> Option<&'static str> {
        Some(match self {
            AuthError::MissingToken | AuthError::UnsupportedScheme => return None,
            AuthError::Malformed => "the access token is malformed",
            AuthError::UnsupportedAlgorithm => "the access token algorithm is not accepted",
            AuthError::UnknownKey => "the access token signing key is not known",
            AuthError::KeysUnavailable => "the access token could not be verified",
            AuthError::BadSignature => "the access token signature is invalid",
            AuthError::Expired => "the access token expired",
            AuthError::NotYetValid => "the access token is not yet valid",
            AuthError::WrongIssuer => "the access token issuer is not accepted",
            AuthError::WrongAudience => "the access token audience is not accepted",
            AuthError::InvalidClaim { .. } => "the access token claims are invalid",
            AuthError::Unrecognised => "the access token is not valid",
        })
    }

    /// The `WWW-Authenticate` header value (RFC 6750 §3).
    pub fn www_authenticate(&self) -> String {
        match (self.error_code(), self.description()) {
            (Some(code), Some(description)) => format!(
                "Bearer realm=\"{REALM}\", error=\"{code}\", error_description=\"{description}\""
            ),
            _ => format!("Bearer realm=\"{REALM}\""),
        }
    }
}

/// Authenticates one request from its `Authorization` header.
#[async_trait]
pub trait Authenticator: Send + Sync {
    /// The principal the header's bearer token stands for.
    async fn authenticate(
        &self,
        authorization_header: Option<&str>,
    ) -> Result<Principal, AuthError>;
}

/// The token of a `Bearer` authorization header. The scheme is case-insensitive; the token
/// must be an RFC 6750 `b64token` of at most [`MAX_TOKEN_BYTES`].
pub fn bearer_token(authorization_header: Option<&str>) -> Result<&str, AuthError> {
    let header = authorization_header
        .map(|h| h.trim_matches(' '))
        .filter(|h| !h.is_empty())
        .ok_or(AuthError::MissingToken)?;
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthError::UnsupportedScheme);
    }
    let token = rest.trim_start_matches(' ');
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || !is_b64token(token) {
        return Err(AuthError::Malformed);
    }
    Ok(token)
}

/// `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// The authenticator `config` describes. `http` is used for JWK set fetches (its TLS roots,
/// proxy and redirect settings apply; each fetch is bounded by [`JWKS_FETCH_TIMEOUT`]).
/// Keys are fetched on first use; call [`JwksAuthenticator::refresh`] on one built directly to
/// fetch them up front.
pub fn build(
    config: &AuthConfig,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
) -> Arc<dyn Authenticator> {
    match &config.keys {
        KeySource::Jwks { url } => {
            if url.scheme() == "http" && !is_loopback(url) {
                tracing::warn!(
                    host = url.host_str().unwrap_or_default(),
                    "the JWK set is fetched over plain http: anyone on the path can substitute keys"
                );
            }
            Arc::new(JwksAuthenticator::new(
                url.clone(),
                config.rules.clone(),
                http,
                clock,
            ))
        }
        KeySource::Hs256(key) => Arc::new(SharedSecretAuthenticator::new(
            key.clone(),
            config.rules.clone(),
            clock,
        )),
    }
}

#[cfg(test)]
mod tests;
