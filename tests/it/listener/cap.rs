//! The connection cap on a real listener: a client cannot hold more than its share; at a full
//! cap the connection that has waited longest (no complete request head yet, or idle between
//! requests) is closed for a newcomer, so a flood of waiting connections from many addresses
//! cannot keep out a probe or a client; a connection whose request is being answered keeps its
//! slot; only when every slot is busy is a newcomer closed, and then the reserve still takes
//! health probes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sentin8_cron::server::listener::ListenerLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{address, closed_within, start};

/// A route whose requests stay in flight until released: a busy connection at will.
#[derive(Clone)]
struct Hold {
    arrived: Arc<watch::Sender<usize>>,
    open: Arc<watch::Sender<bool>>,
}

impl Hold {
    fn route() -> (axum::Router, Hold) {
        let hold = Hold {
            arrived: Arc::new(watch::channel(0).0),
            open: Arc::new(watch::channel(false).0),
        };
        let held = hold.clone();
        let router = axum::Router::new().route(
            "/hold",
            axum::routing::get(move || {
                let held = held.clone();
                async move {
                    let mut open = held.open.subscribe();
                    held.arrived.send_modify(|n| *n += 1);
                    let _ = open.wait_for(|open| *open).await;
                    "released"
                }
            }),
        );
        (router, hold)
    }

    /// Waits until `count` requests are in flight on the route.
    async fn arrived(&self, count: usize) {
        let mut arrived = self.arrived.subscribe();
        let waited =
            tokio::time::timeout(Duration::from_secs(20), arrived.wait_for(|n| *n >= count));
        assert!(waited.await.is_ok(), "{count} held requests did not arrive");
    }

    fn release(&self) {
        self.open.send_replace(true);
    }
}

/// A connection from `source` (a loopback address of its own, so each is another client).
async fn connect_from(source: [u8; 4], addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((source, 0)))?;
    socket.connect(addr).await
}

/// A request sent on a new connection from `source`, not yet read.
async fn sent(source: [u8; 4], addr: SocketAddr, path: &str, token: Option<&str>) -> TcpStream {
    let mut stream = connect_from(source, addr).await.unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// Reads one answer's first bytes (empty when the server closed the connection unanswered).
async fn answer_on(stream: &mut TcpStream) -> String {
    let mut chunk = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut chunk)).await;
    let n = read.expect("an answer or a close in time").unwrap_or(0);
    String::from_utf8_lossy(&chunk[..n]).into_owned()
}

/// One request on a connection of its own, kept alive; the answer, and whether the server
/// closed the connection after it.
async fn one_request(source: [u8; 4], addr: SocketAddr, path: &str) -> (String, bool) {
    let mut stream = sent(source, addr, path, None).await;
    let answer = answer_on(&mut stream).await;
    // A kept-alive connection stays open for the header timeout, far beyond this bound.
    let closed = closed_within(&mut stream, Duration::from_secs(2))
        .await
        .is_some();
    (answer, closed)
}

/// How many of `streams` the server closes within 5 s, watched together.
async fn closed_among(streams: &mut [TcpStream]) -> usize {
    let watched = streams
        .iter_mut()
        .map(|stream| closed_within(stream, Duration::from_secs(5)));
    futures_util::future::join_all(watched)
        .await
        .iter()
        .filter(|closed| closed.is_some())
        .count()
}

fn limits(max: usize, per_client: usize, reserve: usize) -> ListenerLimits {
    ListenerLimits {
        // Waiting connections are never closed by the timeout within a test.
        header_timeout: Duration::from_secs(60),
        max_connections: max,
        max_connections_per_client: per_client,
        reserved_for_health: reserve,
        ..ListenerLimits::default()
    }
}

const CLIENT: [u8; 4] = [127, 0, 0, 3];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_is_closed_only_when_every_slot_is_busy() {
    let (route, hold) = Hold::route();
    let api = start(limits(3, 128, 0), route).await;
    let addr = address(&api);
    let mut busy = Vec::new();
    for _ in 0..3 {
        busy.push(sent(CLIENT, addr, "/hold", None).await);
    }
    hold.arrived(3).await;
    let mut extra = sent(CLIENT, addr, "/v1/health", None).await;
    assert_eq!(
        answer_on(&mut extra).await,
        "",
        "the fourth is closed unanswered"
    );

    hold.release();
    for stream in &mut busy {
        let answer = answer_on(stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // The three are idle now, and give way to a new connection.
    let (answer, _) = one_request(CLIENT, addr, "/v1/health").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_more_than_its_share() {
    let api = start(limits(24, 8, 4), axum::Router::new()).await;
    let addr = address(&api);
    const ATTACKER: [u8; 4] = [127, 0, 0, 2];
    // One client opens 30 connections that never finish a request head: 8 stay open, the
    // rest are closed at once, unanswered.
    let mut slow = Vec::new();
    for _ in 0..30 {
        let mut stream = connect_from(ATTACKER, addr).await.unwrap();
        let _ = stream
            .write_all(b"GET /v1/health HTTP/1.1\r\nX-Slow: 1\r\n")
            .await;
        slow.push(stream);
    }
    // Watched together, for well under the header timeout that would close the rest.
    let closed = closed_among(&mut slow).await;
    assert_eq!(closed, 22, "all but the client's share are closed");
    let (answer, _) = one_request(CLIENT, addr, "/v1/schedules").await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_general_slot_is_busy_the_reserve_answers_health_only() {
    let (route, hold) = Hold::route();
    // 6 general slots, 2 reserved.
    let api = start(limits(8, 128, 2), route).await;
    let addr = address(&api);
    let mut busy = Vec::new();
    for _ in 0..6 {
        busy.push(sent(CLIENT, addr, "/hold", None).await);
    }
    hold.arrived(6).await;
    // A probe is answered on the reserve and its connection closed after the answer; anything
    // else there is a 503.
    for _ in 0..3 {
        let (answer, closed) = one_request(CLIENT, addr, "/v1/health").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(closed, "a reserved connection is closed after its answer");
    }
    let (refused, closed) = one_request(CLIENT, addr, "/v1/schedules").await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("connection limit"), "{refused}");
    assert!(closed);

    hold.release();
    for stream in &mut busy {
        let answer = answer_on(stream).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let (answer, closed) = one_request(CLIENT, addr, "/v1/schedules").await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(!closed, "on the general part again: kept alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_waiting_connections_from_many_addresses_gives_way_to_probes_and_clients() {
    let (route, hold) = Hold::route();
    // 36 general slots and 4 reserved, 8 per client: the flood below stays within every
    // client's share and still outnumbers the cap.
    let api = start(limits(40, 8, 4), route).await;
    let addr = address(&api);
    let token = api.writer();
    // A request in flight before the flood: it must keep its connection.
    let mut busy = sent(CLIENT, addr, "/hold", None).await;
    hold.arrived(1).await;

    // 10 addresses x 6: half never finish their request head, half are answered once and
    // then sit idle on the kept-alive connection.
    let mut flood = Vec::new();
    for address_no in 10..20u8 {
        for i in 0..6 {
            let source = [127, 0, 0, address_no];
            let Ok(mut stream) = connect_from(source, addr).await else {
                continue;
            };
            if i % 2 == 0 {
                let _ = stream
                    .write_all(b"GET /v1/health HTTP/1.1\r\nX-Slow: 1\r\n")
                    .await;
            } else {
                let _ = stream
                    .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await;
            }
            flood.push(stream);
        }
    }

    // Probes and a client's API requests, each on a new connection: all answered.
    let schedules = format!("/v1/schedules?target_env_id={}", api.env_a);
    for _ in 0..10 {
        let mut probe = sent(CLIENT, addr, "/v1/health", None).await;
        let answer = answer_on(&mut probe).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "probe: {answer:?}");
        let mut call = sent(CLIENT, addr, &schedules, Some(&token)).await;
        let answer = answer_on(&mut call).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "API: {answer:?}");
    }

    // The flood's connections gave way: at least those beyond the cap, and one for each new
    // connection above that stays open.
    let closed = closed_among(&mut flood).await;
    assert!(
        closed >= 60 - 35,
        "only {closed} of 60 waiting connections closed"
    );

    hold.release();
    let answer = answer_on(&mut busy).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the busy request: {answer:?}"
    );
}
