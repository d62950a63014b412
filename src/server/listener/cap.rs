//! Admission at accept time: the client's share, then a slot of the cap from the [`Pool`]
//! (closing the connection that gave its slot away), and the stream and service wrappers that
//! tell the pool when the connection is busy and close it when it is evicted.

use std::collections::HashMap;
use std::future::{Future, Ready};
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::Response;
use axum_server::accept::Accept;
use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::ListenerLimits;
use super::pool::{ConnId, Part, Pool};
use super::refusals::{AtCap, RefusalTally, Untold};

/// Admits a connection within its client's share and the cap; what it holds is given back when
/// its stream is dropped.
#[derive(Clone)]
pub(super) struct ConnectionCap {
    slots: Arc<Mutex<Slots>>,
    per_client: usize,
    clients: Arc<Mutex<HashMap<ClientKey, usize>>>,
    refusals: Arc<Mutex<RefusalTally>>,
}

/// The pool, and how to close each connection in it.
struct Slots {
    pool: Pool,
    closers: HashMap<ConnId, Arc<Closer>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
    pub(super) fn new(limits: &ListenerLimits) -> Self {
        let max = limits.max_connections.max(1);
        // The reserve never takes the whole cap.
        let reserve = limits.reserved_for_health.min(max / 2);
        Self {
            slots: Arc::new(Mutex::new(Slots {
                pool: Pool::new(max - reserve, reserve),
                closers: HashMap::new(),
            })),
            per_client: limits.max_connections_per_client.max(1),
            clients: Arc::default(),
            refusals: Arc::default(),
        }
    }

    fn admit(&self, peer: Option<IpAddr>) -> io::Result<Held> {
        let client = peer.map(ClientKey::of);
        let share = match client {
            Some(key) => {
                let mut clients = lock(&self.clients);
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
        let mut slots = lock(&self.slots);
        let Some(admitted) = slots.pool.admit() else {
            drop(slots);
            self.tell(AtCap::Refused);
            // `share` is dropped here, giving the client's count back.
            return Err(io::Error::other("connection limit reached"));
        };
        if let Some(victim) = admitted.evicted {
            if let Some(closer) = slots.closers.remove(&victim) {
                closer.close();
            }
            drop(slots);
            self.tell(AtCap::GaveWay);
            slots = lock(&self.slots);
        }
        let closer = Arc::new(Closer::default());
        slots.closers.insert(admitted.id, closer.clone());
        Ok(Held {
            id: admitted.id,
            part: admitted.part,
            closer,
            slots: self.slots.clone(),
            _share: share,
        })
    }
}

impl ConnectionCap {
    /// Counts a close at the full cap, and warns once an interval with the counts.
    fn tell(&self, what: AtCap) {
        let told = lock(&self.refusals).count(what, std::time::Instant::now());
        if let Some(Untold { refused, gave_way }) = told {
            tracing::warn!(
                refused,
                gave_way,
                "connection limit reached: new connections refused while every connection was busy, and waiting ones closed for new ones (one line per 10 s at most, counting both since the last)"
            );
        }
    }
}

/// Closes a connection from outside its task: the next read of its stream fails, and the stream
/// is woken to make that read.
#[derive(Default)]
struct Closer {
    closed: AtomicBool,
    waker: AtomicWaker,
}

impl Closer {
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Whether the connection is closed; otherwise `cx` is woken when it is.
    fn poll_closed(&self, cx: &Context<'_>) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return true;
        }
        self.waker.register(cx.waker());
        self.closed.load(Ordering::Acquire)
    }
}

/// One connection's count in its client's share.
struct ClientShare {
    key: ClientKey,
    clients: Arc<Mutex<HashMap<ClientKey, usize>>>,
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        let mut clients = lock(&self.clients);
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
    id: ConnId,
    part: Part,
    closer: Arc<Closer>,
    slots: Arc<Mutex<Slots>>,
    _share: Option<ClientShare>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut slots = lock(&self.slots);
        slots.pool.closed(self.id);
        // An evicted connection's closer is already gone; a newer one never has its number.
        slots.closers.remove(&self.id);
    }
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
        std::future::ready(self.admit(stream.peer_ip()).map(|held| {
            let service = Admitted {
                inner: service,
                part: held.part,
                id: held.id,
                slots: held.slots.clone(),
            };
            (
                Counted {
                    inner: stream,
                    held,
                },
                service,
            )
        }))
    }
}

/// A connection's service: marks each request with the part of the cap its connection holds,
/// and keeps the connection busy in the pool until the response body is sent.
#[derive(Clone)]
pub struct Admitted<S> {
    inner: S,
    part: Part,
    id: ConnId,
    slots: Arc<Mutex<Slots>>,
}

/// The connection's request in flight, ended when dropped.
struct InFlight {
    id: ConnId,
    slots: Arc<Mutex<Slots>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.slots).pool.request_finished(self.id);
    }
}

impl<S, B> tower_service::Service<axum::http::Request<B>> for Admitted<S>
where
    S: tower_service::Service<axum::http::Request<B>, Response = Response>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> Self::Future {
        request.extensions_mut().insert(self.part);
        lock(&self.slots).pool.request_started(self.id);
        let in_flight = InFlight {
            id: self.id,
            slots: self.slots.clone(),
        };
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| {
                Body::new(Answering {
                    inner: body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A response body that keeps its connection busy until it is sent or dropped.
struct Answering {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for Answering {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A stream holding its connection's admission; a read fails once the connection is evicted.
pub struct Counted<I> {
    inner: I,
    held: Held,
}

impl<I: AsyncRead + Unpin> AsyncRead for Counted<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.held.closer.poll_closed(cx) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed while waiting, to admit a newer connection at the cap",
            )));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
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
