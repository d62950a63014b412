//! The JWKS mode: RS256, ES256 and EdDSA JWTs verified against a JWK set fetched over HTTP(S),
//! with a rate-limited refetch on an unknown `kid` and a maximum cache age.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;
use serde_json::Value;

use super::claims::{log_rejection, peek_header, verify};
use super::config::{ClaimRules, KeySource};
use super::{
    AuthError, Authenticator, JWKS_FETCH_TIMEOUT, JWKS_MAX_AGE, JWKS_REFETCH_INTERVAL,
    MAX_JWKS_BYTES, Principal, bearer_token,
};
use crate::core::clock::Clock;
use crate::util::http::{BodyError, describe, read_capped};

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
pub(super) struct VerifyingKey {
    pub(super) alg: Algorithm,
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
pub(super) fn parse_jwks(body: &[u8]) -> Result<HashMap<String, Vec<VerifyingKey>>, JwksError> {
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
