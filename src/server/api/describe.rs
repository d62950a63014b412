//! `GET /v1/schedules/{id}/describe`: one schedule at a glance (see
//! [`crate::core::ops::ScheduleDescription`]), as `sentin8-cron schedules describe` shows it.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::requests::EnvQuery;
use super::views::{JobView, PausedView, ScheduleView};
use crate::core::model::ScheduleId;
use crate::core::ops::ScheduleDescription;
use crate::server::AppState;
use crate::server::error::{ApiResult, Problem};
use crate::server::extract::{ApiPath, ApiQuery, Caller};
use crate::server::policy::Access;

/// A schedule described.
#[derive(Debug, Serialize, ToSchema)]
pub struct DescriptionView {
    /// The schedule, with who paused it and why when it is paused.
    pub schedule: ScheduleView,
    /// The job open now (scheduled, pending or running); under `allow_all`, the latest.
    pub open_job: Option<JobView>,
    /// The latest jobs (at most 10), newest first.
    pub recent_jobs: Vec<JobView>,
    /// The next calls (at most 5), soonest first; none unless the schedule is active.
    pub upcoming: Vec<UpcomingView>,
    /// What the occurrences since `counts.since` came to, and the jobs open now.
    pub counts: CountsView,
}

/// One upcoming call.
#[derive(Debug, Serialize, ToSchema)]
pub struct UpcomingView {
    /// The occurrence's instant.
    pub occurrence: DateTime<Utc>,
    /// When it is called: the occurrence plus its jitter.
    pub at: DateTime<Utc>,
}

/// A schedule's jobs, counted.
#[derive(Debug, Serialize, ToSchema)]
pub struct CountsView {
    /// The window's start (7 days back): the counts below cover occurrences since then.
    pub since: DateTime<Utc>,
    pub succeeded: i64,
    pub failed: i64,
    /// Occurrences not run because a job of the schedule was open.
    pub skipped: i64,
    /// Occurrences nobody fired in time (an outage), beyond the catch-up window or before the
    /// latest of a run.
    pub missed: i64,
    /// Of all the above, the backfilled ones.
    pub backfilled: i64,
    /// Open now, whatever their occurrence.
    pub scheduled: i64,
    pub pending: i64,
    pub running: i64,
    /// Waiting for the open job to end (`buffer_one`, a backfill).
    pub buffered: i64,
}

impl From<ScheduleDescription> for DescriptionView {
    fn from(d: ScheduleDescription) -> Self {
        let mut schedule = ScheduleView::from(d.schedule);
        schedule.paused = d.paused.map(PausedView::from);
        let c = d.counts;
        Self {
            schedule,
            open_job: d.open_job.map(JobView::from),
            recent_jobs: d.recent.into_iter().map(JobView::from).collect(),
            upcoming: d
                .upcoming
                .into_iter()
                .map(|u| UpcomingView {
                    occurrence: u.occurrence,
                    at: u.at,
                })
                .collect(),
            counts: CountsView {
                since: d.since,
                succeeded: c.succeeded,
                failed: c.failed,
                skipped: c.skipped,
                missed: c.missed,
                backfilled: c.backfilled,
                scheduled: c.scheduled,
                pending: c.pending,
                running: c.running,
                buffered: c.buffered,
            },
        }
    }
}

/// One schedule at a glance: its definition and pause, the open job, the latest jobs with
/// their outcomes, the next calls with their jitter, and its jobs of the last 7 days counted
/// (succeeded, failed, skipped, missed) with the open ones (scheduled, pending, running,
/// buffered). A deleted schedule is described too.
#[utoipa::path(
    get, path = "/v1/schedules/{id}/describe", tag = "schedules",
    params(("id" = Uuid, Path), EnvQuery),
    responses((status = 200, description = "OK", body = DescriptionView), (status = 404, description = "Not found in this environment", body = Problem, content_type = "application/problem+json"), (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn describe_schedule(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EnvQuery>,
) -> ApiResult<Json<DescriptionView>> {
    let env = caller.env(query.target_env_id, Access::Read)?;
    let described = state
        .ops
        .schedule_describe(env, ScheduleId(id), state.clock.now())
        .await?;
    Ok(Json(DescriptionView::from(described)))
}
