//! Request extractors that answer in problem+json: the authenticated caller, and JSON, path and
//! query extractors whose rejections become 400s naming what was wrong.

use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use super::auth::Principal;
use super::error::ApiError;
use super::policy::{self, Access};
use super::rate::RateLimits;
use super::{AppState, REQUEST_ID};
use crate::core::model::EnvId;

/// The authenticated caller, with the request id that correlates its changes (and the
/// environment budget its request draws on once the environment is known).
#[derive(Debug, Clone)]
pub struct Caller(pub Principal, pub Option<String>, EnvBudget);

/// What [`Caller::env`] charges the addressed environment's rate limit with.
#[derive(Debug, Clone)]
struct EnvBudget {
    limits: Arc<RateLimits>,
    at: DateTime<Utc>,
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let principal = state.auth.authenticate(header).await?;
        let at = state.clock.now();
        state.rate.client(&principal.subject, at)?;
        let request_id = parts
            .headers
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let budget = EnvBudget {
            limits: state.rate.clone(),
            at,
        };
        Ok(Caller(principal, request_id, budget))
    }
}

impl Caller {
    /// Resolves the addressed environment and checks the policy: `target_env_id` is required
    /// (never taken from the token), and the caller must hold `access` on it. Then the request
    /// draws on the environment's rate limit (after the policy, so a caller cannot spend
    /// another tenant's budget).
    pub fn env(&self, target_env_id: Option<Uuid>, access: Access) -> Result<EnvId, ApiError> {
        let env = target_env_id
            .map(EnvId)
            .ok_or_else(|| ApiError::field("target_env_id", "is required (query or body)"))?;
        policy::authorize(&self.0, env, access)?;
        self.2.limits.env(env, self.2.at)?;
        Ok(env)
    }

    /// The actor name recorded in audit entries and events.
    pub fn actor_name(&self) -> String {
        if self.0.dev {
            format!("dev:{}", self.0.subject)
        } else {
            self.0.subject.clone()
        }
    }
}

/// `Json<T>` whose rejections are problem documents.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match <axum::Json<T> as FromRequest<S>>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

impl<T: DeserializeOwned, S: Send + Sync> OptionalFromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    /// No body (nothing, or only white space, whatever its `Content-Type`: many clients send
    /// `application/json` with an empty body) is `None`; a body must be JSON (415 otherwise)
    /// and valid.
    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, ApiError> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Read within the router's body limit.
        let body = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    super::listener::too_large()
                } else {
                    ApiError::Invalid {
                        detail: "the body could not be read".to_owned(),
                        errors: Vec::new(),
                    }
                }
            })?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let is_json = content_type.as_deref().is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
                || essence.to_ascii_lowercase().ends_with("+json")
        });
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body is {}: this endpoint reads application/json, or no body",
                content_type.map_or_else(
                    || "given without a Content-Type".to_owned(),
                    |t| format!("{t:?}")
                )
            )));
        }
        // Read as a required body is, with the same answers to a bad one.
        match axum::Json::<T>::from_bytes(&body) {
            Ok(axum::Json(value)) => Ok(Some(ApiJson(value))),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return super::listener::too_large();
    }
    if let JsonRejection::MissingJsonContentType(_) = &rejection {
        return ApiError::UnsupportedMediaType(
            "expected a JSON body with Content-Type: application/json".to_owned(),
        );
    }
    let detail = match &rejection {
        JsonRejection::JsonSyntaxError(_) => {
            format!("the body is not valid JSON: {}", inner(&rejection))
        }
        JsonRejection::JsonDataError(_) => {
            // serde's `field: message at line L column C`: the field and its problem, without
            // the position in a text the client wrote as one line.
            let text = inner(&rejection);
            let text = without_position(&text);
            return match text.split_once(": ") {
                Some((field, message)) if !field.contains(' ') => {
                    ApiError::fields(vec![crate::core::decl::FieldError::new(field, message)])
                }
                _ => ApiError::Invalid {
                    detail: format!("the body does not match: {text}"),
                    errors: Vec::new(),
                },
            };
        }
        _ => rejection.body_text(),
    };
    ApiError::Invalid {
        detail,
        errors: Vec::new(),
    }
}

/// `text` without serde's trailing ` at line L column C`.
fn without_position(text: &str) -> &str {
    match text.rfind(" at line ") {
        Some(at)
            if text[at + 9..]
                .split_once(" column ")
                .is_some_and(|(line, column)| {
                    line.chars().all(|c| c.is_ascii_digit())
                        && column.chars().all(|c| c.is_ascii_digit())
                }) =>
        {
            &text[..at]
        }
        _ => text,
    }
}

/// The serde message of a JSON rejection (field names and positions, no internals).
fn inner(rejection: &JsonRejection) -> String {
    let text = rejection.body_text();
    // axum prefixes a generic sentence; keep serde's part, which names the field.
    text.split_once(": ")
        .map_or(text.clone(), |(_, rest)| rest.to_owned())
}

/// `Path<T>` whose rejections are problem documents.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    ApiError::Invalid {
        detail: format!("invalid path parameter: {}", rejection.body_text()),
        errors: Vec::new(),
    }
}

/// `Query<T>` whose rejections are problem documents.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    let text = rejection.body_text();
    let detail = text
        .strip_prefix("Failed to deserialize query string: ")
        .unwrap_or(&text);
    ApiError::Invalid {
        detail: format!("invalid query: {detail}"),
        errors: Vec::new(),
    }
}
