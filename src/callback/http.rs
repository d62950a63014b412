//! The HTTP proxy-back client: `POST {baseUrl}/v1/internal/schedules/run` with a bearer token,
//! one retry after a 401 with a fresh token, a per-call timeout and a capped response body.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use serde_json::Value;

use super::config::{ConfigError, DispatchConfig, Secret, TokenSettings};
use super::token::{OAuth2TokenSource, StaticTokenSource, TokenSource};
use super::{BodyError, describe, read_capped};
use crate::core::clock::{Clock, SystemClock};
use crate::core::dispatch::{DispatchError, Dispatcher, RunRequest};
use crate::core::target::BaseUrl;

/// The path appended to a target's `baseUrl`.
pub const RUN_PATH: &str = "/v1/internal/schedules/run";

/// The largest response body accepted from a target.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Calls owning services back over HTTP(S).
///
/// Cheap to clone: clones share one connection pool and one token cache.
#[derive(Clone)]
pub struct HttpDispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    tokens: Option<Arc<dyn TokenSource>>,
    job_timeout: Duration,
}

impl std::fmt::Debug for HttpDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpDispatcher")
            .field("job_timeout", &self.inner.job_timeout)
            .field("has_token_source", &self.inner.tokens.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpDispatcher {
    /// A dispatcher for `config`, with tokens from `config.token` and the system clock.
    pub fn new(config: &DispatchConfig) -> Result<Self, ConfigError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// Like [`HttpDispatcher::new`], with the clock that decides when cached tokens expire.
    pub fn with_clock(config: &DispatchConfig, clock: Arc<dyn Clock>) -> Result<Self, ConfigError> {
        let client = build_client(config)?;
        let tokens: Option<Arc<dyn TokenSource>> = match &config.token {
            TokenSettings::OAuth2(settings) => Some(Arc::new(OAuth2TokenSource::new(
                settings.clone(),
                client.clone(),
                clock,
            )?)),
            TokenSettings::Static(token) => Some(Arc::new(StaticTokenSource::new(token.clone()))),
            TokenSettings::None => None,
        };
        Ok(Self::from_parts(client, tokens, config.job_timeout))
    }

    /// A dispatcher using `tokens` instead of `config.token` (which is ignored).
    pub fn with_token_source(
        config: &DispatchConfig,
        tokens: Arc<dyn TokenSource>,
    ) -> Result<Self, ConfigError> {
        let client = build_client(config)?;
        Ok(Self::from_parts(client, Some(tokens), config.job_timeout))
    }

    fn from_parts(
        client: reqwest::Client,
        tokens: Option<Arc<dyn TokenSource>>,
        job_timeout: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                tokens,
                job_timeout,
            }),
        }
    }

    /// The bound on one whole call.
    pub fn job_timeout(&self) -> Duration {
        self.inner.job_timeout
    }

    async fn call(
        &self,
        tokens: &dyn TokenSource,
        url: Url,
        headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Value, DispatchError> {
        let token = tokens.token().await?;
        let response = self
            .send(url.clone(), headers.clone(), &token, body.clone())
            .await?;
        let response = if response.status() == StatusCode::UNAUTHORIZED {
            // The token may have been revoked or rotated before its stated expiry: retry once
            // with a fresh one. A second 401 is the target's final word.
            drop(response);
            if !tokens.invalidate(&token).await {
                return Err(DispatchError::Status(401));
            }
            tracing::debug!("proxy-back target answered 401; retrying once with a fresh token");
            let token = tokens.token().await?;
            self.send(url, headers, &token, body).await?
        } else {
            response
        };
        self.interpret(response).await
    }

    async fn send(
        &self,
        url: Url,
        mut headers: HeaderMap,
        token: &Secret,
        body: Vec<u8>,
    ) -> Result<reqwest::Response, DispatchError> {
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            .map_err(|_| DispatchError::Token("token is not a valid header value".into()))?;
        // Keeps the value out of any debug output of the request.
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        self.inner
            .client
            .post(url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(e))
    }

    async fn interpret(&self, mut response: reqwest::Response) -> Result<Value, DispatchError> {
        let status = response.status();
        if !status.is_success() {
            return Err(DispatchError::Status(status.as_u16()));
        }
        if status == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let body = read_capped(&mut response, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| match e {
                BodyError::TooLarge => DispatchError::Decode(format!(
                    "response body exceeds {} MiB",
                    MAX_RESPONSE_BYTES / (1024 * 1024)
                )),
                BodyError::Read(e) => self.transport_error(e),
            })?;
        // A success is a success: a body that cannot be stored (not JSON, or holding a NUL) is
        // recorded as a marker, so the call is never delivered again.
        Ok(super::failure::stored_result(&body, MAX_RESPONSE_BYTES))
    }

    fn transport_error(&self, err: reqwest::Error) -> DispatchError {
        if err.is_timeout() {
            DispatchError::Timeout(self.inner.job_timeout)
        } else {
            DispatchError::Transport(describe(err))
        }
    }
}

#[async_trait]
impl Dispatcher for HttpDispatcher {
    async fn run(&self, request: &RunRequest) -> Result<Value, DispatchError> {
        // Everything that needs no network is checked first, so a misconfigured schedule never
        // costs a token fetch or a connection.
        let url = run_url(request.base_url.as_ref().map_err(DispatchError::from)?);
        let tokens = self
            .inner
            .tokens
            .as_deref()
            .ok_or(DispatchError::NoTokenSource)?;
        let headers = request_headers(request)?;
        let body = serde_json::to_vec(request)
            .map_err(|e| DispatchError::Decode(format!("encoding the request: {e}")))?;

        let limit = self.inner.job_timeout;
        match tokio::time::timeout(limit, self.call(tokens, url, headers, body)).await {
            Ok(result) => result,
            Err(_) => Err(DispatchError::Timeout(limit)),
        }
    }
}

/// The run URL of a target: [`RUN_PATH`] appended to the parsed base URL's path (a path
/// prefix is kept; a trailing slash does not double up).
pub fn run_url(base_url: &BaseUrl) -> Url {
    base_url.join_path(RUN_PATH)
}

fn request_headers(request: &RunRequest) -> Result<HeaderMap, DispatchError> {
    let value = |v: &str, name: &str| {
        HeaderValue::from_str(v).map_err(|_| {
            DispatchError::Decode(format!(
                "encoding the request: {name} is not a valid header value"
            ))
        })
    };
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers.insert(
        "idempotency-key",
        value(&request.idempotency_key, "idempotency_key")?,
    );
    headers.insert(
        "x-correlation-id",
        value(&request.correlation_id, "correlation_id")?,
    );
    Ok(headers)
}

fn build_client(config: &DispatchConfig) -> Result<reqwest::Client, ConfigError> {
    let builder = reqwest::Client::builder()
        .user_agent(config.user_agent.clone())
        // A redirect would turn the POST into a GET or carry the token elsewhere; a target
        // that redirects is misconfigured, and its 3xx is reported as such.
        .redirect(reqwest::redirect::Policy::none())
        // A backstop for the per-call timeout, which also bounds token fetches made outside a
        // dispatch.
        .timeout(config.job_timeout);
    let Some(path) = &config.ca_file else {
        return builder
            .build()
            .map_err(|e| ConfigError::Client(describe(e)));
    };
    let ca_error = |reason: String| ConfigError::CaFile {
        path: path.display().to_string(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| ca_error(format!("cannot read it: {e}")))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| ca_error(format!("not a PEM certificate bundle: {}", describe(e))))?;
    if certs.is_empty() {
        return Err(ca_error("contains no PEM certificates".into()));
    }
    // The certificates' DER is only decoded when the TLS stack is built, so a failure here is
    // almost always a malformed certificate in the bundle.
    builder
        .tls_certs_merge(certs)
        .build()
        .map_err(|e| ca_error(format!("not usable as trust roots: {}", describe(e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_url_joins_paths() {
        let url = |s: &str| run_url(&BaseUrl::parse(s).unwrap()).to_string();
        assert_eq!(url("http://h:1"), "http://h:1/v1/internal/schedules/run");
        assert_eq!(url("http://h:1/"), "http://h:1/v1/internal/schedules/run");
        assert_eq!(
            url("https://h/billing"),
            "https://h/billing/v1/internal/schedules/run"
        );
        assert_eq!(
            url("https://h/billing/"),
            "https://h/billing/v1/internal/schedules/run"
        );
        assert_eq!(
            url("http://h/a/b//"),
            "http://h/a/b/v1/internal/schedules/run"
        );
    }
}
