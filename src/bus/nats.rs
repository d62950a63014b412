//! The NATS JetStream sink: each event is published to `<prefix>.<type>` with the header
//! `Nats-Msg-Id: <event id>` and acknowledged by the stream, whose duplicate window drops a
//! re-send of the same event.
//!
//! The sink connects on its first publish, not when it is built, so a relay starts (and keeps
//! retrying) while the bus is down. Once connected, the client reconnects by itself; the stream
//! is created when missing, and re-checked after the server said it has none.

use std::fmt;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use async_trait::async_trait;
use tokio::sync::Mutex;

use crate::core::model::OutboxEvent;
use crate::core::relay::{Delivery, EventEnvelope, Sink, SinkError};
use crate::util::url::hide_userinfo;

/// After a failed connection attempt, publishes fail at once for this long instead of each
/// trying (and timing out) again.
const RECONNECT_COOLDOWN: Duration = Duration::from_secs(1);

/// Where and how to publish.
#[derive(Clone, PartialEq, Eq)]
pub struct NatsSettings {
    /// `nats://host:port` (credentials in the URL are never shown).
    pub url: String,
    /// Subjects are `<subject_prefix>.<event type suffix>`.
    pub subject_prefix: String,
    /// The stream, created with subjects `<subject_prefix>.>` when missing.
    pub stream: String,
    pub connect_timeout: Duration,
    /// How long to wait for the stream's acknowledgement of one publish.
    pub ack_timeout: Duration,
    /// The duplicate window of a stream this sink creates.
    pub duplicate_window: Duration,
}

impl NatsSettings {
    /// Settings with the default timeouts.
    pub fn new(url: String, subject_prefix: String, stream: String) -> Self {
        Self {
            url,
            subject_prefix,
            stream,
            connect_timeout: Duration::from_secs(5),
            ack_timeout: Duration::from_secs(5),
            duplicate_window: Duration::from_secs(120),
        }
    }
}

impl fmt::Debug for NatsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsSettings")
            .field("url", &hide_userinfo(&self.url))
            .field("subject_prefix", &self.subject_prefix)
            .field("stream", &self.stream)
            .field("connect_timeout", &self.connect_timeout)
            .field("ack_timeout", &self.ack_timeout)
            .field("duplicate_window", &self.duplicate_window)
            .finish()
    }
}

/// The namespace of sentin8-cron's event types, replaced by the subject prefix.
pub const EVENT_NAMESPACE: &str = "sentin8:cron:";

/// The subject of an event type: the `sentin8:cron:` namespace is replaced by the prefix and
/// the remaining `:`-separated parts become tokens (`sentin8:cron:schedule:completed` with
/// prefix `sentin8.cron` is `sentin8.cron.schedule.completed`). Characters a subject token
/// cannot hold become `_`.
pub fn subject_for(prefix: &str, event_type: &str) -> String {
    let rest = event_type
        .strip_prefix(EVENT_NAMESPACE)
        .unwrap_or(event_type);
    let mut subject = prefix.to_owned();
    for token in rest.split(':') {
        subject.push('.');
        if token.is_empty() {
            subject.push('_');
        }
        subject.extend(token.chars().map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        }));
    }
    subject
}

#[derive(Default)]
struct State {
    context: Option<jetstream::Context>,
    stream_ready: bool,
    last_failure: Option<(Instant, String)>,
}

/// Publishes to NATS JetStream.
pub struct NatsSink {
    settings: NatsSettings,
    state: Mutex<State>,
}

impl fmt::Debug for NatsSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsSink")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl NatsSink {
    /// A sink that connects on its first publish.
    pub fn new(settings: NatsSettings) -> Self {
        Self {
            settings,
            state: Mutex::new(State::default()),
        }
    }

    /// A sink connected now, with its stream in place: for callers that want a bad URL or an
    /// unreachable server reported up front.
    pub async fn connect(settings: NatsSettings) -> Result<Self, SinkError> {
        let sink = Self::new(settings);
        sink.context().await?;
        Ok(sink)
    }

    pub fn settings(&self) -> &NatsSettings {
        &self.settings
    }

    /// The JetStream context, connecting and creating the stream first where needed.
    pub async fn context(&self) -> Result<jetstream::Context, SinkError> {
        let mut state = self.state.lock().await;
        if let (Some(context), true) = (&state.context, state.stream_ready) {
            return Ok(context.clone());
        }
        if let Some((at, error)) = &state.last_failure
            && at.elapsed() < RECONNECT_COOLDOWN
        {
            return Err(SinkError::Unavailable(error.clone()));
        }
        match self.prepare(&mut state).await {
            Ok(context) => {
                state.last_failure = None;
                Ok(context)
            }
            Err(error) => {
                state.last_failure = Some((Instant::now(), error.clone()));
                Err(SinkError::Unavailable(error))
            }
        }
    }

    async fn prepare(&self, state: &mut State) -> Result<jetstream::Context, String> {
        let context = match &state.context {
            Some(context) => context.clone(),
            None => {
                let client = async_nats::ConnectOptions::new()
                    .name("sentin8-cron relay")
                    .connection_timeout(self.settings.connect_timeout)
                    .connect(self.settings.url.as_str())
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot connect to NATS at {}: {e}",
                            hide_userinfo(&self.settings.url)
                        )
                    })?;
                let mut context = jetstream::new(client);
                context.set_timeout(self.settings.ack_timeout);
                state.context = Some(context.clone());
                context
            }
        };
        let wanted = format!("{}.>", self.settings.subject_prefix);
        let stream = context
            .get_or_create_stream(stream::Config {
                name: self.settings.stream.clone(),
                subjects: vec![wanted.clone()],
                duplicate_window: self.settings.duplicate_window,
                ..stream::Config::default()
            })
            .await
            .map_err(|e| {
                format!(
                    "cannot find or create the JetStream stream {}: {e}",
                    self.settings.stream
                )
            })?;
        let subjects = &stream.cached_info().config.subjects;
        if !subjects.iter().any(|s| s == &wanted || s == ">") {
            tracing::warn!(
                stream = %self.settings.stream,
                ?subjects,
                wanted = %wanted,
                "the JetStream stream exists but may not capture the relay's subjects"
            );
        }
        state.stream_ready = true;
        Ok(context)
    }

    async fn forget_stream(&self) {
        self.state.lock().await.stream_ready = false;
    }
}

#[async_trait]
impl Sink for NatsSink {
    fn kind(&self) -> &'static str {
        "nats"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        let context = self.context().await?;
        let body = EventEnvelope::of(event).to_json()?;
        let subject = subject_for(&self.settings.subject_prefix, &event.event_type);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", event.id.to_string().as_str());
        let pending = context
            .publish_with_headers(subject, headers, body.into())
            .await
            .map_err(|e| classify(e.kind(), &e))?;
        let ack = match pending.await {
            Ok(ack) => ack,
            Err(e) => {
                if e.kind() == PublishErrorKind::StreamNotFound {
                    // Someone deleted the stream: create it again on the next publish.
                    self.forget_stream().await;
                }
                return Err(classify(e.kind(), &e));
            }
        };
        Ok(Delivery {
            duplicate: ack.duplicate,
        })
    }
}

/// A refusal is about this message (too large, an API error for it); everything else is the
/// bus being unreachable, slow or missing its stream.
fn classify(kind: PublishErrorKind, err: &dyn fmt::Display) -> SinkError {
    match kind {
        PublishErrorKind::MaxPayloadExceeded
        | PublishErrorKind::WrongLastMessageId
        | PublishErrorKind::WrongLastSequence
        | PublishErrorKind::Other => SinkError::Rejected(err.to_string()),
        PublishErrorKind::StreamNotFound
        | PublishErrorKind::TimedOut
        | PublishErrorKind::BrokenPipe
        | PublishErrorKind::MaxAckPending => SinkError::Unavailable(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::events;

    #[test]
    fn subjects_follow_event_types() {
        assert_eq!(
            subject_for("sentin8.cron", "sentin8:cron:schedule:completed"),
            "sentin8.cron.schedule.completed"
        );
        assert_eq!(
            subject_for("acme.jobs", "sentin8:cron:dlq:republished"),
            "acme.jobs.dlq.republished"
        );
        for event_type in events::ALL {
            assert!(event_type.starts_with(EVENT_NAMESPACE), "{event_type}");
            let subject = subject_for("p", event_type);
            assert_eq!(subject.split('.').count(), 3, "{subject}");
        }
        // Foreign or odd types still make a valid subject.
        assert_eq!(subject_for("p", "other:thing"), "p.other.thing");
        assert_eq!(subject_for("p", "a b:*:>::x"), "p.a_b._._._.x");
    }

    #[test]
    fn debug_hides_credentials() {
        let settings = NatsSettings::new(
            "nats://relay:hunter2@bus:4222".into(),
            "sentin8.cron".into(),
            "SENTIN8_CRON".into(),
        );
        let shown = format!("{settings:?} {:?}", NatsSink::new(settings.clone()));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("bus:4222"), "{shown}");
    }
}
