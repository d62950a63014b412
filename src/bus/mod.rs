//! The outbox relay's sinks and settings: where [`crate::core::relay::Relay`] delivers events.
//!
//! - [`config`]: [`BusArgs`] (flags, or `SENTIN8_CRON_*` variables) and the [`RelayConfig`]
//!   they convert to; the bus is chosen by `--bus-url` (`SENTIN8_CRON_BUS_URL`).
//! - [`nats`]: [`NatsSink`], NATS JetStream with publish acknowledgements and de-duplication
//!   by event id (`nats://host:port`, or a cluster's seed list `nats://a:4222,nats://b:4222`).
//! - [`webhook`]: [`WebhookSink`], one signed POST per event in the Standard Webhooks format
//!   (`https://...`).
//! - [`log`]: [`LogSink`], events written to the structured log (the default).

pub mod config;
pub mod log;
pub mod nats;
pub mod webhook;

use std::sync::Arc;

pub use config::{
    BusArgs, BusConfig, ENV_BUS_STREAM, ENV_BUS_STREAM_REPLICAS, ENV_BUS_SUBJECT_PREFIX,
    ENV_BUS_URL, ENV_OUTBOX_RETENTION, ENV_RELAY_MAX_ATTEMPTS, ENV_WEBHOOK_SECRET, RelayConfig,
    RelayConfigError, SigningKey,
};
pub use log::LogSink;
pub use nats::{NatsSettings, NatsSink, server_addrs, shown_servers, subject_for};
pub use webhook::{WebhookSink, signature};

use crate::core::clock::Clock;
use crate::core::relay::Sink;

/// The sink `bus` names. Nothing is contacted yet: the NATS sink connects on its first publish
/// (so a relay starts, and retries, while the bus is down).
pub fn sink_for(bus: &BusConfig, clock: Arc<dyn Clock>) -> Result<Arc<dyn Sink>, RelayConfigError> {
    Ok(match bus {
        BusConfig::Log => Arc::new(LogSink),
        BusConfig::Nats(settings) => Arc::new(NatsSink::new(settings.clone())),
        BusConfig::Webhook { url, key } => {
            Arc::new(WebhookSink::new(url.clone(), key.clone(), clock)?)
        }
    })
}
