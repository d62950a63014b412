//! Relay settings, read from the environment through a lookup function so tests never have to
//! mutate the process environment.

use std::fmt;
use std::net::IpAddr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::Url;
use sha2::Sha256;

use super::nats::NatsSettings;
use crate::callback::parse_duration;
use crate::core::relay::RelayOptions;

/// `SENTIN8_CRON_BUS_URL`: `nats://host:port`, `https://...` (a webhook), or `log` (the
/// default). `http://` is accepted for loopback addresses only.
pub const ENV_BUS_URL: &str = "SENTIN8_CRON_BUS_URL";
/// `SENTIN8_CRON_BUS_SUBJECT_PREFIX`: the NATS subject prefix (default `sentin8.cron`).
pub const ENV_BUS_SUBJECT_PREFIX: &str = "SENTIN8_CRON_BUS_SUBJECT_PREFIX";
/// `SENTIN8_CRON_BUS_STREAM`: the JetStream stream, created when missing (default
/// `SENTIN8_CRON`).
pub const ENV_BUS_STREAM: &str = "SENTIN8_CRON_BUS_STREAM";
/// `SENTIN8_CRON_WEBHOOK_SECRET`: signs webhook deliveries; `whsec_<base64>` or a raw string.
pub const ENV_WEBHOOK_SECRET: &str = "SENTIN8_CRON_WEBHOOK_SECRET";
/// `SENTIN8_CRON_RELAY_MAX_ATTEMPTS`: refused publishes after which an event is parked.
pub const ENV_RELAY_MAX_ATTEMPTS: &str = "SENTIN8_CRON_RELAY_MAX_ATTEMPTS";
/// `SENTIN8_CRON_OUTBOX_RETENTION`: how long relayed events are kept (`7d`, `48h`, ...).
pub const ENV_OUTBOX_RETENTION: &str = "SENTIN8_CRON_OUTBOX_RETENTION";

/// The subject prefix when none is configured.
pub const DEFAULT_SUBJECT_PREFIX: &str = "sentin8.cron";
/// The stream name when none is configured.
pub const DEFAULT_STREAM: &str = "SENTIN8_CRON";

/// Why the relay settings are unusable. Raised at start-up, never on the relay path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelayConfigError {
    #[error(
        "{ENV_BUS_URL}: {0:?} is not a bus URL; use nats://host:port, https://host/path \
         (a webhook) or log"
    )]
    UnknownBus(String),
    #[error("{ENV_BUS_URL}: {0}")]
    InvalidUrl(String),
    #[error("{var}: {reason}")]
    Invalid { var: &'static str, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// The key that signs webhook deliveries. `Debug` never shows it.
#[derive(Clone)]
pub struct SigningKey {
    bytes: Vec<u8>,
    mac: Hmac<Sha256>,
}

impl SigningKey {
    /// A Standard Webhooks secret (`whsec_` followed by base64), or any other non-empty string,
    /// whose bytes are then the key.
    pub fn parse(secret: &str) -> Result<Self, String> {
        let bytes = match secret.strip_prefix("whsec_") {
            Some(encoded) => STANDARD
                .decode(encoded)
                .map_err(|_| "a whsec_ secret must be followed by base64".to_owned())?,
            None => secret.as_bytes().to_vec(),
        };
        if bytes.is_empty() {
            return Err("the secret is empty".into());
        }
        let mac = Hmac::<Sha256>::new_from_slice(&bytes)
            .map_err(|_| "the secret cannot be an HMAC key".to_owned())?;
        Ok(Self { bytes, mac })
    }

    /// The key bytes. Only for computing signatures.
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }

    /// A fresh HMAC-SHA256 keyed with this key.
    pub fn mac(&self) -> Hmac<Sha256> {
        self.mac.clone()
    }
}

impl PartialEq for SigningKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for SigningKey {}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(\"<redacted>\")")
    }
}

/// Where events go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BusConfig {
    /// The structured log: every event acknowledged at once. For development and as the
    /// default, so an unconfigured relay still drains the outbox.
    #[default]
    Log,
    /// NATS JetStream.
    Nats(NatsSettings),
    /// One POST per event, signed when a key is set.
    Webhook { url: Url, key: Option<SigningKey> },
}

impl BusConfig {
    /// A short name: `log`, `nats` or `webhook`.
    pub fn kind(&self) -> &'static str {
        match self {
            BusConfig::Log => "log",
            BusConfig::Nats(_) => "nats",
            BusConfig::Webhook { .. } => "webhook",
        }
    }
}

/// Everything the relay needs: the bus and the relay's tuning.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RelayConfig {
    pub bus: BusConfig,
    pub options: RelayOptions,
}

impl RelayConfig {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, RelayConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads the settings through `lookup` (a variable name to its value). Empty values count
    /// as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, RelayConfigError> {
        let get = |key: &str| {
            lookup(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut options = RelayOptions::default();
        if let Some(raw) = get(ENV_RELAY_MAX_ATTEMPTS) {
            options.max_attempts = raw
                .parse::<i32>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| RelayConfigError::Invalid {
                    var: ENV_RELAY_MAX_ATTEMPTS,
                    reason: format!("{raw:?} is not a whole number from 1 to 1000"),
                })?;
        }
        if let Some(raw) = get(ENV_OUTBOX_RETENTION) {
            options.retention = parse_duration(&raw)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| RelayConfigError::Invalid {
                    var: ENV_OUTBOX_RETENTION,
                    reason: format!("{raw:?} is not a positive duration (examples: 7d, 48h)"),
                })?;
        }
        let bus = bus_config(&get)?;
        Ok(Self { bus, options })
    }
}

fn bus_config(get: &impl Fn(&str) -> Option<String>) -> Result<BusConfig, RelayConfigError> {
    let Some(url) = get(ENV_BUS_URL) else {
        return Ok(BusConfig::Log);
    };
    if url.eq_ignore_ascii_case("log") {
        return Ok(BusConfig::Log);
    }
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase())
        .unwrap_or_default();
    match scheme.as_str() {
        "nats" | "tls" => {
            let subject_prefix =
                get(ENV_BUS_SUBJECT_PREFIX).unwrap_or_else(|| DEFAULT_SUBJECT_PREFIX.to_owned());
            check_subject_prefix(&subject_prefix).map_err(|reason| RelayConfigError::Invalid {
                var: ENV_BUS_SUBJECT_PREFIX,
                reason,
            })?;
            let stream = get(ENV_BUS_STREAM).unwrap_or_else(|| DEFAULT_STREAM.to_owned());
            check_stream_name(&stream).map_err(|reason| RelayConfigError::Invalid {
                var: ENV_BUS_STREAM,
                reason,
            })?;
            Ok(BusConfig::Nats(NatsSettings::new(
                url,
                subject_prefix,
                stream,
            )))
        }
        "https" | "http" => {
            let parsed =
                Url::parse(&url).map_err(|e| RelayConfigError::InvalidUrl(e.to_string()))?;
            if parsed.scheme() == "http" && !is_loopback(&parsed) {
                return Err(RelayConfigError::InvalidUrl(
                    "http:// is accepted for loopback addresses only; use https://".into(),
                ));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(RelayConfigError::InvalidUrl(
                    "credentials do not belong in the webhook URL; set \
                     SENTIN8_CRON_WEBHOOK_SECRET to sign deliveries"
                        .into(),
                ));
            }
            let key = get(ENV_WEBHOOK_SECRET)
                .map(|secret| SigningKey::parse(&secret))
                .transpose()
                .map_err(|reason| RelayConfigError::Invalid {
                    var: ENV_WEBHOOK_SECRET,
                    reason,
                })?;
            Ok(BusConfig::Webhook { url: parsed, key })
        }
        _ => Err(RelayConfigError::UnknownBus(hide_userinfo(&url))),
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

/// A subject prefix is one or more dot-separated tokens of letters, digits, `-` and `_`.
fn check_subject_prefix(prefix: &str) -> Result<(), String> {
    let valid = prefix.split('.').all(|token| {
        !token.is_empty()
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{prefix:?} is not a subject prefix (dot-separated tokens of letters, digits, - and _)"
        ))
    }
}

/// A stream name is letters, digits, `-` and `_`.
fn check_stream_name(name: &str) -> Result<(), String> {
    if !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a stream name (letters, digits, - and _)"
        ))
    }
}

/// Hides user, password or token of a URL for messages.
pub(crate) fn hide_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_log_is_the_default_bus() {
        let config = RelayConfig::from_lookup(lookup(&[])).unwrap();
        assert_eq!(config.bus, BusConfig::Log);
        assert_eq!(config.options.max_attempts, 10);
        assert_eq!(config.options.retention, Duration::from_secs(7 * 24 * 3600));
        let config = RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, " LOG ")])).unwrap();
        assert_eq!(config.bus, BusConfig::Log);
        let config = RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "")])).unwrap();
        assert_eq!(config.bus, BusConfig::Log);
    }

    #[test]
    fn nats_takes_prefix_and_stream() {
        let config =
            RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "nats://127.0.0.1:4222")])).unwrap();
        let BusConfig::Nats(nats) = config.bus else {
            panic!("not NATS: {config:?}");
        };
        assert_eq!(nats.url, "nats://127.0.0.1:4222");
        assert_eq!(nats.subject_prefix, "sentin8.cron");
        assert_eq!(nats.stream, "SENTIN8_CRON");

        let config = RelayConfig::from_lookup(lookup(&[
            (ENV_BUS_URL, "nats://bus:4222"),
            (ENV_BUS_SUBJECT_PREFIX, "acme.cron"),
            (ENV_BUS_STREAM, "ACME_CRON"),
        ]))
        .unwrap();
        let BusConfig::Nats(nats) = config.bus else {
            panic!("not NATS");
        };
        assert_eq!(nats.subject_prefix, "acme.cron");
        assert_eq!(nats.stream, "ACME_CRON");

        for bad in ["acme.>", "acme..cron", "acme cron", ".acme", "acme.*"] {
            let err = RelayConfig::from_lookup(lookup(&[
                (ENV_BUS_URL, "nats://bus:4222"),
                (ENV_BUS_SUBJECT_PREFIX, bad),
            ]))
            .unwrap_err();
            assert!(
                err.to_string().starts_with(ENV_BUS_SUBJECT_PREFIX),
                "{bad}: {err}"
            );
        }
        let err = RelayConfig::from_lookup(lookup(&[
            (ENV_BUS_URL, "nats://bus:4222"),
            (ENV_BUS_STREAM, "a.b"),
        ]))
        .unwrap_err();
        assert!(err.to_string().starts_with(ENV_BUS_STREAM), "{err}");
    }

    #[test]
    fn webhooks_need_https_except_on_loopback() {
        let config =
            RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "https://hooks.example/sentin8")]))
                .unwrap();
        assert_eq!(
            config.bus,
            BusConfig::Webhook {
                url: Url::parse("https://hooks.example/sentin8").unwrap(),
                key: None
            }
        );
        for ok in [
            "http://127.0.0.1:8080/hook",
            "http://localhost/hook",
            "http://[::1]:9/x",
        ] {
            RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, ok)])).unwrap();
        }
        let err = RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "http://hooks.example/x")]))
            .unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        let err = RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "https://u:pw@hooks.example/")]))
            .unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        assert!(!err.to_string().contains("pw"), "{err}");
    }

    #[test]
    fn unknown_buses_are_refused_without_showing_credentials() {
        let err = RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "kafka://user:pw@k:9092")]))
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("kafka://***@k:9092"), "{text}");
        assert!(!text.contains("pw"), "{text}");
        let err = RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "bus:4222")])).unwrap_err();
        assert!(matches!(err, RelayConfigError::UnknownBus(_)), "{err:?}");
    }

    #[test]
    fn webhook_secrets_parse_and_stay_hidden() {
        let raw = b"\x00\x01binary key bytes\xff";
        let key = SigningKey::parse(&format!("whsec_{}", STANDARD.encode(raw))).unwrap();
        assert_eq!(key.expose(), raw);
        assert_eq!(
            SigningKey::parse("raw-secret").unwrap().expose(),
            b"raw-secret"
        );
        assert!(SigningKey::parse("whsec_not base64!").is_err());
        assert!(SigningKey::parse("whsec_").is_err());

        let config = RelayConfig::from_lookup(lookup(&[
            (ENV_BUS_URL, "https://hooks.example/x"),
            (ENV_WEBHOOK_SECRET, "very-secret-value"),
        ]))
        .unwrap();
        let shown = format!("{config:?} {config:#?}");
        assert!(!shown.contains("very-secret-value"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        let err = RelayConfig::from_lookup(lookup(&[
            (ENV_BUS_URL, "https://hooks.example/x"),
            (ENV_WEBHOOK_SECRET, "whsec_%%%"),
        ]))
        .unwrap_err();
        assert!(err.to_string().starts_with(ENV_WEBHOOK_SECRET), "{err}");
        assert!(!err.to_string().contains("%%%"), "{err}");
    }

    #[test]
    fn nats_credentials_are_hidden_in_debug() {
        let config =
            RelayConfig::from_lookup(lookup(&[(ENV_BUS_URL, "nats://relay:hunter2@bus:4222")]))
                .unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("bus:4222"), "{shown}");
    }

    #[test]
    fn tuning_is_read_and_validated() {
        let config = RelayConfig::from_lookup(lookup(&[
            (ENV_RELAY_MAX_ATTEMPTS, "3"),
            (ENV_OUTBOX_RETENTION, "2d"),
        ]))
        .unwrap();
        assert_eq!(config.options.max_attempts, 3);
        assert_eq!(config.options.retention, Duration::from_secs(2 * 24 * 3600));
        let config = RelayConfig::from_lookup(lookup(&[(ENV_OUTBOX_RETENTION, "36h")])).unwrap();
        assert_eq!(config.options.retention, Duration::from_secs(36 * 3600));
        for (var, bad) in [
            (ENV_RELAY_MAX_ATTEMPTS, "0"),
            (ENV_RELAY_MAX_ATTEMPTS, "many"),
            (ENV_OUTBOX_RETENTION, "0d"),
            (ENV_OUTBOX_RETENTION, "d"),
            (ENV_OUTBOX_RETENTION, "a week"),
        ] {
            let err = RelayConfig::from_lookup(lookup(&[(var, bad)])).unwrap_err();
            assert!(err.to_string().starts_with(var), "{bad}: {err}");
        }
    }
}
