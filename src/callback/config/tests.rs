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

#[test]
fn the_egress_policy_comes_from_the_allow_list_or_the_platform_domain() {
    let url = |s: &str| url::Url::parse(s).unwrap();
    let listed = config(&[
        "--target-allow",
        "*.svc.example.com,http://127.0.0.1:9000",
        "--target-allow=https://billing.internal:8443",
    ])
    .unwrap();
    for allowed in [
        "https://a.svc.example.com",
        "http://127.0.0.1:9000",
        "https://billing.internal:8443",
    ] {
        assert!(listed.egress.check_url(&url(allowed)).is_ok(), "{allowed}");
    }
    assert!(
        listed
            .egress
            .check_url(&url("http://127.0.0.1:9001"))
            .is_err()
    );

    let platform = config(&["--platform-domain", "svc.example.com"]).unwrap();
    assert!(
        platform
            .egress
            .check_url(&url("https://billing.svc.example.com"))
            .is_ok()
    );
    assert!(
        platform
            .egress
            .check_url(&url("http://billing.svc.example.com"))
            .is_err()
    );

    // Nothing configured allows nothing, except loopback in development mode.
    let args: CallbackArgs = parse_flags(&[]).unwrap();
    let strict = DispatchConfig::from_args(&args, false).unwrap();
    assert!(
        strict
            .egress
            .check_url(&url("http://127.0.0.1:9000"))
            .is_err()
    );
    let dev = DispatchConfig::from_args(&args, true).unwrap();
    assert!(dev.egress.check_url(&url("http://127.0.0.1:9000")).is_ok());
}

#[test]
fn bad_egress_settings_name_the_setting() {
    let err = config(&["--target-allow", "ftp://x"]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("--target-allow (SENTIN8_CRON_TARGET_ALLOW): "),
        "{err}"
    );
    let err = config(&["--platform-domain", "bad domain!"]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("--platform-domain (SENTIN8_CRON_PLATFORM_DOMAIN): "),
        "{err}"
    );
}

#[test]
fn signing_settings_and_the_result_cap() {
    let defaults = config(&[]).unwrap();
    assert_eq!(defaults.signing, SigningSettings::default());
    assert_eq!(defaults.signing.issuer, "sentin8-cron");
    assert_eq!(defaults.result_cap, 16 * 1024);

    let set = config(&[
        "--signing-key-file=new.pem",
        "--signing-key-previous-file=old.pem,older.pem",
        "--signing-key-previous-file=oldest.pem",
        "--signing-issuer=https://cron.example.com",
        "--result-max-bytes=100",
    ])
    .unwrap();
    assert_eq!(set.signing.key_file, Some(PathBuf::from("new.pem")));
    assert_eq!(
        set.signing.previous_files,
        ["old.pem", "older.pem", "oldest.pem"].map(PathBuf::from)
    );
    assert_eq!(set.signing.issuer, "https://cron.example.com");
    assert_eq!(set.result_cap, 100);

    let err = config(&["--signing-key-previous-file=old.pem"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--signing-key-file (SENTIN8_CRON_SIGNING_KEY_FILE) is required when \
         --signing-key-previous-file (SENTIN8_CRON_SIGNING_KEY_PREVIOUS_FILE) is set"
    );
    assert!(refused(&["--result-max-bytes=0"]).contains("--result-max-bytes"));
}

#[test]
fn oauth2_token_requests_name_the_target_under_configurable_parameters() {
    let oauth = [
        "--m2m-token-url=https://idp.example/token",
        "--m2m-client-id=cron",
        "--m2m-client-secret=hunter2",
    ];
    let params = |extra: &[&str]| {
        let flags: Vec<&str> = oauth.iter().chain(extra).copied().collect();
        match config(&flags).unwrap().token {
            TokenSettings::OAuth2(s) => (s.resource_param, s.audience_param),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        params(&[]),
        (Some("resource".into()), Some("audience".into()))
    );
    assert_eq!(
        params(&["--m2m-resource-param=", "--m2m-audience-param=aud"]),
        (None, Some("aud".into()))
    );
}
