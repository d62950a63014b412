//! `GET /v1/whoami`: what the caller's token grants, as the server reads it (subject, scopes,
//! environments, expiry), so a team can check a token before it relies on it.

use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::server::auth::EnvGrant;
use crate::server::error::Problem;
use crate::server::extract::Caller;

/// The caller, as its token is read.
#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmIView {
    /// The token's `sub`: the actor named in the audit journal and in events.
    pub subject: String,
    /// Every scope the token carries (`sentin8:cron:read`, `:write` or `:admin` count).
    pub scopes: Vec<String>,
    /// Every environment, present and future (the admin scope).
    pub all_environments: bool,
    /// The environments the token names (empty with `all_environments`).
    pub environments: Vec<Uuid>,
    /// When the token expires; null for the development token (it lives with its process).
    pub expires_at: Option<DateTime<Utc>>,
    /// Authenticated with the development token.
    pub development: bool,
}

/// What the caller's token grants. Any valid token may ask; nothing else is read.
#[utoipa::path(
    get, path = "/v1/whoami", tag = "system",
    responses(
        (status = 200, description = "The caller's subject, scopes, environments and expiry", body = WhoAmIView),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(caller: Caller) -> Json<WhoAmIView> {
    let principal = caller.0;
    let (all_environments, environments) = match principal.envs {
        EnvGrant::All => (true, Vec::new()),
        EnvGrant::Some(envs) => (false, envs.into_iter().map(|env| env.0).collect()),
    };
    Json(WhoAmIView {
        subject: principal.subject,
        scopes: principal.scopes.into_iter().collect(),
        all_environments,
        environments,
        expires_at: principal.expires_at,
        development: principal.dev,
    })
}
