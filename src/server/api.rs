//! The `/v1` resource handlers: schedules, jobs and the dead-letter queue. Every handler
//! authenticates the caller, resolves the explicitly addressed environment through the policy,
//! and only then opens the tenant transaction (inside [`Ops`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, ApiResult, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, Caller};
use super::policy::Access;
use crate::core::decl::{FieldError, PolicyDecl, ScheduleDecl};
use crate::core::model::*;
use crate::core::ops::{self, Actor, CreateSchedule, LabelsPatch, SchedulePatch};
use crate::core::storable;
use crate::core::store::{DlqQuery, JobQuery, ScheduleQuery};
use crate::core::target::Target;

pub mod bulk;
pub mod calendars;
pub mod describe;
pub mod lifecycle;
pub(crate) mod requests;
pub mod views;
pub mod whoami;

pub use requests::*;
use requests::{action_env, lenient, parse_status};

pub use views::{
    AttemptView, AuditView, BackfillView, DlqView, JobView, MAX_PAGE, Page, ScheduleView,
};
use views::{cursor, page, page_limit};

/// The actor of a change: the token's subject, recorded in the audit and in events, must be
/// text every store can hold; it and the client's request id are capped.
fn actor(state: &AppState, caller: &Caller) -> ApiResult<Actor> {
    storable::check_text("sub", &caller.0.subject).map_err(|e| ApiError::fields(vec![e]))?;
    Ok(Actor {
        name: storable::capped(&caller.actor_name(), storable::MAX_RECORDED_ID_BYTES),
        correlation_id: caller
            .1
            .as_deref()
            .map(|id| storable::capped(id, storable::MAX_RECORDED_ID_BYTES)),
        now: state.clock.now(),
    })
}

/// Creates a schedule.
#[utoipa::path(
    post, path = "/v1/schedules", tag = "schedules",
    params(EnvQuery),
    request_body = CreateScheduleRequest,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 400, description = "Invalid (every field problem listed)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"), (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "schedule_type already used in this domain", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn create_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<EnvQuery>,
    ApiJson(body): ApiJson<CreateScheduleRequest>,
) -> ApiResult<(StatusCode, Json<ScheduleView>)> {
    let env = caller.env(body.target_env_id.or(query.target_env_id), Access::Write)?;
    let now = state.clock.now();
    let mut errors: Vec<FieldError> = Vec::new();
    if let Err(e) = ops::validate_domain(&body.domain) {
        errors.push(e);
    }
    let target = Target::validate_for(&body.target_config, state.ops.target_policy())
        .map_err(|mut e| errors.append(&mut e))
        .ok();
    let decl = ScheduleDecl {
        schedule_type: body.schedule_type,
        cron: body.cron,
        every: body.every,
        phase: body.phase,
        run_at: body.run_at,
        timezone: body.timezone,
        payload: body.payload,
        max_retries: lenient(body.max_retries, "max_retries", &mut errors),
        on_dst_gap: lenient(body.on_dst_gap, "on_dst_gap", &mut errors),
        on_dst_repeat: lenient(body.on_dst_repeat, "on_dst_repeat", &mut errors),
        overlap: lenient(body.overlap, "overlap", &mut errors),
        catchup_window: body.catchup_window,
        max_jitter: body.max_jitter,
        start_at: body.start_at,
        end_at: body.end_at,
        pause_on_failure: lenient(body.pause_on_failure, "pause_on_failure", &mut errors),
        remaining_runs: body.remaining_runs,
        after_completion: lenient(body.after_completion, "after_completion", &mut errors),
        labels: lenient(body.labels, "labels", &mut errors),
        exclude: lenient(body.exclude, "exclude", &mut errors),
    };
    let spec = decl
        .validate(now)
        .map_err(|mut e| errors.append(&mut e))
        .ok();
    let (Some(spec), Some(target), true) = (spec, target, errors.is_empty()) else {
        return Err(ApiError::fields(errors));
    };
    let schedule = state
        .ops
        .schedule_create(
            env,
            CreateSchedule {
                domain: body.domain,
                spec,
                target,
            },
            &actor(&state, &caller)?,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(schedule.into())))
}

/// Lists an environment's schedules by creation order; deleted ones only with
/// `include_deleted=true` or `status=deleted`.
#[utoipa::path(
    get, path = "/v1/schedules", tag = "schedules",
    params(ScheduleListQuery),
    responses((status = 200, description = "OK", body = Page<ScheduleView>), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn list_schedules(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ScheduleListQuery>,
) -> ApiResult<Json<Page<ScheduleView>>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let limit = page_limit(query.limit)?;
    let status: Option<ScheduleStatus> = parse_status("status", query.status.as_deref())?;
    let labels = parse_status("label_selector", query.label_selector.as_deref())?;
    let items = state
        .ops
        .schedule_list(
            env,
            &ScheduleQuery {
                domain: query.domain,
                status,
                include_deleted: status == Some(ScheduleStatus::Deleted)
                    || query.include_deleted.unwrap_or(false),
                type_contains: query.type_contains.filter(|text| !text.is_empty()),
                labels,
                after: cursor(query.cursor.as_deref())?.map(ScheduleId),
                limit,
            },
        )
        .await?;
    Ok(Json(page(items, limit, |s: &Schedule| s.id.0)))
}

/// One schedule; a deleted one only with `include_deleted=true`.
#[utoipa::path(
    get, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), ScheduleGetQuery),
    responses((status = 200, description = "OK", body = ScheduleView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn get_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<ScheduleGetQuery>,
) -> ApiResult<Json<ScheduleView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let include_deleted = query.include_deleted.unwrap_or(false);
    let schedule = state
        .ops
        .schedule_read(env, ScheduleId(id), include_deleted)
        .await?;
    with_pause(&state, env, schedule).await
}

/// The view of `schedule`, with who paused it and why when it is paused.
async fn with_pause(
    state: &AppState,
    env: EnvId,
    schedule: Schedule,
) -> ApiResult<Json<ScheduleView>> {
    let paused = state.ops.schedule_paused_by(env, &schedule).await?;
    let mut view = ScheduleView::from(schedule);
    view.paused = paused.map(views::PausedView::from);
    Ok(Json(view))
}

/// Updates a schedule: status (`active`/`paused`) and any declaration field, re-validated.
#[utoipa::path(
    patch, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    request_body = PatchScheduleRequest,
    responses((status = 200, description = "OK", body = ScheduleView), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"), (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn patch_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    ApiJson(body): ApiJson<PatchScheduleRequest>,
) -> ApiResult<Json<ScheduleView>> {
    let env = caller.env(body.target_env_id.or(query.target_env_id), Access::Write)?;
    let status = parse_status("status", body.status.as_deref())?;
    // Fields of the wrong type are told together; the rest is checked with the change.
    let mut errors = Vec::new();
    let patch = SchedulePatch {
        cron: body.cron,
        run_at: body.run_at,
        timezone: body.timezone,
        payload: body.payload,
        max_retries: lenient(body.max_retries, "max_retries", &mut errors),
        on_dst_gap: lenient(body.on_dst_gap, "on_dst_gap", &mut errors),
        on_dst_repeat: lenient(body.on_dst_repeat, "on_dst_repeat", &mut errors),
        target_config: body.target_config,
        status,
        policies: PolicyDecl {
            overlap: lenient(body.overlap, "overlap", &mut errors),
            catchup_window: body.catchup_window,
            max_jitter: body.max_jitter,
            start_at: body.start_at,
            end_at: body.end_at,
            pause_on_failure: lenient(body.pause_on_failure, "pause_on_failure", &mut errors),
            remaining_runs: body.remaining_runs,
            after_completion: lenient(body.after_completion, "after_completion", &mut errors),
        },
        labels: match body.labels {
            None => None,
            Some(None) => Some(LabelsPatch::Clear),
            Some(changes) => lenient(changes, "labels", &mut errors).map(LabelsPatch::Merge),
        },
        exclude: lenient(body.exclude, "exclude", &mut errors),
    };
    if !errors.is_empty() {
        return Err(ApiError::fields(errors));
    }
    let schedule = state
        .ops
        .schedule_patch(env, ScheduleId(id), patch, &actor(&state, &caller)?)
        .await?;
    Ok(Json(schedule.into()))
}

/// Soft-deletes a schedule (kept for audit and DLQ references; never fires again).
#[utoipa::path(
    delete, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "OK", body = ScheduleView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn delete_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<Json<ScheduleView>> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let schedule = state
        .ops
        .schedule_delete(env, ScheduleId(id), &actor(&state, &caller)?)
        .await?;
    Ok(Json(schedule.into()))
}

/// Soft-deletes a schedule (the same as `DELETE`, for clients that only POST).
#[utoipa::path(
    post, path = "/v1/schedules/{id}/delete", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "OK", body = ScheduleView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn delete_schedule_post(
    state: State<Arc<AppState>>,
    caller: Caller,
    id: ApiPath<Uuid>,
    query: ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<Json<ScheduleView>> {
    delete_schedule(state, caller, id, query, body).await
}

/// Pauses a schedule, optionally saying why (`note`, shown with the schedule while it is paused
/// and kept in the audit journal).
#[utoipa::path(
    post, path = "/v1/schedules/{id}/pause", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    request_body(content = requests::PauseRequest, description = "Optional: why it is paused", content_type = "application/json"),
    responses((status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"), (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"), (status = 200, description = "OK", body = ScheduleView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn pause_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<requests::PauseRequest>>,
) -> ApiResult<Json<ScheduleView>> {
    let body = body.map(|ApiJson(b)| b).unwrap_or_default();
    let env = caller.env(query.target_env_id.or(body.target_env_id), Access::Write)?;
    let schedule = state
        .ops
        .schedule_pause(
            env,
            ScheduleId(id),
            &actor(&state, &caller)?,
            body.note.as_deref(),
        )
        .await?;
    with_pause(&state, env, schedule).await
}

/// Resumes a schedule; its next fire is recomputed from now.
#[utoipa::path(
    post, path = "/v1/schedules/{id}/resume", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "OK", body = ScheduleView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn resume_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<Json<ScheduleView>> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let schedule = state
        .ops
        .schedule_resume(env, ScheduleId(id), &actor(&state, &caller)?)
        .await?;
    Ok(Json(schedule.into()))
}

/// Runs a schedule now. 409 while it has an open job, and while it is paused (a paused
/// schedule runs nothing; the problem says how to resume it).
#[utoipa::path(
    post, path = "/v1/schedules/{id}/trigger", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 202, description = "A pending job, due now", body = JobView), (status = 409, description = "In conflict with the resource's state", body = Problem, content_type = "application/problem+json"), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn trigger_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let job = state
        .ops
        .schedule_trigger(env, ScheduleId(id), &actor(&state, &caller)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}

/// A past range of a cron schedule's occurrences to run again.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// Accepted here too, for clients that cannot set the query; the query parameter is
    /// the documented place.
    #[schema(ignore)]
    pub target_env_id: Option<Uuid>,
    /// RFC 3339: the first instant of the range (inclusive).
    pub from: DateTime<Utc>,
    /// RFC 3339: the last instant of the range (inclusive), not after now.
    pub to: DateTime<Utc>,
    /// The overlap policy the backfilled occurrences run under: `buffer_all` (one after
    /// another), `allow_all` (up to 5 at once, beside the schedule's other jobs), `skip` (the
    /// first runs unless a job is open or waiting; the rest are skipped) or `buffer_one` (the
    /// first runs, one more waits, the rest are skipped). By default `allow_all` for an
    /// `allow_all` schedule and `buffer_all` for any other; `cancel_other` is refused.
    #[schema(value_type = Option<OverlapValue>)]
    pub overlap: Option<requests::Lenient<crate::core::policies::Overlap>>,
}

/// Backfills a past range of a cron schedule's occurrences (at most 1,000): one job each,
/// recorded as a backfill and run under the overlap policy the request names (by default one
/// at a time, or up to 5 at once for an `allow_all` schedule); occurrences that policy skips
/// are recorded as skipped. 409 while the schedule is paused, as a trigger is.
#[utoipa::path(
    post, path = "/v1/schedules/{id}/backfill", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    request_body = BackfillRequest,
    responses((status = 202, description = "The occurrences' jobs", body = BackfillView), (status = 409, description = "In conflict with the resource's state", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"), (status = 415, description = "Body not JSON", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn backfill_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    ApiJson(body): ApiJson<BackfillRequest>,
) -> ApiResult<(StatusCode, Json<BackfillView>)> {
    let env = caller.env(body.target_env_id.or(query.target_env_id), Access::Write)?;
    let mut errors = Vec::new();
    let overlap = lenient(body.overlap, "overlap", &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::fields(errors));
    }
    let done = state
        .ops
        .schedule_backfill(
            env,
            ScheduleId(id),
            (body.from, body.to),
            overlap,
            &actor(&state, &caller)?,
        )
        .await?;
    // Charged by occurrences: the request paid for one.
    let queued = u64::try_from(done.jobs.len()).unwrap_or(u64::MAX);
    state
        .rate
        .charge_env(env, queued.saturating_sub(1), state.clock.now());
    Ok((
        StatusCode::ACCEPTED,
        Json(BackfillView {
            occurrences: done.jobs.len(),
            started: done.started,
            skipped: done.skipped,
            overlap: done.overlap.to_string(),
            jobs: done.jobs.into_iter().map(JobView::from).collect(),
        }),
    ))
}

/// Lists jobs, newest first.
#[utoipa::path(
    get, path = "/v1/jobs", tag = "jobs",
    params(JobListQuery),
    responses((status = 200, description = "OK", body = Page<JobView>), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn list_jobs(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<JobListQuery>,
) -> ApiResult<Json<Page<JobView>>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let limit = page_limit(query.limit)?;
    let items = state
        .ops
        .job_list(
            env,
            &JobQuery {
                schedule_id: query.schedule_id.map(ScheduleId),
                status: parse_status("status", query.status.as_deref())?,
                schedule_labels: parse_status("label_selector", query.label_selector.as_deref())?,
                before: cursor(query.cursor.as_deref())?.map(JobId),
                limit,
            },
        )
        .await?;
    let held = state.ops.jobs_held_by_pause(env, &items).await?;
    let mut answer: Page<JobView> = page(items, limit, |j: &Job| j.id.0);
    for view in &mut answer.items {
        view.held_by_pause = held.contains(&JobId(view.id));
    }
    Ok(Json(answer))
}

/// One job, with every recorded attempt (`attempts`, first attempt first).
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "OK", body = JobView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn get_job(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<JobView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let (job, attempts) = state.ops.job_get_with_attempts(env, JobId(id)).await?;
    let held = state
        .ops
        .jobs_held_by_pause(env, std::slice::from_ref(&job))
        .await?;
    let mut view = JobView::with_attempts(job, attempts);
    view.held_by_pause = held.contains(&JobId(view.id));
    Ok(Json(view))
}

/// Retries a failed job now (failed → pending); its DLQ entry, if any, is removed. A job
/// that succeeded, was superseded (its dead letter republished: the 409 names the successor
/// in the `successor_job_id` extension member) or whose dead letter was discarded answers
/// 409: retrying it would deliver the occurrence twice, or one given up.
#[utoipa::path(
    post, path = "/v1/jobs/{id}/retry", tag = "jobs",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 202, description = "Accepted", body = JobView), (status = 409, description = "Not retryable; a superseded job's problem names its successor in `successor_job_id`", body = Problem, content_type = "application/problem+json"), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn retry_job(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let job = state
        .ops
        .job_retry(env, JobId(id), &actor(&state, &caller)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}

/// Lists dead-letter entries, newest first.
#[utoipa::path(
    get, path = "/v1/dlq", tag = "dlq",
    params(DlqListQuery),
    responses((status = 200, description = "OK", body = Page<DlqView>), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn list_dlq(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<DlqListQuery>,
) -> ApiResult<Json<Page<DlqView>>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let limit = page_limit(query.limit)?;
    let items = state
        .ops
        .dlq_list(
            env,
            &DlqQuery {
                domain: query.domain,
                schedule_id: query.schedule_id.map(ScheduleId),
                job_id: query.job_id.map(JobId),
                schedule_labels: parse_status("label_selector", query.label_selector.as_deref())?,
                before: cursor(query.cursor.as_deref())?.map(DlqId),
                limit,
            },
        )
        .await?;
    Ok(Json(page(items, limit, |e: &DlqEntry| e.id.0)))
}

/// One dead-letter entry.
#[utoipa::path(
    get, path = "/v1/dlq/{id}", tag = "dlq",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "OK", body = DlqView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn get_dlq(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<DlqView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    Ok(Json(state.ops.dlq_get(env, DlqId(id)).await?.into()))
}

/// Republishes a dead-letter entry: a fresh pending job due now; the entry is removed and the
/// original job is marked `superseded` by the new one. 409 when the schedule was deleted.
#[utoipa::path(
    post, path = "/v1/dlq/{id}/republish", tag = "dlq",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 202, description = "Accepted", body = JobView), (status = 409, description = "In conflict with the resource's state", body = Problem, content_type = "application/problem+json"), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn republish_dlq(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let job = state
        .ops
        .dlq_republish(env, DlqId(id), &actor(&state, &caller)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}
