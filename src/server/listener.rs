//! The listener: serving the application on a bound socket (plain or TLS) with limits that keep
//! a client, authenticated or not, from holding the server's connections or memory. A
//! connection must finish its request head within the header timeout (the first request
//! includes protocol detection and, on TLS, follows a bounded handshake); a request gets the
//! request timeout to be answered (503 otherwise); at most `max_connections` connections are
//! open at once (further ones are closed as soon as they are accepted, so no file descriptor
//! waits on them); a body over the limit is a 413 before it is read.

use std::future::{Future, Ready};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
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

/// The listener's limits (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Time a connection gets to send a complete request head.
    pub header_timeout: Duration,
    /// Time a request gets to be answered, its body included.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

/// Adds the per-request limits to `app`: the request timeout and the early body-size check.
pub fn limit_requests(app: Router, limits: &ListenerLimits) -> Router {
    app.layer(middleware::from_fn(refuse_large_bodies))
        .layer(middleware::from_fn_with_state(
            limits.request_timeout,
            answer_within,
        ))
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
    let cap = ConnectionCap::new(limits.max_connections);
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

/// Admits a connection only while fewer than the cap are open; the permit lives as long as the
/// connection's stream.
#[derive(Clone)]
struct ConnectionCap {
    permits: Arc<Semaphore>,
}

impl ConnectionCap {
    fn new(max: usize) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS))),
        }
    }
}

impl<I, S> Accept<I, S> for ConnectionCap {
    type Stream = Counted<I>;
    type Service = S;
    type Future = Ready<io::Result<(Counted<I>, S)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        std::future::ready(match self.permits.clone().try_acquire_owned() {
            Ok(permit) => Ok((
                Counted {
                    inner: stream,
                    _permit: permit,
                },
                service,
            )),
            Err(_) => {
                tracing::warn!("connection limit reached: a new connection was closed");
                Err(io::Error::other("connection limit reached"))
            }
        })
    }
}

/// A stream holding one connection permit.
struct Counted<I> {
    inner: I,
    _permit: OwnedSemaphorePermit,
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
