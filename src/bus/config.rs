//! Relay settings: [`BusArgs`] (flags, or the `SENTIN8_CRON_*` variables they name) and the
//! [`RelayConfig`] they convert to, checked as a whole in that one conversion.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::Url;
use sha2::Sha256;

use super::nats::{NatsSettings, server_addrs};
use crate::callback::Secret;
use crate::core::relay::RelayOptions;
use crate::util::duration::positive_duration;
use crate::util::setting::or_default;
use crate::util::url::{hide_userinfo, is_loopback};

/// `SENTIN8_CRON_BUS_URL`: `nats://host:port` (or a comma-separated list of a cluster's
/// servers), `https://...` (a webhook), or `log` (the default). `http://` is accepted for
/// loopback addresses only.
pub const ENV_BUS_URL: &str = "SENTIN8_CRON_BUS_URL";
/// `SENTIN8_CRON_BUS_SUBJECT_PREFIX`: the NATS subject prefix (default `sentin8.cron`).
pub const ENV_BUS_SUBJECT_PREFIX: &str = "SENTIN8_CRON_BUS_SUBJECT_PREFIX";
/// `SENTIN8_CRON_BUS_STREAM`: the JetStream stream, created when missing (default
/// `SENTIN8_CRON`).
pub const ENV_BUS_STREAM: &str = "SENTIN8_CRON_BUS_STREAM";
/// `SENTIN8_CRON_BUS_STREAM_REPLICAS`: replicas of the stream when the relay creates it
/// (default 1; 3 on a cluster).
pub const ENV_BUS_STREAM_REPLICAS: &str = "SENTIN8_CRON_BUS_STREAM_REPLICAS";
pub const ENV_BUS_STREAM_MAX_AGE: &str = "SENTIN8_CRON_BUS_STREAM_MAX_AGE";

/// A stream's message age limit: at least an hour, well past the duplicate window (a shorter
/// age would let a re-send after the window's end through as a new message).
fn stream_max_age(text: &str) -> Result<Duration, String> {
    let age = positive_duration(text)?;
    if age < Duration::from_secs(3600) {
        return Err(format!("{text} is shorter than 1h"));
    }
    Ok(age)
}
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
        "--bus-url ({ENV_BUS_URL}): {0:?} is not a bus URL; use nats://host:port, \
         https://host/path (a webhook) or log"
    )]
    UnknownBus(String),
    #[error("--bus-url ({ENV_BUS_URL}): {0}")]
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

/// The relay's settings (`serve` and `relay`): where events go and how failures are handled.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Outbox relay")]
pub struct BusArgs {
    /// Where the outbox relay publishes events: nats://host:port (JetStream; a cluster as a
    /// comma-separated list, nats://a:4222,nats://b:4222), https://... (signed webhook;
    /// http:// on loopback only) or log.
    #[arg(long, env = ENV_BUS_URL, value_name = "URL", default_value = "log", hide_env_values = true)]
    pub bus_url: String,
    /// NATS subject prefix of relayed events.
    #[arg(long, env = ENV_BUS_SUBJECT_PREFIX, value_name = "PREFIX", default_value = DEFAULT_SUBJECT_PREFIX)]
    pub bus_subject_prefix: String,
    /// JetStream stream the relay publishes into, created when missing.
    #[arg(long, env = ENV_BUS_STREAM, value_name = "NAME", default_value = DEFAULT_STREAM)]
    pub bus_stream: String,
    /// Replicas of the JetStream stream when the relay creates it; 3 on a cluster, so the
    /// stream survives the loss of a server (an existing stream keeps its own).
    #[arg(long, env = ENV_BUS_STREAM_REPLICAS, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub bus_stream_replicas: u8,
    /// How long the JetStream stream keeps an event when the relay creates it, at least 1h
    /// (an existing stream keeps its own)
    #[arg(long, env = ENV_BUS_STREAM_MAX_AGE, value_name = "DURATION", default_value = "7d", value_parser = stream_max_age)]
    pub bus_stream_max_age: Duration,
    /// Signing secret of the webhook bus (Standard Webhooks, whsec_... or raw).
    #[arg(long, env = ENV_WEBHOOK_SECRET, value_name = "SECRET", hide_env_values = true, value_parser = Secret::parse)]
    pub webhook_secret: Option<Secret>,
    /// Failed publishes of one event before it is parked for an operator.
    #[arg(long, env = ENV_RELAY_MAX_ATTEMPTS, value_name = "N", default_value_t = crate::core::relay::DEFAULT_MAX_ATTEMPTS, value_parser = clap::value_parser!(i32).range(1..=1000))]
    pub relay_max_attempts: i32,
    /// How long relayed events stay in the outbox before they are deleted.
    #[arg(long, env = ENV_OUTBOX_RETENTION, value_name = "DURATION", default_value = "7d", value_parser = positive_duration)]
    pub outbox_retention: Duration,
}

impl TryFrom<&BusArgs> for RelayConfig {
    type Error = RelayConfigError;

    fn try_from(args: &BusArgs) -> Result<Self, RelayConfigError> {
        let options = RelayOptions {
            max_attempts: args.relay_max_attempts,
            retention: args.outbox_retention,
            ..RelayOptions::default()
        };
        Ok(Self {
            bus: bus_config(args)?,
            options,
        })
    }
}

fn bus_config(args: &BusArgs) -> Result<BusConfig, RelayConfigError> {
    let url = args.bus_url.trim();
    if url.is_empty() || url.eq_ignore_ascii_case("log") {
        return Ok(BusConfig::Log);
    }
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase())
        .unwrap_or_default();
    match scheme.as_str() {
        "nats" | "tls" => {
            server_addrs(url).map_err(RelayConfigError::InvalidUrl)?;
            let subject_prefix = or_default(&args.bus_subject_prefix, DEFAULT_SUBJECT_PREFIX);
            check_subject_prefix(&subject_prefix).map_err(|reason| RelayConfigError::Invalid {
                var: "--bus-subject-prefix (SENTIN8_CRON_BUS_SUBJECT_PREFIX)",
                reason,
            })?;
            let stream = or_default(&args.bus_stream, DEFAULT_STREAM);
            check_stream_name(&stream).map_err(|reason| RelayConfigError::Invalid {
                var: "--bus-stream (SENTIN8_CRON_BUS_STREAM)",
                reason,
            })?;
            let mut settings = NatsSettings::new(url.to_owned(), subject_prefix, stream);
            settings.replicas = usize::from(args.bus_stream_replicas);
            settings.max_age = args.bus_stream_max_age;
            Ok(BusConfig::Nats(settings))
        }
        "https" | "http" => {
            let parsed =
                Url::parse(url).map_err(|e| RelayConfigError::InvalidUrl(e.to_string()))?;
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
            let key = Secret::given(&args.webhook_secret)
                .map(|secret| SigningKey::parse(secret.expose()))
                .transpose()
                .map_err(|reason| RelayConfigError::Invalid {
                    var: "--webhook-secret (SENTIN8_CRON_WEBHOOK_SECRET)",
                    reason,
                })?;
            Ok(BusConfig::Webhook { url: parsed, key })
        }
        _ => Err(RelayConfigError::UnknownBus(hide_userinfo(url))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::setting::parse_flags;

    fn args(flags: &[&str]) -> BusArgs {
        parse_flags(flags).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
    }

    /// The settings these flags give (the process environment is not read).
    fn config(flags: &[&str]) -> Result<RelayConfig, RelayConfigError> {
        RelayConfig::try_from(&args(flags))
    }

    fn refused(flags: &[&str]) -> String {
        parse_flags::<BusArgs>(flags).unwrap_err().to_string()
    }

    #[test]
    fn the_log_is_the_default_bus() {
        let config = config(&[]).unwrap();
        assert_eq!(config.bus, BusConfig::Log);
        assert_eq!(config.options.max_attempts, 10);
        assert_eq!(config.options.retention, Duration::from_secs(7 * 24 * 3600));
        // The flags' defaults are the relay's own.
        let defaults = RelayOptions::default();
        assert_eq!(config.options.max_attempts, defaults.max_attempts);
        assert_eq!(config.options.retention, defaults.retention);
        let config = self::config(&["--bus-url", " LOG "]).unwrap();
        assert_eq!(config.bus, BusConfig::Log);
        let config = self::config(&["--bus-url="]).unwrap();
        assert_eq!(config.bus, BusConfig::Log);
    }

    #[test]
    fn nats_takes_prefix_and_stream() {
        let config = config(&["--bus-url=nats://127.0.0.1:4222"]).unwrap();
        let BusConfig::Nats(nats) = config.bus else {
            panic!("not NATS: {config:?}");
        };
        assert_eq!(nats.url, "nats://127.0.0.1:4222");
        assert_eq!(nats.subject_prefix, "sentin8.cron");
        assert_eq!(nats.stream, "SENTIN8_CRON");
        assert_eq!(nats.replicas, 1);

        let config = self::config(&[
            "--bus-url=nats://bus:4222",
            "--bus-subject-prefix=acme.cron",
            "--bus-stream=ACME_CRON",
            "--bus-stream-replicas=3",
        ])
        .unwrap();
        let BusConfig::Nats(nats) = config.bus else {
            panic!("not NATS");
        };
        assert_eq!(nats.subject_prefix, "acme.cron");
        assert_eq!(nats.stream, "ACME_CRON");
        assert_eq!(nats.replicas, 3);
        for bad in ["0", "6", "three"] {
            let err = refused(&["--bus-stream-replicas", bad]);
            assert!(err.contains("--bus-stream-replicas"), "{bad}: {err}");
        }

        for bad in ["acme.>", "acme..cron", "acme cron", ".acme", "acme.*"] {
            let err = self::config(&["--bus-url=nats://bus:4222", "--bus-subject-prefix", bad])
                .unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("--bus-subject-prefix (SENTIN8_CRON_BUS_SUBJECT_PREFIX): "),
                "{bad}: {err}"
            );
        }
        let err = self::config(&["--bus-url=nats://bus:4222", "--bus-stream=a.b"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--bus-stream (SENTIN8_CRON_BUS_STREAM): "),
            "{err}"
        );
    }

    #[test]
    fn nats_takes_a_seed_list_of_servers() {
        let list = "nats://127.0.0.1:4222, nats://127.0.0.1:4223,tls://bus-3.example:4222";
        let config = config(&["--bus-url", list]).unwrap();
        let BusConfig::Nats(nats) = config.bus else {
            panic!("not NATS: {config:?}");
        };
        let servers = server_addrs(&nats.url).unwrap();
        let hosts: Vec<String> = servers
            .iter()
            .map(|s| format!("{}:{}", s.host(), s.port()))
            .collect();
        assert_eq!(
            hosts,
            ["127.0.0.1:4222", "127.0.0.1:4223", "bus-3.example:4222"]
        );
        assert!(servers[2].tls_required());

        for (bad, says) in [
            ("nats://a:4222,", "server 2 of 2 is empty"),
            ("nats://a:4222,,nats://b:4222", "server 2 of 3 is empty"),
            (
                "nats://a:4222,b:4222",
                "server 2 of 2 (b:4222) is not a NATS server URL",
            ),
            (
                "nats://a:4222,https://b/x",
                "server 2 of 2 (https://b/x) is not a NATS server URL",
            ),
            ("nats://a:4222,nats://:4222", "server 2 of 2 (nats://:4222)"),
            (
                "nats://a:4222,nats://b:99999",
                "server 2 of 2 (nats://b:99999) is not a valid URL",
            ),
            ("nats://a:4222/stream", "has a path"),
            (
                "nats://a:4222, nats://a:4222",
                "server 2 of 2 (nats://a:4222) is listed twice",
            ),
        ] {
            let err = self::config(&["--bus-url", bad]).unwrap_err().to_string();
            assert!(
                err.starts_with("--bus-url (SENTIN8_CRON_BUS_URL): "),
                "{bad}: {err}"
            );
            assert!(err.contains(says), "{bad}: {err}");
        }
        // Credentials of any entry stay hidden, in errors and in Debug.
        let err = self::config(&["--bus-url=nats://u:pw1@a:4222,nats://u:pw2@b:4222/x"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("nats://***@b:4222/x"), "{err}");
        assert!(!err.contains("pw"), "{err}");
        let config = self::config(&["--bus-url=nats://u:pw1@a:4222,nats://u:pw2@b:4222"]).unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("pw"), "{shown}");
        assert!(
            shown.contains("nats://***@a:4222,nats://***@b:4222"),
            "{shown}"
        );
    }

    #[test]
    fn webhooks_need_https_except_on_loopback() {
        let config = config(&["--bus-url=https://hooks.example/sentin8"]).unwrap();
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
            self::config(&["--bus-url", ok]).unwrap();
        }
        let err = self::config(&["--bus-url=http://hooks.example/x"]).unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        let err = self::config(&["--bus-url=https://u:pw@hooks.example/"]).unwrap_err();
        assert!(err.to_string().contains("credentials"), "{err}");
        assert!(!err.to_string().contains("pw"), "{err}");
    }

    #[test]
    fn unknown_buses_are_refused_without_showing_credentials() {
        let err = config(&["--bus-url=kafka://user:pw@k:9092"]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("--bus-url (SENTIN8_CRON_BUS_URL): "),
            "{text}"
        );
        assert!(text.contains("kafka://***@k:9092"), "{text}");
        assert!(!text.contains("pw"), "{text}");
        let err = config(&["--bus-url=bus:4222"]).unwrap_err();
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

        let args = args(&[
            "--bus-url=https://hooks.example/x",
            "--webhook-secret=very-secret-value",
        ]);
        let config = RelayConfig::try_from(&args).unwrap();
        let shown = format!("{config:?} {config:#?} {args:?}");
        assert!(!shown.contains("very-secret-value"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
        let err = self::config(&[
            "--bus-url=https://hooks.example/x",
            "--webhook-secret=whsec_%%%",
        ])
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--webhook-secret (SENTIN8_CRON_WEBHOOK_SECRET): "),
            "{err}"
        );
        assert!(!err.to_string().contains("%%%"), "{err}");
    }

    #[test]
    fn nats_credentials_are_hidden_in_debug() {
        let config = config(&["--bus-url=nats://relay:hunter2@bus:4222"]).unwrap();
        let shown = format!("{config:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("bus:4222"), "{shown}");
    }

    #[test]
    fn tuning_is_read_and_validated() {
        let config = config(&["--relay-max-attempts=3", "--outbox-retention=2d"]).unwrap();
        assert_eq!(config.options.max_attempts, 3);
        assert_eq!(config.options.retention, Duration::from_secs(2 * 24 * 3600));
        let config = self::config(&["--outbox-retention=36h"]).unwrap();
        assert_eq!(config.options.retention, Duration::from_secs(36 * 3600));
        for (flag, bad) in [
            ("--relay-max-attempts", "0"),
            ("--relay-max-attempts", "many"),
            ("--outbox-retention", "0d"),
            ("--outbox-retention", "d"),
            ("--outbox-retention", "a week"),
        ] {
            let err = refused(&[flag, bad]);
            assert!(err.contains(flag), "{bad}: {err}");
        }
    }
}
