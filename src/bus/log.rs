//! The log sink: each event becomes one structured log record (target `sentin8_cron::events`)
//! and counts as acknowledged at once. The default bus, so an unconfigured relay still drains
//! the outbox, and a development aid.

use async_trait::async_trait;

use crate::core::model::OutboxEvent;
use crate::core::relay::{Delivery, EventEnvelope, Sink, SinkError};

/// Writes events to the log.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogSink;

#[async_trait]
impl Sink for LogSink {
    fn kind(&self) -> &'static str {
        "log"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        let body = EventEnvelope::of(event).to_json()?;
        tracing::info!(
            target: "sentin8_cron::events",
            event_id = %event.id,
            event_type = %event.event_type,
            env_id = %event.env_id,
            schedule_id = event.schedule_id.map(tracing::field::display),
            event = %String::from_utf8_lossy(&body),
            "event"
        );
        Ok(Delivery::default())
    }
}
