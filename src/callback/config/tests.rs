use super::*;
use crate::util::setting::parse_flags;

/// The settings these flags give (the process environment is not read).
fn config(flags: &[&str]) -> Result<DispatchConfig, ConfigError> {
    let args: CallbackArgs = parse_flags(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
    assert!(!format!("{args:?}").contains("hunter2"), "{args:?}");
    DispatchConfig::try_from(&args)
}

fn refused(flags: &[&str]) -> String {
    parse_flags::<CallbackArgs>(flags).unwrap_err().to_string()
}

#[test]
fn defaults_when_nothing_is_set() {
    let config = config(&[]).unwrap();
    assert_eq!(config.token, TokenSettings::None);
    assert_eq!(config.job_timeout, Duration::from_secs(30));
    assert_eq!(config.ca_file, None);
    assert!(config.user_agent.starts_with("sentin8-cron/"));
    assert_eq!(config, DispatchConfig::default());
}

#[test]
fn job_timeout_is_read_and_validated() {
    let config = config(&["--job-timeout", "500ms"]).unwrap();
    assert_eq!(config.job_timeout, Duration::from_millis(500));

    let err = refused(&["--job-timeout", "abc"]);
    assert!(
        err.contains("--job-timeout")
            && err.contains(r#""abc" is not a duration (examples: 30s, 2m, 500ms)"#),
        "{err}"
    );
    let err = refused(&["--job-timeout", "0s"]);
    assert!(
        err.contains("--job-timeout") && err.contains("must be greater than zero"),
        "{err}"
    );
}

#[test]
fn static_token_is_the_dev_fallback() {
    let config = config(&["--static-token", "dev"]).unwrap();
    assert_eq!(config.token, TokenSettings::Static(Secret::new("dev")));
}

#[test]
fn oauth2_wins_over_the_static_token() {
    let config = config(&[
        "--static-token=dev",
        "--m2m-token-url=https://idp.example/token",
        "--m2m-client-id=cron",
        "--m2m-client-secret=hunter2",
        "--m2m-scope=schedules:run",
        "--ca-file=ca.pem",
    ])
    .unwrap();
    assert_eq!(
        config.token,
        TokenSettings::OAuth2(OAuth2Settings {
            token_url: "https://idp.example/token".into(),
            client_id: "cron".into(),
            client_secret: Secret::new("hunter2"),
            scope: Some("schedules:run".into()),
            resource_param: Some("resource".into()),
            audience_param: Some("audience".into()),
        })
    );
    assert_eq!(config.ca_file, Some(PathBuf::from("ca.pem")));
}

#[test]
fn partial_oauth2_is_an_error_not_a_fallback() {
    let err = config(&[
        "--static-token=dev",
        "--m2m-token-url=https://idp.example/token",
        "--m2m-client-id=cron",
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "--m2m-client-secret (SENTIN8_CRON_M2M_CLIENT_SECRET) is required when \
         --m2m-token-url (SENTIN8_CRON_M2M_TOKEN_URL) is set"
    );

    let err = config(&["--m2m-client-secret=hunter2"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--m2m-token-url (SENTIN8_CRON_M2M_TOKEN_URL) is required when \
         --m2m-client-secret (SENTIN8_CRON_M2M_CLIENT_SECRET) is set"
    );
    assert!(!format!("{err:?}").contains("hunter2"));
}

#[test]
fn empty_values_count_as_unset() {
    let config = config(&["--m2m-token-url=", "--static-token=  ", "--m2m-scope= "]).unwrap();
    assert_eq!(config, DispatchConfig::default());
}

#[test]
fn debug_hides_secrets() {
    let config = config(&[
        "--m2m-token-url=https://idp.example/token",
        "--m2m-client-id=cron",
        "--m2m-client-secret=hunter2-very-secret",
    ])
    .unwrap();
    let shown = format!("{config:?} {config:#?}");
    assert!(!shown.contains("hunter2-very-secret"), "{shown}");
    assert!(shown.contains("<redacted>"));
    // The non-secret parts stay visible, so the output is still useful.
    assert!(shown.contains("idp.example") && shown.contains("cron"));

    let dev = TokenSettings::Static(Secret::new("dev-token-value"));
    assert!(!format!("{dev:?}").contains("dev-token-value"));
    assert_eq!(Secret::new("x").to_string(), "<redacted>");
}
