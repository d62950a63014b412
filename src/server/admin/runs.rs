//! `GET /v1/admin/runs`: what the jobs of a window came to, hour by hour (fires, failures,
//! skips and lateness), for the run charts of the overview and of a schedule's page. The sums
//! come from the store, grouped in SQL over the window's hours only; hours without jobs are
//! filled in here as zeros so a chart has every hour.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Duration, DurationRound, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::data::read_env;
use crate::core::model::ScheduleId;
use crate::core::store::{JobHour, JobHoursQuery};
use crate::server::AppState;
use crate::server::error::{ApiError, ApiResult, Problem};
use crate::server::extract::{ApiQuery, Caller};

/// The longest window: a week of hours.
pub const MAX_HOURS: u32 = 7 * 24;
/// The window when `hours` is not given: a day.
pub const DEFAULT_HOURS: u32 = 24;

/// The window to sum up.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RunsQuery {
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    /// One schedule's jobs only.
    pub schedule_id: Option<Uuid>,
    /// Hours back from the current one (which is included), 1 to 168, default 24.
    #[param(minimum = 1, maximum = 168)]
    pub hours: Option<u32>,
}

/// One hour of a window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct RunHourView {
    /// The hour's start (UTC).
    pub hour: DateTime<Utc>,
    /// Jobs scheduled in the hour, in any state but superseded.
    pub fires: i64,
    /// Of those, the ones that succeeded.
    pub succeeded: i64,
    pub failures: i64,
    pub skips: i64,
    /// Median and 99th percentile of how late first attempts started, in milliseconds.
    pub late_p50_ms: Option<i64>,
    pub late_p99_ms: Option<i64>,
}

/// A window's hours and totals.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunsView {
    /// The window `[from, to)`, whole hours ending with the current one.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub now: DateTime<Utc>,
    /// Every hour of the window, oldest first.
    pub hours: Vec<RunHourView>,
    pub fires: i64,
    pub succeeded: i64,
    pub failures: i64,
    pub skips: i64,
    /// Lateness percentiles over the whole window, in milliseconds.
    pub late_p50_ms: Option<i64>,
    pub late_p99_ms: Option<i64>,
}

/// The hours `[from, to)` with the store's rows where it has them and zeros elsewhere.
fn every_hour(from: DateTime<Utc>, count: u32, found: &[JobHour]) -> Vec<RunHourView> {
    (0..i64::from(count))
        .map(|i| {
            let hour = from + Duration::hours(i);
            match found.iter().find(|row| row.hour == hour) {
                Some(row) => RunHourView {
                    hour,
                    fires: row.fires,
                    succeeded: row.succeeded,
                    failures: row.failures,
                    skips: row.skips,
                    late_p50_ms: row.late_p50_ms,
                    late_p99_ms: row.late_p99_ms,
                },
                None => RunHourView {
                    hour,
                    fires: 0,
                    succeeded: 0,
                    failures: 0,
                    skips: 0,
                    late_p50_ms: None,
                    late_p99_ms: None,
                },
            }
        })
        .collect()
}

/// Fires, failures, skips and lateness per hour over the last `hours` hours (the current one
/// included) of one environment, or of one of its schedules.
#[utoipa::path(
    get, path = "/v1/admin/runs", tag = "admin",
    params(RunsQuery),
    responses(
        (status = 200, description = "OK", body = RunsView),
        (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn runs(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<RunsQuery>,
) -> ApiResult<Json<RunsView>> {
    let env = read_env(&caller, query.target_env_id)?;
    let count = query.hours.unwrap_or(DEFAULT_HOURS);
    if !(1..=MAX_HOURS).contains(&count) {
        return Err(ApiError::field(
            "hours",
            format!("must be between 1 and {MAX_HOURS}"),
        ));
    }
    let now = state.clock.now();
    let current = now
        .duration_trunc(Duration::hours(1))
        .map_err(|e| ApiError::Internal(format!("truncating {now} to the hour: {e}")))?;
    let to = current + Duration::hours(1);
    let from = to - Duration::hours(i64::from(count));
    let summary = state
        .ops
        .job_hours(
            env,
            &JobHoursQuery {
                schedule_id: query.schedule_id.map(ScheduleId),
                from,
                to,
            },
        )
        .await?;
    let hours = every_hour(from, count, &summary.hours);
    Ok(Json(RunsView {
        from,
        to,
        now,
        fires: hours.iter().map(|h| h.fires).sum(),
        succeeded: hours.iter().map(|h| h.succeeded).sum(),
        failures: hours.iter().map(|h| h.failures).sum(),
        skips: hours.iter().map(|h| h.skips).sum(),
        hours,
        late_p50_ms: summary.late_p50_ms,
        late_p99_ms: summary.late_p99_ms,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hour_of_the_window_is_present_and_rows_land_on_their_hour() {
        let from = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let row = JobHour {
            hour: from + Duration::hours(2),
            fires: 3,
            succeeded: 1,
            failures: 1,
            skips: 1,
            late_p50_ms: Some(40),
            late_p99_ms: Some(900),
        };
        let hours = every_hour(from, 4, &[row]);
        assert_eq!(hours.len(), 4);
        assert_eq!(hours[0].hour, from);
        assert_eq!(hours[3].hour, from + Duration::hours(3));
        assert_eq!(hours[2].fires, 3);
        assert_eq!(hours[2].late_p99_ms, Some(900));
        assert_eq!(
            hours.iter().map(|h| h.fires).collect::<Vec<_>>(),
            [0, 0, 3, 0]
        );
        assert_eq!(hours[1].late_p50_ms, None);
    }
}
