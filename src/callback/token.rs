//! M2M bearer tokens for proxy-back calls: OAuth2 client credentials (production) or a static
//! token (development).
//!
//! OAuth2 tokens are requested per target origin (RFC 8707 `resource`, and `audience` for
//! identity providers that use that name) and cached per origin, so a token one target
//! receives is not accepted by another.

use std::collections::HashMap;
use std::sync::{Arc, Once};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use reqwest::header::ACCEPT;
use serde_json::Value;
use tokio::sync::Mutex;

use super::config::{ConfigError, ENV_TOKEN_URL, OAuth2Settings, Secret};
use super::{BodyError, describe, read_capped};
use crate::core::clock::Clock;
use crate::core::dispatch::DispatchError;

/// Token endpoint answers are small; anything bigger is not a token response.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;

/// The longest a token is cached whatever `expires_in` says: bounds the date arithmetic and
/// means a misreported lifetime heals within a day.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Refresh this long before expiry at most (less for short-lived tokens, see `refresh_margin`).
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(30);

/// Origins whose tokens are cached before stale entries are dropped.
const MAX_CACHED_ORIGINS: usize = 1024;

/// Supplies bearer tokens for proxy-back calls.
#[async_trait]
pub trait TokenSource: Send + Sync + 'static {
    /// A token for the next call to `origin` (`scheme://host[:port]`), from the cache when
    /// still fresh.
    async fn token(&self, origin: &str) -> Result<Secret, DispatchError>;

    /// Reports that `origin` rejected `rejected` (HTTP 401). Returns whether asking again may
    /// yield a different token, i.e. whether a retry is worth it.
    async fn invalidate(&self, origin: &str, rejected: &Secret) -> bool;
}

/// A fixed token from `SENTIN8_CRON_TOKEN`. For development: it never rotates, so a real
/// deployment must use OAuth2 client credentials.
#[derive(Debug)]
pub struct StaticTokenSource {
    token: Secret,
}

impl StaticTokenSource {
    /// Wraps `token`, warning (once per process) that this is a dev fallback.
    pub fn new(token: Secret) -> Self {
        static WARNED: Once = Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "proxy-back uses the static SENTIN8_CRON_TOKEN; this is a development fallback \
                 that real deployments must not rely on (configure SENTIN8_CRON_M2M_TOKEN_URL)"
            );
        });
        Self { token }
    }
}

#[async_trait]
impl TokenSource for StaticTokenSource {
    async fn token(&self, _origin: &str) -> Result<Secret, DispatchError> {
        Ok(self.token.clone())
    }

    async fn invalidate(&self, _origin: &str, _rejected: &Secret) -> bool {
        // There is no other token to try.
        false
    }
}

#[derive(Debug)]
struct CachedToken {
    token: Secret,
    refresh_at: DateTime<Utc>,
}

/// OAuth2 client credentials (RFC 6749 section 4.4).
///
/// The client authenticates with HTTP Basic (`client_secret_basic`), the method every
/// authorization server must support; the id and secret are form-encoded first, as the RFC
/// requires. They are not repeated in the form body: a client must use one method only.
///
/// Tokens are cached per target origin until shortly before expiry. Each origin's slot sits
/// behind an async mutex held across the refresh, so concurrent callers wait for one
/// in-flight fetch instead of each hitting the token endpoint.
pub struct OAuth2TokenSource {
    settings: OAuth2Settings,
    token_url: reqwest::Url,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    cache: std::sync::Mutex<HashMap<String, Slot>>,
}

type Slot = Arc<Mutex<Option<CachedToken>>>;

impl std::fmt::Debug for OAuth2TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth2TokenSource")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl OAuth2TokenSource {
    /// A token source fetching through `client`; `clock` decides when a cached token is stale.
    pub fn new(
        settings: OAuth2Settings,
        client: reqwest::Client,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::InvalidUrl {
            var: ENV_TOKEN_URL,
            reason,
        };
        let token_url = reqwest::Url::parse(&settings.token_url)
            .map_err(|e| invalid(format!("not an absolute URL ({e})")))?;
        if !matches!(token_url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "scheme {:?} is not http or https",
                token_url.scheme()
            )));
        }
        Ok(Self {
            settings,
            token_url,
            client,
            clock,
            cache: std::sync::Mutex::default(),
        })
    }

    /// The cache slot of `origin`, created when missing. Slots of tokens no longer fresh are
    /// dropped when the map grows large, so a policy allowing many origins stays bounded.
    fn slot(&self, origin: &str) -> Slot {
        let mut slots = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = slots.get(origin) {
            return slot.clone();
        }
        if slots.len() >= MAX_CACHED_ORIGINS {
            let now = self.clock.now();
            // A slot in use (locked) is kept; an idle one only while its token is fresh.
            slots.retain(|_, slot| match slot.try_lock() {
                Ok(cached) => cached.as_ref().is_some_and(|c| now < c.refresh_at),
                Err(_) => true,
            });
        }
        slots.entry(origin.to_owned()).or_default().clone()
    }

    async fn fetch(&self, origin: &str) -> Result<(Secret, Option<Duration>), DispatchError> {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.settings.scope {
            form.push(("scope", scope.as_str()));
        }
        for name in [&self.settings.resource_param, &self.settings.audience_param]
            .into_iter()
            .flatten()
        {
            form.push((name.as_str(), origin));
        }
        let mut response = self
            .client
            .post(self.token_url.clone())
            .basic_auth(
                form_encode(&self.settings.client_id),
                Some(form_encode(self.settings.client_secret.expose())),
            )
            .header(ACCEPT, "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|e| {
                // Tenants see the class; the socket detail is the operator's.
                tracing::warn!(detail = %describe(e), "M2M token endpoint unreachable");
                token_error("token endpoint unreachable")
            })?;

        let status = response.status();
        let body = read_capped(&mut response, MAX_TOKEN_RESPONSE_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge => token_error("token endpoint response is too large"),
                BodyError::Read(e) => token_error(format!(
                    "reading the token endpoint response: {}",
                    describe(e)
                )),
            })?;

        if !status.is_success() {
            // The OAuth2 `error` code (e.g. invalid_client) says what is wrong without
            // revealing anything secret; `error_description` is free text, so it is left out.
            let code = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
                .filter(|c| is_safe_code(c));
            return Err(token_error(match code {
                Some(code) => format!(
                    "token endpoint returned status {} ({code})",
                    status.as_u16()
                ),
                None => format!("token endpoint returned status {}", status.as_u16()),
            }));
        }
        parse_token_response(&body)
    }
}

#[async_trait]
impl TokenSource for OAuth2TokenSource {
    async fn token(&self, origin: &str) -> Result<Secret, DispatchError> {
        let slot = self.slot(origin);
        let mut cache = slot.lock().await;
        let now = self.clock.now();
        if let Some(cached) = cache.as_ref().filter(|c| now < c.refresh_at) {
            return Ok(cached.token.clone());
        }
        *cache = None;

        let (token, lifetime) = self.fetch(origin).await?;
        // Measured from before the request, so the cached expiry is never later than the
        // server's.
        if let Some(refresh_at) = lifetime.and_then(|l| refresh_at(now, l)) {
            *cache = Some(CachedToken {
                token: token.clone(),
                refresh_at,
            });
        }
        Ok(token)
    }

    async fn invalidate(&self, origin: &str, rejected: &Secret) -> bool {
        let slot = self.slot(origin);
        let mut cache = slot.lock().await;
        // Only drop the token that was rejected: when many calls fail with the same stale
        // token, the first refresh serves them all rather than each forcing another.
        if cache.as_ref().is_some_and(|c| &c.token == rejected) {
            *cache = None;
        }
        true
    }
}

fn token_error(message: impl Into<String>) -> DispatchError {
    DispatchError::Token(message.into())
}

/// When to stop using a token that lives `lifetime` from `obtained`: 10% early, but never
/// more than 30 s early. `None` (do not cache) for zero lifetimes.
fn refresh_at(obtained: DateTime<Utc>, lifetime: Duration) -> Option<DateTime<Utc>> {
    if lifetime.is_zero() {
        return None;
    }
    let lifetime = lifetime.min(MAX_TOKEN_LIFETIME);
    let margin = (lifetime / 10).min(MAX_REFRESH_MARGIN);
    let usable = TimeDelta::from_std(lifetime - margin).ok()?;
    obtained.checked_add_signed(usable)
}

/// Reads `access_token`, `token_type` and `expires_in` by hand rather than through serde, so
/// that no error message can echo a field's value (which might be the token).
fn parse_token_response(body: &[u8]) -> Result<(Secret, Option<Duration>), DispatchError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| token_error("token endpoint response is not JSON"))?;
    let access_token = value
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| token_error("token endpoint response has no access_token"))?;
    // RFC 6750 b64token characters are all visible ASCII; anything else cannot go in a header.
    if !access_token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(token_error(
            "token endpoint issued an access_token that is not a valid header value",
        ));
    }
    match value.get("token_type") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t.eq_ignore_ascii_case("bearer") => {}
        Some(Value::String(t)) if is_safe_code(t) => {
            return Err(token_error(format!(
                "token endpoint issued an unsupported token_type {t:?}"
            )));
        }
        Some(_) => {
            return Err(token_error(
                "token endpoint issued an unsupported token_type",
            ));
        }
    }
    Ok((
        Secret::new(access_token),
        expires_in(value.get("expires_in")),
    ))
}

/// `expires_in` in seconds. Some servers send it as a string, or as a float. Missing or
/// unreadable means unknown; a token of unknown, zero or negative lifetime is not cached.
fn expires_in(value: Option<&Value>) -> Option<Duration> {
    let seconds = match value? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Some(Duration::ZERO);
    }
    // Clamped before converting, so absurd values cannot overflow.
    Some(Duration::from_secs_f64(
        seconds.min(MAX_TOKEN_LIFETIME.as_secs_f64()),
    ))
}

/// Short ASCII codes are safe to repeat in messages; free text from a server is not.
fn is_safe_code(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `application/x-www-form-urlencoded` encoding of one value, as RFC 6749 (section 2.3.1)
/// asks for the client id and secret before they go into the Basic credentials.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 1, 12, 0, 0).unwrap()
    }

    #[test]
    fn refresh_margin_is_ten_percent_capped_at_thirty_seconds() {
        let secs = |s| Duration::from_secs(s);
        assert_eq!(
            refresh_at(t0(), secs(3600)),
            Some(t0() + TimeDelta::seconds(3570))
        );
        assert_eq!(
            refresh_at(t0(), secs(100)),
            Some(t0() + TimeDelta::seconds(90))
        );
        assert_eq!(refresh_at(t0(), Duration::ZERO), None);
        // Capped at a day, so a huge lifetime neither overflows nor lingers.
        assert_eq!(
            refresh_at(t0(), secs(u64::MAX / 4)),
            Some(t0() + TimeDelta::seconds(24 * 3600 - 30))
        );
    }

    #[test]
    fn expires_in_accepts_numbers_and_strings() {
        let v = |j: &str| serde_json::from_str::<Value>(j).unwrap();
        assert_eq!(
            expires_in(Some(&v("3600"))),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            expires_in(Some(&v("\"60\""))),
            Some(Duration::from_secs(60))
        );
        assert_eq!(expires_in(Some(&v("0"))), Some(Duration::ZERO));
        assert_eq!(expires_in(Some(&v("-5"))), Some(Duration::ZERO));
        assert_eq!(expires_in(Some(&v("1e300"))), Some(MAX_TOKEN_LIFETIME));
        assert_eq!(expires_in(Some(&v("\"soon\""))), None);
        assert_eq!(expires_in(None), None);
    }

    #[test]
    fn token_responses_are_parsed_without_echoing_values() {
        let (token, lifetime) = parse_token_response(
            br#"{"access_token":"abc.def","token_type":"Bearer","expires_in":300}"#,
        )
        .unwrap();
        assert_eq!(token.expose(), "abc.def");
        assert_eq!(lifetime, Some(Duration::from_secs(300)));

        let err =
            parse_token_response(br#"{"access_token":"abc","token_type":"mac"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"M2M token: token endpoint issued an unsupported token_type "mac""#
        );

        let err = parse_token_response(br#"{"access_token":"has space secret"}"#).unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");

        let err = parse_token_response(br#"{"token_type":"bearer"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "M2M token: token endpoint response has no access_token"
        );
        assert!(parse_token_response(b"<html>").is_err());
    }

    #[test]
    fn form_encoding_for_basic_credentials() {
        assert_eq!(form_encode("cron-client_1.x"), "cron-client_1.x");
        assert_eq!(form_encode("a b:c/d%"), "a+b%3Ac%2Fd%25");
        assert_eq!(form_encode("é"), "%C3%A9");
    }
}
