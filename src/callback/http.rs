//! The HTTP proxy-back client: `POST {baseUrl}/v1/internal/schedules/run`, signed
//! (`Sentin8-Signature`, bound to the target's origin and the body), checked against the
//! egress policy before it is sent and again when its host name is resolved, with a bearer
//! token where one may go, one retry after a 401 with a fresh token, a per-call timeout and a
//! capped result.
//!
//! A failure is reported to the tenant by class only ([`FailureClass`]); the full detail
//! goes to the operator's log.

mod client;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use serde_json::Value;

use super::config::{ConfigError, DispatchConfig, Secret, TokenSettings};
use super::egress::EgressPolicy;
use super::failure::{
    FailureClass, Omitted, STATUS_EXCERPT_BYTES, classify_error, classify_status, operator_detail,
    result_marker, stored_result,
};
use super::signing::{CallClaims, CallSigner, SIGNATURE_HEADER, target_origin};
use super::token::{OAuth2TokenSource, StaticTokenSource, TokenSource};
use crate::core::clock::{Clock, SystemClock};
use crate::core::dispatch::{CallFence, DispatchError, Dispatcher, PreparedCall, RunRequest};
use crate::core::model::JobId;
use crate::core::target::BaseUrl;

/// The path appended to a target's `baseUrl`.
pub const RUN_PATH: &str = "/v1/internal/schedules/run";

/// The largest result cap that may be configured.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Calls owning services back over HTTP(S).
///
/// Cheap to clone: clones share one connection pool and one token cache.
#[derive(Clone)]
pub struct HttpDispatcher {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    client: reqwest::Client,
    tokens: Option<Arc<dyn TokenSource>>,
    job_timeout: Duration,
    egress: Arc<EgressPolicy>,
    result_cap: usize,
    signer: Option<Arc<CallSigner>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for HttpDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpDispatcher")
            .field("job_timeout", &self.inner.job_timeout)
            .field("has_token_source", &self.inner.tokens.is_some())
            .field("signs", &self.inner.signer.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpDispatcher {
    /// A dispatcher for `config`, with tokens from `config.token` and the system clock.
    pub fn new(config: &DispatchConfig) -> Result<Self, ConfigError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// Like [`HttpDispatcher::new`], with the clock that decides when cached tokens expire and
    /// when signed calls are issued.
    pub fn with_clock(config: &DispatchConfig, clock: Arc<dyn Clock>) -> Result<Self, ConfigError> {
        let clients = client::build(config)?;
        let tokens: Option<Arc<dyn TokenSource>> = match &config.token {
            TokenSettings::OAuth2(settings) => Some(Arc::new(OAuth2TokenSource::new(
                settings.clone(),
                clients.token.clone(),
                clock.clone(),
            )?)),
            TokenSettings::Static(token) => Some(Arc::new(StaticTokenSource::new(token.clone()))),
            TokenSettings::None => None,
        };
        Ok(Self::from_parts(config, clients.target, tokens, clock))
    }

    /// A dispatcher using `tokens` instead of `config.token` (which is ignored).
    pub fn with_token_source(
        config: &DispatchConfig,
        tokens: Arc<dyn TokenSource>,
    ) -> Result<Self, ConfigError> {
        let clients = client::build(config)?;
        Ok(Self::from_parts(
            config,
            clients.target,
            Some(tokens),
            Arc::new(SystemClock),
        ))
    }

    fn from_parts(
        config: &DispatchConfig,
        client: reqwest::Client,
        tokens: Option<Arc<dyn TokenSource>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                tokens,
                job_timeout: config.job_timeout,
                egress: client::policy(config),
                result_cap: config.result_cap.clamp(1, MAX_RESPONSE_BYTES),
                signer: None,
                clock,
            }),
        }
    }

    /// Signs every call with `signer` (the `Sentin8-Signature` header).
    pub fn signed(self, signer: Arc<CallSigner>) -> Self {
        let mut inner = (*self.inner).clone();
        inner.signer = Some(signer);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The bound on one whole call.
    pub fn job_timeout(&self) -> Duration {
        self.inner.job_timeout
    }

    /// The bearer token source for `url`, if one may go there: a token of either kind (the
    /// static development token, or an OAuth2 token requested for that origin) goes only to an
    /// origin the allow list names exactly, or anywhere in development mode. An origin allowed
    /// only through a wildcard host, a network or the port `*` may be a tenant's own listener:
    /// it gets the signed call and no bearer.
    fn bearer_for(&self, url: &Url) -> Option<&dyn TokenSource> {
        let tokens = self.inner.tokens.as_deref()?;
        let allowed =
            self.inner.egress.dev_mode() || self.inner.egress.names_origin_explicitly(url);
        allowed.then_some(tokens)
    }

    /// Sends `built` (with `signed`, its headers signed ahead, or signed now), with a bearer
    /// token from `tokens` where one may go.
    async fn call(
        &self,
        tokens: Option<&dyn TokenSource>,
        built: Built,
        signed: Option<HeaderMap>,
        request: &RunRequest,
    ) -> Result<Value, DispatchError> {
        let Built {
            url,
            origin,
            headers,
            body,
        } = built;
        let origin = origin.as_str();
        let fence = request.fence.as_ref();
        let token = match tokens {
            Some(tokens) => Some(tokens.token(origin).await?),
            None => None,
        };
        let signed = match signed {
            Some(signed) => signed,
            None => self.with_signature(&headers, request, &url, &body)?,
        };
        // The last thing before the request goes: everything above (a token fetch, signing)
        // may have taken long, or the instance may have stalled.
        if fence.is_some_and(|fence| !fence.holds()) {
            return Err(DispatchError::LeaseUnsure);
        }
        let response = self
            .send(url.clone(), signed, token.as_ref(), body.clone())
            .await?;
        let response = match (tokens, &token) {
            // The token may have been revoked or rotated before its stated expiry: retry once
            // with a fresh one. A second 401 is the target's final word.
            // Sent again only while the lease still holds; otherwise the 401 stands.
            (Some(tokens), Some(rejected))
                if response.status() == StatusCode::UNAUTHORIZED
                    && fence.is_none_or(CallFence::holds)
                    && tokens.invalidate(origin, rejected).await =>
            {
                drop(response);
                tracing::debug!(%origin, "proxy-back target answered 401; retrying once with a fresh token");
                let token = tokens.token(origin).await?;
                // A new request, with its own signature and `jti`: a target that accepts each
                // `jti` once would refuse the first one's again as a replay.
                let signed = self.with_signature(&headers, request, &url, &body)?;
                self.send(url, signed, Some(&token), body).await?
            }
            _ => response,
        };
        self.interpret(origin, response).await
    }

    async fn send(
        &self,
        url: Url,
        mut headers: HeaderMap,
        token: Option<&Secret>,
        // Shared, not copied, when a 401 sends the same body again.
        body: bytes::Bytes,
    ) -> Result<reqwest::Response, DispatchError> {
        if let Some(token) = token {
            let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                .map_err(|_| DispatchError::Token("token is not a valid header value".into()))?;
            // Keeps the value out of any debug output of the request.
            auth.set_sensitive(true);
            headers.insert(AUTHORIZATION, auth);
        }
        let origin = target_origin(&url).unwrap_or_default();
        self.inner
            .client
            .post(url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| self.transport_error(&origin, &e))
    }

    /// A success is stored (capped; a marker when it cannot be); a non-success status is a
    /// failure with an excerpt of its body.
    async fn interpret(
        &self,
        origin: &str,
        mut response: reqwest::Response,
    ) -> Result<Value, DispatchError> {
        let status = response.status();
        if !status.is_success() {
            let body = client::read_prefix(&mut response, STATUS_EXCERPT_BYTES)
                .await
                .unwrap_or_default();
            return Err(match classify_status(status, &body) {
                FailureClass::Status { code, excerpt } => DispatchError::Status(code, excerpt),
                _ => DispatchError::Status(status.as_u16(), String::new()),
            });
        }
        if status == StatusCode::NO_CONTENT {
            return Ok(Value::Null);
        }
        let cap = self.inner.result_cap;
        let announced = response.content_length();
        let body = client::read_prefix(&mut response, cap + 1)
            .await
            .map_err(|e| self.transport_error(origin, &e))?;
        if body.len() > cap {
            let bytes = announced.map_or(body.len(), |n| usize::try_from(n).unwrap_or(usize::MAX));
            return Ok(result_marker(Omitted::TooLarge, bytes));
        }
        Ok(stored_result(&body, cap))
    }

    /// The tenant-facing error of a transport failure; the detail goes to the log.
    fn transport_error(&self, origin: &str, err: &reqwest::Error) -> DispatchError {
        let class = classify_error(err);
        tracing::warn!(%origin, failure = %class, detail = %operator_detail(err), "proxy-back call failed");
        match class {
            FailureClass::Timeout => DispatchError::Timeout(self.inner.job_timeout),
            // Redirects are not followed, so a configuration failure of a sent request is the
            // resolver refusing every address of the name; a request reqwest cannot build
            // (unreachable from a parsed base URL) is reported as such.
            FailureClass::Configuration if err.is_builder() => {
                DispatchError::InvalidBaseUrl("the request could not be built".into())
            }
            FailureClass::Configuration => DispatchError::EgressRefused,
            FailureClass::Decode => DispatchError::Decode("the response could not be read".into()),
            other => DispatchError::Transport(other.to_string()),
        }
    }

    /// `headers` with a fresh `Sentin8-Signature` (its own `jti` and `iat`) when calls are
    /// signed: each request sent, the resend after a 401 included, is signed on its own.
    fn with_signature(
        &self,
        headers: &HeaderMap,
        request: &RunRequest,
        url: &Url,
        body: &[u8],
    ) -> Result<HeaderMap, DispatchError> {
        Ok(signed(headers, self.signature(request, url, body)?))
    }

    /// A fresh `Sentin8-Signature` value for a call to `url` carrying `body`; none when calls
    /// are not signed.
    fn signature(
        &self,
        request: &RunRequest,
        url: &Url,
        body: &[u8],
    ) -> Result<Option<HeaderValue>, DispatchError> {
        let Some(signer) = &self.inner.signer else {
            return Ok(None);
        };
        let signed = CallClaims::for_call(
            url,
            request.env_id.0,
            request.schedule_id.0,
            request.job_id.0,
            body,
            self.inner.clock.now().timestamp(),
        )
        .and_then(|claims| signer.sign(&claims));
        let token = signed.map_err(|e| {
            tracing::error!(error = %e, "signing a proxy-back call failed");
            DispatchError::Decode("the call could not be signed".into())
        })?;
        HeaderValue::from_str(&token)
            .map(Some)
            .map_err(|_| DispatchError::Decode("the call could not be signed".into()))
    }
}

/// `headers` with `signature` as the `Sentin8-Signature`, when there is one.
fn signed(headers: &HeaderMap, signature: Option<HeaderValue>) -> HeaderMap {
    let mut headers = headers.clone();
    if let Some(signature) = signature {
        headers.insert(SIGNATURE_HEADER, signature);
    }
    headers
}

#[async_trait]
impl Dispatcher for HttpDispatcher {
    async fn run(&self, request: &RunRequest) -> Result<Value, DispatchError> {
        // Everything that needs no network is checked first, so a misconfigured schedule never
        // costs a token fetch or a connection.
        let ready = request
            .prepared
            .as_ref()
            .and_then(|prepared| prepared.get::<ReadyCall>())
            .filter(|ready| ready.fits(request, self.inner.clock.now()));
        let (built, signed) = match ready {
            Some(ready) => {
                let built = Built::with_body(request, ready.body.clone())?;
                let headers = signed(&built.headers, ready.signature.clone());
                (built, Some(headers))
            }
            None => (Built::new(request)?, None),
        };
        if let Err(denied) = self.inner.egress.check_url(&built.url) {
            tracing::warn!(schedule_id = %request.schedule_id, job_id = %request.job_id, reason = %denied, "proxy-back refused by the egress policy");
            return Err(DispatchError::EgressRefused);
        }
        let tokens = self.bearer_for(&built.url);
        if tokens.is_none() && self.inner.signer.is_none() {
            return Err(DispatchError::NoTokenSource);
        }
        let limit = self.inner.job_timeout;
        match tokio::time::timeout(limit, self.call(tokens, built, signed, request)).await {
            Ok(result) => result,
            Err(_) => Err(DispatchError::Timeout(limit)),
        }
    }

    /// The request built and its first send signed, ahead of the call. A call that would be
    /// refused is not made ready: it is refused at its instant, with its reason logged there.
    fn prepare(&self, request: &RunRequest) -> Option<PreparedCall> {
        let built = Built::new(request).ok()?;
        self.inner.egress.check_url(&built.url).ok()?;
        let signature = self.signature(request, &built.url, &built.body).ok()?;
        Some(PreparedCall::new(ReadyCall {
            job_id: request.job_id,
            attempt: request.attempt,
            body: built.body,
            signature,
            signed_at: self.inner.clock.now(),
        }))
    }
}

/// A call's request as built once: the URL, its origin, the headers (unsigned) and the body.
#[derive(Clone)]
struct Built {
    url: Url,
    origin: String,
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl Built {
    fn new(request: &RunRequest) -> Result<Self, DispatchError> {
        let body = serde_json::to_vec(request)
            .map_err(|e| DispatchError::Decode(format!("encoding the request: {e}")))?;
        Self::with_body(request, bytes::Bytes::from(body))
    }

    /// The request around a body encoded before (a call made ready).
    fn with_body(request: &RunRequest, body: bytes::Bytes) -> Result<Self, DispatchError> {
        let url = run_url(request.base_url.as_ref().map_err(DispatchError::from)?);
        let origin = target_origin(&url)
            .map_err(|_| DispatchError::InvalidBaseUrl("has no http(s) origin".into()))?;
        let headers = request_headers(request)?;
        Ok(Self {
            url,
            origin,
            headers,
            body,
        })
    }
}

/// A call made ready ahead of its instant ([`Dispatcher::prepare`]).
///
/// Only what costs to make is kept: the encoded body and its signature (about a kilobyte
/// together), so a large burst's calls can all be made ready at their hand-off. The URL and
/// the headers, cheap to make, are made again at the call from the same request: the fire's
/// schedule as it was handed off (a fire whose schedule is read again loses its ready call),
/// so the URL is the one signed.
struct ReadyCall {
    job_id: JobId,
    attempt: i32,
    body: bytes::Bytes,
    /// The first send's `Sentin8-Signature`, over this body, when calls are signed.
    signature: Option<HeaderValue>,
    signed_at: DateTime<Utc>,
}

/// A call made ready is sent as it was made while its signature is at most this old (a
/// signature is valid for minutes; a fire that waited longer for a slot is signed again).
const READY_FOR: chrono::Duration = chrono::Duration::seconds(60);

impl ReadyCall {
    /// Made for this attempt, and recently enough.
    fn fits(&self, request: &RunRequest, now: DateTime<Utc>) -> bool {
        self.job_id == request.job_id
            && self.attempt == request.attempt
            && now - self.signed_at <= READY_FOR
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
    // W3C trace context: a target that continues the trace ties its work to the job.
    if let Some((parent, state)) = &request.trace {
        headers.insert("traceparent", value(parent, "traceparent")?);
        headers.insert("tracestate", value(state, "tracestate")?);
    }
    Ok(headers)
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
