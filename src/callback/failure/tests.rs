use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .unwrap()
}

/// Reads one request's head (up to the blank line).
async fn read_head(stream: &mut tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A listener answering every connection with `response`, verbatim.
async fn answering(response: Vec<u8>) -> u16 {
    serve(response, true).await
}

/// Like [`answering`]; `read_first: false` answers before reading anything.
async fn serve(response: Vec<u8>, read_first: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                if read_first {
                    read_head(&mut stream).await;
                }
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    port
}

fn assert_no_socket_text(class: &FailureClass) {
    let text = class.to_string().to_lowercase();
    for leak in [
        "os error",
        "127.0.0.1",
        "tcp",
        "hyper",
        "reqwest",
        "error sending",
    ] {
        assert!(!text.contains(leak), "{text:?} contains {leak:?}");
    }
}

#[tokio::test]
async fn a_closed_port_is_connection_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let err = client(Duration::from_secs(5))
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    let class = classify_error(&err);
    assert_eq!(class, FailureClass::ConnectionRefused);
    assert_eq!(class.to_string(), "connection refused");
    assert_no_socket_text(&class);
    // The operator's detail keeps the cause, without the URL.
    let detail = operator_detail(&err);
    assert!(detail.to_lowercase().contains("refused"), "{detail}");
    assert!(!detail.contains(&format!(":{port}")), "{detail}");
}

#[tokio::test]
async fn a_listener_that_never_answers_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts and reads, never answers.
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let err = client(Duration::from_millis(300))
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    let class = classify_error(&err);
    assert_eq!(class, FailureClass::Timeout);
    assert_eq!(class.to_string(), "timeout");
    held.abort();
}

#[tokio::test]
async fn a_503_with_a_long_body_is_status_with_a_512_byte_excerpt() {
    let mut body = b"upstream \x00 down\r\n\x1b[31m".to_vec();
    body.extend(std::iter::repeat_n(b'x', 4000));
    let mut response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    let port = answering(response).await;
    let resp = client(Duration::from_secs(5))
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let received = resp.bytes().await.unwrap();
    assert_eq!(received.len(), body.len());
    let class = classify_status(status, &received);
    let FailureClass::Status { code, excerpt } = &class else {
        panic!("{class:?}");
    };
    assert_eq!(*code, 503);
    assert!(excerpt.len() <= STATUS_EXCERPT_BYTES);
    assert!(excerpt.starts_with("upstream"), "{excerpt:?}");
    assert!(!excerpt.contains('\0') && !excerpt.contains('\x1b') && !excerpt.contains('\n'));
    let text = class.to_string();
    assert!(text.starts_with("status 503: upstream"), "{text}");
    assert!(text.len() <= "status 503: ".len() + STATUS_EXCERPT_BYTES);
}

#[tokio::test]
async fn tls_to_a_plain_listener_is_tls() {
    // A plain HTTP server answering the ClientHello with plain text.
    let port = serve(
        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n".to_vec(),
        false,
    )
    .await;
    let err = client(Duration::from_secs(5))
        .get(format!("https://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    let class = classify_error(&err);
    assert_eq!(class, FailureClass::Tls, "{}", operator_detail(&err));
    assert_eq!(class.to_string(), "tls");
}

#[tokio::test]
async fn an_untrusted_certificate_is_tls() {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(stream).await;
            });
        }
    });
    let err = client(Duration::from_secs(5))
        .get(format!("https://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();
    let class = classify_error(&err);
    assert_eq!(class, FailureClass::Tls, "{}", operator_detail(&err));
    assert_no_socket_text(&class);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_decode() {
    let port = answering(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\nnot json"
            .to_vec(),
    )
    .await;
    let err = client(Duration::from_secs(5))
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap_err();
    assert_eq!(classify_error(&err), FailureClass::Decode);
}

#[tokio::test]
async fn a_connection_closed_mid_response_is_connection_failed() {
    let port = answering(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial".to_vec()).await;
    let err = client(Duration::from_secs(5))
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap_err();
    let class = classify_error(&err);
    assert!(
        matches!(class, FailureClass::Connection | FailureClass::Decode),
        "{class:?}"
    );
    assert_no_socket_text(&class);
}

#[test]
fn an_invalid_request_is_configuration() {
    let err = reqwest::Client::new()
        .get("http://a.example/")
        .header("bad header", "x")
        .build()
        .unwrap_err();
    assert_eq!(classify_error(&err), FailureClass::Configuration);
}

#[test]
fn excerpts_cut_at_character_boundaries() {
    assert_eq!(excerpt("héllo".as_bytes(), 2), "h");
    assert_eq!(excerpt("héllo".as_bytes(), 3), "hé");
    assert_eq!(excerpt(b"  a\tb\0c  ", 100), "a b c");
    assert_eq!(excerpt(b"\xff\xfeok", 100), "\u{fffd}\u{fffd}ok");
    assert_eq!(excerpt(b"", 512), "");
    assert_eq!(
        classify_status(reqwest::StatusCode::BAD_GATEWAY, b"").to_string(),
        "status 502"
    );
}

#[test]
fn stored_results_are_capped_and_storable() {
    assert_eq!(
        stored_result(br#"{"ok":true}"#, DEFAULT_RESULT_CAP),
        json!({"ok": true})
    );
    assert_eq!(stored_result(b"", DEFAULT_RESULT_CAP), Value::Null);
    assert_eq!(stored_result(b" \n", DEFAULT_RESULT_CAP), Value::Null);

    let big = format!(r#"{{"data":"{}"}}"#, "x".repeat(DEFAULT_RESULT_CAP));
    assert_eq!(
        stored_result(big.as_bytes(), DEFAULT_RESULT_CAP),
        json!({RESULT_MARKER_KEY: {"reason": "too_large", "bytes": big.len()}})
    );
    let exactly = format!(r#""{}""#, "x".repeat(DEFAULT_RESULT_CAP - 2));
    assert!(stored_result(exactly.as_bytes(), DEFAULT_RESULT_CAP).is_string());

    assert_eq!(parse_result(b"<html>", 100), Err(Omitted::NotJson));
    assert_eq!(parse_result(b"{\"a\":\"\x00\"}", 100), Err(Omitted::Nul));
    // NUL spelled as a JSON escape, in a value and in a key.
    assert_eq!(parse_result(br#"{"a":"x\u0000y"}"#, 100), Err(Omitted::Nul));
    assert_eq!(parse_result(br#"{"a\u0000":1}"#, 100), Err(Omitted::Nul));
    assert_eq!(
        parse_result(br#"[[{"b":["\u0000"]}]]"#, 100),
        Err(Omitted::Nul)
    );
    assert_eq!(
        stored_result(br#"{"a":"\u0000"}"#, 100),
        json!({RESULT_MARKER_KEY: {"reason": "nul", "bytes": 14}})
    );
    // Other escapes are fine.
    assert_eq!(
        parse_result(br#"{"a":"\u0001"}"#, 100),
        Ok(json!({"a": "\u{1}"}))
    );
}

#[test]
fn parsed_values_are_capped_too() {
    assert_eq!(cap_value(json!({"a": 1}), 100), json!({"a": 1}));
    let capped = cap_value(json!({"a": "x".repeat(200)}), 100);
    assert_eq!(capped[RESULT_MARKER_KEY]["reason"], "too_large");
    assert_eq!(
        cap_value(json!({"k": "\u{0}"}), 100)[RESULT_MARKER_KEY]["reason"],
        "nul"
    );
}
