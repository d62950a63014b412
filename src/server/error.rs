//! API errors as RFC 9457 problem details (`application/problem+json`). The `type` and `title`
//! of each kind are stable; `detail` helps the caller; internal errors are logged with the
//! request id and answered with an opaque 500 that never carries internal text.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::core::decl::FieldError;
use crate::core::ops::OpsError;
use crate::core::store::StoreError;
use crate::server::auth::AuthError;
use crate::server::policy::PolicyError;
use crate::server::rate::{Limited, RateLimited};

/// The problem kinds the API answers with.
#[derive(Debug)]
pub enum ApiError {
    /// 400: the request is malformed or invalid; `errors` lists each field's problem.
    Invalid {
        detail: String,
        errors: Vec<FieldError>,
    },
    /// 401: no or bad credentials.
    Unauthorized(AuthError),
    /// 403: authenticated, but not allowed.
    Forbidden(String),
    /// 404: not found (in the addressed environment).
    NotFound(String),
    /// 409: conflicts with the current state.
    Conflict(String),
    /// 409: the job was superseded; the problem names its successor (`successor_job_id`).
    Superseded { detail: String, successor: Uuid },
    /// 413: the request body is over the limit.
    TooLarge(String),
    /// 415: a body in a media type the endpoint does not read.
    UnsupportedMediaType(String),
    /// 429: over a rate limit; `Retry-After` says when to come back.
    RateLimited(RateLimited),
    /// 503: not ready to serve.
    Unavailable(String),
    /// 503: the request was not answered in time.
    Timeout(String),
    /// 500: logged, never shown.
    Internal(String),
}

/// The problem document (RFC 9457).
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem kind; stable across releases.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// One entry per invalid field, for validation problems.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub errors: Vec<FieldError>,
    /// An extension member of a 409 refusing to retry a superseded job: the job that runs
    /// its occurrence instead (its republished dead letter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successor_job_id: Option<Uuid>,
}

impl ApiError {
    /// A 400 naming one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        let error = FieldError::new(field, message);
        ApiError::Invalid {
            detail: error.to_string(),
            errors: vec![error],
        }
    }

    /// A 400 with several field problems.
    pub fn fields(errors: Vec<FieldError>) -> Self {
        let detail = match errors.as_slice() {
            [one] => one.to_string(),
            many => format!("{} fields are invalid", many.len()),
        };
        ApiError::Invalid { detail, errors }
    }

    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            ApiError::Invalid { .. } => (
                StatusCode::BAD_REQUEST,
                "invalid-request",
                "Invalid request",
            ),
            ApiError::Unauthorized(_) => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Authentication required",
            ),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", "Not allowed"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            ApiError::Conflict(_) | ApiError::Superseded { .. } => (
                StatusCode::CONFLICT,
                "conflict",
                "Conflict with the current state",
            ),
            ApiError::TooLarge(_) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                "Request body too large",
            ),
            ApiError::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
            ),
            ApiError::RateLimited(_) => (
                StatusCode::TOO_MANY_REQUESTS,
                "rate-limited",
                "Too many requests",
            ),
            ApiError::Unavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
            ),
            ApiError::Timeout(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "timeout",
                "Request timed out",
            ),
            ApiError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal error",
            ),
        }
    }

    /// The stable `type` URI of a problem kind.
    pub fn type_uri(slug: &str) -> String {
        format!("urn:sentin8-cron:problem:{slug}")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, slug, title) = self.parts();
        let mut challenge = None;
        let mut successor_job_id = None;
        let mut retry_after = None;
        let (detail, errors) = match self {
            ApiError::RateLimited(limited) => {
                retry_after = Some(limited.retry_after_secs);
                let whose = match limited.limit {
                    Limited::Client => "this client's",
                    Limited::Environment => "this environment's",
                };
                (
                    format!(
                        "{whose} request rate limit is reached: retry after {} s",
                        limited.retry_after_secs
                    ),
                    Vec::new(),
                )
            }
            ApiError::Invalid { detail, errors } => (detail, errors),
            ApiError::Unauthorized(err) => {
                challenge = Some(err.www_authenticate());
                (
                    err.description()
                        .unwrap_or("a bearer token is required")
                        .to_owned(),
                    Vec::new(),
                )
            }
            ApiError::Superseded { detail, successor } => {
                successor_job_id = Some(successor);
                (detail, Vec::new())
            }
            ApiError::Forbidden(detail)
            | ApiError::NotFound(detail)
            | ApiError::Conflict(detail)
            | ApiError::TooLarge(detail)
            | ApiError::UnsupportedMediaType(detail)
            | ApiError::Unavailable(detail)
            | ApiError::Timeout(detail) => (detail, Vec::new()),
            ApiError::Internal(cause) => {
                tracing::error!(error = %cause, "request failed");
                (
                    "the request could not be completed; it has been logged".to_owned(),
                    Vec::new(),
                )
            }
        };
        let problem = Problem {
            kind: ApiError::type_uri(slug),
            title: title.to_owned(),
            status: status.as_u16(),
            detail,
            errors,
            successor_job_id,
        };
        let mut response = (status, Json(problem)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(value) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

impl From<OpsError> for ApiError {
    fn from(err: OpsError) -> Self {
        match err {
            OpsError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            OpsError::Invalid(errors) => ApiError::fields(errors),
            OpsError::Conflict(detail) => ApiError::Conflict(detail),
            err @ OpsError::Superseded { successor } => ApiError::Superseded {
                detail: err.to_string(),
                successor: successor.0,
            },
            OpsError::Store(err) => ApiError::from(err),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(conflict) => ApiError::Conflict(conflict.to_string()),
            StoreError::NotFound { what, .. } => ApiError::NotFound(format!("{what} not found")),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        ApiError::Unauthorized(err)
    }
}

impl From<PolicyError> for ApiError {
    fn from(err: PolicyError) -> Self {
        ApiError::Forbidden(err.reason().to_owned())
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

impl From<RateLimited> for ApiError {
    fn from(limited: RateLimited) -> Self {
        ApiError::RateLimited(limited)
    }
}
