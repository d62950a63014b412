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
//! Configuration ([`AuthConfig::from_lookup`]):
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

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::StatusCode;
use base64::Engine;
use base64::alphabet;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use chrono::{DateTime, Utc};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest::Url;
use serde_json::{Map, Value};
use subtle::ConstantTimeEq;

use crate::callback::config::parse_duration;
use crate::callback::{BodyError, describe, read_capped};
use crate::core::clock::Clock;
use crate::core::model::EnvId;
use crate::server::policy::{SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};

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

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// Why the authentication settings are unusable. Raised at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthConfigError {
    #[error("set only one of {} and {}", ENV_JWKS_URL, ENV_HS256_SECRET)]
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
    #[error("{var}: {value:?} is not a duration (examples: 30s, 2m, 500ms)")]
    InvalidDuration { var: &'static str, value: String },
    #[error("{var}: must be at most {max_secs}s")]
    LeewayTooLarge { var: &'static str, max_secs: u64 },
    #[error(
        "{var} is set but neither {} nor {} is",
        ENV_JWKS_URL,
        ENV_HS256_SECRET
    )]
    NoMode { var: &'static str },
}

/// A validated HS256 secret (at least [`MIN_HS256_SECRET_BYTES`]). `Debug` hides it.
#[derive(Clone)]
pub struct Hs256Key(DecodingKey);

impl Hs256Key {
    /// Checks the secret's length and prepares the key.
    pub fn new(secret: &[u8]) -> Result<Self, AuthConfigError> {
        let short = AuthConfigError::SecretTooShort {
            var: ENV_HS256_SECRET,
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

impl AuthConfig {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Option<Self>, AuthConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the settings through `lookup` (a variable name to its value). Empty values count
    /// as unset. `Ok(None)` when no token verification is configured at all: whether to fall
    /// back to a development token is the caller's decision. Any JWT setting without a mode is
    /// an error, so a half-configured deployment never silently runs without verification.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, AuthConfigError> {
        let get = |key: &str| {
            lookup(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };

        let issuer = get(ENV_ISSUER);
        let audience = get(ENV_AUDIENCE);
        let leeway = get(ENV_LEEWAY);
        let scope_claim = get(ENV_SCOPE_CLAIM);
        let envs_claim = get(ENV_ENVS_CLAIM);

        let keys = match (get(ENV_JWKS_URL), get(ENV_HS256_SECRET)) {
            (Some(_), Some(_)) => return Err(AuthConfigError::BothModes),
            (Some(url), None) => {
                let url = parse_jwks_url(&url)?;
                for (value, var) in [(&issuer, ENV_ISSUER), (&audience, ENV_AUDIENCE)] {
                    if value.is_none() {
                        return Err(AuthConfigError::Incomplete {
                            missing: var,
                            present: ENV_JWKS_URL,
                        });
                    }
                }
                KeySource::Jwks { url }
            }
            (None, Some(secret)) => KeySource::Hs256(Hs256Key::new(secret.as_bytes())?),
            (None, None) => {
                let orphans = [
                    (ENV_ISSUER, issuer.is_some()),
                    (ENV_AUDIENCE, audience.is_some()),
                    (ENV_LEEWAY, leeway.is_some()),
                    (ENV_SCOPE_CLAIM, scope_claim.is_some()),
                    (ENV_ENVS_CLAIM, envs_claim.is_some()),
                ];
                if let Some((var, _)) = orphans.iter().find(|(_, set)| *set) {
                    return Err(AuthConfigError::NoMode { var });
                }
                return Ok(None);
            }
        };

        let leeway = match leeway {
            None => DEFAULT_LEEWAY,
            Some(raw) => {
                let d = parse_duration(&raw).ok_or_else(|| AuthConfigError::InvalidDuration {
                    var: ENV_LEEWAY,
                    value: raw.clone(),
                })?;
                if d > MAX_LEEWAY {
                    return Err(AuthConfigError::LeewayTooLarge {
                        var: ENV_LEEWAY,
                        max_secs: MAX_LEEWAY.as_secs(),
                    });
                }
                d
            }
        };

        Ok(Some(Self {
            keys,
            rules: ClaimRules {
                issuer,
                audience,
                leeway,
                scope_claim: scope_claim.unwrap_or_else(|| DEFAULT_SCOPE_CLAIM.to_owned()),
                envs_claim: envs_claim.unwrap_or_else(|| DEFAULT_ENVS_CLAIM.to_owned()),
            },
        }))
    }
}

fn parse_jwks_url(raw: &str) -> Result<Url, AuthConfigError> {
    let invalid = |reason: String| AuthConfigError::InvalidUrl {
        var: ENV_JWKS_URL,
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

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

// ---------------------------------------------------------------------------------------------
// JWT verification shared by both JWT modes
// ---------------------------------------------------------------------------------------------

/// The parts of a JOSE header needed before verification.
struct PeekedHeader {
    alg: Algorithm,
    kid: Option<String>,
}

/// Reads `alg` and `kid` from an unverified token, so the key can be chosen. Nothing read here
/// is trusted beyond that: the signature is checked against the chosen key and algorithm.
fn peek_header(token: &str) -> Result<PeekedHeader, AuthError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Malformed);
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(header)
        .map_err(|_| AuthError::Malformed)?;
    let Ok(Value::Object(header)) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(AuthError::Malformed);
    };
    let Some(Value::String(alg)) = header.get("alg") else {
        return Err(AuthError::Malformed);
    };
    // `none` (in any spelling) is not an algorithm jsonwebtoken knows, so it fails here.
    let alg: Algorithm = alg.parse().map_err(|_| AuthError::UnsupportedAlgorithm)?;
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(AuthError::Malformed),
    };
    Ok(PeekedHeader { alg, kid })
}

/// Verifies the signature with `key` under exactly `alg`, then the claims.
fn verify(
    token: &str,
    alg: Algorithm,
    key: &DecodingKey,
    rules: &ClaimRules,
    now: DateTime<Utc>,
) -> Result<Principal, AuthError> {
    // jsonwebtoken checks only the signature (and that `alg` is the one given, of the key's
    // family); every claim, time included, is checked below against the injected clock.
    let mut validation = Validation::new(alg);
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation)
        .map_err(|e| jwt_error(e.kind()))?;
    principal_from_claims(&data.claims, rules, now)
}

fn jwt_error(kind: &ErrorKind) -> AuthError {
    match kind {
        ErrorKind::InvalidSignature => AuthError::BadSignature,
        ErrorKind::InvalidAlgorithm
        | ErrorKind::UnsupportedAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::MissingAlgorithm => AuthError::UnsupportedAlgorithm,
        ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat
        | ErrorKind::Provider(_) => {
            tracing::warn!(error = ?kind, "a verification key could not be used");
            AuthError::BadSignature
        }
        _ => AuthError::Malformed,
    }
}

/// A NumericDate (RFC 7519 §2): seconds since the epoch, possibly fractional.
fn numeric_date(value: &Value) -> Option<f64> {
    value.as_f64().filter(|v| v.is_finite())
}

fn invalid(claim: &str) -> AuthError {
    AuthError::InvalidClaim {
        claim: claim.to_owned(),
    }
}

fn principal_from_claims(
    claims: &Map<String, Value>,
    rules: &ClaimRules,
    now: DateTime<Utc>,
) -> Result<Principal, AuthError> {
    // Microsecond precision keeps f64 exact for any date this service will see.
    let now = now.timestamp_micros() as f64 / 1e6;
    let leeway = rules.leeway.as_secs_f64();

    let exp = claims
        .get("exp")
        .and_then(numeric_date)
        .ok_or_else(|| invalid("exp"))?;
    if now >= exp + leeway {
        return Err(AuthError::Expired);
    }
    if let Some(nbf) = claims.get("nbf") {
        let nbf = numeric_date(nbf).ok_or_else(|| invalid("nbf"))?;
        if now + leeway < nbf {
            return Err(AuthError::NotYetValid);
        }
    }

    if let Some(expected) = &rules.issuer {
        match claims.get("iss") {
            Some(Value::String(iss)) if iss == expected => {}
            _ => return Err(AuthError::WrongIssuer),
        }
    }
    if let Some(expected) = &rules.audience {
        let ok = match claims.get("aud") {
            Some(Value::String(aud)) => aud == expected,
            Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(expected)),
            _ => false,
        };
        if !ok {
            return Err(AuthError::WrongAudience);
        }
    }

    let subject = match claims.get("sub") {
        Some(Value::String(sub)) if !sub.trim().is_empty() => sub.clone(),
        _ => return Err(invalid("sub")),
    };
    let scopes = scopes_from_claims(claims, &rules.scope_claim)?;
    let envs = envs_from_claims(claims, &rules.envs_claim)?;
    let envs = if scopes.contains(SCOPE_ADMIN) {
        EnvGrant::All
    } else {
        EnvGrant::Some(envs)
    };

    Ok(Principal {
        subject,
        scopes,
        envs,
        dev: false,
    })
}

/// Scopes from `claim`, or from `scp` when `claim` is absent: a space-separated string or an
/// array of strings. Any other shape rejects the token.
fn scopes_from_claims(
    claims: &Map<String, Value>,
    claim: &str,
) -> Result<BTreeSet<String>, AuthError> {
    let (name, value) = match claims.get(claim) {
        Some(value) => (claim, value),
        None => match claims.get(FALLBACK_SCOPE_CLAIM) {
            Some(value) => (FALLBACK_SCOPE_CLAIM, value),
            None => return Ok(BTreeSet::new()),
        },
    };
    match value {
        Value::String(s) => Ok(s.split_ascii_whitespace().map(str::to_owned).collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                _ => Err(invalid(name)),
            })
            .filter(|s| !matches!(s, Ok(s) if s.is_empty()))
            .collect(),
        _ => Err(invalid(name)),
    }
}

/// Environment ids from `claim`: absent means none; otherwise an array of UUID strings, every
/// one valid.
fn envs_from_claims(
    claims: &Map<String, Value>,
    claim: &str,
) -> Result<BTreeSet<EnvId>, AuthError> {
    match claims.get(claim) {
        None => Ok(BTreeSet::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .and_then(|s| s.parse::<EnvId>().ok())
                    .ok_or_else(|| invalid(claim))
            })
            .collect(),
        Some(_) => Err(invalid(claim)),
    }
}

fn log_rejection(mode: &'static str, result: &Result<Principal, AuthError>) {
    if let Err(err) = result {
        tracing::debug!(mode, error = %err, "bearer token rejected");
    }
}

// ---------------------------------------------------------------------------------------------
// HS256 shared secret
// ---------------------------------------------------------------------------------------------

/// Verifies HS256 JWTs with a shared secret. Every other algorithm is refused.
#[derive(Clone)]
pub struct SharedSecretAuthenticator {
    key: Hs256Key,
    rules: ClaimRules,
    clock: Arc<dyn Clock>,
}

impl SharedSecretAuthenticator {
    pub fn new(key: Hs256Key, rules: ClaimRules, clock: Arc<dyn Clock>) -> Self {
        Self { key, rules, clock }
    }

    fn check(&self, header: Option<&str>) -> Result<Principal, AuthError> {
        let token = bearer_token(header)?;
        if peek_header(token)?.alg != Algorithm::HS256 {
            return Err(AuthError::UnsupportedAlgorithm);
        }
        verify(
            token,
            Algorithm::HS256,
            &self.key.0,
            &self.rules,
            self.clock.now(),
        )
    }
}

impl fmt::Debug for SharedSecretAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSecretAuthenticator")
            .field("key", &self.key)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Authenticator for SharedSecretAuthenticator {
    async fn authenticate(
        &self,
        authorization_header: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let result = self.check(authorization_header);
        log_rejection("hs256", &result);
        result
    }
}

// ---------------------------------------------------------------------------------------------
// JWKS
// ---------------------------------------------------------------------------------------------

/// Why a JWK set could not be fetched or used. Logged; the token at hand is rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("jwks request failed: {0}")]
    Request(String),
    #[error("jwks endpoint answered {0}")]
    Status(u16),
    #[error("jwks document larger than {0} bytes")]
    TooLarge(usize),
    #[error("jwks document is not a json key set: {0}")]
    Parse(String),
    #[error("jwks document has no usable signing key")]
    NoUsableKeys,
}

/// The algorithms JWKS mode accepts. Never an HMAC one: a public key is not a secret.
const JWKS_ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// The shortest RSA modulus accepted, in bytes.
const MIN_RSA_MODULUS_BYTES: usize = 2048 / 8;

/// JWK members are base64url; tolerate padding, which some issuers emit.
const JWK_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A key from the set, bound to the one algorithm it verifies.
#[derive(Clone)]
struct VerifyingKey {
    alg: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct KeyCache {
    keys: HashMap<String, Vec<VerifyingKey>>,
    /// When the keys were fetched; `None` until a fetch succeeds.
    fetched_at: Option<DateTime<Utc>>,
}

enum Lookup {
    Found(DecodingKey),
    /// The kid is known, but not for this algorithm.
    WrongAlgorithm,
    Unknown,
}

impl KeyCache {
    fn lookup(&self, kid: &str, alg: Algorithm) -> Lookup {
        match self.keys.get(kid) {
            None => Lookup::Unknown,
            Some(keys) => keys
                .iter()
                .find(|k| k.alg == alg)
                .map_or(Lookup::WrongAlgorithm, |k| Lookup::Found(k.key.clone())),
        }
    }

    fn is_fresh(&self, now: DateTime<Utc>, max_age: chrono::Duration) -> bool {
        // A clock that stepped backwards makes the cache stale rather than fresh for longer.
        self.fetched_at
            .is_some_and(|at| now >= at && now - at < max_age)
    }
}

/// Verifies RS256, ES256 and EdDSA JWTs against a JWK set fetched from a URL.
///
/// Keys are selected by the token's `kid` and must be of the token's `alg`. The set is fetched
/// on first use, again when a token names a `kid` the cache lacks (at most once per refetch
/// interval: within it such tokens are rejected without a fetch), and again when the cache is
/// older than its maximum age (if that refresh fails the old keys stay in use and the refresh
/// is retried after the refetch interval). Only one fetch runs at a time.
pub struct JwksAuthenticator {
    url: Url,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    rules: ClaimRules,
    refetch_interval: chrono::Duration,
    max_age: chrono::Duration,
    cache: RwLock<Arc<KeyCache>>,
    /// Held while fetching; holds the time of the last fetch attempt.
    last_attempt: tokio::sync::Mutex<Option<DateTime<Utc>>>,
}

impl fmt::Debug for JwksAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwksAuthenticator")
            .field(
                "keys",
                &KeySource::Jwks {
                    url: self.url.clone(),
                },
            )
            .field("rules", &self.rules)
            .field("refetch_interval", &self.refetch_interval)
            .field("max_age", &self.max_age)
            .finish_non_exhaustive()
    }
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

impl JwksAuthenticator {
    /// An authenticator with an empty cache, the default refetch interval and maximum age.
    /// JWKS mode should check issuer and audience: [`AuthConfig::from_lookup`] insists on both.
    pub fn new(url: Url, rules: ClaimRules, http: reqwest::Client, clock: Arc<dyn Clock>) -> Self {
        Self {
            url,
            http,
            clock,
            rules,
            refetch_interval: chrono_duration(JWKS_REFETCH_INTERVAL),
            max_age: chrono_duration(JWKS_MAX_AGE),
            cache: RwLock::new(Arc::new(KeyCache::default())),
            last_attempt: tokio::sync::Mutex::new(None),
        }
    }

    /// Sets the least time between two fetches.
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = chrono_duration(interval);
        self
    }

    /// Sets how long fetched keys are used before the set is fetched again.
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = chrono_duration(max_age);
        self
    }

    /// Fetches the set now, whatever the rate limit says (for warming the cache at start-up),
    /// and returns how many usable keys it holds. On failure the cache is left as it was.
    pub async fn refresh(&self) -> Result<usize, JwksError> {
        let mut last_attempt = self.last_attempt.lock().await;
        let now = self.clock.now();
        *last_attempt = Some(now);
        let keys = self.fetch().await?;
        let count = keys.values().map(Vec::len).sum();
        self.store(keys, now);
        Ok(count)
    }

    fn snapshot(&self) -> Arc<KeyCache> {
        Arc::clone(&self.cache.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn store(&self, keys: HashMap<String, Vec<VerifyingKey>>, now: DateTime<Utc>) {
        let cache = Arc::new(KeyCache {
            keys,
            fetched_at: Some(now),
        });
        *self.cache.write().unwrap_or_else(|p| p.into_inner()) = cache;
    }

    async fn key_for(&self, kid: &str, alg: Algorithm) -> Result<DecodingKey, AuthError> {
        let answer = |lookup: Lookup| match lookup {
            Lookup::Found(key) => Ok(key),
            Lookup::WrongAlgorithm | Lookup::Unknown => Err(AuthError::UnknownKey),
        };

        let cache = self.snapshot();
        if cache.is_fresh(self.clock.now(), self.max_age) {
            match cache.lookup(kid, alg) {
                // A kid the set has, under another algorithm: refetching will not help.
                found @ (Lookup::Found(_) | Lookup::WrongAlgorithm) => return answer(found),
                Lookup::Unknown => {}
            }
        }

        // The kid is unknown or the cache is stale: maybe fetch, one caller at a time.
        let mut last_attempt = self.last_attempt.lock().await;
        let now = self.clock.now();
        let cache = self.snapshot();
        if cache.is_fresh(now, self.max_age)
            && let found @ (Lookup::Found(_) | Lookup::WrongAlgorithm) = cache.lookup(kid, alg)
        {
            // Another caller fetched while this one waited.
            return answer(found);
        }
        // A clock that stepped backwards does not block fetching until it catches up.
        let may_fetch = last_attempt.is_none_or(|at| now < at || now - at >= self.refetch_interval);
        if may_fetch {
            *last_attempt = Some(now);
            match self.fetch().await {
                Ok(keys) => {
                    self.store(keys, now);
                    drop(last_attempt);
                    return answer(self.snapshot().lookup(kid, alg));
                }
                Err(err) => {
                    tracing::warn!(url = %self.url, error = %err, "cannot fetch the JWK set");
                }
            }
        }
        drop(last_attempt);

        // Rate-limited, or the fetch failed: answer from what is cached, stale or not.
        match cache.lookup(kid, alg) {
            Lookup::Unknown if cache.fetched_at.is_none() => Err(AuthError::KeysUnavailable),
            lookup => answer(lookup),
        }
    }

    async fn fetch(&self) -> Result<HashMap<String, Vec<VerifyingKey>>, JwksError> {
        let mut response = self
            .http
            .get(self.url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(JWKS_FETCH_TIMEOUT)
            .send()
            .await
            .map_err(|e| JwksError::Request(describe(e)))?;
        if !response.status().is_success() {
            return Err(JwksError::Status(response.status().as_u16()));
        }
        let body = read_capped(&mut response, MAX_JWKS_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge => JwksError::TooLarge(MAX_JWKS_BYTES),
                BodyError::Read(e) => JwksError::Request(describe(e)),
            })?;
        parse_jwks(&body)
    }

    async fn check(&self, header: Option<&str>) -> Result<Principal, AuthError> {
        let token = bearer_token(header)?;
        let head = peek_header(token)?;
        if !JWKS_ALGORITHMS.contains(&head.alg) {
            return Err(AuthError::UnsupportedAlgorithm);
        }
        // Without a kid there is no safe way to choose among the keys.
        let kid = head.kid.ok_or(AuthError::UnknownKey)?;
        let key = self.key_for(&kid, head.alg).await?;
        verify(token, head.alg, &key, &self.rules, self.clock.now())
    }
}

#[async_trait]
impl Authenticator for JwksAuthenticator {
    async fn authenticate(
        &self,
        authorization_header: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let result = self.check(authorization_header).await;
        log_rejection("jwks", &result);
        result
    }
}

/// Parses a JWK set, keeping the signing keys this service can use: RSA (2048 bits or more)
/// for RS256, P-256 for ES256 and Ed25519 for EdDSA, each with a `kid`. Other keys (symmetric
/// ones in particular) are skipped; a set with no usable key is an error.
fn parse_jwks(body: &[u8]) -> Result<HashMap<String, Vec<VerifyingKey>>, JwksError> {
    let doc: Value = serde_json::from_slice(body).map_err(|e| JwksError::Parse(e.to_string()))?;
    let Some(Value::Array(entries)) = doc.get("keys") else {
        return Err(JwksError::Parse("no keys array".into()));
    };
    let mut keys: HashMap<String, Vec<VerifyingKey>> = HashMap::new();
    for entry in entries {
        match parse_jwk(entry) {
            Ok((kid, key)) => keys.entry(kid).or_default().push(key),
            Err(reason) => {
                let kid = entry.get("kid").and_then(Value::as_str).unwrap_or_default();
                tracing::debug!(kid, reason, "JWK skipped");
            }
        }
    }
    if keys.is_empty() {
        return Err(JwksError::NoUsableKeys);
    }
    Ok(keys)
}

fn parse_jwk(jwk: &Value) -> Result<(String, VerifyingKey), &'static str> {
    let member = |name: &str| jwk.get(name).and_then(Value::as_str);
    let bytes = |name: &str| {
        member(name)
            .and_then(|v| JWK_BASE64.decode(v).ok())
            .ok_or("missing or invalid key parameter")
    };

    let kid = member("kid").filter(|k| !k.is_empty()).ok_or("no kid")?;
    if let Some(usage) = jwk.get("use")
        && usage.as_str() != Some("sig")
    {
        return Err("not a signing key");
    }
    if let Some(ops) = jwk.get("key_ops") {
        let verifies = ops
            .as_array()
            .is_some_and(|ops| ops.iter().any(|op| op.as_str() == Some("verify")));
        if !verifies {
            return Err("key_ops exclude verify");
        }
    }

    let (alg, key) = match member("kty") {
        Some("RSA") => {
            let n = bytes("n")?;
            let e = bytes("e")?;
            let first = n.iter().position(|b| *b != 0).unwrap_or(n.len());
            if n.len() - first < MIN_RSA_MODULUS_BYTES {
                return Err("rsa key shorter than 2048 bits");
            }
            if e.iter().all(|b| *b == 0) {
                return Err("rsa exponent invalid");
            }
            (
                Algorithm::RS256,
                DecodingKey::from_rsa_raw_components(&n, &e),
            )
        }
        Some("EC") => {
            if member("crv") != Some("P-256") {
                return Err("unsupported curve");
            }
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != 32 || y.len() != 32 {
                return Err("p-256 coordinates must be 32 bytes");
            }
            let mut point = Vec::with_capacity(65);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            (Algorithm::ES256, DecodingKey::from_ec_der(&point))
        }
        Some("OKP") => {
            if member("crv") != Some("Ed25519") {
                return Err("unsupported curve");
            }
            let x = bytes("x")?;
            if x.len() != 32 {
                return Err("ed25519 keys must be 32 bytes");
            }
            (Algorithm::EdDSA, DecodingKey::from_ed_der(&x))
        }
        Some("oct") => return Err("symmetric keys are never used"),
        _ => return Err("unsupported key type"),
    };

    if let Some(declared) = jwk.get("alg") {
        let matches = declared
            .as_str()
            .and_then(|d| d.parse::<Algorithm>().ok())
            .is_some_and(|d| d == alg);
        if !matches {
            return Err("alg not supported for this key");
        }
    }
    Ok((kid.to_owned(), VerifyingKey { alg, key }))
}

// ---------------------------------------------------------------------------------------------
// Development token
// ---------------------------------------------------------------------------------------------

/// Accepts exactly one random token, generated at start-up, as an admin over every
/// environment (`dev: true`). For local development: the token is printed once by the caller
/// and lives as long as the process.
pub struct DevTokenAuthenticator {
    token: String,
}

impl fmt::Debug for DevTokenAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DevTokenAuthenticator(<redacted>)")
    }
}

impl DevTokenAuthenticator {
    /// A fresh authenticator and its token: [`DEV_TOKEN_PREFIX`] followed by 256 bits from the
    /// operating system's RNG, base64url-encoded.
    ///
    /// # Panics
    ///
    /// When the operating system's RNG fails, which leaves no safe token to make. Use
    /// [`DevTokenAuthenticator::try_generate`] to handle that instead.
    pub fn generate() -> (Self, String) {
        match Self::try_generate() {
            Ok(pair) => pair,
            Err(err) => panic!("the operating system's random number generator failed: {err}"),
        }
    }

    /// Like [`DevTokenAuthenticator::generate`], reporting an RNG failure.
    pub fn try_generate() -> Result<(Self, String), getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        let token = format!("{DEV_TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
        Ok((
            Self {
                token: token.clone(),
            },
            token,
        ))
    }

    /// The principal every accepted request gets.
    pub fn principal() -> Principal {
        Principal {
            subject: "dev".to_owned(),
            scopes: [SCOPE_READ, SCOPE_WRITE, SCOPE_ADMIN]
                .into_iter()
                .map(str::to_owned)
                .collect(),
            envs: EnvGrant::All,
            dev: true,
        }
    }
}

#[async_trait]
impl Authenticator for DevTokenAuthenticator {
    async fn authenticate(
        &self,
        authorization_header: Option<&str>,
    ) -> Result<Principal, AuthError> {
        let token = bearer_token(authorization_header)?;
        // Constant time in the content; the length is public (it is fixed).
        if bool::from(token.as_bytes().ct_eq(self.token.as_bytes())) {
            Ok(Self::principal())
        } else {
            tracing::debug!(mode = "dev", "bearer token rejected");
            Err(AuthError::Unrecognised)
        }
    }
}

#[cfg(test)]
mod tests;
