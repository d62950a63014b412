//! The HTTP target `serve` calls back: its own process (the bench binary run with `--target`),
//! so its CPU is measured apart from the bench. Three listeners on loopback: `fast` answers 200
//! at once, `slow` after one second, `hang` never. Each request is printed on standard output
//! as one line when it arrives, before it is answered; the bench reads the lines back as
//! [`Arrival`]s. HTTP/1.1 and HTTP/2 without TLS (prior knowledge) are both served.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use crate::now_micros;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Fast,
    Slow,
    Hang,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fast => "fast",
            Kind::Slow => "slow (answers in 1 s)",
            Kind::Hang => "never answering",
        }
    }
}

/// One request as the target saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at_us: i64,
    pub http2: bool,
    pub peer_port: u16,
    pub schedule_id: String,
    pub scheduled_for_us: i64,
    /// The `Idempotency-Key` header: one per job.
    pub key: String,
    /// The envelope's attempt number.
    pub attempt: i32,
}

/// The part of the envelope the bench reads.
#[derive(Deserialize)]
struct Envelope {
    schedule_id: String,
    scheduled_for: DateTime<Utc>,
    attempt: i32,
}

type Lines = mpsc::UnboundedSender<String>;

async fn handle(
    State((kind, lines)): State<(Kind, Lines)>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    let at = now_micros();
    let http2 = request.version() == axum::http::Version::HTTP_2;
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    let Ok(body) = axum::body::to_bytes(request.into_body(), 1 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Ok(envelope) = serde_json::from_slice::<Envelope>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let _ = lines.send(format!(
        "{at} {} {} {} {} {} {}\n",
        u8::from(http2),
        peer.port(),
        envelope.schedule_id,
        envelope.scheduled_for.timestamp_micros(),
        key,
        envelope.attempt
    ));
    match kind {
        Kind::Fast => {}
        Kind::Slow => tokio::time::sleep(Duration::from_secs(1)).await,
        Kind::Hang => std::future::pending::<()>().await,
    }
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        "{\"ok\":true}",
    )
        .into_response()
}

/// The target process: binds the three listeners, prints `ports FAST SLOW HANG`, then one line
/// per request until it is killed.
pub async fn run_process() -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let mut ports = Vec::new();
    for kind in [Kind::Fast, Kind::Slow, Kind::Hang] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        ports.push(listener.local_addr()?.port());
        let app = Router::new()
            .route("/v1/internal/schedules/run", post(handle))
            .with_state((kind, tx.clone()));
        tokio::spawn(async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
        });
    }
    // Standard output is written from a thread of its own (blocking writes).
    let writer = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        use std::io::Write as _;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        writeln!(out, "ports {} {} {}", ports[0], ports[1], ports[2])?;
        out.flush()?;
        while let Some(line) = rx.blocking_recv() {
            out.write_all(line.as_bytes())?;
            // Write what has queued up, then flush once.
            while let Ok(more) = rx.try_recv() {
                out.write_all(more.as_bytes())?;
            }
            out.flush()?;
        }
        Ok(())
    });
    drop(tx);
    writer.await??;
    Ok(())
}

fn parse(line: &str) -> Option<Arrival> {
    let mut f = line.split(' ');
    Some(Arrival {
        at_us: f.next()?.parse().ok()?,
        http2: f.next()? == "1",
        peer_port: f.next()?.parse().ok()?,
        schedule_id: f.next()?.to_owned(),
        scheduled_for_us: f.next()?.parse().ok()?,
        key: f.next()?.to_owned(),
        attempt: f.next()?.parse().ok()?,
    })
}

/// The running target process, seen from the bench.
pub struct Target {
    /// Killed when the bench ends (`kill_on_drop`).
    _process: Child,
    pub pid: u32,
    pub fast: u16,
    pub slow: u16,
    pub hang: u16,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Target {
    pub async fn start() -> anyhow::Result<Target> {
        let exe = std::env::current_exe().context("cannot find the bench executable")?;
        let mut child = Command::new(exe)
            .arg("--target")
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start the target process")?;
        let pid = child.id().context("target exited at once")?;
        let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("the target did not start within 30 s")??
            .context("the target exited before listening")?;
        let ports: Vec<u16> = first
            .strip_prefix("ports ")
            .map(|p| p.split(' ').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default();
        if ports.len() != 3 {
            bail!("unexpected first line from the target: {first:?}");
        }
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let sink = arrivals.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(arrival) = parse(&line) {
                    sink.lock().unwrap().push(arrival);
                }
            }
        });
        Ok(Target {
            _process: child,
            pid,
            fast: ports[0],
            slow: ports[1],
            hang: ports[2],
            arrivals,
        })
    }

    pub fn port(&self, kind: Kind) -> u16 {
        match kind {
            Kind::Fast => self.fast,
            Kind::Slow => self.slow,
            Kind::Hang => self.hang,
        }
    }

    pub fn base_url(&self, kind: Kind) -> String {
        format!("http://127.0.0.1:{}", self.port(kind))
    }

    /// Every origin, for the egress allow list.
    pub fn allow_list(&self) -> String {
        [Kind::Fast, Kind::Slow, Kind::Hang]
            .map(|k| self.base_url(k))
            .join(",")
    }

    /// Takes the arrivals recorded so far (the next call starts empty).
    pub fn take(&self) -> Vec<Arrival> {
        std::mem::take(&mut *self.arrivals.lock().unwrap())
    }
}
