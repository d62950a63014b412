//! The hardened listener through the real `Service` on port 0: half-open connections are closed
//! after the header timeout while the API keeps answering, slow requests get a 503, oversized
//! bodies a 413, and `/metrics` can live on its own listener. The connection cap: [`cap`].

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use sentin8_cron::server::listener::ListenerLimits;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::api::Api;

mod cap;

/// Long enough for any loaded test machine; only a server that never closes exceeds it.
const CLOSE_BOUND: Duration = Duration::from_secs(20);

fn limits(header_timeout: Duration) -> ListenerLimits {
    ListenerLimits {
        header_timeout,
        ..ListenerLimits::default()
    }
}

async fn start(limits: ListenerLimits, extra: axum::Router) -> Api {
    let store = crate::support::sqlite_store().await;
    Api::start_listening(store, extra, false, None, limits, None).await
}

fn address(api: &Api) -> SocketAddr {
    api.base
        .trim_start_matches("http://")
        .parse()
        .expect("the base is an address")
}

/// Reads until the server closes the connection; `None` when it stays open past the bound.
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(bound, async {
        let mut chunk = [0u8; 1024];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_connections_are_closed_after_the_header_timeout_while_health_answers() {
    let api = start(limits(Duration::from_secs(1)), axum::Router::new()).await;
    let addr = address(&api);
    // Nothing at all, half a request line, and a head without its final blank line.
    let partials: [&[u8]; 3] = [
        b"",
        b"GET /v1/hea",
        b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n",
    ];
    let mut open = Vec::new();
    for i in 0..50 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(partials[i % partials.len()])
            .await
            .unwrap();
        open.push(stream);
    }

    let (status, health) = health_on_a_new_connection(&api).await;
    assert_eq!(status, StatusCode::OK, "{health}");

    for (i, stream) in open.iter_mut().enumerate() {
        let received = closed_within(stream, CLOSE_BOUND).await;
        assert!(
            received.is_some(),
            "connection {i} was still open after {CLOSE_BOUND:?}"
        );
    }
    // The server still serves new connections afterwards.
    let (status, health) = health_on_a_new_connection(&api).await;
    assert_eq!(status, StatusCode::OK, "{health}");
}

/// `GET /v1/health` on a connection of its own: a pooled keep-alive connection may be one the
/// server has just closed for idling past the header timeout (the behaviour under test), which
/// would fail the request for a reason that is not the one tested.
async fn health_on_a_new_connection(api: &Api) -> (StatusCode, String) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let response = client
        .get(format!("{}/v1/health", api.base))
        .header(reqwest::header::CONNECTION, "close")
        .send()
        .await
        .expect("health answers on a new connection");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_request_is_served_on_a_connection_that_paused_within_the_timeout() {
    let api = start(limits(Duration::from_secs(5)), axum::Router::new()).await;
    let mut stream = TcpStream::connect(address(&api)).await.unwrap();
    stream
        .write_all(b"GET /v1/health HTTP/1.1\r\n")
        .await
        .unwrap();
    tokio::task::yield_now().await;
    stream
        .write_all(b"Host: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let received = closed_within(&mut stream, CLOSE_BOUND).await.unwrap();
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

fn assert_problem(status: StatusCode, body: &Value, expected: StatusCode, kind: &str) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(
        body["type"],
        format!("urn:sentin8-cron:problem:{kind}"),
        "{body}"
    );
    assert_eq!(body["status"], expected.as_u16(), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413_whether_declared_or_streamed() {
    let api = start(ListenerLimits::default(), axum::Router::new()).await;
    let mut schedule = api.new_schedule(api.env_a, "too-big");
    schedule["payload"] = json!({"blob": "x".repeat(300 * 1024)});

    // Declared by Content-Length: refused before the body is read (no token needed to tell).
    let (status, body, headers) = api
        .call(Method::POST, "/v1/schedules", None, Some(schedule.clone()))
        .await;
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE, "too-large");
    assert_eq!(headers["content-type"], "application/problem+json");

    // Chunked, with no declared length: cut off at the limit while it is read.
    let text = serde_json::to_string(&schedule).unwrap();
    let mut stream = TcpStream::connect(address(&api)).await.unwrap();
    let head = format!(
        "POST /v1/schedules HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n",
        api.writer()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in text.as_bytes().chunks(16 * 1024) {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        if stream.write_all(&framed).await.is_err() {
            break; // the server may answer and close before the whole body is sent
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let received = closed_within(&mut stream, CLOSE_BOUND).await.unwrap();
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(
        text.contains("urn:sentin8-cron:problem:too-large"),
        "{text}"
    );
    let stats = api.store.stats_get().await.unwrap();
    assert_eq!(stats.schedules_active, 0, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_answered_in_time_is_503() {
    let slow = axum::Router::new().route(
        "/slow",
        axum::routing::get(|| async {
            std::future::pending::<()>().await;
            "never"
        }),
    );
    let limits = ListenerLimits {
        request_timeout: Duration::from_secs(1),
        ..ListenerLimits::default()
    };
    let api = start(limits, slow).await;
    let (status, body, headers) = api.call(Method::GET, "/slow", None, None).await;
    assert_problem(status, &body, StatusCode::SERVICE_UNAVAILABLE, "timeout");
    assert_eq!(headers["content-type"], "application/problem+json");
    let (status, _, _) = api.call(Method::GET, "/v1/health", None, None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_their_own_listener_are_not_on_the_main_one() {
    let store = crate::support::sqlite_store().await;
    let metrics_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics_addr = metrics_listener.local_addr().unwrap();
    let api = Api::start_listening(
        store,
        axum::Router::new(),
        false,
        None,
        ListenerLimits::default(),
        Some(metrics_listener),
    )
    .await;

    let response = api
        .http
        .get(format!("http://{metrics_addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    assert!(text.contains("sentin8_cron_fires_total"), "{text}");

    let (status, body, _) = api.call(Method::GET, "/metrics", None, None).await;
    assert_problem(status, &body, StatusCode::NOT_FOUND, "not-found");
    // And the main listener's document does not promise it.
    let (status, doc, _) = api.call(Method::GET, "/v1/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["paths"]["/metrics"].is_null(), "{}", doc["paths"]);
    assert!(doc["paths"]["/v1/health"].is_object());
    // The separate listener is the operator's: health with its detail, and nothing else.
    let response = api
        .http
        .get(format!("http://{metrics_addr}/v1/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let health: Value = response.json().await.unwrap();
    assert_eq!(health["status"], "ok", "{health}");
    assert!(health["counts"].is_object(), "{health}");
    let response = api
        .http
        .get(format!("http://{metrics_addr}/v1/schedules"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}
