//! The proxy-back port: how the engine asks an owning service to run a due schedule. The HTTP
//! implementation lives outside `core` (it needs an HTTP client); the engine sees only this.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::core::clock::Clock;
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
    /// What must hold for the call to leave (the attempt's lease); none: nothing to check.
    #[serde(skip)]
    pub fence: Option<CallFence>,
    /// The W3C `traceparent` and `tracestate` headers of the call (see
    /// [`crate::core::trace`]).
    #[serde(skip)]
    pub trace: Option<(String, String)>,
    /// This call as the dispatcher made it ready ahead of its instant
    /// ([`Dispatcher::prepare`]); none: it is made at the call.
    #[serde(skip)]
    pub prepared: Option<PreparedCall>,
}

/// A call made ready ahead of its instant by the dispatcher that will send it (for HTTP: its
/// request built and signed), so that the instant, when a burst's calls share the machine,
/// costs little more than the send. Opaque to the engine, which carries it from the fire's
/// hand-off to its call.
#[derive(Clone)]
pub struct PreparedCall(Arc<dyn Any + Send + Sync>);

impl PreparedCall {
    pub fn new<T: Any + Send + Sync>(prepared: T) -> Self {
        Self(Arc::new(prepared))
    }

    /// What the dispatcher put in, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreparedCall")
    }
}

/// How a call was made ready is not part of what a request says.
impl PartialEq for PreparedCall {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// The check a call passes just before its request is handed to the transport: the attempt's
/// lease, as its instance knows it on its own monotonic clock, has at least a margin left. The
/// instance moves the deadline on as it renews the lease; a stall of the instance (a freeze, a
/// pause, starvation) shows as monotonic time passing, so a call that waited past its lease is
/// not sent.
#[derive(Clone)]
pub struct CallFence {
    clock: Arc<dyn Clock>,
    /// The lease's end on `clock`'s monotonic reading, in microseconds.
    deadline: Arc<AtomicU64>,
    margin: std::time::Duration,
}

impl CallFence {
    pub fn new(
        clock: Arc<dyn Clock>,
        deadline: Arc<AtomicU64>,
        margin: std::time::Duration,
    ) -> Self {
        Self {
            clock,
            deadline,
            margin,
        }
    }

    /// True while the lease has more than the margin left.
    pub fn holds(&self) -> bool {
        Self::holds_at(&self.deadline, self.clock.monotonic(), self.margin)
    }

    /// The rule itself: a deadline (monotonic microseconds) holds at `mono_now` while more
    /// than `margin` is left. The engine's own check before a launch is this one too.
    pub fn holds_at(
        deadline: &AtomicU64,
        mono_now: std::time::Duration,
        margin: std::time::Duration,
    ) -> bool {
        let deadline =
            std::time::Duration::from_micros(deadline.load(std::sync::atomic::Ordering::Acquire));
        mono_now + margin < deadline
    }
}

impl std::fmt::Debug for CallFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallFence")
            .field("holds", &self.holds())
            .finish()
    }
}

/// Fences are not part of what a request says.
impl PartialEq for CallFence {
    fn eq(&self, _: &Self) -> bool {
        true
    }
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
    /// The call was not sent: its lease could not be known to hold (the instance stalled, or
    /// could not renew it). Not an attempt: its instance renews the lease and calls, or, the
    /// job having been taken over, drops it.
    #[error("proxy-back not sent: the attempt's lease is not known to hold")]
    LeaseUnsure,
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
            DispatchError::LeaseUnsure => "lease",
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
            | DispatchError::Timeout(_)
            | DispatchError::LeaseUnsure => FailureClass::Retryable,
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

    /// Makes `request`'s call ready ahead of its instant, where that saves work at the call;
    /// `run` uses it when the request carries it. It must not change what is sent, only
    /// when it is computed (a call that cannot be made ready is made at its instant, where
    /// its error is reported).
    fn prepare(&self, _request: &RunRequest) -> Option<PreparedCall> {
        None
    }
}
