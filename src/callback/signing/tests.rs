use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use jsonwebtoken::jwk::{JwkSet, ThumbprintHash};
use jsonwebtoken::{DecodingKey, Validation};
use serde_json::{Map, Value};

use super::*;

const ISSUER: &str = "https://cron.example.com";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

fn claims(target: &str, body: &[u8]) -> CallClaims {
    CallClaims::for_call(
        &url::Url::parse(target).unwrap(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        Uuid::now_v7(),
        body,
        now(),
    )
    .unwrap()
}

/// What a receiver does, with an independent JOSE implementation (jsonwebtoken): find the key
/// by `kid` in the published set, check signature, `iss`, `aud` and `exp`, then compare the
/// body hash with the bytes received.
fn verify(
    token: &str,
    jwks: &Value,
    audience: &str,
    body: &[u8],
) -> Result<Map<String, Value>, String> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
    let kid = header.kid.ok_or("no kid")?;
    let set: JwkSet = serde_json::from_value(jwks.clone()).map_err(|e| e.to_string())?;
    let jwk = set.find(&kid).ok_or("unknown kid")?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(header.alg);
    validation.set_audience(&[audience]);
    validation.set_issuer(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
    validation.leeway = 0;
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| e.to_string())?;
    let claims = data.claims;
    if claims.get("body_sha256").and_then(Value::as_str) != Some(&body_sha256(body)) {
        return Err("body hash mismatch".into());
    }
    Ok(claims)
}

fn ed25519() -> (SigningKey, String) {
    SigningKey::generate_ed25519().unwrap()
}

fn es256_pem() -> String {
    let doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
        .unwrap();
    pem_encode(doc.as_ref())
}

#[test]
fn an_ed25519_signed_call_verifies_against_the_published_jwks() {
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    let body = br#"{"schedule_id":"x","payload":{"a":1}}"#;
    let claims = claims("https://billing.svc.example.com/base/path", body);
    let token = signer.sign(&claims).unwrap();

    let header = jsonwebtoken::decode_header(&token).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::EdDSA);
    assert_eq!(header.kid.as_deref(), Some(signer.current().kid()));

    let verified = verify(
        &token,
        &signer.jwks(),
        "https://billing.svc.example.com",
        body,
    )
    .unwrap();
    assert_eq!(verified["iss"], ISSUER);
    assert_eq!(verified["aud"], "https://billing.svc.example.com");
    assert_eq!(verified["env_id"], claims.env_id.to_string());
    assert_eq!(verified["schedule_id"], claims.schedule_id.to_string());
    assert_eq!(verified["job_id"], claims.job_id.to_string());
    assert_eq!(verified["jti"], claims.jti);
    assert_eq!(verified["iat"], claims.iat);
}

#[test]
fn an_es256_key_from_pem_signs_verifiable_calls() {
    let key = SigningKey::from_pem(es256_pem().as_bytes(), "test").unwrap();
    assert_eq!(key.algorithm(), SigningAlgorithm::ES256);
    let signer = CallSigner::new(ISSUER, key, Vec::new()).unwrap();
    let body = b"{}";
    let token = signer
        .sign(&claims("https://billing.internal:8443", body))
        .unwrap();
    assert_eq!(
        jsonwebtoken::decode_header(&token).unwrap().alg,
        jsonwebtoken::Algorithm::ES256
    );
    verify(
        &token,
        &signer.jwks(),
        "https://billing.internal:8443",
        body,
    )
    .unwrap();
}

#[test]
fn the_wrong_audience_is_refused() {
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    let token = signer
        .sign(&claims("https://a.svc.example.com", b"{}"))
        .unwrap();
    let err = verify(&token, &signer.jwks(), "https://b.svc.example.com", b"{}").unwrap_err();
    assert!(err.contains("Audience"), "{err}");
    // Another port is another origin.
    assert!(
        verify(
            &token,
            &signer.jwks(),
            "https://a.svc.example.com:8443",
            b"{}"
        )
        .is_err()
    );
}

#[test]
fn a_tampered_body_or_token_fails() {
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    let body = br#"{"amount":1}"#;
    let token = signer
        .sign(&claims("https://a.svc.example.com", body))
        .unwrap();
    let aud = "https://a.svc.example.com";
    assert_eq!(
        verify(&token, &signer.jwks(), aud, br#"{"amount":1000}"#).unwrap_err(),
        "body hash mismatch"
    );

    // Re-pointing the claims at another audience breaks the signature.
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let mut payload: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
    payload["aud"] = Value::String("https://b.svc.example.com".into());
    parts[1] = URL_SAFE_NO_PAD.encode(payload.to_string());
    let forged = parts.join(".");
    assert!(verify(&forged, &signer.jwks(), "https://b.svc.example.com", body).is_err());
}

#[test]
fn a_rotated_set_still_verifies_calls_signed_by_the_previous_key() {
    let (old_key, old_pem) = ed25519();
    let old_kid = old_key.kid().to_owned();
    let before = CallSigner::new(ISSUER, old_key, Vec::new()).unwrap();
    let body = b"{}";
    let aud = "https://a.svc.example.com";
    let signed_before = before.sign(&claims(aud, body)).unwrap();

    let (new_key, _) = ed25519();
    let new_kid = new_key.kid().to_owned();
    let old_again = SigningKey::from_pem(old_pem.as_bytes(), "old").unwrap();
    let after = CallSigner::new(ISSUER, new_key, vec![old_again]).unwrap();
    let jwks = after.jwks();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(
        kids,
        [new_kid.as_str(), old_kid.as_str()],
        "current key first"
    );

    verify(&signed_before, &jwks, aud, body).unwrap();
    let signed_after = after.sign(&claims(aud, body)).unwrap();
    assert_eq!(
        jsonwebtoken::decode_header(&signed_after).unwrap().kid,
        Some(new_kid)
    );
    verify(&signed_after, &jwks, aud, body).unwrap();
    // Once the previous key is withdrawn, its calls no longer verify.
    assert_eq!(
        verify(
            &signed_before,
            &CallSigner::generate_dev(ISSUER).unwrap().jwks(),
            aud,
            body
        )
        .unwrap_err(),
        "unknown kid"
    );
}

#[test]
fn calls_expire_within_five_minutes() {
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    let check = |signer: &CallSigner| {
        let token = signer.sign(&claims("https://a.example", b"")).unwrap();
        let payload: Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(token.split('.').nth(1).unwrap())
                .unwrap(),
        )
        .unwrap();
        payload["exp"].as_i64().unwrap() - payload["iat"].as_i64().unwrap()
    };
    let lifetime = check(&signer);
    assert!(lifetime > 0 && lifetime <= 300, "{lifetime}");
    let short = signer.with_ttl(Duration::from_secs(60)).unwrap();
    assert_eq!(check(&short), 60);
    assert!(matches!(
        short.with_ttl(Duration::from_secs(301)),
        Err(SigningError::InvalidTtl)
    ));
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    assert!(matches!(
        signer.with_ttl(Duration::from_millis(500)),
        Err(SigningError::InvalidTtl)
    ));
}

#[test]
fn an_expired_call_is_refused_by_a_receiver() {
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    let mut c = claims("https://a.example", b"{}");
    c.iat = now() - 301;
    let token = signer.sign(&c).unwrap();
    let err = verify(&token, &signer.jwks(), "https://a.example", b"{}").unwrap_err();
    assert!(err.contains("Expired"), "{err}");
}

#[test]
fn kids_are_rfc7638_thumbprints() {
    let ed = CallSigner::generate_dev(ISSUER).unwrap();
    let es = CallSigner::new(
        ISSUER,
        SigningKey::from_pem(es256_pem().as_bytes(), "es").unwrap(),
        Vec::new(),
    )
    .unwrap();
    for signer in [ed, es] {
        let set: JwkSet = serde_json::from_value(signer.jwks()).unwrap();
        let jwk = &set.keys[0];
        assert_eq!(
            jwk.thumbprint(ThumbprintHash::SHA256).unwrap(),
            signer.current().kid()
        );
        assert_eq!(jwk.common.key_id.as_deref(), Some(signer.current().kid()));
    }
}

#[test]
fn the_published_set_holds_no_private_material() {
    let signer = CallSigner::generate_dev(ISSUER).unwrap();
    let jwks = signer.jwks();
    let key = jwks["keys"][0].as_object().unwrap();
    let mut names: Vec<&str> = key.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["alg", "crv", "kid", "kty", "use", "x"]);
    assert_eq!(key["alg"], "EdDSA");
    assert_eq!(key["use"], "sig");
}

#[test]
fn the_audience_is_the_normalized_origin() {
    let origin = |s: &str| target_origin(&url::Url::parse(s).unwrap());
    assert_eq!(
        origin("https://Billing.SVC.example.com:443/x/y").unwrap(),
        "https://billing.svc.example.com"
    );
    assert_eq!(origin("http://127.0.0.1:80").unwrap(), "http://127.0.0.1");
    assert_eq!(
        origin("http://127.0.0.1:9000/").unwrap(),
        "http://127.0.0.1:9000"
    );
    assert_eq!(origin("https://[::1]:8443").unwrap(), "https://[::1]:8443");
    assert_eq!(
        origin("https://bücher.example/").unwrap(),
        "https://xn--bcher-kva.example"
    );
    assert!(matches!(
        origin("ftp://a.example"),
        Err(SigningError::NoOrigin)
    ));
    assert!(matches!(
        origin("data:text/plain,hi"),
        Err(SigningError::NoOrigin)
    ));
}

#[test]
fn unsupported_keys_and_bad_configuration_are_refused() {
    for pem in [
        "not a key",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    ] {
        let err = SigningKey::from_pem(pem.as_bytes(), "k.pem").unwrap_err();
        assert!(matches!(err, SigningError::UnsupportedKey { .. }), "{err}");
        assert!(!err.to_string().contains("AAAA"));
    }
    // A P-384 key is EC but not ES256.
    let p384 = EcdsaKeyPair::generate_pkcs8(
        &aws_lc_rs::signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        &SystemRandom::new(),
    )
    .unwrap();
    assert!(matches!(
        SigningKey::from_pem(pem_encode(p384.as_ref()).as_bytes(), "p384"),
        Err(SigningError::UnsupportedKey { .. })
    ));

    let (key, pem) = ed25519();
    let twin = SigningKey::from_pem(pem.as_bytes(), "twin").unwrap();
    assert!(matches!(
        CallSigner::new(ISSUER, key, vec![twin]),
        Err(SigningError::DuplicateKey { .. })
    ));
    assert!(matches!(
        CallSigner::generate_dev(" "),
        Err(SigningError::EmptyIssuer)
    ));
    assert!(matches!(
        SigningKey::from_pem_file(Path::new("/nonexistent/key.pem")),
        Err(SigningError::Io { .. })
    ));
}

#[test]
fn dev_keys_persist_across_restarts_in_a_private_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentin8-cron.signing-key.pem");
    let first = CallSigner::load_or_create(ISSUER, &path).unwrap();
    let second = CallSigner::load_or_create(ISSUER, &path).unwrap();
    assert_eq!(first.current().kid(), second.current().kid());
    assert_eq!(first.current().algorithm(), SigningAlgorithm::EdDSA);

    // A call signed before the restart verifies against the key set after it.
    let token = first.sign(&claims("https://a.example", b"x")).unwrap();
    verify(&token, &second.jwks(), "https://a.example", b"x").unwrap();

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // The file is an ordinary PKCS#8 PEM that the PEM loader reads too.
    let loaded = SigningKey::from_pem_file(&path).unwrap();
    assert_eq!(loaded.kid(), first.current().kid());

    // A corrupt file is an error, never silently replaced.
    std::fs::write(&path, "garbage").unwrap();
    assert!(matches!(
        CallSigner::load_or_create(ISSUER, &path),
        Err(SigningError::UnsupportedKey { .. })
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"garbage");
}

#[test]
fn pem_files_load_current_and_previous_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (cur, cur_pem) = ed25519();
    let prev_path = dir.path().join("prev.pem");
    let cur_path = dir.path().join("cur.pem");
    std::fs::write(&cur_path, cur_pem).unwrap();
    std::fs::write(&prev_path, es256_pem()).unwrap();
    let signer = CallSigner::from_pem_files(ISSUER, &cur_path, &[prev_path.as_path()]).unwrap();
    assert_eq!(signer.current().kid(), cur.kid());
    let jwks = signer.jwks();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2);
    assert_eq!(jwks["keys"][1]["alg"], "ES256");
}

// Throwaway keys generated for this test with the openssl command line, as operators would:
// `openssl genpkey -algorithm ed25519`, `openssl genpkey -algorithm EC -pkeyopt
// ec_paramgen_curve:P-256`, `openssl ecparam -genkey -noout -name prime256v1` (SEC1, not
// PKCS#8) and `openssl genpkey -algorithm RSA`.
const OPENSSL_ED25519: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEICE2fboUEg/mhePIQfBo6P6w1jwVIpDW/5YTfmbIKl7+
-----END PRIVATE KEY-----
";
const OPENSSL_P256_PKCS8: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgs5QbQvP17bkRSLTI
51mRXFy4ekgi4EDCbLW4luRRrkqhRANCAAQ6K8F4vUf1dxOWde/zmagk/dw6U3iv
Ao5wFVpa10RGF/Um3cGWlX8ymsaUQQs3zogy33Lea1QH+zUXAGTqiBa0
-----END PRIVATE KEY-----
";
const OPENSSL_P256_SEC1: &str = "-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIKyVVSyjuY+K+++e2DmlD+dV8xxGuKigdlvRXrHIv1UBoAoGCCqGSM49
AwEHoUQDQgAEKkF+9d0Hp/XHo+IBewMoLbRNRbmvheYbywnOaLaQEe+uvyWbd13c
Gu+z7fJGHRSR8Wpe6nXja1cmP34jiEZSJA==
-----END EC PRIVATE KEY-----
";
const OPENSSL_RSA: &str = "-----BEGIN PRIVATE KEY-----
MIICeAIBADANBgkqhkiG9w0BAQEFAASCAmIwggJeAgEAAoGBALcJQaIAl8opzCRd
RIN31eoh1h+1wcP1Z9eZpl7IAIQX7uZjJ0OrORk7crewrx2Aq3QgdxWTaN9ZXF+6
hEKtP2V6QlA8Y/qB3b2FvWtMQ0k/AuM++2sqRH62OtH0VXTng8rDB9gYh6QoTsJg
1Hb0aTAIW4iMvlNPrHOapkAxZzCxAgMBAAECgYEApb4jCaDB0pXwvokabnYIZeBH
9iTvFhRV+Pywk6lGFldZxJPKzVLx/HBBnCbJG80U9K4lR4tZbs6LgD/0XjBlc2WB
pJm+CWnUTuX3u5praBfbRGnPYmBqDjGWM3f+b2JUt7SD52gqM1MY/QVpNcG4P2Wn
g68yKvw+xE5Y8SGzpDUCQQDfDrlLHahdHb93uP345a5x72sz98JtoNMJvLwL+seK
XybjeRiVNJxBA/6sW4KkKWCca4+3F6clGjpYpWlq/njrAkEA0hFrfQMHpluo7QTF
CnwSD/sboz5O5STHXYgi6sZO46QwbojVksCFRMYvVflq18mbwq7icont3gvSYxsi
MarV0wJBAM/lDzo9iCBRi5TwbHXAzJgQh6BF+Ybn8AoRSEr6D2SeTsaQpSLbiA7o
xEKsf9S1ZAAmGCqT9wsTqPHaKai5SMUCQCwhjLtOj6TbTLm+bsatGf5RepTo2ho5
h8iWeP9pedlI/QO7q2KRH247VGZzZ4a9zAMySlBVuasUQLahVKWqhhECQQDeWzdX
mXWZIIKutvAVFBEehthK5kTmSqrFjRJochsL4PlYPwptnuiyhDisylH0ZdMzsHtb
8K6Hn+ZI0P+/aPQQ
-----END PRIVATE KEY-----
";

#[test]
fn keys_made_with_openssl_load() {
    let ed = SigningKey::from_pem(OPENSSL_ED25519.as_bytes(), "ed.pem").unwrap();
    assert_eq!(ed.algorithm(), SigningAlgorithm::EdDSA);
    let es = SigningKey::from_pem(OPENSSL_P256_PKCS8.as_bytes(), "es.pem").unwrap();
    assert_eq!(es.algorithm(), SigningAlgorithm::ES256);
    for key in [ed, es] {
        let signer = CallSigner::new(ISSUER, key, Vec::new()).unwrap();
        let token = signer.sign(&claims("https://a.example", b"{}")).unwrap();
        verify(&token, &signer.jwks(), "https://a.example", b"{}").unwrap();
    }
    // Only PKCS#8 Ed25519 and P-256 keys are accepted.
    for (pem, name) in [(OPENSSL_P256_SEC1, "sec1.pem"), (OPENSSL_RSA, "rsa.pem")] {
        let err = SigningKey::from_pem(pem.as_bytes(), name).unwrap_err();
        assert!(
            matches!(err, SigningError::UnsupportedKey { .. }),
            "{name}: {err}"
        );
        assert!(err.to_string().contains(name));
    }
}

#[test]
fn every_signed_call_has_its_own_jti() {
    // A retry is a new call: the receiver tells it from a replay by its jti.
    let jtis: std::collections::HashSet<String> = (0..50)
        .map(|_| claims("https://billing.internal", b"{}").jti)
        .collect();
    assert_eq!(jtis.len(), 50);
}

#[test]
fn the_audience_is_the_canonical_origin_the_egress_policy_judged() {
    for (target, origin) in [
        ("http://[::ffff:7f00:1]:43100/run", "http://127.0.0.1:43100"),
        ("http://[::ffff:127.0.0.1]:43100", "http://127.0.0.1:43100"),
        ("http://2130706433:8080/x", "http://127.0.0.1:8080"),
        (
            "HTTPS://Billing.Internal.:443/v1",
            "https://billing.internal",
        ),
        (
            "https://billing.internal:8443",
            "https://billing.internal:8443",
        ),
        ("http://[0:0:0:0:0:0:0:1]:80/", "http://[::1]"),
        ("https://bücher.example/", "https://xn--bcher-kva.example"),
    ] {
        let url = url::Url::parse(target).unwrap();
        assert_eq!(target_origin(&url).unwrap(), origin, "{target}");
    }
    for not_http in ["ftp://billing.internal/", "file:///etc/passwd"] {
        let url = url::Url::parse(not_http).unwrap();
        assert!(target_origin(&url).is_err(), "{not_http}");
    }
}
