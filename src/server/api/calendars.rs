//! The calendar endpoints: an environment's named lists of exclusions (holidays, freezes),
//! which its schedules name in their `exclude`. A calendar is written whole (`PUT`), from
//! entries or from an iCalendar (RFC 5545) file of all-day events.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{EnvBody, EnvQuery, action_env, actor};
use crate::core::calendar::{Calendar, CalendarDraft, CalendarEntryText, ical};
use crate::server::AppState;
use crate::server::error::{ApiError, ApiResult, Problem};
use crate::server::extract::{ApiJson, ApiPath, ApiQuery, Caller};
use crate::server::policy::Access;

/// A calendar as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarView {
    pub name: String,
    pub description: String,
    /// Its exclusions, in the order written.
    pub entries: Vec<CalendarEntryView>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_by: String,
}

/// One exclusion of a calendar.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarEntryView {
    /// A date (`2026-12-25`), an inclusive range (`2026-12-24..2026-12-26`) or a cron-like
    /// spec (`* * 25 12 *`, every Christmas; `* * * 11 THU#4`), on the wall clock of each
    /// schedule that names the calendar.
    pub spec: String,
    /// What it is (a holiday's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<Calendar> for CalendarView {
    fn from(c: Calendar) -> Self {
        Self {
            entries: c
                .entry_texts()
                .into_iter()
                .map(|e| CalendarEntryView {
                    spec: e.spec,
                    note: e.note,
                })
                .collect(),
            name: c.name,
            description: c.description,
            created_at: c.created_at,
            updated_at: c.updated_at,
            created_by: c.created_by,
            updated_by: c.updated_by,
        }
    }
}

/// The environment's calendars.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarList {
    pub items: Vec<CalendarView>,
}

/// A calendar, written whole: its entries, or an iCalendar file to read them from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutCalendarRequest {
    /// Accepted here too, for clients that cannot set the query.
    pub target_env_id: Option<Uuid>,
    /// What the calendar is for (at most 200 characters).
    #[serde(default)]
    pub description: String,
    /// Its exclusions (at most 2,000). Give `entries` or `ical`, not both.
    pub entries: Option<Vec<CalendarEntryView>>,
    /// The text of an iCalendar (RFC 5545) file of all-day events, such as a public-holiday
    /// calendar: each event becomes an entry with its summary as the note (yearly rules
    /// become cron-like specs, bounded ones their dates).
    pub ical: Option<String>,
}

/// Lists the environment's calendars, by name.
#[utoipa::path(
    get, path = "/v1/calendars", tag = "calendars",
    params(EnvQuery),
    responses((status = 200, description = "OK", body = CalendarList), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn list_calendars(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<CalendarList>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let items = state.ops.calendar_list(env).await?;
    Ok(Json(CalendarList {
        items: items.into_iter().map(Into::into).collect(),
    }))
}

/// Reads one calendar.
#[utoipa::path(
    get, path = "/v1/calendars/{name}", tag = "calendars",
    params(("name" = String, Path), EnvQuery),
    responses((status = 200, description = "OK", body = CalendarView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn get_calendar(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<CalendarView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    Ok(Json(state.ops.calendar_get(env, &name).await?.into()))
}

/// Creates a calendar or replaces one whole (its description and entries). The schedules
/// that name it follow the new entries from their next occurrence on. Writes an audit entry.
#[utoipa::path(
    put, path = "/v1/calendars/{name}", tag = "calendars",
    params(("name" = String, Path), EnvQuery),
    request_body = PutCalendarRequest,
    responses((status = 201, description = "Created", body = CalendarView), (status = 200, description = "Replaced", body = CalendarView), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"), (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn put_calendar(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    ApiJson(body): ApiJson<PutCalendarRequest>,
) -> ApiResult<(StatusCode, Json<CalendarView>)> {
    let env = caller.env(body.target_env_id.or(query.target_env_id), Access::Write)?;
    let entries = match (body.entries, body.ical) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field("ical", "give entries or ical, not both"));
        }
        (Some(entries), None) => entries
            .into_iter()
            .map(|e| CalendarEntryText {
                spec: e.spec,
                note: e.note,
            })
            .collect(),
        (None, Some(text)) => ical::parse_ical(&text)
            .map_err(|e| ApiError::field("ical", e.to_string()))?
            .into_iter()
            .map(Into::into)
            .collect(),
        (None, None) => Vec::new(),
    };
    let draft = CalendarDraft {
        description: body.description,
        entries,
    };
    let (calendar, created) = state
        .ops
        .calendar_put(env, &name, &draft, &actor(&state, &caller)?)
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(calendar.into())))
}

/// Removes a calendar; refused (409) while a live schedule names it. Writes an audit entry.
#[utoipa::path(
    delete, path = "/v1/calendars/{name}", tag = "calendars",
    params(("name" = String, Path), EnvQuery),
    responses((status = 204, description = "Removed"), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 409, description = "A schedule names it (the first few are listed)", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn delete_calendar(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<StatusCode> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    state
        .ops
        .calendar_delete(env, &name, &actor(&state, &caller)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
