//! HTTPS: `serve` over rustls prefers the post-quantum hybrid key exchange (X25519MLKEM768),
//! still serves clients that only speak classical groups, and negotiates HTTP/2.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use sentin8_cron::core::clock::SystemClock;
use sentin8_cron::core::engine::EngineConfig;
use sentin8_cron::core::metrics::Metrics;
use sentin8_cron::daemon::Service;
use sentin8_cron::server::auth::DevTokenAuthenticator;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::engine::dispatcher;

struct TlsServer {
    addr: std::net::SocketAddr,
    cert: CertificateDer<'static>,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn start() -> TlsServer {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert_path = dir.path().join("cert.pem");
    let key_path = dir.path().join("key.pem");
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();

    let tls = sentin8_cron::server::tls::rustls_config(&cert_path, &key_path).unwrap();
    let store = crate::support::sqlite_store().await;
    let clock = Arc::new(SystemClock);
    let (auth, _token) = DevTokenAuthenticator::generate();
    let service = Service {
        store,
        auth: Arc::new(auth),
        dispatcher: dispatcher(clock.clone(), Duration::from_secs(5)),
        clock,
        engine: EngineConfig::default(),
        metrics: Arc::new(Metrics::default()),
        tls: Some(tls),
        drain: Duration::from_secs(2),
        run_ticker: false,
        relay: None,
        extra_routes: axum::Router::new(),
        limits: Default::default(),
        stats: Default::default(),
        metrics_listener: None,
        target_policy: Arc::new(crate::support::dev_egress()),
        jwks: None,
        health: Default::default(),
        retention: None,
        waiting_cap: sentin8_cron::core::ops::DEFAULT_WAITING_CAP,
        spans: None,
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    tokio::spawn(service.run(listener, async move {
        let _ = stopped.await;
    }));
    TlsServer {
        addr,
        cert: cert.der().clone(),
        _dir: dir,
        stop: Some(stop),
    }
}

fn client(
    server: &TlsServer,
    provider: rustls::crypto::CryptoProvider,
    alpn: &[&[u8]],
) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    roots.add(server.cert.clone()).unwrap();
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

#[tokio::test]
async fn https_prefers_the_hybrid_post_quantum_key_exchange_and_http2() {
    let server = start().await;
    let connector = client(
        &server,
        rustls::crypto::aws_lc_rs::default_provider(),
        &[b"h2", b"http/1.1"],
    );
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (_, session) = tls.get_ref();
    let group = session
        .negotiated_key_exchange_group()
        .expect("a key exchange happened");
    assert_eq!(format!("{:?}", group.name()), "X25519MLKEM768");
    assert_eq!(session.alpn_protocol(), Some(&b"h2"[..]));
}

#[tokio::test]
async fn classical_clients_fall_back_and_are_served() {
    let server = start().await;
    let mut classical = rustls::crypto::aws_lc_rs::default_provider();
    classical.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let connector = client(&server, classical, &[b"http/1.1"]);
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let group = tls.get_ref().1.negotiated_key_exchange_group().unwrap();
    assert_eq!(format!("{:?}", group.name()), "X25519");
    tls.write_all(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tls.read_to_string(&mut response).await.ok();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"status\":\"ok\""), "{response}");
}
