//! The settings: flags (or their variables) to an [`AuthConfig`], and the authenticator it
//! builds.

use super::*;
use crate::server::auth::config::AuthConfigError;
use crate::util::setting::parse_flags;

fn args(flags: &[&str]) -> AuthArgs {
    parse_flags(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
}

/// The configuration these flags give (the process environment is not read).
fn config(flags: &[&str]) -> Result<Option<AuthConfig>, AuthConfigError> {
    AuthConfig::from_args(&args(flags))
}

fn refused(flags: &[&str]) -> String {
    parse_flags::<AuthArgs>(flags).unwrap_err().to_string()
}

const JWKS_URL: &str = "--jwks-url=https://idp.test/jwks.json";

fn issuer() -> String {
    format!("--jwt-issuer={ISSUER}")
}

fn audience() -> String {
    format!("--jwt-audience={AUDIENCE}")
}

#[test]
fn nothing_configured_leaves_the_choice_to_the_caller() {
    assert!(config(&[]).unwrap().is_none());
    assert!(
        config(&["--jwks-url", " ", "--jwt-hs256-secret="])
            .unwrap()
            .is_none()
    );
}

#[test]
fn jwks_mode_requires_issuer_and_audience() {
    let config = config(&[JWKS_URL, &issuer(), &audience()])
        .unwrap()
        .unwrap();
    assert!(
        matches!(&config.keys, KeySource::Jwks { url } if url.as_str() == "https://idp.test/jwks.json")
    );
    assert_eq!(config.rules, jwks_rules());

    let err = self::config(&[JWKS_URL, &audience()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--jwt-issuer (SENTIN8_CRON_JWT_ISSUER) is required when --jwks-url \
         (SENTIN8_CRON_JWKS_URL) is set"
    );
    let err = self::config(&[JWKS_URL, &issuer()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--jwt-audience (SENTIN8_CRON_JWT_AUDIENCE) is required when --jwks-url \
         (SENTIN8_CRON_JWKS_URL) is set"
    );
}

#[test]
fn inconsistent_configurations_are_errors() {
    let secret = format!("--jwt-hs256-secret={}", random_hex(32));
    let err = config(&[JWKS_URL, &secret, &issuer(), &audience()]).unwrap_err();
    assert_eq!(err, AuthConfigError::BothModes);
    assert_eq!(
        err.to_string(),
        "set only one of --jwks-url (SENTIN8_CRON_JWKS_URL) and --jwt-hs256-secret \
         (SENTIN8_CRON_JWT_HS256_SECRET)"
    );

    for url in [
        "ftp://idp.test/jwks",
        "file:///etc/jwks.json",
        "idp.test/jwks",
        "https://",
    ] {
        let err = config(&["--jwks-url", url, &issuer(), &audience()]).unwrap_err();
        assert!(
            matches!(err, AuthConfigError::InvalidUrl { .. }),
            "{url}: {err}"
        );
        assert!(
            err.to_string()
                .starts_with("--jwks-url (SENTIN8_CRON_JWKS_URL): "),
            "{url}: {err}"
        );
    }

    let err = config(&["--jwt-hs256-secret=too-short"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--jwt-hs256-secret (SENTIN8_CRON_JWT_HS256_SECRET): must be at least 32 bytes"
    );

    let err = config(&[&issuer()]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--jwt-issuer (SENTIN8_CRON_JWT_ISSUER) is set but neither --jwks-url \
         (SENTIN8_CRON_JWKS_URL) nor --jwt-hs256-secret (SENTIN8_CRON_JWT_HS256_SECRET) is"
    );

    let err = refused(&[&secret, "--jwt-leeway=soon"]);
    assert!(
        err.contains("--jwt-leeway")
            && err.contains(r#""soon" is not a duration (examples: 30s, 2m, 500ms)"#),
        "{err}"
    );
    let err = refused(&[&secret, "--jwt-leeway=6m"]);
    assert!(
        err.contains("--jwt-leeway") && err.contains("must be at most 300s"),
        "{err}"
    );
}

#[test]
fn secret_mode_settings_are_read_and_hidden() {
    let secret = random_hex(32);
    let secret_flag = format!("--jwt-hs256-secret={secret}");
    let args = args(&[
        &secret_flag,
        "--jwt-leeway=5s",
        "--jwt-scope-claim=scp",
        "--jwt-envs-claim=tenants",
        &issuer(),
    ]);
    let config = AuthConfig::from_args(&args).unwrap().unwrap();
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
    let shown = format!("{config:?} {config:#?} {args:?}");
    assert!(!shown.contains(&secret), "{shown}");
    assert!(shown.contains("<redacted>"));

    let with_password = self::config(&[
        "--jwks-url=https://cron:hunter2-pw@idp.test/jwks",
        &issuer(),
        &audience(),
    ])
    .unwrap()
    .unwrap();
    let shown = format!("{with_password:?}");
    assert!(
        !shown.contains("hunter2-pw") && shown.contains("idp.test"),
        "{shown}"
    );
}

#[test]
fn the_defaults_are_the_claim_rules_defaults() {
    let secret = format!("--jwt-hs256-secret={}", random_hex(32));
    let config = config(&[&secret]).unwrap().unwrap();
    assert_eq!(config.rules, ClaimRules::default());
}

#[tokio::test]
async fn build_makes_the_configured_authenticator() {
    let server = JwksServer::start(jwks(&[ED.jwk("ed-1")])).await;
    let clock = start_clock();
    let url = format!("--jwks-url={}", server.url);
    let config = config(&[&url, &issuer(), &audience()]).unwrap().unwrap();
    let auth = build(&config, http(), clock.clone());
    let token = ED.sign("ed-1", &claims_at(&clock));
    assert!(
        auth.authenticate(Some(&format!("Bearer {token}")))
            .await
            .is_ok()
    );
    assert_eq!(server.hits(), 1);

    let secret = random_hex(32);
    let config = self::config(&[&format!("--jwt-hs256-secret={secret}")])
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
