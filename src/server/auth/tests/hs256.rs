//! The shared-secret mode.

use super::*;

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
