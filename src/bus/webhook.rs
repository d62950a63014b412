//! The webhook sink: one `POST` per event, in the Standard Webhooks format. The body is the
//! event envelope (JSON); the headers are `webhook-id` (the event id, stable across re-sends so
//! the receiver can drop duplicates), `webhook-timestamp` (Unix seconds of this attempt) and,
//! when a key is configured, `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `{id}.{timestamp}.{body}`. A 2xx answer acknowledges the event.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::Mac;
use reqwest::Url;
use reqwest::header::CONTENT_TYPE;

use super::config::{RelayConfigError, SigningKey};
use crate::callback::config::default_user_agent;
use crate::core::clock::Clock;
use crate::core::model::OutboxEvent;
use crate::core::relay::{Delivery, EventEnvelope, STRUCTURED_CONTENT_TYPE, Sink, SinkError};

/// The bound on one delivery, response included.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(8);

/// The `webhook-signature` value for one delivery: `v1,` and the base64 HMAC-SHA256 of
/// `{id}.{timestamp}.{body}` under `key`.
pub fn signature(key: &SigningKey, id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = key.mac();
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// Posts events to one URL.
pub struct WebhookSink {
    client: reqwest::Client,
    url: Url,
    key: Option<SigningKey>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for WebhookSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSink")
            .field("url", &self.url.as_str())
            .field("signed", &self.key.is_some())
            .finish_non_exhaustive()
    }
}

impl WebhookSink {
    /// A sink posting to `url`, signing with `key` when given; `clock` stamps each delivery.
    pub fn new(
        url: Url,
        key: Option<SigningKey>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, RelayConfigError> {
        let client = reqwest::Client::builder()
            .user_agent(default_user_agent())
            // A receiver that redirects is misconfigured; following would re-send elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(DELIVERY_TIMEOUT)
            .build()
            .map_err(|e| RelayConfigError::Client(crate::util::http::describe(e)))?;
        Ok(Self {
            client,
            url,
            key,
            clock,
        })
    }
}

#[async_trait]
impl Sink for WebhookSink {
    fn kind(&self) -> &'static str {
        "webhook"
    }

    async fn publish(&self, event: &OutboxEvent) -> Result<Delivery, SinkError> {
        let body = EventEnvelope::of(event).to_json()?;
        let id = event.id.to_string();
        let timestamp = self.clock.now().timestamp();
        let mut request = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, STRUCTURED_CONTENT_TYPE)
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string());
        if let Some(key) = &self.key {
            request = request.header("webhook-signature", signature(key, &id, timestamp, &body));
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|e| SinkError::Unavailable(crate::util::http::describe(e)))?;
        let status = response.status();
        if status.is_success() {
            return Ok(Delivery::default());
        }
        let text = format!("webhook answered {status}");
        // Throttling, timeouts and server errors say nothing about the event itself.
        if status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429 {
            Err(SinkError::Unavailable(text))
        } else {
            Err(SinkError::Rejected(text))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::Hmac;
    use sha2::Sha256;

    #[test]
    fn signatures_are_hmac_sha256_over_id_timestamp_and_body() {
        let key = SigningKey::parse("k").unwrap();
        let sig = signature(&key, "msg_1", 1_700_000_000, b"{}");
        let mut mac = Hmac::<Sha256>::new_from_slice(b"k").unwrap();
        mac.update(b"msg_1.1700000000.{}");
        let expected = STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(sig, format!("v1,{expected}"));
        // Any change to what is signed changes the signature.
        assert_ne!(sig, signature(&key, "msg_2", 1_700_000_000, b"{}"));
        assert_ne!(sig, signature(&key, "msg_1", 1_700_000_001, b"{}"));
        assert_ne!(sig, signature(&key, "msg_1", 1_700_000_000, b"[]"));
    }
}
