//! `POST /v1/schedules/bulk`: pause, resume, trigger or delete every live schedule a label
//! selector matches, in one transaction, with a dry run and a count to confirm.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::requests::{EnvQuery, Lenient, lenient};
use super::{AppState, actor};
use crate::core::labels::LabelSelector;
use crate::core::ops::{BulkAction, BulkItem, BulkOutcome, BulkReport, BulkRequest};
use crate::server::error::{ApiError, ApiResult, Problem};
use crate::server::extract::{ApiJson, ApiQuery, Caller};
use crate::server::policy::Access;

/// What to do, to which schedules, and the safeguards.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkActionRequest {
    /// Accepted here too, for clients that cannot set the query; the query parameter is
    /// the documented place.
    #[schema(ignore)]
    pub target_env_id: Option<Uuid>,
    /// `pause`, `resume`, `trigger` or `delete`.
    #[schema(value_type = BulkActionValue)]
    pub action: Lenient<BulkAction>,
    /// Which schedules, in Kubernetes' syntax (`team=billing,tier in (gold,silver)`); at least
    /// one requirement.
    pub label_selector: String,
    /// Report what would happen and change nothing (default false).
    #[serde(default)]
    pub dry_run: bool,
    /// The number of schedules the selector matches: required to act on more than 10, so a
    /// selector broader than meant changes nothing.
    #[schema(minimum = 0)]
    pub confirm: Option<u64>,
    /// Why (recorded with each pause; at most 500 characters).
    #[schema(max_length = 500)]
    pub note: Option<String>,
}

/// A bulk action.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum BulkActionValue {
    Pause,
    Resume,
    Trigger,
    Delete,
}

/// What a bulk action did (or, in a dry run, would do) to each selected schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkView {
    #[schema(value_type = BulkActionValue)]
    pub action: BulkAction,
    /// The selector, in its canonical form.
    pub label_selector: String,
    pub dry_run: bool,
    /// Live schedules the selector matched.
    pub matched: usize,
    /// Schedules changed (or that a dry run would change).
    pub changed: usize,
    pub items: Vec<BulkItemView>,
}

/// One selected schedule.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkItemView {
    pub schedule_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    /// Its status before the action.
    pub status: String,
    /// `paused`, `resumed`, `triggered`, `deleted`, `unchanged` (already as asked) or
    /// `refused` (the action does not apply now; `detail` says why).
    #[schema(value_type = String)]
    pub outcome: BulkOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The job a trigger created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<Uuid>,
}

impl From<BulkItem> for BulkItemView {
    fn from(item: BulkItem) -> Self {
        BulkItemView {
            schedule_id: item.schedule_id.0,
            domain: item.domain,
            schedule_type: item.schedule_type,
            status: item.status.to_string(),
            outcome: item.outcome,
            detail: item.detail,
            job_id: item.job_id.map(|id| id.0),
        }
    }
}

impl From<BulkReport> for BulkView {
    fn from(report: BulkReport) -> Self {
        BulkView {
            action: report.action,
            label_selector: report.label_selector,
            dry_run: report.dry_run,
            matched: report.matched,
            changed: report.changed,
            items: report.items.into_iter().map(Into::into).collect(),
        }
    }
}

/// Pauses, resumes, triggers or deletes every live schedule the selector matches (at most
/// 1,000), in one transaction; each schedule gets its own event and audit entry. A schedule
/// the action does not apply to is reported (`unchanged`, `refused`) and the rest go on. More
/// than 10 need `confirm` set to their number; `dry_run` reports without changing anything.
#[utoipa::path(
    post, path = "/v1/schedules/bulk", tag = "schedules",
    params(EnvQuery),
    request_body = BulkActionRequest,
    responses(
        (status = 200, description = "Done (or, with dry_run, what would be done)", body = BulkView),
        (status = 400, description = "Invalid: the selector, the action, or a missing or wrong confirm", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"), (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn bulk_schedules(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<EnvQuery>,
    ApiJson(body): ApiJson<BulkActionRequest>,
) -> ApiResult<Json<BulkView>> {
    let env = caller.env(body.target_env_id.or(query.target_env_id), Access::Write)?;
    let mut errors = Vec::new();
    let action = lenient(Some(body.action), "action", &mut errors);
    let selector = body
        .label_selector
        .parse::<LabelSelector>()
        .map_err(|e| {
            errors.push(crate::core::decl::FieldError::new(
                "label_selector",
                e.to_string(),
            ))
        })
        .ok();
    let (Some(action), Some(selector), true) = (action, selector, errors.is_empty()) else {
        return Err(ApiError::fields(errors));
    };
    let request = BulkRequest {
        action,
        selector,
        dry_run: body.dry_run,
        confirm: body.confirm,
        note: body.note,
    };
    let report = state
        .ops
        .schedules_bulk(env, &request, &actor(&state, &caller)?)
        .await?;
    Ok(Json(report.into()))
}
