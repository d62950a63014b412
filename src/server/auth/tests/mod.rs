//! Real keys (generated per run), real signatures, a real JWK set endpoint on 127.0.0.1 and a
//! manual clock, so nothing here sleeps or depends on the time of day.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _,
};
use axum::http::header::CONTENT_TYPE;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{TimeZone, Utc};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::Url;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::*;
use crate::core::clock::ManualClock;
use crate::core::model::EnvId;
use crate::server::auth::claims::invalid;
use crate::server::auth::jwks::parse_jwks;
use crate::server::policy::{SCOPE_ADMIN, SCOPE_READ, SCOPE_WRITE};

mod config;
mod dev;
mod hs256;
mod jwks;
mod verify;

const ISSUER: &str = "https://idp.test/realms/platform";
const AUDIENCE: &str = "sentin8-cron";
const ENV_A: &str = "0190a1b2-0000-7000-8000-00000000000a";
const ENV_B: &str = "0190a1b2-0000-7000-8000-00000000000b";

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

struct TestKey {
    alg: Algorithm,
    enc: EncodingKey,
    /// The public JWK, without kid.
    jwk: Value,
    /// The public key as SubjectPublicKeyInfo DER.
    spki: Vec<u8>,
}

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn public_jwk(enc: &EncodingKey, alg: Algorithm) -> Value {
    serde_json::to_value(Jwk::from_encoding_key(enc, alg).unwrap()).unwrap()
}

impl TestKey {
    fn rsa() -> Self {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let pkcs8: Pkcs8V1Der = pair.as_der().unwrap();
        let enc = EncodingKey::from_rsa_pem(pem("PRIVATE KEY", pkcs8.as_ref()).as_bytes()).unwrap();
        let spki: PublicKeyX509Der = pair.public_key().as_der().unwrap();
        Self {
            alg: Algorithm::RS256,
            jwk: public_jwk(&enc, Algorithm::RS256),
            enc,
            spki: spki.as_ref().to_vec(),
        }
    }

    fn p256() -> Self {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let enc = EncodingKey::from_ec_der(pair.to_pkcs8v1().unwrap().as_ref());
        let spki: PublicKeyX509Der = pair.public_key().as_der().unwrap();
        Self {
            alg: Algorithm::ES256,
            jwk: public_jwk(&enc, Algorithm::ES256),
            enc,
            spki: spki.as_ref().to_vec(),
        }
    }

    fn ed25519() -> Self {
        let pair = Ed25519KeyPair::generate().unwrap();
        let enc = EncodingKey::from_ed_der(pair.to_pkcs8v1().unwrap().as_ref());
        let spki: PublicKeyX509Der = pair.public_key().as_der().unwrap();
        Self {
            alg: Algorithm::EdDSA,
            jwk: public_jwk(&enc, Algorithm::EdDSA),
            enc,
            spki: spki.as_ref().to_vec(),
        }
    }

    /// The public JWK under `kid`, marked for signatures.
    fn jwk(&self, kid: &str) -> Value {
        let mut jwk = self.jwk.clone();
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        jwk
    }

    fn sign(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.enc).unwrap()
    }
}

static RSA: LazyLock<TestKey> = LazyLock::new(TestKey::rsa);
/// Another RSA key, to sign under the first one's kid.
static RSA_OTHER: LazyLock<TestKey> = LazyLock::new(TestKey::rsa);
static EC: LazyLock<TestKey> = LazyLock::new(TestKey::p256);
static ED: LazyLock<TestKey> = LazyLock::new(TestKey::ed25519);

fn jwks(keys: &[Value]) -> Value {
    json!({ "keys": keys })
}

/// A token assembled by hand, for what jsonwebtoken refuses to make.
fn craft(header: &Value, claims: &Value, signature: &[u8]) -> String {
    let part = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    format!(
        "{}.{}.{}",
        part(header.to_string().as_bytes()),
        part(claims.to_string().as_bytes()),
        part(signature)
    )
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).unwrap();
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------------------------
// The JWK set endpoint
// ---------------------------------------------------------------------------------------------

struct JwksServer {
    url: Url,
    hits: Arc<AtomicUsize>,
    reply: Arc<Mutex<(u16, String)>>,
    task: JoinHandle<()>,
}

impl JwksServer {
    async fn start(doc: Value) -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let reply = Arc::new(Mutex::new((200, doc.to_string())));
        let handler = {
            let hits = Arc::clone(&hits);
            let reply = Arc::clone(&reply);
            move || async move {
                hits.fetch_add(1, Ordering::SeqCst);
                let (status, body) = reply.lock().unwrap().clone();
                (
                    StatusCode::from_u16(status).unwrap(),
                    [(CONTENT_TYPE, "application/json")],
                    body,
                )
            }
        };
        let app = axum::Router::new().route("/jwks", axum::routing::get(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url: Url::parse(&format!("http://{addr}/jwks")).unwrap(),
            hits,
            reply,
            task,
        }
    }

    fn serve(&self, doc: Value) {
        *self.reply.lock().unwrap() = (200, doc.to_string());
    }

    fn answer(&self, status: u16, body: &str) {
        *self.reply.lock().unwrap() = (status, body.to_owned());
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn start_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap(),
    ))
}

fn jwks_rules() -> ClaimRules {
    ClaimRules {
        issuer: Some(ISSUER.into()),
        audience: Some(AUDIENCE.into()),
        ..ClaimRules::default()
    }
}

struct Fixture {
    server: JwksServer,
    clock: Arc<ManualClock>,
    auth: JwksAuthenticator,
}

impl Fixture {
    async fn new(doc: Value) -> Self {
        Self::with_rules(doc, jwks_rules()).await
    }

    async fn with_rules(doc: Value, rules: ClaimRules) -> Self {
        let server = JwksServer::start(doc).await;
        let clock = start_clock();
        let auth = JwksAuthenticator::new(server.url.clone(), rules, http(), clock.clone());
        Self {
            server,
            clock,
            auth,
        }
    }

    /// Valid claims as of now.
    fn claims(&self) -> Value {
        claims_at(&self.clock)
    }

    async fn check(&self, token: &str) -> Result<Principal, AuthError> {
        let result = self
            .auth
            .authenticate(Some(&format!("Bearer {token}")))
            .await;
        if let Err(err) = &result {
            assert_no_leak(err, token);
        }
        result
    }
}

fn claims_at(clock: &ManualClock) -> Value {
    let now = clock.now().timestamp();
    json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "svc-billing",
        "iat": now,
        "exp": now + 300,
        "scope": "sentin8:cron:read sentin8:cron:write",
        "envs": [ENV_A, ENV_B],
    })
}

fn with(mut claims: Value, name: &str, value: Value) -> Value {
    claims[name] = value;
    claims
}

fn without(mut claims: Value, name: &str) -> Value {
    claims.as_object_mut().unwrap().remove(name);
    claims
}

fn env(id: &str) -> EnvId {
    id.parse().unwrap()
}

fn scopes(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Neither the log text, the debug form nor the challenge may carry any part of the token.
fn assert_no_leak(err: &AuthError, token: &str) {
    let shown = format!("{err} {err:?} {}", err.www_authenticate());
    for part in token.split('.').filter(|p| p.len() >= 8) {
        assert!(!shown.contains(part), "{shown} leaks the token");
    }
}

fn hs_fixture(
    issuer: Option<&str>,
    audience: Option<&str>,
) -> (SharedSecretAuthenticator, String, Arc<ManualClock>) {
    let secret = random_hex(32);
    let clock = start_clock();
    let rules = ClaimRules {
        issuer: issuer.map(str::to_owned),
        audience: audience.map(str::to_owned),
        ..ClaimRules::default()
    };
    let auth = SharedSecretAuthenticator::new(
        Hs256Key::new(secret.as_bytes()).unwrap(),
        rules,
        clock.clone(),
    );
    (auth, secret, clock)
}

fn hs_sign(secret: &str, alg: Algorithm, claims: &Value) -> String {
    jsonwebtoken::encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

async fn hs_check(auth: &SharedSecretAuthenticator, token: &str) -> Result<Principal, AuthError> {
    let result = auth.authenticate(Some(&format!("Bearer {token}"))).await;
    if let Err(err) = &result {
        assert_no_leak(err, token);
    }
    result
}
