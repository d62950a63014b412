//! The NATS JetStream sink: each event is published to `<prefix>.<type>` with the header
//! `Nats-Msg-Id: <event id>` and acknowledged by the stream, whose duplicate window drops a
//! re-send of the same event.
//!
//! The sink connects on its first publish, not when it is built, so a relay starts (and keeps
//! retrying) while the bus is down. Once connected, the client reconnects by itself, to any
//! server of the seed list (`nats://a:4222,nats://b:4222`) or that the cluster announced; the
//! stream is created when missing, and re-checked after the server said it has none.

use std::fmt;
use std::time::{Duration, Instant};

use async_nats::ServerAddr;
use async_nats::jetstream::{self, context::PublishErrorKind, stream};
use async_trait::async_trait;
use tokio::sync::Mutex;

use crate::core::model::OutboxEvent;
use crate::core::relay::{Delivery, EventEnvelope, STRUCTURED_CONTENT_TYPE, Sink, SinkError};
use crate::util::url::hide_userinfo;

/// The connection's name, as the servers' monitoring (`/connz`) shows it.
pub const CLIENT_NAME: &str = "sentin8-cron relay";

/// After a failed connection attempt, publishes fail at once for this long instead of each
/// trying (and timing out) again.
const RECONNECT_COOLDOWN: Duration = Duration::from_secs(1);

/// Where and how to publish.
#[derive(Clone, PartialEq, Eq)]
pub struct NatsSettings {
    /// `nats://host:port`, or a comma-separated seed list of a cluster's servers
    /// (`nats://a:4222,nats://b:4222`; see [`server_addrs`]). Credentials are never shown.
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
    /// The replicas of a stream this sink creates: 3 on a cluster, so the stream keeps its
    /// messages and accepts publishes while one server is down.
    pub replicas: usize,
    /// How long a stream this sink creates keeps a message (JetStream's `max_age`): a bounded
    /// stream, not one that grows for ever.
    pub max_age: Duration,
}

/// How long a stream the relay creates keeps its messages, unless told otherwise.
pub const DEFAULT_STREAM_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

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
            replicas: 1,
            max_age: DEFAULT_STREAM_MAX_AGE,
        }
    }
}

impl fmt::Debug for NatsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsSettings")
            .field("url", &shown_servers(&self.url))
            .field("subject_prefix", &self.subject_prefix)
            .field("stream", &self.stream)
            .field("connect_timeout", &self.connect_timeout)
            .field("ack_timeout", &self.ack_timeout)
            .field("duplicate_window", &self.duplicate_window)
            .field("replicas", &self.replicas)
            .field("max_age", &self.max_age)
            .finish()
    }
}

/// The servers of a bus URL: one `nats://host:port` (or `tls://`), or several separated by
/// commas, each naming its scheme and host. A client that knows a single server cannot find
/// the rest of a cluster when that one is down at connect time, so a cluster's URL should name
/// several. The reason names the entry, with any credentials hidden.
pub fn server_addrs(list: &str) -> Result<Vec<ServerAddr>, String> {
    let entries: Vec<&str> = list.split(',').map(str::trim).collect();
    let many = entries.len() > 1;
    let mut servers = Vec::with_capacity(entries.len());
    for (n, entry) in entries.iter().enumerate() {
        let which = if many {
            format!(
                "server {} of {} ({})",
                n + 1,
                entries.len(),
                hide_userinfo(entry)
            )
        } else {
            hide_userinfo(entry)
        };
        if entry.is_empty() {
            return Err(format!(
                "server {} of {} is empty; separate nats://host:port entries with single commas",
                n + 1,
                entries.len()
            ));
        }
        let scheme = entry
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("nats" | "tls")) {
            return Err(format!(
                "{which} is not a NATS server URL; use nats://host:port or tls://host:port"
            ));
        }
        let parsed =
            url::Url::parse(entry).map_err(|e| format!("{which} is not a valid URL: {e}"))?;
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(format!("{which} names no host"));
        }
        if parsed.path().len() > 1 || parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(format!(
                "{which} has a path, query or fragment; a NATS server is nats://host:port"
            ));
        }
        let server = ServerAddr::from_url(parsed).map_err(|e| format!("{which}: {e}"))?;
        if servers.contains(&server) {
            return Err(format!("{which} is listed twice"));
        }
        servers.push(server);
    }
    Ok(servers)
}

/// A bus URL for messages: each server's credentials hidden.
pub fn shown_servers(list: &str) -> String {
    list.split(',')
        .map(|entry| hide_userinfo(entry.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The prefix of sentin8-cron's event types, replaced by the subject prefix.
pub const EVENT_NAMESPACE: &str = crate::core::events::TYPE_PREFIX;

/// The subject of an event type: the `io.sentin8.cron.` prefix is replaced by the subject
/// prefix and the remaining `.`-separated parts become tokens
/// (`io.sentin8.cron.job.succeeded.v1` with prefix `sentin8.cron` is
/// `sentin8.cron.job.succeeded.v1`). Characters a subject token cannot hold become `_`.
pub fn subject_for(prefix: &str, event_type: &str) -> String {
    let rest = event_type
        .strip_prefix(EVENT_NAMESPACE)
        .unwrap_or(event_type);
    let mut subject = prefix.to_owned();
    for token in rest.split('.') {
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
                let servers = server_addrs(&self.settings.url)?;
                let client = async_nats::ConnectOptions::new()
                    .name(CLIENT_NAME)
                    .connection_timeout(self.settings.connect_timeout)
                    .connect(servers)
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot connect to NATS at {}: {e}",
                            shown_servers(&self.settings.url)
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
                num_replicas: self.settings.replicas.max(1),
                max_age: self.settings.max_age,
                ..stream::Config::default()
            })
            .await
            .map_err(|e| {
                format!(
                    "cannot find or create the JetStream stream {}: {e}",
                    self.settings.stream
                )
            })?;
        let found = &stream.cached_info().config;
        if found.num_replicas < self.settings.replicas {
            // An existing stream keeps its own configuration: say so rather than change it.
            tracing::warn!(
                stream = %self.settings.stream,
                replicas = found.num_replicas,
                wanted = self.settings.replicas,
                "the JetStream stream has fewer replicas than configured; it does not survive \
                 the loss of a server holding it"
            );
        }
        let subjects = &found.subjects;
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
        headers.insert("content-type", STRUCTURED_CONTENT_TYPE);
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
            subject_for("sentin8.cron", "io.sentin8.cron.job.succeeded.v1"),
            "sentin8.cron.job.succeeded.v1"
        );
        assert_eq!(
            subject_for("acme.jobs", events::DLQ_REPUBLISHED),
            "acme.jobs.dlq.republished.v1"
        );
        for event_type in events::ALL {
            assert!(event_type.starts_with(EVENT_NAMESPACE), "{event_type}");
            let subject = subject_for("p", event_type);
            assert_eq!(subject.split('.').count(), 4, "{subject}");
        }
        // Foreign or odd types still make a valid subject.
        assert_eq!(subject_for("p", "other.thing"), "p.other.thing");
        assert_eq!(subject_for("p", "a b.*.>..x"), "p.a_b._._._.x");
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
