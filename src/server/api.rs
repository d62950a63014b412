//! The `/v1` resource handlers: schedules, jobs and the dead-letter queue. Every handler
//! authenticates the caller, resolves the explicitly addressed environment through the policy,
//! and only then opens the tenant transaction (inside [`Ops`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, ApiResult, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, Caller};
use super::policy::Access;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::{FieldError, ScheduleDecl};
use crate::core::model::*;
use crate::core::ops::{self, Actor, CreateSchedule, SchedulePatch};
use crate::core::store::{DlqQuery, JobQuery, ScheduleQuery};
use crate::core::target::Target;

/// Largest page a list returns.
pub const MAX_PAGE: u32 = 100;
const DEFAULT_PAGE: u32 = 50;

fn actor(state: &AppState, caller: &Caller) -> Actor {
    Actor {
        name: caller.actor_name(),
        correlation_id: caller.1.clone(),
        now: state.clock.now(),
    }
}

/// A schedule as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ScheduleView {
    pub id: Uuid,
    pub env_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    /// `cron` or `once`.
    pub kind: String,
    /// The cron expression (cron schedules).
    pub cron: Option<String>,
    /// The instant of a one-shot schedule.
    pub run_at: Option<DateTime<Utc>>,
    pub timezone: String,
    #[schema(value_type = String)]
    pub on_dst_gap: OnDstGap,
    #[schema(value_type = String)]
    pub on_dst_repeat: OnDstRepeat,
    #[schema(value_type = Object)]
    pub target_config: Value,
    #[schema(value_type = Object)]
    pub payload: Value,
    /// `active`, `paused`, `completed` or `deleted`.
    pub status: String,
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_run_at: Option<DateTime<Utc>>,
    pub retry_count: i32,
    pub max_retries: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: String,
    pub updated_by: String,
}

impl From<Schedule> for ScheduleView {
    fn from(s: Schedule) -> Self {
        let timing = s.timing.columns();
        Self {
            id: s.id.0,
            env_id: s.env_id.0,
            domain: s.domain,
            schedule_type: s.schedule_type,
            kind: timing.kind.to_string(),
            cron: timing.cron_expr,
            run_at: timing.run_at,
            timezone: timing.timezone,
            on_dst_gap: timing.on_dst_gap,
            on_dst_repeat: timing.on_dst_repeat,
            target_config: s.target.config().clone(),
            payload: s.payload,
            status: s.status.to_string(),
            next_run_at: s.next_run_at,
            last_run_at: s.last_run_at,
            retry_count: s.retry_count,
            max_retries: s.max_retries,
            created_at: s.created_at,
            updated_at: s.updated_at,
            created_by: s.created_by,
            updated_by: s.updated_by,
        }
    }
}

/// A job (one execution of a schedule, with its retries).
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    pub id: Uuid,
    pub schedule_id: Uuid,
    pub env_id: Uuid,
    /// `pending`, `running`, `succeeded`, `failed` or `skipped`.
    pub status: String,
    pub attempt: i32,
    pub scheduled_for: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    pub error: Option<String>,
    pub idempotency_key: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<Job> for JobView {
    fn from(j: Job) -> Self {
        Self {
            id: j.id.0,
            schedule_id: j.schedule_id.0,
            env_id: j.env_id.0,
            status: j.status.to_string(),
            attempt: j.attempt,
            scheduled_for: j.scheduled_for,
            next_attempt_at: j.next_attempt_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
            result: j.result,
            error: j.error,
            idempotency_key: j.idempotency_key,
            created_at: j.created_at,
            updated_at: j.updated_at,
        }
    }
}

/// A dead-letter entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct DlqView {
    pub id: Uuid,
    pub env_id: Uuid,
    pub schedule_id: Uuid,
    pub job_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    #[schema(value_type = Object)]
    pub payload: Value,
    pub attempts: i32,
    pub last_error: String,
    pub scheduled_for: DateTime<Utc>,
    pub landed_at: DateTime<Utc>,
}

impl From<DlqEntry> for DlqView {
    fn from(e: DlqEntry) -> Self {
        Self {
            id: e.id.0,
            env_id: e.env_id.0,
            schedule_id: e.schedule_id.0,
            job_id: e.job_id.0,
            domain: e.domain,
            schedule_type: e.schedule_type,
            payload: e.payload,
            attempts: e.attempts,
            last_error: e.last_error,
            scheduled_for: e.scheduled_for,
            landed_at: e.landed_at,
        }
    }
}

/// One page of a list. Pass `next_cursor` back as `cursor` for the next page.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

fn page<T, U: From<T>>(items: Vec<T>, limit: u32, cursor_of: impl Fn(&T) -> Uuid) -> Page<U> {
    let next_cursor = (items.len() as u32 >= limit)
        .then(|| items.last().map(|last| cursor_of(last).to_string()))
        .flatten();
    Page {
        items: items.into_iter().map(U::from).collect(),
        next_cursor,
    }
}

fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::field(
            "limit",
            format!("must be between 1 and {MAX_PAGE}"),
        )),
    }
}

fn cursor(cursor: Option<&str>) -> Result<Option<Uuid>, ApiError> {
    cursor
        .map(|c| {
            Uuid::parse_str(c)
                .map_err(|_| ApiError::field("cursor", "is not a cursor this API returned"))
        })
        .transpose()
}

/// `target_env_id` for requests without a body.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct EnvQuery {
    /// The environment addressed (required).
    pub target_env_id: Option<Uuid>,
}

/// An optional JSON body carrying `target_env_id` (for POST actions).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvBody {
    pub target_env_id: Option<Uuid>,
}

/// The environment of a bodyless action: the query, or else a JSON body.
fn action_env(query: EnvQuery, body: Option<ApiJson<EnvBody>>) -> Option<Uuid> {
    query
        .target_env_id
        .or_else(|| body.and_then(|ApiJson(b)| b.target_env_id))
}

/// A new schedule. The fields are those of a schedule declaration, plus where it belongs and
/// whom to call.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateScheduleRequest {
    /// The environment (required here or in the query).
    pub target_env_id: Option<Uuid>,
    pub domain: String,
    pub schedule_type: String,
    /// A 5-field cron expression; exactly one of `cron` and `run_at`.
    pub cron: Option<String>,
    /// RFC 3339 instant of a one-shot schedule.
    pub run_at: Option<String>,
    /// IANA time zone of a cron schedule (default UTC).
    pub timezone: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    pub max_retries: Option<u32>,
    #[schema(value_type = Option<String>)]
    pub on_dst_gap: Option<OnDstGap>,
    #[schema(value_type = Option<String>)]
    pub on_dst_repeat: Option<OnDstRepeat>,
    /// `{"baseUrl": "https://..."}`; credentials are not allowed.
    #[schema(value_type = Object)]
    pub target_config: Value,
}

/// A partial update. Any declaration field, `target_config`, and `status` (`active` or
/// `paused`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchScheduleRequest {
    pub target_env_id: Option<Uuid>,
    pub status: Option<String>,
    pub cron: Option<String>,
    pub run_at: Option<String>,
    pub timezone: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    pub max_retries: Option<u32>,
    #[schema(value_type = Option<String>)]
    pub on_dst_gap: Option<OnDstGap>,
    #[schema(value_type = Option<String>)]
    pub on_dst_repeat: Option<OnDstRepeat>,
    #[schema(value_type = Option<Object>)]
    pub target_config: Option<Value>,
}

/// Filters for listing schedules.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ScheduleListQuery {
    pub target_env_id: Option<Uuid>,
    pub domain: Option<String>,
    /// `active`, `paused` or `completed` (deleted schedules are never listed).
    pub status: Option<String>,
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    pub limit: Option<u32>,
}

/// Filters for listing jobs.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct JobListQuery {
    pub target_env_id: Option<Uuid>,
    pub schedule_id: Option<Uuid>,
    pub status: Option<String>,
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    pub limit: Option<u32>,
}

/// Filters for listing dead-letter entries.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct DlqListQuery {
    pub target_env_id: Option<Uuid>,
    pub domain: Option<String>,
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    pub limit: Option<u32>,
}

fn parse_status<T: std::str::FromStr>(
    field: &str,
    value: Option<&str>,
) -> Result<Option<T>, ApiError>
where
    T::Err: std::fmt::Display,
{
    value
        .map(|v| {
            v.parse::<T>()
                .map_err(|e| ApiError::field(field, e.to_string()))
        })
        .transpose()
}

/// Creates a schedule.
#[utoipa::path(
    post, path = "/v1/schedules", tag = "schedules",
    request_body = CreateScheduleRequest,
    responses(
        (status = 201, description = "Created", body = ScheduleView),
        (status = 400, description = "Invalid (every field problem listed)", body = Problem),
        (status = 401, body = Problem), (status = 403, body = Problem),
        (status = 409, description = "schedule_type already used in this domain", body = Problem),
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
    let target = Target::validate(&body.target_config)
        .map_err(|mut e| errors.append(&mut e))
        .ok();
    let decl = ScheduleDecl {
        schedule_type: body.schedule_type,
        cron: body.cron,
        run_at: body.run_at,
        timezone: body.timezone,
        payload: body.payload,
        max_retries: body.max_retries,
        on_dst_gap: body.on_dst_gap,
        on_dst_repeat: body.on_dst_repeat,
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
            &actor(&state, &caller),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(schedule.into())))
}

/// Lists an environment's schedules (deleted ones left out), by creation order.
#[utoipa::path(
    get, path = "/v1/schedules", tag = "schedules",
    params(ScheduleListQuery),
    responses((status = 200, body = Page<ScheduleView>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
    if status == Some(ScheduleStatus::Deleted) {
        return Err(ApiError::field(
            "status",
            "deleted schedules are not listed",
        ));
    }
    let items = state
        .ops
        .schedule_list(
            env,
            &ScheduleQuery {
                domain: query.domain,
                status,
                include_deleted: false,
                after: cursor(query.cursor.as_deref())?.map(ScheduleId),
                limit,
            },
        )
        .await?;
    Ok(Json(page(items, limit, |s: &Schedule| s.id.0)))
}

/// One schedule.
#[utoipa::path(
    get, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, body = ScheduleView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn get_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<ScheduleView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    Ok(Json(
        state.ops.schedule_get(env, ScheduleId(id)).await?.into(),
    ))
}

/// Updates a schedule: status (`active`/`paused`) and any declaration field, re-validated.
#[utoipa::path(
    patch, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    request_body = PatchScheduleRequest,
    responses((status = 200, body = ScheduleView), (status = 400, body = Problem), (status = 404, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
    let patch = SchedulePatch {
        cron: body.cron,
        run_at: body.run_at,
        timezone: body.timezone,
        payload: body.payload,
        max_retries: body.max_retries,
        on_dst_gap: body.on_dst_gap,
        on_dst_repeat: body.on_dst_repeat,
        target_config: body.target_config,
        status,
    };
    let schedule = state
        .ops
        .schedule_patch(env, ScheduleId(id), patch, &actor(&state, &caller))
        .await?;
    Ok(Json(schedule.into()))
}

/// Soft-deletes a schedule (kept for audit and DLQ references; never fires again).
#[utoipa::path(
    delete, path = "/v1/schedules/{id}", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, body = ScheduleView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
        .schedule_delete(env, ScheduleId(id), &actor(&state, &caller))
        .await?;
    Ok(Json(schedule.into()))
}

/// Soft-deletes a schedule (the same as `DELETE`, for clients that only POST).
#[utoipa::path(
    post, path = "/v1/schedules/{id}/delete", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, body = ScheduleView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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

/// Pauses a schedule.
#[utoipa::path(
    post, path = "/v1/schedules/{id}/pause", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, body = ScheduleView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = ["sentin8:cron:write"]))
)]
pub async fn pause_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
    body: Option<ApiJson<EnvBody>>,
) -> ApiResult<Json<ScheduleView>> {
    let env = caller.env(action_env(query, body), Access::Write)?;
    let schedule = state
        .ops
        .schedule_pause(env, ScheduleId(id), &actor(&state, &caller))
        .await?;
    Ok(Json(schedule.into()))
}

/// Resumes a schedule; its next fire is recomputed from now.
#[utoipa::path(
    post, path = "/v1/schedules/{id}/resume", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, body = ScheduleView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
        .schedule_resume(env, ScheduleId(id), &actor(&state, &caller))
        .await?;
    Ok(Json(schedule.into()))
}

/// Runs a schedule now. 409 while it has an open job.
#[utoipa::path(
    post, path = "/v1/schedules/{id}/trigger", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 202, description = "A pending job, due now", body = JobView), (status = 409, body = Problem), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
        .schedule_trigger(env, ScheduleId(id), &actor(&state, &caller))
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}

/// Lists jobs, newest first.
#[utoipa::path(
    get, path = "/v1/jobs", tag = "jobs",
    params(JobListQuery),
    responses((status = 200, body = Page<JobView>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
                before: cursor(query.cursor.as_deref())?.map(JobId),
                limit,
            },
        )
        .await?;
    Ok(Json(page(items, limit, |j: &Job| j.id.0)))
}

/// One job.
#[utoipa::path(
    get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, body = JobView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn get_job(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<JobView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    Ok(Json(state.ops.job_get(env, JobId(id)).await?.into()))
}

/// Retries a failed job now (failed → pending); its DLQ entry, if any, is removed.
#[utoipa::path(
    post, path = "/v1/jobs/{id}/retry", tag = "jobs",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 202, body = JobView), (status = 409, body = Problem), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
        .job_retry(env, JobId(id), &actor(&state, &caller))
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}

/// Lists dead-letter entries, newest first.
#[utoipa::path(
    get, path = "/v1/dlq", tag = "dlq",
    params(DlqListQuery),
    responses((status = 200, body = Page<DlqView>), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
                schedule_id: None,
                job_id: None,
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
    responses((status = 200, body = DlqView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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

/// Republishes a dead-letter entry: a fresh pending job due now; the entry is removed.
#[utoipa::path(
    post, path = "/v1/dlq/{id}/republish", tag = "dlq",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 202, body = JobView), (status = 409, body = Problem), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
        .dlq_republish(env, DlqId(id), &actor(&state, &caller))
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}
