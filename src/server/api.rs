//! The `/v1` resource handlers: schedules, jobs and the dead-letter queue. Every handler
//! authenticates the caller, resolves the explicitly addressed environment through the policy,
//! and only then opens the tenant transaction (inside [`Ops`]).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, ApiResult, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, Caller};
use super::policy::Access;
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::{FieldError, PolicyDecl, ScheduleDecl};
use crate::core::model::*;
use crate::core::ops::{self, Actor, CreateSchedule, SchedulePatch};
use crate::core::policies::Overlap;
use crate::core::storable;
use crate::core::store::{DlqQuery, JobQuery, ScheduleQuery};
use crate::core::target::Target;

pub mod lifecycle;
pub mod views;

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
    /// `skip` (default), `buffer_one` or `allow_all`: what an occurrence due while a job of the
    /// schedule is open does (cron only).
    #[schema(value_type = Option<String>)]
    pub overlap: Option<Overlap>,
    /// How late the latest missed occurrence may still run (`1h` by default, `1s`-`366d`);
    /// older ones are recorded as skipped.
    pub catchup_window: Option<String>,
    /// Spread each call over this much past its instant (`30s`; at most the shortest interval,
    /// `1d` for a one-shot), by an offset fixed for the schedule and the occurrence.
    pub max_jitter: Option<String>,
    /// RFC 3339: no occurrence before (cron only).
    pub start_at: Option<String>,
    /// RFC 3339: no occurrence after; the schedule then completes (cron only).
    pub end_at: Option<String>,
    /// Pause the schedule when one of its jobs lands in the dead-letter queue (cron only).
    pub pause_on_failure: Option<bool>,
    /// Fires left before the schedule completes (cron only, 1-1000000); a skipped occurrence
    /// does not count.
    pub remaining_runs: Option<u32>,
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
    /// `skip`, `buffer_one` or `allow_all`: what an occurrence due while a job of the schedule
    /// is open does (cron only).
    #[schema(value_type = Option<String>)]
    pub overlap: Option<Overlap>,
    /// How late the latest missed occurrence may still run (`1s`-`366d`); older ones are
    /// recorded as skipped.
    pub catchup_window: Option<String>,
    /// Spread each call over this much past its instant (`30s`, `0s` for none; at most the
    /// shortest interval). Moves the next call.
    pub max_jitter: Option<String>,
    /// RFC 3339: no occurrence before (cron only), or null to remove the bound.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub start_at: Option<Option<String>>,
    /// RFC 3339: no occurrence after (cron only), or null to remove the bound. A later end
    /// makes a completed schedule active again.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub end_at: Option<Option<String>>,
    /// Pause the schedule when one of its jobs lands in the dead-letter queue (cron only).
    pub pause_on_failure: Option<bool>,
    /// Fires left before the schedule completes (cron only), or null for no limit. More runs
    /// make a completed schedule active again.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<u32>)]
    pub remaining_runs: Option<Option<u32>>,
    #[schema(value_type = Option<Object>)]
    pub target_config: Option<Value>,
}

/// A field that may be given as null (to clear it), told apart from one left out.
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Filters for listing schedules.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ScheduleListQuery {
    pub target_env_id: Option<Uuid>,
    pub domain: Option<String>,
    /// `active`, `paused`, `completed` or `deleted` (deleted schedules are listed only when
    /// asked for by this filter).
    pub status: Option<String>,
    /// Only schedules whose type contains this text (ASCII case-insensitively).
    pub type_contains: Option<String>,
    /// Also list deleted schedules (default false), as `GET /v1/schedules/{id}` reads one.
    pub include_deleted: Option<bool>,
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    pub limit: Option<u32>,
}

/// `target_env_id`, and whether a deleted schedule may be read.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ScheduleGetQuery {
    /// The environment addressed (required).
    pub target_env_id: Option<Uuid>,
    /// Also answer for a deleted schedule (default false: 404).
    pub include_deleted: Option<bool>,
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
    /// Only this schedule's entries.
    pub schedule_id: Option<Uuid>,
    /// Only the entry of this job (a job lands at most once).
    pub job_id: Option<Uuid>,
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
    let target = Target::validate_for(&body.target_config, state.ops.target_policy())
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
        overlap: body.overlap,
        catchup_window: body.catchup_window,
        max_jitter: body.max_jitter,
        start_at: body.start_at,
        end_at: body.end_at,
        pause_on_failure: body.pause_on_failure,
        remaining_runs: body.remaining_runs,
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
    responses((status = 200, body = ScheduleView), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
    Ok(Json(
        state
            .ops
            .schedule_read(env, ScheduleId(id), include_deleted)
            .await?
            .into(),
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
        policies: PolicyDecl {
            overlap: body.overlap,
            catchup_window: body.catchup_window,
            max_jitter: body.max_jitter,
            start_at: body.start_at,
            end_at: body.end_at,
            pause_on_failure: body.pause_on_failure,
            remaining_runs: body.remaining_runs,
        },
    };
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
        .schedule_delete(env, ScheduleId(id), &actor(&state, &caller)?)
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
        .schedule_pause(env, ScheduleId(id), &actor(&state, &caller)?)
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
        .schedule_resume(env, ScheduleId(id), &actor(&state, &caller)?)
        .await?;
    Ok(Json(schedule.into()))
}

/// Runs a schedule now. 409 while it has an open job, and while it is paused (a paused
/// schedule runs nothing; the problem says how to resume it).
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
        .schedule_trigger(env, ScheduleId(id), &actor(&state, &caller)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}

/// A past range of a cron schedule's occurrences to run again.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    pub target_env_id: Option<Uuid>,
    /// RFC 3339: the first instant of the range (inclusive).
    pub from: DateTime<Utc>,
    /// RFC 3339: the last instant of the range (inclusive), not after now.
    pub to: DateTime<Utc>,
}

/// Backfills a past range of a cron schedule's occurrences (at most 1,000): one job each,
/// recorded as a backfill and run under the schedule's overlap policy (one at a time unless it
/// is `allow_all`, then up to 5 at once). 409 while the schedule is paused, as a trigger is.
#[utoipa::path(
    post, path = "/v1/schedules/{id}/backfill", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    request_body = BackfillRequest,
    responses((status = 202, description = "The occurrences' jobs", body = BackfillView), (status = 409, body = Problem), (status = 400, body = Problem), (status = 404, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
    let done = state
        .ops
        .schedule_backfill(
            env,
            ScheduleId(id),
            body.from,
            body.to,
            &actor(&state, &caller)?,
        )
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(BackfillView {
            occurrences: done.jobs.len(),
            started: done.started,
            jobs: done.jobs.into_iter().map(JobView::from).collect(),
        }),
    ))
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
    responses((status = 202, body = JobView), (status = 409, description = "Not retryable; a superseded job's problem names its successor in `successor_job_id`", body = Problem), (status = 404, body = Problem), (status = 400, body = Problem), (status = 401, body = Problem), (status = 403, body = Problem)),
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
                schedule_id: query.schedule_id.map(ScheduleId),
                job_id: query.job_id.map(JobId),
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

/// Republishes a dead-letter entry: a fresh pending job due now; the entry is removed and the
/// original job is marked `superseded` by the new one. 409 when the schedule was deleted.
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
        .dlq_republish(env, DlqId(id), &actor(&state, &caller)?)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(job.into())))
}
