//! A deliberately dumb HTTP/1.1 server for contract tests: it parses the request line, headers
//! and a Content-Length body by hand, records what arrived and answers with canned replies.
//! Being hand-rolled, it shows exactly what goes over the wire, not what a framework infers.
//! One request per connection (`Connection: close`), so every request is also a connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// Requests larger than this are a test bug, not something to buffer.
const MAX_HEAD_LINES: usize = 100;
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The value of header `name` (case-insensitive), if it arrived exactly once.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let first = values.next()?;
        values.next().is_none().then_some(first.1.as_str())
    }

    /// The bearer token sent, if any.
    pub fn bearer(&self) -> Option<&str> {
        self.header("authorization")?.strip_prefix("Bearer ")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// What to answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        /// Send Content-Length; without it the body ends when the connection closes.
        content_length: bool,
    },
    /// Read the request, then never answer (and never close).
    Hang,
    /// Wait, then answer with the inner reply.
    After(std::time::Duration, Box<Reply>),
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self::Respond {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            content_length: true,
        }
    }

    pub fn json(status: u16, value: serde_json::Value) -> Self {
        Self::body(status, "application/json", value.to_string().into_bytes())
    }

    pub fn body(status: u16, content_type: &str, body: Vec<u8>) -> Self {
        Self::Respond {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body,
            content_length: true,
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Self::Respond { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }

    pub fn without_content_length(mut self) -> Self {
        if let Self::Respond { content_length, .. } = &mut self {
            *content_length = false;
        }
        self
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// A listening server on 127.0.0.1; stops when dropped.
pub struct RawServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// How many requests have arrived, for [`RawServer::arrived`].
    arrivals: Arc<tokio::sync::watch::Sender<usize>>,
    connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl RawServer {
    /// Starts a server answering every request with `handler`.
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let arrivals = Arc::new(tokio::sync::watch::Sender::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);

        let task = tokio::spawn({
            let requests = requests.clone();
            let arrivals = arrivals.clone();
            let connections = connections.clone();
            async move {
                // Owned here, so aborting the accept loop also ends every open connection.
                let mut conns = JoinSet::new();
                while let Ok((stream, _)) = listener.accept().await {
                    connections.fetch_add(1, Ordering::SeqCst);
                    conns.spawn(serve(
                        stream,
                        handler.clone(),
                        requests.clone(),
                        arrivals.clone(),
                    ));
                }
            }
        });
        Self {
            addr,
            requests,
            arrivals,
            connections,
            task,
        }
    }

    /// `http://127.0.0.1:<port>`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until at least `count` requests have arrived: woken by each arrival, not by
    /// looking again on the wall clock. Panics after 20 s.
    pub async fn arrived(&self, count: usize) {
        let mut arrivals = self.arrivals.subscribe();
        let waited = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            arrivals.wait_for(|n| *n >= count),
        )
        .await;
        if !matches!(waited, Ok(Ok(_))) {
            panic!(
                "{count} requests did not arrive within 20 s ({} did)",
                self.requests().len()
            );
        }
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    stream: TcpStream,
    handler: Arc<Handler>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    arrivals: Arc<tokio::sync::watch::Sender<usize>>,
) {
    let mut stream = BufReader::new(stream);
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let count = {
        let mut requests = requests.lock().unwrap();
        requests.push(request.clone());
        requests.len()
    };
    arrivals.send_replace(count);
    let mut reply = handler(&request);
    while let Reply::After(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    match reply {
        Reply::After(..) => unreachable!("unwrapped above"),
        Reply::Hang => std::future::pending::<()>().await,
        Reply::Respond {
            status,
            headers,
            body,
            content_length,
        } => {
            let mut head = format!("HTTP/1.1 {status} Canned\r\nconnection: close\r\n");
            for (name, value) in &headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            // A 204 must not carry a length.
            if content_length && status != 204 {
                head.push_str(&format!("content-length: {}\r\n", body.len()));
            }
            head.push_str("\r\n");
            let stream = stream.get_mut();
            // The client may hang up early (e.g. on an oversized body); that is not an error.
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = stream.shutdown().await;
        }
    }
}

async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<Recorded> {
    let mut line = String::new();
    stream.read_line(&mut line).await.ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();

    let mut headers = Vec::new();
    for _ in 0..MAX_HEAD_LINES {
        line.clear();
        stream.read_line(&mut line).await.ok()?;
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            break;
        }
        let (name, value) = trimmed.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }

    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(Some(0), |(_, v)| v.parse::<usize>().ok())?;
    if length > MAX_BODY {
        return None;
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}
