//! `sentin8-cron echo-target`: a tiny local target for trying sentin8-cron out. It prints what
//! arrived (the request line, the headers a target reads, whether the `Sentin8-Signature`
//! verifies against the service's published keys, fetched per call so a restarted service's
//! new key is picked up, and the body) and answers as a real target must: 401 with the reason
//! to a missing, invalid or replayed signature, the chosen status otherwise. Target authors
//! copy it, so it checks everything a target should.
//!
//! A subcommand rather than a separate example program: the tour then needs nothing but the
//! one binary (no second build, no source tree), and the tour's own test runs exactly it.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::{Json, Router};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::callback::config::DEFAULT_SIGNING_ISSUER;
use crate::callback::signing::{SIGNATURE_HEADER, body_sha256};
use crate::util::process::shutdown_signal;

/// Print every call a local target receives (and check its signature).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (the schedule's baseUrl is http://this-address)
    #[arg(long, default_value = "127.0.0.1:9000", value_name = "ADDR")]
    pub listen: String,
    /// Where sentin8-cron publishes the keys calls are signed with
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080/.well-known/jwks.json",
        value_name = "URL"
    )]
    pub jwks_url: String,
    /// The issuer (`iss`) sentin8-cron signs calls as (its --signing-issuer)
    #[arg(long, default_value = DEFAULT_SIGNING_ISSUER, value_name = "ISSUER")]
    pub issuer: String,
    /// Status to answer with (2xx is a success; try 500 to watch retries and the DLQ)
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(100..=599))]
    pub status: u16,
}

struct Target {
    status: StatusCode,
    jwks_url: String,
    issuer: String,
    origin: String,
    http: reqwest::Client,
    calls: mpsc::UnboundedSender<String>,
    /// The `jti` of every call accepted, with its expiry: a request seen again before it
    /// expires is a replay (a retry is signed anew, with a new `jti`).
    seen: Mutex<HashMap<String, i64>>,
}

impl Target {
    /// Remembers `claims`' `jti` until its expiry; refuses one already seen.
    fn first_sighting(&self, claims: &Map<String, Value>) -> Result<(), String> {
        let jti = claims
            .get("jti")
            .and_then(Value::as_str)
            .ok_or("the token has no jti")?;
        let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
        let now = chrono::Utc::now().timestamp();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, expiry| *expiry >= now);
        if seen.contains_key(jti) {
            return Err(format!("replayed: jti {jti} was already accepted"));
        }
        seen.insert(jti.to_owned(), exp);
        Ok(())
    }
}

fn app(target: Arc<Target>) -> Router {
    Router::new().fallback(receive).with_state(target)
}

pub async fn run(args: Args, out: &mut (dyn Write + Send)) -> anyhow::Result<ExitCode> {
    let status = StatusCode::from_u16(args.status).context("--status")?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let address: SocketAddr = listener.local_addr()?;
    let origin = format!("http://{address}");
    let (calls, mut printed) = mpsc::unbounded_channel();
    let target = Arc::new(Target {
        status,
        jwks_url: args.jwks_url,
        issuer: args.issuer,
        origin: origin.clone(),
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(5))
            .build()
            .context("cannot build the HTTP client for the key set")?,
        calls,
        seen: Mutex::default(),
    });
    let app = app(target);
    writeln!(
        out,
        "echo target listening on {origin}: use it as a schedule's baseUrl; every call is printed here"
    )?;
    out.flush()?;
    let server = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal());
    let mut server = std::pin::pin!(server.into_future());
    loop {
        tokio::select! {
            done = &mut server => {
                done.context("the echo target stopped")?;
                return Ok(ExitCode::SUCCESS);
            }
            Some(call) = printed.recv() => {
                writeln!(out, "{call}")?;
                out.flush()?;
            }
        }
    }
}

async fn receive(
    State(target): State<Arc<Target>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    let mut text = format!(
        "── {method} {uri} at {}\n",
        chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ")
    );
    for name in ["idempotency-key", "x-correlation-id", "content-type"] {
        let value = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("(none)");
        text.push_str(&format!("{name}: {value}\n"));
    }
    let bearer = if headers.contains_key("authorization") {
        "(a bearer token, not shown)"
    } else {
        "(none)"
    };
    text.push_str(&format!("authorization: {bearer}\n"));
    let verified = match headers.get(SIGNATURE_HEADER).map(|v| v.to_str()) {
        Some(Ok(token)) => verify(&target, token, &body)
            .await
            .and_then(|claims| target.first_sighting(&claims).map(|()| claims)),
        Some(Err(_)) => Err(format!("the {SIGNATURE_HEADER} header is not text")),
        None => Err(format!("no {SIGNATURE_HEADER} header")),
    };
    let signature = match &verified {
        Ok(claims) => format!(
            "valid (aud {}, job {}, body_sha256 matches, jti not seen before)",
            claims.get("aud").and_then(Value::as_str).unwrap_or("?"),
            claims.get("job_id").and_then(Value::as_str).unwrap_or("?"),
        ),
        Err(why) => format!("NOT VALID: {why}"),
    };
    text.push_str(&format!("signature: {signature}\n"));
    let shown = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|json| serde_json::to_string_pretty(&json).ok())
        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
    text.push_str(&format!("body:\n{shown}\n"));
    let (status, answer) = match verified {
        Ok(_) => (target.status, json!({"received": true})),
        Err(why) => (
            StatusCode::UNAUTHORIZED,
            json!({"received": false, "error": format!("signature refused: {why}")}),
        ),
    };
    text.push_str(&format!("answered {}", status.as_u16()));
    // The printer ends only when the process does.
    let _ = target.calls.send(text);
    (status, Json(answer))
}

/// Fetches the published keys and checks the call's signature with them.
async fn verify(target: &Target, token: &str, body: &[u8]) -> Result<Map<String, Value>, String> {
    let keys: JwkSet = target
        .http
        .get(&target.jwks_url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("cannot fetch {} ({e})", target.jwks_url))?
        .json()
        .await
        .map_err(|e| format!("{} is not a key set ({e})", target.jwks_url))?;
    check(&keys, &target.issuer, &target.origin, token, body)
}

/// Checks the signature against `keys` with the algorithm the key is published for (never the
/// one the token's header names), the issuer, the audience against this target's origin, the
/// expiry, and the body's hash.
fn check(
    keys: &JwkSet,
    issuer: &str,
    origin: &str,
    token: &str,
    body: &[u8],
) -> Result<Map<String, Value>, String> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| format!("unreadable ({e})"))?;
    let kid = header
        .kid
        .as_deref()
        .ok_or("the token names no key (kid)")?;
    let jwk = keys
        .find(kid)
        .ok_or_else(|| format!("key {kid} is not published"))?;
    let alg = jwk
        .common
        .key_algorithm
        .and_then(|alg| alg.to_string().parse::<Algorithm>().ok())
        .ok_or_else(|| format!("key {kid} is published without a signing algorithm"))?;
    if header.alg != alg {
        return Err(format!(
            "signed with {:?}, but key {kid} is for {alg:?}",
            header.alg
        ));
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|e| format!("key {kid} is unusable ({e})"))?;
    let mut validation = Validation::new(alg);
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[origin]);
    validation.set_required_spec_claims(&["exp", "aud", "iat", "iss"]);
    let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| e.to_string())?
        .claims;
    if claims.get("body_sha256").and_then(Value::as_str) != Some(body_sha256(body).as_str()) {
        return Err("the body does not match body_sha256".to_owned());
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::signing::{CallClaims, CallSigner};

    const ORIGIN: &str = "http://127.0.0.1:9000";

    fn signed(issuer: &str, body: &[u8]) -> (JwkSet, String) {
        let signer = CallSigner::generate_dev(issuer).unwrap();
        let id = uuid::Uuid::now_v7();
        let iat = chrono::Utc::now().timestamp();
        let url = url::Url::parse(&format!("{ORIGIN}/v1/internal/schedules/run")).unwrap();
        let claims = CallClaims::for_call(&url, id, id, id, body, iat).unwrap();
        let keys = serde_json::from_value(signer.jwks()).unwrap();
        (keys, signer.sign(&claims).unwrap())
    }

    #[test]
    fn a_call_from_the_expected_issuer_verifies() {
        let (keys, token) = signed(DEFAULT_SIGNING_ISSUER, b"{}");
        let claims = check(&keys, DEFAULT_SIGNING_ISSUER, ORIGIN, &token, b"{}").unwrap();
        assert_eq!(claims["iss"], DEFAULT_SIGNING_ISSUER);
    }

    #[test]
    fn a_call_from_another_issuer_is_refused() {
        let (keys, token) = signed("someone-else", b"{}");
        let err = check(&keys, DEFAULT_SIGNING_ISSUER, ORIGIN, &token, b"{}").unwrap_err();
        assert!(err.to_lowercase().contains("issuer"), "{err}");
    }

    /// A real echo target on port 0 whose key set is served by a second real listener.
    async fn running_target(signer: &CallSigner) -> (String, mpsc::UnboundedReceiver<String>) {
        let jwks = signer.jwks();
        let keys = Router::new().route(
            "/.well-known/jwks.json",
            axum::routing::get(move || {
                let jwks = jwks.clone();
                async move { Json(jwks) }
            }),
        );
        let keys_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let keys_url = format!(
            "http://{}/.well-known/jwks.json",
            keys_listener.local_addr().unwrap()
        );
        tokio::spawn(async move { axum::serve(keys_listener, keys).await });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let (calls, printed) = mpsc::unbounded_channel();
        let target = Arc::new(Target {
            status: StatusCode::OK,
            jwks_url: keys_url,
            issuer: DEFAULT_SIGNING_ISSUER.to_owned(),
            origin: origin.clone(),
            http: reqwest::Client::new(),
            calls,
            seen: Mutex::default(),
        });
        tokio::spawn(async move { axum::serve(listener, app(target)).await });
        (origin, printed)
    }

    async fn post(origin: &str, signature: Option<&str>, body: &'static [u8]) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .post(format!("{origin}/v1/internal/schedules/run"))
            .body(body);
        if let Some(signature) = signature {
            request = request.header(SIGNATURE_HEADER, signature);
        }
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap())
    }

    #[tokio::test]
    async fn a_missing_invalid_or_replayed_signature_is_answered_401_with_the_reason() {
        let signer = CallSigner::generate_dev(DEFAULT_SIGNING_ISSUER).unwrap();
        let (origin, mut printed) = running_target(&signer).await;
        let sign = |aud: &str, body: &[u8]| {
            let id = uuid::Uuid::now_v7();
            let url = url::Url::parse(aud).unwrap();
            let claims =
                CallClaims::for_call(&url, id, id, id, body, chrono::Utc::now().timestamp())
                    .unwrap();
            signer.sign(&claims).unwrap()
        };
        let body: &[u8] = br#"{"job": 1}"#;

        let (status, answer) = post(&origin, None, body).await;
        assert_eq!(status, 401);
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("no Sentin8-Signature header")
        );

        let good = sign(&origin, body);
        assert_eq!(
            post(&origin, Some(&good), body).await,
            (200, json!({"received": true}))
        );
        // The same signed request again is a replay, not a retry.
        let (status, answer) = post(&origin, Some(&good), body).await;
        assert_eq!(status, 401);
        assert!(
            answer["error"].as_str().unwrap().contains("replayed"),
            "{answer}"
        );

        let (status, answer) = post(&origin, Some(&sign(&origin, body)), br#"{"job": 2}"#).await;
        assert_eq!(status, 401);
        assert!(
            answer["error"].as_str().unwrap().contains("body_sha256"),
            "{answer}"
        );

        let elsewhere = sign("http://127.0.0.1:1", body);
        let (status, answer) = post(&origin, Some(&elsewhere), body).await;
        assert_eq!(status, 401);
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("signature refused"),
            "{answer}"
        );

        // What the operator watching the terminal sees says why, call by call.
        let mut lines = Vec::new();
        while let Ok(call) = printed.try_recv() {
            lines.push(call);
        }
        assert_eq!(lines.len(), 5);
        assert!(
            lines[0].contains("NOT VALID: no Sentin8-Signature header"),
            "{}",
            lines[0]
        );
        assert!(lines[0].ends_with("answered 401"));
        assert!(lines[1].ends_with("answered 200"));
        assert!(lines[2].contains("NOT VALID: replayed"));
    }

    #[test]
    fn a_key_published_without_its_algorithm_is_refused() {
        let (mut keys, token) = signed(DEFAULT_SIGNING_ISSUER, b"{}");
        for key in &mut keys.keys {
            key.common.key_algorithm = None;
        }
        let err = check(&keys, DEFAULT_SIGNING_ISSUER, ORIGIN, &token, b"{}").unwrap_err();
        assert!(err.contains("without a signing algorithm"), "{err}");
    }
}
