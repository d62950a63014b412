//! The life-cycle endpoints: discarding a dead letter and reading the audit journal.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use super::views::{AuditView, DlqView, Page, cursor, page, page_limit};
use super::{EnvBody, EnvQuery, action_env, actor};
use crate::core::model::*;
use crate::core::store::AuditQuery;
use crate::server::AppState;
use crate::server::error::{ApiError, ApiResult, Problem};
use crate::server::extract::{ApiJson, ApiPath, ApiQuery, Caller};
use crate::server::policy::Access;

/// Discards a dead-letter entry: its occurrence will not run. Entries of deleted schedules
/// can be discarded. Publishes `io.sentin8.cron.dlq.discarded.v1` and writes an audit entry in the
/// same transaction.
#[utoipa::path(
    delete, path = "/v1/dlq/{id}", tag = "dlq",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "The discarded entry", body = DlqView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn discard_dlq(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<Json<DlqView>> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let entry = state
        .ops
        .dlq_discard(env, DlqId(id), &actor(&state, &caller)?)
        .await?;
    Ok(Json(entry.into()))
}

/// Filters for reading the audit journal.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditListQuery {
    /// The environment addressed (required).
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    /// Only entries about this schedule.
    pub schedule_id: Option<Uuid>,
    /// Only entries by this actor (a token subject, or `engine`).
    pub actor: Option<String>,
    /// Only entries written at or after this RFC 3339 instant.
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// A page's `next_cursor`.
    #[param(format = Uuid)]
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// Reads an environment's audit journal, newest first: who changed what, from what, to what.
#[utoipa::path(
    get, path = "/v1/audit", tag = "audit",
    params(AuditListQuery),
    responses((status = 200, description = "OK", body = Page<AuditView>), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn list_audit(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<AuditListQuery>,
) -> ApiResult<Json<Page<AuditView>>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let limit = page_limit(query.limit)?;
    let since = query
        .since
        .as_deref()
        .map(|text| {
            DateTime::parse_from_rfc3339(text)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| ApiError::field("since", "must be an RFC 3339 instant"))
        })
        .transpose()?;
    let items = state
        .ops
        .audit_list(
            env,
            &AuditQuery {
                schedule_id: query.schedule_id.map(ScheduleId),
                actor: query.actor,
                since,
                before: cursor(query.cursor.as_deref())?,
                limit,
            },
        )
        .await?;
    Ok(Json(page(items, limit, |a: &AuditEntry| a.id)))
}
