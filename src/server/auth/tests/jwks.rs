//! The JWK set: fetching, caching, rotation and refusals.

use super::*;

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
