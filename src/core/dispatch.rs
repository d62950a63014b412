//! The proxy-back port: how the engine asks an owning service to run a due schedule. The HTTP
//! implementation lives outside `core` (it needs an HTTP client); the engine sees only this.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::core::model::{EnvId, JobId, ScheduleId};
use crate::core::target::{BaseUrl, TargetError};

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
    /// The target's parsed base URL (or why the stored one cannot be used); the call URL is
    /// built from it. Not part of the envelope.
    #[serde(skip)]
    pub base_url: Result<BaseUrl, TargetError>,
}

/// Whether a failed call is worth retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// The schedule or the service is misconfigured (a bad or missing target, no credential):
    /// retrying cannot help, so the job goes to the DLQ on its first attempt.
    Configuration,
    /// Transport errors, timeouts, error statuses: retried with backoff.
    Retryable,
}

impl FailureClass {
    /// The name recorded with a configuration failure (`configuration: ...`).
    pub const CONFIGURATION: &'static str = "configuration";
}

/// Why a proxy-back call failed. See [`DispatchError::class`] for which are retried.
///
/// What a tenant reads (the `Display` text, stored with the job) is the class of a failure,
/// never raw transport text: a tenant chooses its target, and socket messages would tell it
/// what listens where. The dispatcher logs the full detail for the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    #[error("missing baseUrl in target_config")]
    MissingBaseUrl,
    #[error("invalid baseUrl in target_config: {0}")]
    InvalidBaseUrl(String),
    /// The egress policy refuses the target (its URL, or every address its name resolves to).
    #[error("target refused by the egress policy")]
    EgressRefused,
    #[error("no M2M token source configured (set SENTIN8_CRON_TOKEN for dev)")]
    NoTokenSource,
    #[error("M2M token: {0}")]
    Token(String),
    /// A non-success status, with an excerpt of the body (at most 512 bytes, control
    /// characters replaced; empty when there was none).
    #[error("proxy-back status {code}{suffix}", code = .0, suffix = excerpt_suffix(.1))]
    Status(u16, String),
    #[error("proxy-back decode: {0}")]
    Decode(String),
    /// A transport failure by class: `connection refused`, `connection failed` or `tls`.
    #[error("proxy-back {0}")]
    Transport(String),
    #[error("proxy-back timed out after {0:?}")]
    Timeout(std::time::Duration),
}

fn excerpt_suffix(excerpt: &str) -> String {
    if excerpt.is_empty() {
        String::new()
    } else {
        format!(": {excerpt}")
    }
}

impl DispatchError {
    /// The kind of failure, as the attempt ledger records it: `configuration`, `egress`,
    /// `token`, `status`, `decode`, `transport` or `timeout`.
    pub fn kind(&self) -> &'static str {
        match self {
            DispatchError::MissingBaseUrl
            | DispatchError::InvalidBaseUrl(_)
            | DispatchError::NoTokenSource => FailureClass::CONFIGURATION,
            DispatchError::EgressRefused => "egress",
            DispatchError::Token(_) => "token",
            DispatchError::Status(..) => "status",
            DispatchError::Decode(_) => "decode",
            DispatchError::Transport(_) => "transport",
            DispatchError::Timeout(_) => "timeout",
        }
    }

    /// Configuration errors are fatal for the job; everything else is retryable.
    pub fn class(&self) -> FailureClass {
        match self {
            DispatchError::MissingBaseUrl
            | DispatchError::InvalidBaseUrl(_)
            | DispatchError::EgressRefused
            | DispatchError::NoTokenSource => FailureClass::Configuration,
            DispatchError::Token(_)
            | DispatchError::Status(..)
            | DispatchError::Decode(_)
            | DispatchError::Transport(_)
            | DispatchError::Timeout(_) => FailureClass::Retryable,
        }
    }
}

impl From<&TargetError> for DispatchError {
    fn from(err: &TargetError) -> Self {
        match err {
            TargetError::MissingBaseUrl => DispatchError::MissingBaseUrl,
            TargetError::InvalidBaseUrl(reason) => DispatchError::InvalidBaseUrl(reason.clone()),
        }
    }
}

/// Calls an owning service back.
#[async_trait]
pub trait Dispatcher: Send + Sync + 'static {
    /// Runs one attempt. `Ok` carries the service's JSON answer (`null` for an empty body).
    async fn run(&self, request: &RunRequest) -> Result<Value, DispatchError>;
}
