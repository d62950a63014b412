//! The header, the challenge, and what a verified token must carry (JWKS mode).

use super::*;

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
                expires_at: principal.expires_at,
            },
            "{kid}"
        );
        assert_eq!(
            principal.expires_at.map(|at| at.timestamp()),
            fx.claims()["exp"].as_i64(),
            "{kid}: the expiry is the token's `exp`"
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
