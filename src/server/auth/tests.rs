//! Real keys (generated per run), real signatures, a real JWK set endpoint on 127.0.0.1 and a
//! manual clock, so nothing here sleeps or depends on the time of day.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _,
};
use axum::http::header::CONTENT_TYPE;
use chrono::TimeZone;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;
use tokio::task::JoinHandle;

use super::*;
use crate::core::clock::ManualClock;

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

// ---------------------------------------------------------------------------------------------
// The header and the challenge
// ---------------------------------------------------------------------------------------------

#[test]
fn bearer_header_parsing() {
    assert_eq!(bearer_token(None), Err(AuthError::MissingToken));
    assert_eq!(bearer_token(Some("")), Err(AuthError::MissingToken));
    assert_eq!(bearer_token(Some("   ")), Err(AuthError::MissingToken));
    assert_eq!(
        bearer_token(Some("Basic dXNlcjpwYXNz")),
        Err(AuthError::UnsupportedScheme)
    );
    assert_eq!(
        bearer_token(Some("Bearerabc")),
        Err(AuthError::UnsupportedScheme)
    );
    assert_eq!(bearer_token(Some("Bearer")), Err(AuthError::Malformed));
    assert_eq!(bearer_token(Some("Bearer   ")), Err(AuthError::Malformed));
    assert_eq!(bearer_token(Some("Bearer a b")), Err(AuthError::Malformed));
    assert_eq!(bearer_token(Some("Bearer a\"b")), Err(AuthError::Malformed));
    assert_eq!(bearer_token(Some("Bearer ===")), Err(AuthError::Malformed));
    assert_eq!(bearer_token(Some("Bearer a=b")), Err(AuthError::Malformed));
    let long = "a".repeat(MAX_TOKEN_BYTES + 1);
    assert_eq!(
        bearer_token(Some(&format!("Bearer {long}"))),
        Err(AuthError::Malformed)
    );

    assert_eq!(bearer_token(Some("Bearer abc.def.ghi")), Ok("abc.def.ghi"));
    assert_eq!(bearer_token(Some("bearer abc")), Ok("abc"));
    assert_eq!(bearer_token(Some("BEARER  abc ")), Ok("abc"));
    assert_eq!(
        bearer_token(Some("Bearer a-b_c~d+e/f==")),
        Ok("a-b_c~d+e/f==")
    );
}

#[test]
fn challenges_follow_rfc_6750() {
    assert_eq!(
        AuthError::MissingToken.www_authenticate(),
        r#"Bearer realm="sentin8-cron""#
    );
    assert_eq!(
        AuthError::UnsupportedScheme.www_authenticate(),
        r#"Bearer realm="sentin8-cron""#
    );
    assert_eq!(
        AuthError::Expired.www_authenticate(),
        r#"Bearer realm="sentin8-cron", error="invalid_token", error_description="the access token expired""#
    );
    let all = [
        AuthError::MissingToken,
        AuthError::UnsupportedScheme,
        AuthError::Malformed,
        AuthError::UnsupportedAlgorithm,
        AuthError::UnknownKey,
        AuthError::KeysUnavailable,
        AuthError::BadSignature,
        AuthError::Expired,
        AuthError::NotYetValid,
        AuthError::WrongIssuer,
        AuthError::WrongAudience,
        AuthError::InvalidClaim {
            claim: "envs".into(),
        },
        AuthError::Unrecognised,
    ];
    for err in all {
        assert_eq!(err.status_code(), StatusCode::UNAUTHORIZED);
        let message = err.to_string();
        assert_eq!(message, message.to_lowercase(), "{message}");
        assert!(!message.ends_with('.'));
        if let Some(description) = err.description() {
            // RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E.
            assert!(
                description
                    .bytes()
                    .all(|b| matches!(b, 0x20..=0x21 | 0x23..=0x5B | 0x5D..=0x7E)),
                "{description}"
            );
            assert_eq!(err.error_code(), Some("invalid_token"));
            assert!(err.www_authenticate().starts_with(
                r#"Bearer realm="sentin8-cron", error="invalid_token", error_description=""#
            ));
        }
    }
    // A claim's name reaches the log line but not the caller.
    let err = AuthError::InvalidClaim {
        claim: "envs".into(),
    };
    assert_eq!(err.to_string(), "token claim envs missing or invalid");
    assert!(!err.www_authenticate().contains("envs"));
}

// ---------------------------------------------------------------------------------------------
// JWKS mode: acceptance
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn accepts_rs256_es256_and_eddsa() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1"), EC.jwk("ec-1"), ED.jwk("ed-1")])).await;
    for (key, kid) in [(&*RSA, "rsa-1"), (&*EC, "ec-1"), (&*ED, "ed-1")] {
        let principal = fx.check(&key.sign(kid, &fx.claims())).await.unwrap();
        assert_eq!(
            principal,
            Principal {
                subject: "svc-billing".into(),
                scopes: scopes(&[SCOPE_READ, SCOPE_WRITE]),
                envs: EnvGrant::Some([env(ENV_A), env(ENV_B)].into()),
                dev: false,
            },
            "{kid}"
        );
    }
    // One fetch served all three.
    assert_eq!(fx.server.hits(), 1);
}

#[tokio::test]
async fn admin_scope_grants_every_environment() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let claims = with(fx.claims(), "scope", json!("sentin8:cron:admin"));
    let principal = fx.check(&RSA.sign("rsa-1", &claims)).await.unwrap();
    assert_eq!(principal.envs, EnvGrant::All);
    assert!(principal.has_scope(SCOPE_ADMIN));

    // Without an envs claim a non-admin gets no environment.
    let claims = without(fx.claims(), "envs");
    let principal = fx.check(&RSA.sign("rsa-1", &claims)).await.unwrap();
    assert_eq!(principal.envs, EnvGrant::none());
}

#[tokio::test]
async fn scopes_come_from_a_string_or_an_array() {
    let fx = Fixture::new(jwks(&[ED.jwk("ed-1")])).await;
    let sign = |claims: Value| ED.sign("ed-1", &claims);

    let p = fx
        .check(&sign(with(fx.claims(), "scope", json!("  a   b\tc "))))
        .await
        .unwrap();
    assert_eq!(p.scopes, scopes(&["a", "b", "c"]));

    let claims = with(without(fx.claims(), "scope"), "scp", json!(["x", "y"]));
    assert_eq!(
        fx.check(&sign(claims)).await.unwrap().scopes,
        scopes(&["x", "y"])
    );

    // The configured claim wins over scp.
    let claims = with(fx.claims(), "scp", json!(["ignored"]));
    assert_eq!(
        fx.check(&sign(claims)).await.unwrap().scopes,
        scopes(&[SCOPE_READ, SCOPE_WRITE])
    );

    let claims = with(fx.claims(), "scope", json!([SCOPE_READ]));
    assert_eq!(
        fx.check(&sign(claims)).await.unwrap().scopes,
        scopes(&[SCOPE_READ])
    );

    let claims = without(fx.claims(), "scope");
    assert_eq!(
        fx.check(&sign(claims)).await.unwrap().scopes,
        BTreeSet::new()
    );

    for bad in [json!(42), json!({"read": true}), json!([SCOPE_READ, 7])] {
        let err = fx
            .check(&sign(with(fx.claims(), "scope", bad.clone())))
            .await
            .unwrap_err();
        assert_eq!(err, invalid("scope"), "{bad}");
    }
    let claims = with(without(fx.claims(), "scope"), "scp", json!(true));
    assert_eq!(fx.check(&sign(claims)).await.unwrap_err(), invalid("scp"));
}

#[tokio::test]
async fn claim_names_are_configurable() {
    let rules = ClaimRules {
        scope_claim: "permissions".into(),
        envs_claim: "https://sentin8.dev/envs".into(),
        ..jwks_rules()
    };
    let fx = Fixture::with_rules(jwks(&[EC.jwk("ec-1")]), rules).await;
    let claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "svc",
        "exp": fx.clock.now().timestamp() + 60,
        "permissions": [SCOPE_WRITE],
        "https://sentin8.dev/envs": [ENV_B],
        "envs": ["not even a uuid"],
        "scope": "sentin8:cron:admin",
    });
    let p = fx.check(&EC.sign("ec-1", &claims)).await.unwrap();
    assert_eq!(p.scopes, scopes(&[SCOPE_WRITE]));
    assert_eq!(p.envs, EnvGrant::Some([env(ENV_B)].into()));
}

// ---------------------------------------------------------------------------------------------
// JWKS mode: rejection
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn requests_without_a_usable_bearer_token_are_rejected() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    assert_eq!(
        fx.auth.authenticate(None).await,
        Err(AuthError::MissingToken)
    );
    assert_eq!(
        fx.auth.authenticate(Some("Basic dXNlcjpwYXNz")).await,
        Err(AuthError::UnsupportedScheme)
    );
    for garbage in [
        "garbage",
        "a.b",
        "a.b.c.d",
        "!!!.b.c",
        "e30.e30.",
        "bm90IGpzb24.e30.c2ln",
    ] {
        assert_eq!(
            fx.check(garbage).await,
            Err(AuthError::Malformed),
            "{garbage}"
        );
    }
    // A header without alg, and a kid that is not a string.
    let claims = fx.claims();
    assert_eq!(
        fx.check(&craft(&json!({"kid": "rsa-1"}), &claims, b"sig"))
            .await,
        Err(AuthError::Malformed)
    );
    assert_eq!(
        fx.check(&craft(&json!({"alg": "RS256", "kid": 1}), &claims, b"sig"))
            .await,
        Err(AuthError::Malformed)
    );
    // A correctly signed token whose payload is not a JSON object.
    let token = RSA.sign("rsa-1", &json!(["not", "claims"]));
    assert_eq!(fx.check(&token).await, Err(AuthError::Malformed));
    // No key was ever needed for any of that except the last.
    assert_eq!(fx.server.hits(), 1);
}

#[tokio::test]
async fn alg_none_is_rejected_in_every_spelling() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    for alg in ["none", "None", "NONE", "nOnE"] {
        let header = json!({"alg": alg, "typ": "JWT", "kid": "rsa-1"});
        let token = craft(&header, &fx.claims(), b"");
        assert!(token.ends_with('.'));
        assert_eq!(
            fx.check(&token).await,
            Err(AuthError::UnsupportedAlgorithm),
            "{alg}"
        );
    }
    assert_eq!(fx.server.hits(), 0, "rejected before any key was needed");
}

#[tokio::test]
async fn a_token_signed_by_another_key_under_a_known_kid_is_rejected() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let forged = RSA_OTHER.sign("rsa-1", &fx.claims());
    assert_eq!(fx.check(&forged).await, Err(AuthError::BadSignature));

    // A genuine token with its payload swapped keeps its signature but not its validity.
    let genuine = RSA.sign("rsa-1", &fx.claims());
    let parts: Vec<&str> = genuine.split('.').collect();
    let admin = with(fx.claims(), "scope", json!(SCOPE_ADMIN));
    let payload = URL_SAFE_NO_PAD.encode(admin.to_string());
    let tampered = format!("{}.{payload}.{}", parts[0], parts[2]);
    assert_eq!(fx.check(&tampered).await, Err(AuthError::BadSignature));
    assert!(fx.check(&genuine).await.is_ok());
}

#[tokio::test]
async fn hmac_tokens_are_never_verified_with_a_public_key() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1"), EC.jwk("ec-1"), ED.jwk("ed-1")])).await;
    let claims = with(fx.claims(), "scope", json!(SCOPE_ADMIN));
    // The classic confusion: HS256 with the public key (in every form an attacker could find
    // it) as the HMAC secret.
    let n = RSA.jwk["n"].as_str().unwrap().to_owned();
    let secrets: Vec<Vec<u8>> = vec![
        RSA.spki.clone(),
        pem("PUBLIC KEY", &RSA.spki).into_bytes(),
        RSA.jwk("rsa-1").to_string().into_bytes(),
        n.into_bytes(),
        EC.spki.clone(),
        ED.spki.clone(),
    ];
    for (kid, secret) in ["rsa-1", "rsa-1", "rsa-1", "rsa-1", "ec-1", "ed-1"]
        .into_iter()
        .zip(&secrets)
    {
        for alg in [Algorithm::HS256, Algorithm::HS384, Algorithm::HS512] {
            let mut header = Header::new(alg);
            header.kid = Some(kid.into());
            let token =
                jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(secret).unwrap())
                    .unwrap();
            assert_eq!(
                fx.check(&token).await,
                Err(AuthError::UnsupportedAlgorithm),
                "{alg:?} {kid}"
            );
        }
    }
    assert_eq!(fx.server.hits(), 0, "rejected before any key was looked up");
}

#[tokio::test]
async fn a_token_must_use_its_keys_own_algorithm() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1"), EC.jwk("ec-1")])).await;
    // Signed with the EC key but naming the RSA key's kid: the RSA key only does RS256.
    let token = EC.sign("rsa-1", &fx.claims());
    assert_eq!(fx.check(&token).await, Err(AuthError::UnknownKey));
    // A kid known under another algorithm is not a reason to refetch.
    assert_eq!(fx.server.hits(), 1);

    // Algorithms the JWKS mode does not take, even from a key family it does.
    for alg in [Algorithm::RS384, Algorithm::PS256, Algorithm::ES384] {
        let token = craft(
            &json!({"alg": format!("{alg:?}"), "kid": "rsa-1"}),
            &fx.claims(),
            b"s",
        );
        assert_eq!(
            fx.check(&token).await,
            Err(AuthError::UnsupportedAlgorithm),
            "{alg:?}"
        );
    }
}

#[tokio::test]
async fn a_token_without_a_kid_is_rejected_without_a_fetch() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let token =
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &fx.claims(), &RSA.enc).unwrap();
    assert_eq!(fx.check(&token).await, Err(AuthError::UnknownKey));
    assert_eq!(fx.server.hits(), 0);
}

#[tokio::test]
async fn expiry_is_judged_by_the_injected_clock_with_leeway() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let now = fx.clock.now().timestamp();
    let token_expiring_at = |exp: i64| RSA.sign("rsa-1", &with(fx.claims(), "exp", json!(exp)));

    // The default leeway is 30 s: expired 29 s ago still passes, 30 s ago does not.
    assert!(fx.check(&token_expiring_at(now - 29)).await.is_ok());
    assert_eq!(
        fx.check(&token_expiring_at(now - 30)).await,
        Err(AuthError::Expired)
    );
    assert_eq!(
        fx.check(&token_expiring_at(now - 3600)).await,
        Err(AuthError::Expired)
    );

    // A token valid now stops being valid when the clock moves, not the wall clock.
    let token = token_expiring_at(now + 300);
    assert!(fx.check(&token).await.is_ok());
    fx.clock.advance(chrono::Duration::seconds(329));
    assert!(fx.check(&token).await.is_ok());
    fx.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(fx.check(&token).await, Err(AuthError::Expired));

    // Fractional NumericDates are fine.
    let now = fx.clock.now().timestamp() as f64;
    assert!(
        fx.check(&RSA.sign("rsa-1", &with(fx.claims(), "exp", json!(now + 0.5))))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn exp_is_required_and_must_be_a_number() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let exp = fx.clock.now().timestamp() + 300;
    for claims in [
        without(fx.claims(), "exp"),
        with(fx.claims(), "exp", json!(exp.to_string())),
        with(fx.claims(), "exp", Value::Null),
    ] {
        let err = fx.check(&RSA.sign("rsa-1", &claims)).await.unwrap_err();
        assert_eq!(err, invalid("exp"), "{claims}");
    }
}

#[tokio::test]
async fn not_before_is_honoured_with_leeway() {
    let fx = Fixture::new(jwks(&[EC.jwk("ec-1")])).await;
    let now = fx.clock.now().timestamp();
    let token_valid_from = |nbf: Value| EC.sign("ec-1", &with(fx.claims(), "nbf", nbf));

    assert!(fx.check(&token_valid_from(json!(now - 10))).await.is_ok());
    assert!(fx.check(&token_valid_from(json!(now + 30))).await.is_ok());
    let early = token_valid_from(json!(now + 31));
    assert_eq!(fx.check(&early).await, Err(AuthError::NotYetValid));
    fx.clock.advance(chrono::Duration::seconds(1));
    assert!(fx.check(&early).await.is_ok());
    assert_eq!(
        fx.check(&token_valid_from(json!("soon"))).await,
        Err(invalid("nbf"))
    );
}

#[tokio::test]
async fn issuer_and_audience_must_match() {
    let fx = Fixture::new(jwks(&[ED.jwk("ed-1")])).await;
    let sign = |claims: Value| ED.sign("ed-1", &claims);

    for iss in [
        json!("https://evil.test/"),
        json!(ISSUER.to_uppercase()),
        json!([ISSUER]),
        Value::Null,
    ] {
        let err = fx.check(&sign(with(fx.claims(), "iss", iss.clone()))).await;
        assert_eq!(err, Err(AuthError::WrongIssuer), "{iss}");
    }
    assert_eq!(
        fx.check(&sign(without(fx.claims(), "iss"))).await,
        Err(AuthError::WrongIssuer)
    );

    for aud in [
        json!("other-service"),
        json!(["a", "b"]),
        json!([]),
        json!(7),
    ] {
        let err = fx.check(&sign(with(fx.claims(), "aud", aud.clone()))).await;
        assert_eq!(err, Err(AuthError::WrongAudience), "{aud}");
    }
    assert_eq!(
        fx.check(&sign(without(fx.claims(), "aud"))).await,
        Err(AuthError::WrongAudience)
    );
    // An audience list naming this service is fine.
    let claims = with(fx.claims(), "aud", json!(["billing", AUDIENCE]));
    assert!(fx.check(&sign(claims)).await.is_ok());
}

#[tokio::test]
async fn sub_is_required() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    for claims in [
        without(fx.claims(), "sub"),
        with(fx.claims(), "sub", json!("")),
        with(fx.claims(), "sub", json!("  ")),
        with(fx.claims(), "sub", json!(42)),
    ] {
        let err = fx.check(&RSA.sign("rsa-1", &claims)).await.unwrap_err();
        assert_eq!(err, invalid("sub"), "{claims}");
    }
}

#[tokio::test]
async fn malformed_environment_ids_reject_the_token() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    for envs in [
        json!([ENV_A, "not-a-uuid"]),
        json!([ENV_A, 7]),
        json!([null]),
        json!(ENV_A),
        json!({ "id": ENV_A }),
        json!([format!("{ENV_A}x")]),
    ] {
        let claims = with(fx.claims(), "envs", envs.clone());
        let err = fx.check(&RSA.sign("rsa-1", &claims)).await.unwrap_err();
        assert_eq!(err, invalid("envs"), "{envs}");
        // Not even an admin token gets through with a malformed list.
        let claims = with(claims, "scope", json!(SCOPE_ADMIN));
        let err = fx.check(&RSA.sign("rsa-1", &claims)).await.unwrap_err();
        assert_eq!(err, invalid("envs"), "{envs}");
    }
    let p = fx
        .check(&RSA.sign("rsa-1", &with(fx.claims(), "envs", json!([]))))
        .await
        .unwrap();
    assert_eq!(p.envs, EnvGrant::none());
}

// ---------------------------------------------------------------------------------------------
// JWKS mode: fetching, caching, rotation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_unknown_kid_refetches_once_then_is_rate_limited() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    assert!(fx.check(&RSA.sign("rsa-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 1);
    assert!(fx.check(&RSA.sign("rsa-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 1, "known keys come from the cache");

    fx.clock.advance(chrono::Duration::seconds(31));
    let unknown = RSA.sign("rsa-9", &fx.claims());
    assert_eq!(fx.check(&unknown).await, Err(AuthError::UnknownKey));
    assert_eq!(fx.server.hits(), 2, "one refetch for the unknown kid");

    let another = RSA.sign("rsa-10", &fx.claims());
    assert_eq!(fx.check(&another).await, Err(AuthError::UnknownKey));
    assert_eq!(fx.check(&unknown).await, Err(AuthError::UnknownKey));
    fx.clock.advance(chrono::Duration::seconds(29));
    assert_eq!(fx.check(&another).await, Err(AuthError::UnknownKey));
    assert_eq!(fx.server.hits(), 2, "no refetch within 30 s");

    fx.clock.advance(chrono::Duration::seconds(1));
    assert_eq!(fx.check(&another).await, Err(AuthError::UnknownKey));
    assert_eq!(fx.server.hits(), 3, "the window has passed");

    // Known keys keep working throughout.
    assert!(fx.check(&RSA.sign("rsa-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 3);
}

#[tokio::test]
async fn a_rotated_in_key_is_accepted_after_a_refetch() {
    let fx = Fixture::new(jwks(&[RSA.jwk("2030-01")])).await;
    assert!(fx.check(&RSA.sign("2030-01", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 1);

    // The issuer publishes a new key and starts signing with it.
    fx.server
        .serve(jwks(&[RSA.jwk("2030-01"), EC.jwk("2030-02")]));
    fx.clock.advance(chrono::Duration::seconds(45));
    let rotated = EC.sign("2030-02", &fx.claims());
    let principal = fx.check(&rotated).await.unwrap();
    assert_eq!(principal.subject, "svc-billing");
    assert_eq!(fx.server.hits(), 2);
    // Both keys are now cached.
    assert!(fx.check(&rotated).await.is_ok());
    assert!(fx.check(&RSA.sign("2030-01", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 2);
}

#[tokio::test]
async fn a_key_published_within_the_window_waits_for_it() {
    let fx = Fixture::new(jwks(&[RSA.jwk("a")])).await;
    assert!(fx.check(&RSA.sign("a", &fx.claims())).await.is_ok());
    fx.server.serve(jwks(&[RSA.jwk("a"), ED.jwk("b")]));
    fx.clock.advance(chrono::Duration::seconds(5));
    let token = ED.sign("b", &fx.claims());
    assert_eq!(fx.check(&token).await, Err(AuthError::UnknownKey));
    assert_eq!(fx.server.hits(), 1);
    fx.clock.advance(chrono::Duration::seconds(25));
    assert!(fx.check(&token).await.is_ok());
    assert_eq!(fx.server.hits(), 2);
}

#[tokio::test]
async fn concurrent_unknown_kids_share_one_fetch() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let tokens: Vec<String> = (0..16)
        .map(|i| RSA.sign(&format!("k{i}"), &fx.claims()))
        .collect();
    let results = futures_util::future::join_all(tokens.iter().map(|t| fx.check(t))).await;
    assert!(results.iter().all(|r| *r == Err(AuthError::UnknownKey)));
    assert_eq!(fx.server.hits(), 1);
}

#[tokio::test]
async fn stale_keys_are_refreshed_and_revoked_keys_dropped() {
    let fx = Fixture::new(jwks(&[RSA.jwk("old"), EC.jwk("new")])).await;
    assert!(fx.check(&RSA.sign("old", &fx.claims())).await.is_ok());
    fx.server.serve(jwks(&[EC.jwk("new")]));

    // Within the cache's maximum age the removed key still works, without a fetch.
    fx.clock.advance(chrono::Duration::minutes(9));
    assert!(fx.check(&RSA.sign("old", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 1);

    // Past it, the next token triggers a refresh, which drops the key.
    fx.clock.advance(chrono::Duration::minutes(1));
    assert_eq!(
        fx.check(&RSA.sign("old", &fx.claims())).await,
        Err(AuthError::UnknownKey)
    );
    assert_eq!(fx.server.hits(), 2);
    assert!(fx.check(&EC.sign("new", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 2);
}

#[tokio::test]
async fn stale_keys_stay_in_use_while_the_endpoint_is_down() {
    let fx = Fixture::new(jwks(&[ED.jwk("ed-1")])).await;
    assert!(fx.check(&ED.sign("ed-1", &fx.claims())).await.is_ok());
    fx.server.answer(503, "down");

    fx.clock.advance(chrono::Duration::minutes(11));
    assert!(fx.check(&ED.sign("ed-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 2, "a refresh was attempted");
    assert!(fx.check(&ED.sign("ed-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 2, "and is not retried within the window");
    fx.clock.advance(chrono::Duration::seconds(30));
    assert!(fx.check(&ED.sign("ed-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 3);

    // Once it is back, the refresh lands and the cache is fresh again.
    fx.server.serve(jwks(&[ED.jwk("ed-1")]));
    fx.clock.advance(chrono::Duration::seconds(30));
    assert!(fx.check(&ED.sign("ed-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 4);
    fx.clock.advance(chrono::Duration::seconds(60));
    assert!(fx.check(&ED.sign("ed-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 4);
}

#[tokio::test]
async fn fetch_failures_reject_tokens_without_crashing() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let token = || RSA.sign("rsa-1", &fx.claims());
    let failures: [(u16, &str); 5] = [
        (500, "oops"),
        (404, "{}"),
        (200, "not json"),
        (200, r#"{"keys": "nope"}"#),
        (
            200,
            r#"{"keys": [{"kty": "oct", "kid": "rsa-1", "k": "c2VjcmV0"}]}"#,
        ),
    ];
    for (i, (status, body)) in failures.into_iter().enumerate() {
        fx.server.answer(status, body);
        assert_eq!(
            fx.check(&token()).await,
            Err(AuthError::KeysUnavailable),
            "{body}"
        );
        assert_eq!(fx.server.hits(), i + 1);
        // Within the window there is no new attempt.
        assert_eq!(fx.check(&token()).await, Err(AuthError::KeysUnavailable));
        assert_eq!(fx.server.hits(), i + 1);
        fx.clock.advance(chrono::Duration::seconds(30));
    }
    fx.server.serve(jwks(&[RSA.jwk("rsa-1")]));
    assert!(fx.check(&token()).await.is_ok());
}

#[tokio::test]
async fn an_oversized_key_set_is_refused() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1")])).await;
    let padding = "x".repeat(MAX_JWKS_BYTES);
    fx.server
        .serve(json!({"keys": [RSA.jwk("rsa-1")], "padding": padding}));
    assert_eq!(
        fx.auth.refresh().await,
        Err(JwksError::TooLarge(MAX_JWKS_BYTES))
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_rejects_tokens() {
    // A port that was just free: connecting is refused at once.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let clock = start_clock();
    let auth = JwksAuthenticator::new(
        Url::parse(&format!("http://{addr}/jwks")).unwrap(),
        jwks_rules(),
        http(),
        clock.clone(),
    );
    let token = RSA.sign("rsa-1", &claims_at(&clock));
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        auth.authenticate(Some(&format!("Bearer {token}"))),
    )
    .await
    .expect("bounded");
    assert_eq!(result, Err(AuthError::KeysUnavailable));
    assert!(matches!(auth.refresh().await, Err(JwksError::Request(_))));
}

#[tokio::test]
async fn refresh_warms_the_cache() {
    let fx = Fixture::new(jwks(&[RSA.jwk("rsa-1"), EC.jwk("ec-1"), ED.jwk("ed-1")])).await;
    assert_eq!(fx.auth.refresh().await, Ok(3));
    assert_eq!(fx.server.hits(), 1);
    assert!(fx.check(&EC.sign("ec-1", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 1);
}

#[test]
fn only_usable_signing_keys_are_taken_from_the_set() {
    let mut small_rsa = RSA.jwk("small");
    small_rsa["n"] = json!(URL_SAFE_NO_PAD.encode([0xC5u8; 128]));
    let mut p384 = EC.jwk("p384");
    p384["crv"] = json!("P-384");
    let mut short_x = ED.jwk("short");
    short_x["x"] = json!(URL_SAFE_NO_PAD.encode([1u8; 31]));
    let mut rs_as_ps = RSA.jwk("ps");
    rs_as_ps["alg"] = json!("PS256");
    let mut enc = RSA.jwk("enc");
    enc["use"] = json!("enc");
    let mut ops = EC.jwk("ops");
    ops["key_ops"] = json!(["sign"]);
    let mut verify_ops = EC.jwk("verify-ops");
    verify_ops["key_ops"] = json!(["verify"]);
    let mut no_kid = RSA.jwk("x");
    no_kid.as_object_mut().unwrap().remove("kid");
    let mut declared = ED.jwk("declared");
    declared["alg"] = json!("EdDSA");
    let mut padded = EC.jwk("padded");
    let x = padded["x"].as_str().unwrap().to_owned();
    padded["x"] = json!(format!("{x}="));

    let doc = jwks(&[
        RSA.jwk("rsa"),
        small_rsa,
        p384,
        short_x,
        rs_as_ps,
        enc,
        ops,
        verify_ops,
        no_kid,
        declared,
        padded,
        json!({"kty": "oct", "kid": "hmac", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}),
        json!({"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"}),
        json!("not an object"),
    ]);
    let keys = parse_jwks(doc.to_string().as_bytes()).unwrap();
    let mut kids: Vec<(&str, Algorithm)> = keys
        .iter()
        .flat_map(|(kid, keys)| keys.iter().map(move |k| (kid.as_str(), k.alg)))
        .collect();
    kids.sort_by_key(|(kid, _)| *kid);
    assert_eq!(
        kids,
        [
            ("declared", Algorithm::EdDSA),
            ("padded", Algorithm::ES256),
            ("rsa", Algorithm::RS256),
            ("verify-ops", Algorithm::ES256),
        ]
    );

    assert_eq!(
        parse_jwks(jwks(&[]).to_string().as_bytes()).err(),
        Some(JwksError::NoUsableKeys)
    );
    assert!(matches!(parse_jwks(b"[]"), Err(JwksError::Parse(_))));
}

// ---------------------------------------------------------------------------------------------
// Shared secret mode
// ---------------------------------------------------------------------------------------------

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

#[tokio::test]
async fn hs256_tokens_are_accepted_in_secret_mode() {
    let (auth, secret, clock) = hs_fixture(None, None);
    let claims = claims_at(&clock);
    let principal = hs_check(&auth, &hs_sign(&secret, Algorithm::HS256, &claims))
        .await
        .unwrap();
    assert_eq!(principal.subject, "svc-billing");
    assert_eq!(principal.scopes, scopes(&[SCOPE_READ, SCOPE_WRITE]));
    assert_eq!(
        principal.envs,
        EnvGrant::Some([env(ENV_A), env(ENV_B)].into())
    );

    // Issuer and audience are optional here: without them configured, neither is looked at.
    let claims = with(without(claims_at(&clock), "iss"), "aud", json!("anyone"));
    assert!(
        hs_check(&auth, &hs_sign(&secret, Algorithm::HS256, &claims))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn secret_mode_rejects_everything_else() {
    let (auth, secret, clock) = hs_fixture(None, None);
    let claims = claims_at(&clock);

    let wrong_secret = random_hex(32);
    assert_eq!(
        hs_check(&auth, &hs_sign(&wrong_secret, Algorithm::HS256, &claims)).await,
        Err(AuthError::BadSignature)
    );
    for alg in [Algorithm::HS384, Algorithm::HS512] {
        assert_eq!(
            hs_check(&auth, &hs_sign(&secret, alg, &claims)).await,
            Err(AuthError::UnsupportedAlgorithm)
        );
    }
    assert_eq!(
        hs_check(&auth, &RSA.sign("rsa-1", &claims)).await,
        Err(AuthError::UnsupportedAlgorithm)
    );
    assert_eq!(
        hs_check(&auth, &craft(&json!({"alg": "none"}), &claims, b"")).await,
        Err(AuthError::UnsupportedAlgorithm)
    );
    let expired = with(claims.clone(), "exp", json!(clock.now().timestamp() - 31));
    assert_eq!(
        hs_check(&auth, &hs_sign(&secret, Algorithm::HS256, &expired)).await,
        Err(AuthError::Expired)
    );
    let bad_envs = with(claims, "envs", json!(["nope"]));
    assert_eq!(
        hs_check(&auth, &hs_sign(&secret, Algorithm::HS256, &bad_envs)).await,
        Err(invalid("envs"))
    );
    assert_eq!(auth.authenticate(None).await, Err(AuthError::MissingToken));
}

#[tokio::test]
async fn secret_mode_checks_issuer_and_audience_when_configured() {
    let (auth, secret, clock) = hs_fixture(Some(ISSUER), Some(AUDIENCE));
    let sign = |claims: Value| hs_sign(&secret, Algorithm::HS256, &claims);
    assert!(hs_check(&auth, &sign(claims_at(&clock))).await.is_ok());
    assert_eq!(
        hs_check(&auth, &sign(without(claims_at(&clock), "iss"))).await,
        Err(AuthError::WrongIssuer)
    );
    assert_eq!(
        hs_check(&auth, &sign(with(claims_at(&clock), "aud", json!("x")))).await,
        Err(AuthError::WrongAudience)
    );
}

// ---------------------------------------------------------------------------------------------
// Development token
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_dev_token_is_accepted_as_an_admin() {
    let (auth, token) = DevTokenAuthenticator::generate();
    let principal = auth
        .authenticate(Some(&format!("Bearer {token}")))
        .await
        .unwrap();
    assert!(principal.dev);
    assert_eq!(principal.envs, EnvGrant::All);
    assert!(principal.has_scope(SCOPE_ADMIN));
    assert_eq!(principal, DevTokenAuthenticator::principal());
}

#[tokio::test]
async fn any_other_token_is_rejected_in_dev_mode() {
    let (auth, token) = DevTokenAuthenticator::generate();
    let (_, other) = DevTokenAuthenticator::generate();
    let mut flipped = token.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let candidates = [
        other.as_str(),
        flipped.as_str(),
        &token[..token.len() - 1],
        DEV_TOKEN_PREFIX,
        "dev",
    ];
    for candidate in candidates {
        let err = auth
            .authenticate(Some(&format!("Bearer {candidate}")))
            .await
            .unwrap_err();
        assert_eq!(err, AuthError::Unrecognised);
        assert_no_leak(&err, &token);
    }
    let longer = format!("{token}A");
    assert_eq!(
        auth.authenticate(Some(&format!("Bearer {longer}"))).await,
        Err(AuthError::Unrecognised)
    );
    assert_eq!(auth.authenticate(None).await, Err(AuthError::MissingToken));
    assert_eq!(
        auth.authenticate(Some(&format!("Basic {token}"))).await,
        Err(AuthError::UnsupportedScheme)
    );
}

#[test]
fn dev_tokens_are_random_and_long() {
    let (a, token_a) = DevTokenAuthenticator::generate();
    let (_, token_b) = DevTokenAuthenticator::generate();
    assert_ne!(token_a, token_b);
    let random = token_a.strip_prefix(DEV_TOKEN_PREFIX).unwrap();
    assert_eq!(URL_SAFE_NO_PAD.decode(random).unwrap().len(), 32);
    assert!(bearer_token(Some(&format!("Bearer {token_a}"))).is_ok());
    assert!(!format!("{a:?}").contains(random));
}

// ---------------------------------------------------------------------------------------------
// Configuration and build
// ---------------------------------------------------------------------------------------------

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn nothing_configured_leaves_the_choice_to_the_caller() {
    assert!(AuthConfig::from_lookup(lookup(&[])).unwrap().is_none());
    assert!(
        AuthConfig::from_lookup(lookup(&[(ENV_JWKS_URL, " "), (ENV_HS256_SECRET, "")]))
            .unwrap()
            .is_none()
    );
}

#[test]
fn jwks_mode_requires_issuer_and_audience() {
    let config = AuthConfig::from_lookup(lookup(&[
        (ENV_JWKS_URL, "https://idp.test/jwks.json"),
        (ENV_ISSUER, ISSUER),
        (ENV_AUDIENCE, AUDIENCE),
    ]))
    .unwrap()
    .unwrap();
    assert!(
        matches!(&config.keys, KeySource::Jwks { url } if url.as_str() == "https://idp.test/jwks.json")
    );
    assert_eq!(config.rules, jwks_rules());

    let err = AuthConfig::from_lookup(lookup(&[
        (ENV_JWKS_URL, "https://idp.test/jwks.json"),
        (ENV_AUDIENCE, AUDIENCE),
    ]))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "SENTIN8_CRON_JWT_ISSUER is required when SENTIN8_CRON_JWKS_URL is set"
    );
    let err = AuthConfig::from_lookup(lookup(&[
        (ENV_JWKS_URL, "https://idp.test/jwks.json"),
        (ENV_ISSUER, ISSUER),
    ]))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "SENTIN8_CRON_JWT_AUDIENCE is required when SENTIN8_CRON_JWKS_URL is set"
    );
}

#[test]
fn inconsistent_configurations_are_errors() {
    let secret = random_hex(32);
    let err = AuthConfig::from_lookup(lookup(&[
        (ENV_JWKS_URL, "https://idp.test/jwks.json"),
        (ENV_HS256_SECRET, &secret),
        (ENV_ISSUER, ISSUER),
        (ENV_AUDIENCE, AUDIENCE),
    ]))
    .unwrap_err();
    assert_eq!(err, AuthConfigError::BothModes);
    assert_eq!(
        err.to_string(),
        "set only one of SENTIN8_CRON_JWKS_URL and SENTIN8_CRON_JWT_HS256_SECRET"
    );

    for url in [
        "ftp://idp.test/jwks",
        "file:///etc/jwks.json",
        "idp.test/jwks",
        "https://",
    ] {
        let err = AuthConfig::from_lookup(lookup(&[
            (ENV_JWKS_URL, url),
            (ENV_ISSUER, ISSUER),
            (ENV_AUDIENCE, AUDIENCE),
        ]))
        .unwrap_err();
        assert!(
            matches!(
                err,
                AuthConfigError::InvalidUrl {
                    var: ENV_JWKS_URL,
                    ..
                }
            ),
            "{url}: {err}"
        );
    }

    let err = AuthConfig::from_lookup(lookup(&[(ENV_HS256_SECRET, "too-short")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "SENTIN8_CRON_JWT_HS256_SECRET: must be at least 32 bytes"
    );

    let err = AuthConfig::from_lookup(lookup(&[(ENV_ISSUER, ISSUER)])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "SENTIN8_CRON_JWT_ISSUER is set but neither SENTIN8_CRON_JWKS_URL nor SENTIN8_CRON_JWT_HS256_SECRET is"
    );

    let err = AuthConfig::from_lookup(lookup(&[(ENV_HS256_SECRET, &secret), (ENV_LEEWAY, "soon")]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"SENTIN8_CRON_JWT_LEEWAY: "soon" is not a duration (examples: 30s, 2m, 500ms)"#
    );
    let err = AuthConfig::from_lookup(lookup(&[(ENV_HS256_SECRET, &secret), (ENV_LEEWAY, "6m")]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "SENTIN8_CRON_JWT_LEEWAY: must be at most 300s"
    );
}

#[test]
fn secret_mode_settings_are_read_and_hidden() {
    let secret = random_hex(32);
    let config = AuthConfig::from_lookup(lookup(&[
        (ENV_HS256_SECRET, &secret),
        (ENV_LEEWAY, "5s"),
        (ENV_SCOPE_CLAIM, "scp"),
        (ENV_ENVS_CLAIM, "tenants"),
        (ENV_ISSUER, ISSUER),
    ]))
    .unwrap()
    .unwrap();
    assert!(matches!(config.keys, KeySource::Hs256(_)));
    assert_eq!(
        config.rules,
        ClaimRules {
            issuer: Some(ISSUER.into()),
            audience: None,
            leeway: Duration::from_secs(5),
            scope_claim: "scp".into(),
            envs_claim: "tenants".into(),
        }
    );
    let shown = format!("{config:?} {config:#?}");
    assert!(!shown.contains(&secret), "{shown}");
    assert!(shown.contains("<redacted>"));

    let with_password = AuthConfig::from_lookup(lookup(&[
        (ENV_JWKS_URL, "https://cron:hunter2-pw@idp.test/jwks"),
        (ENV_ISSUER, ISSUER),
        (ENV_AUDIENCE, AUDIENCE),
    ]))
    .unwrap()
    .unwrap();
    let shown = format!("{with_password:?}");
    assert!(
        !shown.contains("hunter2-pw") && shown.contains("idp.test"),
        "{shown}"
    );
}

#[tokio::test]
async fn build_makes_the_configured_authenticator() {
    let server = JwksServer::start(jwks(&[ED.jwk("ed-1")])).await;
    let clock = start_clock();
    let config = AuthConfig::from_lookup(lookup(&[
        (ENV_JWKS_URL, server.url.as_str()),
        (ENV_ISSUER, ISSUER),
        (ENV_AUDIENCE, AUDIENCE),
    ]))
    .unwrap()
    .unwrap();
    let auth = build(&config, http(), clock.clone());
    let token = ED.sign("ed-1", &claims_at(&clock));
    assert!(
        auth.authenticate(Some(&format!("Bearer {token}")))
            .await
            .is_ok()
    );
    assert_eq!(server.hits(), 1);

    let secret = random_hex(32);
    let config = AuthConfig::from_lookup(lookup(&[(ENV_HS256_SECRET, &secret)]))
        .unwrap()
        .unwrap();
    let auth = build(&config, http(), clock.clone());
    let token = hs_sign(&secret, Algorithm::HS256, &claims_at(&clock));
    assert!(
        auth.authenticate(Some(&format!("Bearer {token}")))
            .await
            .is_ok()
    );
    let token = ED.sign("ed-1", &claims_at(&clock));
    assert_eq!(
        auth.authenticate(Some(&format!("Bearer {token}"))).await,
        Err(AuthError::UnsupportedAlgorithm)
    );
}

#[tokio::test]
async fn a_clock_stepping_backwards_costs_one_fetch_not_a_lockout() {
    let fx = Fixture::new(jwks(&[RSA.jwk("a")])).await;
    assert!(fx.check(&RSA.sign("a", &fx.claims())).await.is_ok());
    fx.server.serve(jwks(&[RSA.jwk("a"), EC.jwk("b")]));
    fx.clock.advance(chrono::Duration::hours(-1));
    // The new key is found straight away rather than an hour later.
    assert!(fx.check(&EC.sign("b", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 2);
    // And the cache is consistent with the new time again.
    assert!(fx.check(&RSA.sign("a", &fx.claims())).await.is_ok());
    assert!(fx.check(&EC.sign("b", &fx.claims())).await.is_ok());
    assert_eq!(fx.server.hits(), 2);
}
