//! The proxy-back port: how the engine asks an owning service to run a due schedule. The HTTP
//! implementation lives outside `core` (it needs an HTTP client); the engine sees only this.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::core::model::{EnvId, JobId, ScheduleId};

/// The envelope sent to `POST {baseUrl}/v1/internal/schedules/run`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRequest {
    pub schedule_id: ScheduleId,
    pub job_id: JobId,
    pub domain: String,
    pub schedule_type: String,
    pub env_id: EnvId,
    pub payload: Value,
    pub attempt: i32,
    pub scheduled_for: DateTime<Utc>,
    /// Always the schedule id: every job of a schedule correlates to it.
    pub correlation_id: String,
    /// `schedule:{schedule_id}:{job_id}`; also sent as the `Idempotency-Key` header.
    pub idempotency_key: String,
    /// The target's base URL from `target_config.baseUrl`. Not part of the envelope.
    #[serde(skip)]
    pub base_url: Option<String>,
}

/// Why a proxy-back call failed. Every variant is a failure on the retry path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("missing baseUrl in target_config")]
    MissingBaseUrl,
    #[error("invalid baseUrl in target_config: {0}")]
    InvalidBaseUrl(String),
    #[error("no M2M token source configured (set SENTIN8_CRON_TOKEN for dev)")]
    NoTokenSource,
    #[error("M2M token: {0}")]
    Token(String),
    #[error("proxy-back status {0}")]
    Status(u16),
    #[error("proxy-back decode: {0}")]
    Decode(String),
    #[error("proxy-back transport: {0}")]
    Transport(String),
    #[error("proxy-back timed out after {0:?}")]
    Timeout(std::time::Duration),
}

/// Calls an owning service back.
#[async_trait]
pub trait Dispatcher: Send + Sync + 'static {
    /// Runs one attempt. `Ok` carries the service's JSON answer (`null` for an empty body).
    async fn run(&self, request: &RunRequest) -> Result<Value, DispatchError>;
}
