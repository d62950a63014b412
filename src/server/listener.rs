//! The listener: serving the application on a bound socket (plain or TLS) with limits that keep
//! a client, authenticated or not, from holding the server's connections or memory. A
//! connection must finish its request head within the header timeout (the first request
//! includes protocol detection and, on TLS, follows a bounded handshake); a request gets the
//! request timeout to be answered (503 otherwise); a body over the limit is a 413 before it is
//! read.
//!
//! Connections: at most `max_connections` are open at once, and at most
//! `max_connections_per_client` from one client (an IPv4 address, or an IPv6 /64, which one
//! host usually holds whole); further ones are closed as soon as they are accepted, so no file
//! descriptor waits on them. The last `reserved_for_health` of the cap are a reserve: a
//! connection admitted there (because the rest are taken) may ask for `/v1/health` only, and is
//! closed after its answer, so a probe still gets through while the server is full.

use std::collections::HashMap;
use std::future::{Future, Ready};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum_server::accept::Accept;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::MAX_BODY_BYTES;
use super::error::ApiError;
use super::rate::RateSettings;

mod refusals;

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
    /// Of `max_connections`, the ones kept for `/v1/health` when the rest are taken.
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

/// How a connection was admitted (a request extension set by the acceptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admission {
    /// Within the general part of the cap.
    General,
    /// On the reserve kept for health probes.
    Reserve,
}

async fn health_only_on_the_reserve(request: Request, next: Next) -> Response {
    if request.extensions().get::<Admission>() != Some(&Admission::Reserve) {
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

/// Admits a connection within the cap and its client's share, on the general part or the
/// reserve; what it holds is given back when its stream is dropped.
#[derive(Clone)]
struct ConnectionCap {
    general: Arc<Semaphore>,
    reserve: Arc<Semaphore>,
    per_client: usize,
    clients: Arc<Mutex<HashMap<ClientKey, usize>>>,
    refusals: Arc<Mutex<refusals::RefusalTally>>,
}

/// Who a client is, for its share of the connections: an IPv4 address, or the /64 of an IPv6
/// address (an IPv4-mapped IPv6 address counts as its IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    V4(Ipv4Addr),
    V6Net(u64),
}

impl ClientKey {
    fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => ClientKey::V4(v4),
            IpAddr::V6(v6) => ClientKey::V6Net((v6.to_bits() >> 64) as u64),
        }
    }
}

impl ConnectionCap {
    fn new(limits: &ListenerLimits) -> Self {
        let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
        // The reserve never takes the whole cap.
        let reserve = limits.reserved_for_health.min(max / 2);
        Self {
            general: Arc::new(Semaphore::new(max - reserve)),
            reserve: Arc::new(Semaphore::new(reserve)),
            per_client: limits.max_connections_per_client.max(1),
            clients: Arc::default(),
            refusals: Arc::default(),
        }
    }

    fn admit(&self, peer: Option<IpAddr>) -> io::Result<(Admission, Held)> {
        let client = peer.map(ClientKey::of);
        let share = match client {
            Some(key) => {
                let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
                let open = clients.entry(key).or_default();
                if *open >= self.per_client {
                    tracing::debug!(client = ?key, "per-client connection limit reached: a new connection was closed");
                    return Err(io::Error::other("per-client connection limit reached"));
                }
                *open += 1;
                Some(ClientShare {
                    key,
                    clients: self.clients.clone(),
                })
            }
            None => None,
        };
        let (admission, permit) = match self.general.clone().try_acquire_owned() {
            Ok(permit) => (Admission::General, permit),
            Err(_) => match self.reserve.clone().try_acquire_owned() {
                Ok(permit) => (Admission::Reserve, permit),
                Err(_) => {
                    let tell = self
                        .refusals
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .refused(std::time::Instant::now());
                    if let Some(closed) = tell {
                        tracing::warn!(
                            closed,
                            "connection limit reached: new connections closed (one line per 10 s at most; `closed` counts them since the last)"
                        );
                    }
                    // `share` is dropped here, giving the client's count back.
                    return Err(io::Error::other("connection limit reached"));
                }
            },
        };
        Ok((
            admission,
            Held {
                _permit: permit,
                _share: share,
            },
        ))
    }
}

/// One connection's count in its client's share.
struct ClientShare {
    key: ClientKey,
    clients: Arc<Mutex<HashMap<ClientKey, usize>>>,
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = clients.get_mut(&self.key) {
            *open -= 1;
            if *open == 0 {
                clients.remove(&self.key);
            }
        }
    }
}

/// What an admitted connection holds while its stream lives.
struct Held {
    _permit: OwnedSemaphorePermit,
    _share: Option<ClientShare>,
}

/// A stream whose peer address is known (the TCP stream an acceptor is given).
pub trait PeerAddress {
    fn peer_ip(&self) -> Option<IpAddr>;
}

impl PeerAddress for tokio::net::TcpStream {
    fn peer_ip(&self) -> Option<IpAddr> {
        self.peer_addr().ok().map(|a| a.ip())
    }
}

impl<I: PeerAddress, S> Accept<I, S> for ConnectionCap {
    type Stream = Counted<I>;
    type Service = Admitted<S>;
    type Future = Ready<io::Result<(Counted<I>, Admitted<S>)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        std::future::ready(self.admit(stream.peer_ip()).map(|(admission, held)| {
            (
                Counted {
                    inner: stream,
                    _held: held,
                },
                Admitted {
                    inner: service,
                    admission,
                },
            )
        }))
    }
}

/// A connection's service, marking each request with how the connection was admitted.
#[derive(Clone)]
pub struct Admitted<S> {
    inner: S,
    admission: Admission,
}

impl<S, B> tower_service::Service<axum::http::Request<B>> for Admitted<S>
where
    S: tower_service::Service<axum::http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.admission);
        self.inner.call(request)
    }
}

/// A stream holding its connection's admission.
pub struct Counted<I> {
    inner: I,
    _held: Held,
}
impl<I: AsyncRead + Unpin> AsyncRead for Counted<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Counted<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
