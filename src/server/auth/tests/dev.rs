//! The development token.

use super::*;

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

#[tokio::test]
async fn a_fixed_dev_token_is_accepted_and_nothing_else() {
    let token = "s8c_dev_kept-across-restarts-0123456789";
    let auth = DevTokenAuthenticator::fixed(token).unwrap();
    let principal = auth
        .authenticate(Some(&format!("Bearer {token}")))
        .await
        .unwrap();
    assert_eq!(principal, DevTokenAuthenticator::principal());
    for other in [
        &token[..token.len() - 1],
        "s8c_dev_kept-across-restarts-0123456788",
    ] {
        let err = auth
            .authenticate(Some(&format!("Bearer {other}")))
            .await
            .unwrap_err();
        assert_eq!(err, AuthError::Unrecognised);
    }
}

#[test]
fn a_fixed_dev_token_must_be_long_and_printable() {
    assert_eq!(
        DevTokenAuthenticator::fixed("short").unwrap_err(),
        DevTokenError::TooShort
    );
    assert_eq!(
        DevTokenAuthenticator::fixed(&"x".repeat(MIN_FIXED_TOKEN_LEN - 1)).unwrap_err(),
        DevTokenError::TooShort
    );
    assert_eq!(
        DevTokenAuthenticator::fixed("a token with spaces in it, long enough").unwrap_err(),
        DevTokenError::NotPrintable
    );
    assert!(DevTokenAuthenticator::fixed(&"x".repeat(MIN_FIXED_TOKEN_LEN)).is_ok());
}
