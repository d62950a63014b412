//! Exports the engine's spans (see [`crate::core::trace`]) over OTLP/HTTP with the JSON
//! encoding (`POST {endpoint}/v1/traces`), to an OpenTelemetry Collector or any backend that
//! takes OTLP. Off unless an endpoint is set. Spans are queued without blocking the engine
//! (a full queue drops them, counted), sent in batches at most a second apart, and a batch
//! the endpoint refuses or cannot take is dropped after one try: traces must never hold up
//! or slow down the calls they describe.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use url::Url;

use crate::core::metrics::Metrics;
use crate::core::trace::{AttrValue, Span, SpanSink};

/// About how many spans may wait to be sent: the queue holds messages, each the spans of one
/// step of a group of attempts (a claim's, a record's: tens, a few hundred at most).
const QUEUE: usize = 8192;
/// Spans per request, at most.
const BATCH: usize = 512;
/// How long a span waits for its batch, at most.
const LINGER: Duration = Duration::from_secs(1);
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

enum Message {
    Spans(Vec<Span>),
    Flush(oneshot::Sender<()>),
}

/// The OTLP/HTTP exporter: a [`SpanSink`] whose spans a background task sends. What became of
/// them is counted in the metrics (`sentin8_cron_spans_exported_total`, `..._dropped_total`).
#[derive(Debug, Clone)]
pub struct OtlpExporter {
    queue: mpsc::Sender<Message>,
    metrics: Arc<Metrics>,
}

impl OtlpExporter {
    /// Starts the exporter's task (on the current runtime) for `endpoint` (the collector's base
    /// URL; spans go to its `/v1/traces`), naming this process `instance`, counting in
    /// `metrics`.
    pub fn start(endpoint: &Url, instance: &str, metrics: Arc<Metrics>) -> Self {
        let (queue, mut rx) = mpsc::channel::<Message>(QUEUE / 64);
        let out = Batches {
            client: reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .unwrap_or_default(),
            url: traces_url(endpoint),
            resource: resource(instance),
            metrics: metrics.clone(),
        };
        tokio::spawn(async move {
            let mut pending: Vec<Span> = Vec::new();
            // When the oldest pending span has waited long enough.
            let mut due = tokio::time::Instant::now();
            loop {
                let message = if pending.is_empty() {
                    rx.recv().await
                } else {
                    match tokio::time::timeout_at(due, rx.recv()).await {
                        Ok(message) => message,
                        // The batch's first span has waited its second: it goes as it is.
                        Err(_) => Some(Message::Flush(oneshot::channel().0)),
                    }
                };
                match message {
                    None => return out.send_all(&mut pending).await,
                    Some(Message::Spans(spans)) => {
                        if pending.is_empty() {
                            due = tokio::time::Instant::now() + LINGER;
                        }
                        pending.extend(spans);
                        if pending.len() >= BATCH {
                            out.send_all(&mut pending).await;
                        }
                    }
                    Some(Message::Flush(done)) => {
                        out.send_all(&mut pending).await;
                        let _ = done.send(());
                    }
                }
            }
        });
        Self { queue, metrics }
    }

    /// Sends what is queued and waits until it was sent (or dropped): before a process ends,
    /// and in tests.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

impl SpanSink for OtlpExporter {
    fn enabled(&self) -> bool {
        true
    }

    fn export(&self, spans: Vec<Span>) {
        let count = spans.len() as u64;
        if self.queue.try_send(Message::Spans(spans)).is_err() {
            self.metrics
                .spans_dropped
                .fetch_add(count, Ordering::Relaxed);
        }
    }
}

/// Where the spans go: `{endpoint}/v1/traces` (a path already ending so is kept).
pub fn traces_url(endpoint: &Url) -> Url {
    if endpoint.path().ends_with("/v1/traces") {
        return endpoint.clone();
    }
    let mut url = endpoint.clone();
    let path = format!("{}/v1/traces", endpoint.path().trim_end_matches('/'));
    url.set_path(&path);
    url
}

/// Where and how batches go, and what became of their spans.
struct Batches {
    client: reqwest::Client,
    url: Url,
    resource: Value,
    metrics: Arc<Metrics>,
}

impl Batches {
    /// Sends `spans` in requests of at most [`BATCH`] spans, leaving it empty.
    async fn send_all(&self, spans: &mut Vec<Span>) {
        for batch in spans.chunks(BATCH) {
            self.send(batch).await;
        }
        spans.clear();
    }

    async fn send(&self, spans: &[Span]) {
        let count = spans.len() as u64;
        let body = request_body(&self.resource, spans);
        match self.client.post(self.url.clone()).json(&body).send().await {
            Ok(response) if response.status().is_success() => {
                self.metrics
                    .spans_exported
                    .fetch_add(count, Ordering::Relaxed);
            }
            Ok(response) => {
                self.metrics
                    .spans_dropped
                    .fetch_add(count, Ordering::Relaxed);
                tracing::warn!(status = %response.status(), spans = count, "the OTLP endpoint refused spans; dropped");
            }
            Err(err) => {
                self.metrics
                    .spans_dropped
                    .fetch_add(count, Ordering::Relaxed);
                tracing::warn!(error = %crate::util::http::describe(err), spans = count, "cannot reach the OTLP endpoint; spans dropped");
            }
        }
    }
}

fn resource(instance: &str) -> Value {
    json!({
        "attributes": [
            attribute("service.name", &AttrValue::Text("sentin8-cron".into())),
            attribute("service.version", &AttrValue::Text(env!("CARGO_PKG_VERSION").into())),
            attribute("service.instance.id", &AttrValue::Text(instance.into())),
        ]
    })
}

fn attribute(key: &str, value: &AttrValue) -> Value {
    let value = match value {
        AttrValue::Text(text) => json!({ "stringValue": text }),
        // OTLP's JSON encoding writes 64-bit integers as strings.
        AttrValue::Int(n) => json!({ "intValue": n.to_string() }),
    };
    json!({ "key": key, "value": value })
}

fn nanos(at: chrono::DateTime<chrono::Utc>) -> String {
    at.timestamp_nanos_opt().unwrap_or(0).max(0).to_string()
}

/// The `ExportTraceServiceRequest` of `spans`, in OTLP's JSON encoding.
pub fn request_body(resource: &Value, spans: &[Span]) -> Value {
    let spans: Vec<Value> = spans
        .iter()
        .map(|span| {
            let mut out = json!({
                "traceId": span.trace_id.hex(),
                "spanId": span.span_id.hex(),
                "name": span.name,
                // SPAN_KIND_INTERNAL (1) or SPAN_KIND_CLIENT (3).
                "kind": if span.client { 3 } else { 1 },
                "startTimeUnixNano": nanos(span.start),
                "endTimeUnixNano": nanos(span.end),
                "attributes": span
                    .attributes
                    .iter()
                    .map(|(k, v)| attribute(k, v))
                    .collect::<Vec<_>>(),
                // STATUS_CODE_OK (1) or STATUS_CODE_ERROR (2).
                "status": match &span.error {
                    None => json!({ "code": 1 }),
                    Some(message) => json!({ "code": 2, "message": message }),
                },
            });
            if let Some(parent) = span.parent {
                out["parentSpanId"] = json!(parent.hex());
            }
            out
        })
        .collect();
    json!({
        "resourceSpans": [{
            "resource": resource,
            "scopeSpans": [{
                "scope": { "name": "sentin8-cron", "version": env!("CARGO_PKG_VERSION") },
                "spans": spans,
            }],
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_go_to_the_traces_path_of_the_endpoint() {
        let url = |s: &str| traces_url(&Url::parse(s).unwrap()).to_string();
        assert_eq!(
            url("http://collector:4318"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            url("https://c.example/otlp"),
            "https://c.example/otlp/v1/traces"
        );
        assert_eq!(
            url("https://c.example/v1/traces"),
            "https://c.example/v1/traces"
        );
    }
}
