//! The listener: serving the application on a bound socket (plain or TLS) with limits that keep
//! a client, authenticated or not, from holding the server's connections or memory. A
//! connection must finish its request head within the header timeout (the first request
//! includes protocol detection and, on TLS, follows a bounded handshake); a request gets the
//! request timeout to be answered (503 otherwise); a body over the limit is a 413 before it is
//! read.
//!
//! Connections: at most `max_connections` are open at once, and at most
//! `max_connections_per_client` from one client (an IPv4 address, or an IPv6 /64, which one
//! host usually holds whole); a connection beyond its client's share is closed as soon as it is
//! accepted, so no file descriptor waits on it. At a full cap, a connection that is only
//! waiting (no complete request head yet, or idle between requests) gives way to the newcomer,
//! the longest-waiting first ([`pool`]): a flood of such connections from any number of
//! addresses cannot keep a probe or a client out, and only connections whose requests are being
//! answered hold their slots. The last `reserved_for_health` of the cap are a reserve for when
//! every general slot is busy: a connection admitted there may ask for `/v1/health` only, and
//! is closed after its answer.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};

use super::MAX_BODY_BYTES;
use super::error::ApiError;
use super::rate::RateSettings;

mod cap;
mod pool;
mod refusals;

use cap::ConnectionCap;
use pool::Part;

/// The listener's limits (see the module documentation), and the API's rate limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListenerLimits {
    /// Time a connection gets to send a complete request head.
    pub header_timeout: Duration,
    /// Time a request gets to be answered, its body included.
    pub request_timeout: Duration,
    /// Connections open at once, the reserve included.
    pub max_connections: usize,
    /// Connections one client (an IPv4 address, an IPv6 /64) may hold open.
    pub max_connections_per_client: usize,
    /// Of `max_connections`, the ones kept for `/v1/health` when every other one is busy.
    pub reserved_for_health: usize,
    /// Requests per client and per environment (see [`crate::server::rate`]).
    pub rate: RateSettings,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_connections_per_client: 128,
            reserved_for_health: 32,
            rate: RateSettings::default(),
        }
    }
}

/// The path a connection admitted on the reserve may ask for.
pub const HEALTH_PATH: &str = "/v1/health";

/// How long a `429 Too Many Requests` is held before it is sent. A client over its rate limit
/// that asks again at once would otherwise turn the refusals themselves into the flood (each
/// costs the parse and the token check); held, one connection asks at most four times a second.
/// A well-behaved client waits `Retry-After` (at least a second) anyway.
pub const RATE_LIMITED_PAUSE: Duration = Duration::from_millis(250);

/// Adds the per-request limits to `app`: the request timeout, the early body-size check, the
/// pause before a 429, and the rule of reserved connections (health only).
pub fn limit_requests(app: Router, limits: &ListenerLimits) -> Router {
    app.layer(middleware::from_fn(pace_refusals))
        .layer(middleware::from_fn(refuse_large_bodies))
        .layer(middleware::from_fn_with_state(
            limits.request_timeout,
            answer_within,
        ))
        .layer(middleware::from_fn(health_only_on_the_reserve))
}

async fn health_only_on_the_reserve(request: Request, next: Next) -> Response {
    if request.extensions().get::<Part>() != Some(&Part::Reserve) {
        return next.run(request).await;
    }
    let mut response = if request.uri().path() == HEALTH_PATH {
        next.run(request).await
    } else {
        ApiError::Unavailable("the server is at its connection limit: try again shortly".to_owned())
            .into_response()
    };
    // The reserve is for one probe at a time, not for keeping.
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

async fn answer_within(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout(format!(
            "the request was not answered within {}s",
            limit.as_secs_f64()
        ))
        .into_response(),
    }
}

async fn pace_refusals(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() == axum::http::StatusCode::TOO_MANY_REQUESTS {
        // Transport pacing, not domain time: the real clock, like the header timeout.
        tokio::time::sleep(RATE_LIMITED_PAUSE).await;
    }
    response
}

/// A declared length over the limit is refused before any of the body is read; a chunked body
/// is cut off at the limit by the JSON extractor, with the same answer.
async fn refuse_large_bodies(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > MAX_BODY_BYTES as u64 => too_large().into_response(),
        _ => next.run(request).await,
    }
}

/// The answer to a body over [`MAX_BODY_BYTES`].
pub fn too_large() -> ApiError {
    ApiError::TooLarge(format!(
        "the request body is larger than {} KiB",
        MAX_BODY_BYTES / 1024
    ))
}

/// Sets the protocol timeouts on a server's HTTP builder (axum-server installs the timer they
/// need). The header timeout also bounds how long an idle keep-alive connection is kept, and an
/// HTTP/2 connection whose peer stops answering pings is closed.
macro_rules! configure {
    ($server:ident, $limits:ident) => {{
        let builder = $server.http_builder();
        builder.http1().header_read_timeout($limits.header_timeout);
        builder
            .http2()
            .keep_alive_interval($limits.header_timeout)
            .keep_alive_timeout($limits.header_timeout);
    }};
}

/// Serves `app` on an already-bound listener (so tests can bind port 0) within `limits` until
/// `shutdown` resolves, then stops accepting and gives in-flight requests up to `drain`.
pub async fn serve(
    listener: std::net::TcpListener,
    app: Router,
    tls: Option<RustlsConfig>,
    limits: ListenerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> io::Result<()> {
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    let handle = axum_server::Handle::new();
    tokio::spawn(graceful(handle.clone(), shutdown, drain));
    let cap = ConnectionCap::new(&limits);
    let server = axum_server::from_tcp(listener)?
        .handle(handle)
        .first_request_timeout(limits.header_timeout)
        .accept_error_handler(|_, err| tracing::debug!(error = %err, "connection refused"));
    match tls {
        Some(config) => {
            let acceptor = RustlsAcceptor::new(config)
                .handshake_timeout(limits.header_timeout)
                .acceptor(cap);
            let mut server = server.acceptor(acceptor);
            configure!(server, limits);
            server.serve(service).await
        }
        None => {
            let mut server = server.acceptor(cap);
            configure!(server, limits);
            server.serve(service).await
        }
    }
}

async fn graceful<A: axum_server::Address>(
    handle: axum_server::Handle<A>,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    shutdown.await;
    tracing::info!(
        drain_seconds = drain.as_secs(),
        "shutting down: no new connections, draining in-flight requests"
    );
    handle.graceful_shutdown(Some(drain));
}
