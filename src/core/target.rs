//! Whom a schedule calls back: its `target_config`, with the base URL parsed once.
//!
//! [`BaseUrl::parse`] is the one parser of a base URL. Every entry (the API, `enroll`,
//! `validate-expr --file`, the admin preview) checks with it, and the proxy-back call builds its
//! URL from the parsed value, so what was accepted is exactly what is called.

use std::fmt;

use serde_json::Value;
use url::Url;

use crate::core::decl::FieldError;

/// The field every base URL problem is reported on.
pub const BASE_URL_FIELD: &str = "target_config.baseUrl";

/// The largest `target_config` accepted, in bytes of its compact JSON.
pub const MAX_TARGET_CONFIG_BYTES: usize = 8 * 1024;

/// The egress policy as the operations see it: whether a base URL may be called at all. The
/// HTTP side implements it (its policy also resolves names at dispatch); `core` only asks, so
/// every entry (the API, `enroll`) refuses the same URLs with a field error.
pub trait TargetPolicy: Send + Sync + fmt::Debug {
    /// `Err` with the reason (no credentials, fit for a field error) when `url` is refused.
    fn check(&self, url: &BaseUrl) -> Result<(), String>;
}

/// Accepts every base URL: for contexts that call nothing (and tests). The proxy-back client
/// still applies its own policy before every call.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyTarget;

impl TargetPolicy for AnyTarget {
    fn check(&self, _url: &BaseUrl) -> Result<(), String> {
        Ok(())
    }
}

/// An absolute http(s) URL with a host, no credentials, no query and no fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl(Url);

/// Why a base URL was refused. The messages never echo the URL (it could carry credentials).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseUrlError {
    #[error("is empty")]
    Empty,
    #[error("must not contain whitespace or control characters (CR, LF, tab, ...)")]
    ControlCharacter,
    #[error("is not an absolute http(s) URL ({0})")]
    Malformed(String),
    #[error("scheme {0:?} is not http or https")]
    Scheme(String),
    #[error("has no host")]
    NoHost,
    #[error("must not carry credentials (user:password@)")]
    Credentials,
    #[error("must not have a query or fragment")]
    QueryOrFragment,
}

impl BaseUrl {
    /// Parses and checks a base URL. The raw text is checked for whitespace and control
    /// characters first: the URL standard's parser silently drops tabs and newlines.
    pub fn parse(raw: &str) -> Result<BaseUrl, BaseUrlError> {
        if raw.is_empty() {
            return Err(BaseUrlError::Empty);
        }
        if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(BaseUrlError::ControlCharacter);
        }
        let url = Url::parse(raw).map_err(|e| BaseUrlError::Malformed(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(BaseUrlError::Scheme(url.scheme().to_owned()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(BaseUrlError::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(BaseUrlError::Credentials);
        }
        // `Url` drops an empty query or fragment (`http://h/?`), so look at the text too.
        if url.query().is_some() || url.fragment().is_some() || raw.contains(['?', '#']) {
            return Err(BaseUrlError::QueryOrFragment);
        }
        Ok(BaseUrl(url))
    }

    /// The URL as normalised by the parser.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The parsed URL.
    pub fn as_url(&self) -> &Url {
        &self.0
    }

    /// `path` appended to the base URL's path: a path prefix is kept and a trailing slash does
    /// not double up (`http://h/billing/` and `http://h/billing` both give
    /// `http://h/billing{path}`).
    pub fn join_path(&self, path: &str) -> Url {
        let mut url = self.0.clone();
        let joined = format!(
            "{}/{}",
            url.path().trim_end_matches('/'),
            path.trim_start_matches('/')
        );
        url.set_path(&joined);
        url
    }
}

impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a stored target cannot be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("missing baseUrl in target_config")]
    MissingBaseUrl,
    #[error("invalid baseUrl in target_config: {0}")]
    InvalidBaseUrl(String),
}

/// A schedule's `target_config` as stored, with its base URL parsed once. A stored value that
/// no longer parses still loads; the problem is reported when the target is called.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    config: Value,
    base_url: Result<BaseUrl, TargetError>,
}

impl Target {
    /// A target read back from storage: never fails, the base URL problem is kept.
    pub fn from_stored(config: Value) -> Target {
        let base_url = match config.get("baseUrl") {
            None | Some(Value::Null) => Err(TargetError::MissingBaseUrl),
            Some(Value::String(raw)) => {
                BaseUrl::parse(raw).map_err(|e| TargetError::InvalidBaseUrl(e.to_string()))
            }
            Some(_) => Err(TargetError::InvalidBaseUrl("must be a string".to_owned())),
        };
        Target { config, base_url }
    }

    /// Validates a requested `target_config`: an object with a valid `baseUrl` and no
    /// credentials anywhere in it. Every problem is listed.
    pub fn validate(config: &Value) -> Result<Target, Vec<FieldError>> {
        let Some(map) = config.as_object() else {
            return Err(vec![FieldError::new("target_config", "must be an object")]);
        };
        let mut errors = Vec::new();
        let size = serde_json::to_vec(config).map_or(usize::MAX, |v| v.len());
        if size > MAX_TARGET_CONFIG_BYTES {
            errors.push(FieldError::new(
                "target_config",
                format!(
                    "must be at most {} KiB of JSON",
                    MAX_TARGET_CONFIG_BYTES / 1024
                ),
            ));
        }
        let base_url = match map.get("baseUrl") {
            None => {
                errors.push(FieldError::new(BASE_URL_FIELD, "is required"));
                None
            }
            Some(Value::String(raw)) => BaseUrl::parse(raw)
                .map_err(|e| errors.push(FieldError::new(BASE_URL_FIELD, e.to_string())))
                .ok(),
            Some(_) => {
                errors.push(FieldError::new(BASE_URL_FIELD, "must be a string"));
                None
            }
        };
        find_credentials(config, "target_config", &mut errors);
        // A NUL in the base URL is already refused as a control character.
        if let Err(nul) = crate::core::storable::check_json("target_config", config)
            && nul.field != BASE_URL_FIELD
        {
            errors.push(nul);
        }
        match base_url {
            Some(base_url) if errors.is_empty() => Ok(Target {
                config: config.clone(),
                base_url: Ok(base_url),
            }),
            _ => Err(errors),
        }
    }

    /// [`Target::validate`], then `policy`'s verdict on the base URL (a field error on
    /// [`BASE_URL_FIELD`]).
    pub fn validate_for(
        config: &Value,
        policy: &dyn TargetPolicy,
    ) -> Result<Target, Vec<FieldError>> {
        let target = Target::validate(config)?;
        target.check(policy)?;
        Ok(target)
    }

    /// `policy`'s verdict on this target's base URL, as a field error on [`BASE_URL_FIELD`].
    pub fn check(&self, policy: &dyn TargetPolicy) -> Result<(), Vec<FieldError>> {
        match &self.base_url {
            Ok(url) => policy
                .check(url)
                .map_err(|reason| vec![FieldError::new(BASE_URL_FIELD, reason)]),
            Err(e) => Err(vec![FieldError::new(BASE_URL_FIELD, e.to_string())]),
        }
    }

    /// The stored `target_config`.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// The parsed base URL, or why the stored one cannot be used.
    pub fn base_url(&self) -> Result<&BaseUrl, &TargetError> {
        self.base_url.as_ref()
    }
}

impl serde::Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.config.serialize(serializer)
    }
}

/// Keys that would smuggle a credential into `target_config`: proxy-back authenticates with
/// sentin8-cron's own M2M token and nothing else. Compared with their letters and digits alone,
/// lower-cased (`X-Api-Key` is `xapikey`), so the common header spellings of API keys count.
const CREDENTIAL_KEYS: &[&str] = &[
    "authorization",
    "proxyauthorization",
    "auth",
    "token",
    "authtoken",
    "xauthtoken",
    "accesstoken",
    "xaccesstoken",
    "sessiontoken",
    "apitoken",
    "xapitoken",
    "bearer",
    "apikey",
    "xapikey",
    "accesskey",
    "privatekey",
    "password",
    "secret",
    "clientsecret",
    "cookie",
    "credentials",
];

fn find_credentials(value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let normalised: String = key
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric())
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                let here = format!("{path}.{key}");
                if CREDENTIAL_KEYS.contains(&normalised.as_str()) {
                    errors.push(FieldError::new(
                        here,
                        "credentials are not allowed in target_config; proxy-back authenticates \
                         with sentin8-cron's own M2M token",
                    ));
                } else {
                    find_credentials(inner, &here, errors);
                }
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                find_credentials(inner, &format!("{path}[{i}]"), errors);
            }
        }
        Value::String(text)
            if text
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("bearer ") =>
        {
            errors.push(FieldError::new(
                path,
                "looks like a bearer token; credentials are not allowed",
            ));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base_urls_that_can_be_called_parse() {
        for good in [
            "https://billing.example.com",
            "http://127.0.0.1:8081/api",
            "http://[::1]:65535/",
            "https://h/billing/",
        ] {
            assert!(BaseUrl::parse(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn base_urls_that_cannot_be_called_are_refused_with_the_reason() {
        let cases: &[(&str, BaseUrlError)] = &[
            ("", BaseUrlError::Empty),
            (
                "http://127.0.0.1:99999",
                BaseUrlError::Malformed(String::new()),
            ),
            (
                "billing.example.com",
                BaseUrlError::Malformed(String::new()),
            ),
            ("/relative", BaseUrlError::Malformed(String::new())),
            ("https://", BaseUrlError::Malformed(String::new())),
            ("ftp://h/", BaseUrlError::Scheme("ftp".into())),
            (
                "mailto:ops@example.com",
                BaseUrlError::Scheme("mailto".into()),
            ),
            ("file:///etc/passwd", BaseUrlError::Scheme("file".into())),
            (
                "http://h/a\r\nX-Injected: 1",
                BaseUrlError::ControlCharacter,
            ),
            ("http://h/\tx", BaseUrlError::ControlCharacter),
            ("http://h\n/", BaseUrlError::ControlCharacter),
            (" http://h/", BaseUrlError::ControlCharacter),
            ("http://user:pw@h/", BaseUrlError::Credentials),
            ("http://user@h/", BaseUrlError::Credentials),
            ("http://h/?x=1", BaseUrlError::QueryOrFragment),
            ("http://h/?", BaseUrlError::QueryOrFragment),
            ("http://h/#frag", BaseUrlError::QueryOrFragment),
        ];
        for (raw, expected) in cases {
            let err = BaseUrl::parse(raw).unwrap_err();
            match (expected, &err) {
                (BaseUrlError::Malformed(_), BaseUrlError::Malformed(_)) => {}
                _ => assert_eq!(&err, expected, "{raw:?}"),
            }
            assert!(!err.to_string().contains("pw"), "{err}");
        }
        assert_eq!(
            BaseUrl::parse("http://127.0.0.1:99999")
                .unwrap_err()
                .to_string(),
            "is not an absolute http(s) URL (invalid port number)"
        );
    }

    #[test]
    fn paths_join_without_doubled_slashes() {
        let join = |s: &str| BaseUrl::parse(s).unwrap().join_path("/v1/run").to_string();
        assert_eq!(join("http://h:1"), "http://h:1/v1/run");
        assert_eq!(join("http://h:1/"), "http://h:1/v1/run");
        assert_eq!(join("https://h/billing"), "https://h/billing/v1/run");
        assert_eq!(join("https://h/billing/"), "https://h/billing/v1/run");
        assert_eq!(join("http://h/a/b//"), "http://h/a/b/v1/run");
    }

    #[test]
    fn target_config_needs_a_valid_base_url() {
        assert!(Target::validate(&json!({"baseUrl": "https://billing.example.com"})).is_ok());
        for bad in [
            "billing.example.com",
            "ftp://x",
            "https://",
            "/relative",
            "https://h/p?q=1",
            "http://127.0.0.1:99999",
            "http://h/\r\n",
        ] {
            let errors = Target::validate(&json!({"baseUrl": bad})).unwrap_err();
            assert_eq!(errors[0].field, BASE_URL_FIELD, "{bad}");
        }
        let errors = Target::validate(&json!({})).unwrap_err();
        assert_eq!(errors[0].to_string(), "target_config.baseUrl: is required");
        let errors = Target::validate(&json!({"baseUrl": 7})).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "target_config.baseUrl: must be a string"
        );
        let errors = Target::validate(&json!("https://x")).unwrap_err();
        assert_eq!(errors[0].to_string(), "target_config: must be an object");
    }

    #[test]
    fn target_config_may_not_carry_credentials() {
        let cases = [
            json!({"baseUrl": "https://x", "headers": {"Authorization": "Bearer abc"}}),
            json!({"baseUrl": "https://x", "api_key": "k"}),
            json!({"baseUrl": "https://x", "client-secret": "s"}),
            json!({"baseUrl": "https://user:pw@x"}),
            json!({"baseUrl": "https://x", "extra": ["Bearer abc"]}),
            json!({"baseUrl": "https://x", "headers": {"X-Api-Key": "k"}}),
            json!({"baseUrl": "https://x", "headers": {"Proxy-Authorization": "Basic abc"}}),
            json!({"baseUrl": "https://x", "headers": {"X-Auth-Token": "t"}}),
            json!({"baseUrl": "https://x", "headers": {"api-token": "t"}}),
            json!({"baseUrl": "https://x", "private_key": "-----BEGIN"}),
        ];
        for case in cases {
            let errors = Target::validate(&case).unwrap_err();
            assert!(
                errors.iter().any(|e| e.message.contains("credentials")),
                "{case}: {errors:?}"
            );
        }
        let ok = Target::validate(&json!({"baseUrl": "https://x", "region": "eu"})).unwrap();
        assert_eq!(
            ok.config(),
            &json!({"baseUrl": "https://x", "region": "eu"})
        );
    }

    #[test]
    fn target_config_is_capped() {
        let padding = "x".repeat(MAX_TARGET_CONFIG_BYTES);
        let errors =
            Target::validate(&json!({"baseUrl": "https://x", "note": padding})).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "target_config: must be at most 8 KiB of JSON"
        );
        let fits = "x".repeat(MAX_TARGET_CONFIG_BYTES - 100);
        assert!(Target::validate(&json!({"baseUrl": "https://x", "note": fits})).is_ok());
    }

    #[derive(Debug)]
    struct OnlyExampleCom;

    impl TargetPolicy for OnlyExampleCom {
        fn check(&self, url: &BaseUrl) -> Result<(), String> {
            match url.as_url().host_str() {
                Some("example.com") => Ok(()),
                _ => Err("is not allowed".into()),
            }
        }
    }

    #[test]
    fn a_policy_refusal_is_a_base_url_field_error() {
        assert!(
            Target::validate_for(&json!({"baseUrl": "https://example.com"}), &OnlyExampleCom)
                .is_ok()
        );
        let errors = Target::validate_for(&json!({"baseUrl": "https://10.0.0.1"}), &OnlyExampleCom)
            .unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "target_config.baseUrl: is not allowed"
        );
        assert!(Target::validate_for(&json!({"baseUrl": "https://10.0.0.1"}), &AnyTarget).is_ok());
    }

    #[test]
    fn a_stored_target_always_loads_and_keeps_its_problem() {
        let target = Target::from_stored(json!({"baseUrl": "http://127.0.0.1:99999"}));
        assert_eq!(
            target.config(),
            &json!({"baseUrl": "http://127.0.0.1:99999"})
        );
        assert_eq!(
            target.base_url().unwrap_err().to_string(),
            "invalid baseUrl in target_config: is not an absolute http(s) URL (invalid port number)"
        );
        assert_eq!(
            Target::from_stored(json!({})).base_url(),
            Err(&TargetError::MissingBaseUrl)
        );
        assert_eq!(
            Target::from_stored(json!({"baseUrl": "https://h/x"}))
                .base_url()
                .unwrap()
                .as_str(),
            "https://h/x"
        );
    }
}
