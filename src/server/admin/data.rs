//! The admin JSON endpoints (`/v1/admin/{resource}`). Reads only: changes go through the `/v1`
//! endpoints. Every endpoint authenticates the caller and requires one of the read, write or
//! admin scopes; every one but `envs` also requires `target_env_id` (never taken from the
//! token) and resolves it through the same policy as the API, then reads through [`Ops`] in a
//! tenant transaction.
//!
//! [`Ops`]: crate::core::ops::Ops

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use crate::core::calendar::{Calendars, Exclude};
use crate::core::cron::{CronExpr, Fire, ZonedCron, parse_timezone};
use crate::core::decl::{CronTiming, Timing};
use crate::core::model::{EnvId, ScheduleId};
use crate::core::policies::{Call, Occurrences, Policies};
use crate::core::store::EnvCounts;
use crate::server::AppState;
use crate::server::api::{self, JobView, Page, ScheduleListQuery, ScheduleView};
use crate::server::auth::EnvGrant;
use crate::server::error::{ApiError, ApiResult, Problem};
use crate::server::extract::{ApiQuery, Caller};
use crate::server::policy::{self, Access};
use crate::server::system::ticker_state;
use crate::util::duration::parse_duration;

/// Most fires a preview or a schedule row shows.
pub const MAX_FIRES: u32 = 20;
/// Fires a preview shows when `count` is not given.
pub const DEFAULT_PREVIEW_FIRES: u32 = 5;
/// Fires each schedule row shows when `fires` is not given.
pub const DEFAULT_ROW_FIRES: u32 = 3;
/// Failed jobs and upcoming schedules the overview lists.
pub const OVERVIEW_ITEMS: u32 = 10;

const NO_SCOPE: &str = "missing scope sentin8:cron:read (or write, or admin)";

/// The environment an admin read addresses: the caller must hold a relevant scope at all
/// (checked first, so a caller without one learns nothing more), name the environment
/// explicitly, and be allowed to read it.
pub(super) fn read_env(caller: &Caller, target_env_id: Option<Uuid>) -> Result<EnvId, ApiError> {
    if !policy::has_any_scope(&caller.0) {
        return Err(ApiError::Forbidden(NO_SCOPE.to_owned()));
    }
    caller.env(target_env_id, Access::Read)
}

/// One fire of a schedule, on its own wall clock: the instant of its call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FireView {
    /// The instant of the call: the occurrence plus the schedule's jitter (the same instant
    /// without one).
    pub at: DateTime<Utc>,
    /// The same instant on the schedule's wall clock, with that clock's UTC offset (RFC 3339).
    pub local: String,
    /// The wall time for people, with the zone's abbreviation: `Tue 2030-01-01 02:00 GMT`.
    pub display: String,
    /// `shifted` (moved out of a spring-forward gap) or `repeated` (second run in a fall-back
    /// fold): what daylight saving did to the occurrence.
    pub dst: Option<String>,
    /// The occurrence the call belongs to, when a jitter puts the call after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occurrence: Option<DateTime<Utc>>,
    /// What excludes the occurrence (`holidays: 2030-12-25 (Christmas Day)`): it is recorded
    /// as skipped, not called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<String>,
}

const DISPLAY_FORMAT: &str = "%a %Y-%m-%d %H:%M";

/// `at` on the schedule's wall clock with the zone's abbreviation: `Mon 2025-03-10 02:30 EDT`.
fn display(zoned: &ZonedCron, at: DateTime<Utc>) -> String {
    format!(
        "{} {}",
        zoned.local_time(at).format(DISPLAY_FORMAT),
        zoned.tz.abbreviation(at)
    )
}

impl FireView {
    fn of(zoned: &ZonedCron, fire: Fire) -> Self {
        FireView {
            at: fire.at,
            local: fire.local.to_rfc3339(),
            display: display(zoned, fire.at),
            dst: fire.dst.map(|d| d.as_str().to_owned()),
            occurrence: None,
            excluded: None,
        }
    }

    fn utc(at: DateTime<Utc>) -> Self {
        FireView {
            at,
            local: at.to_rfc3339(),
            display: format!("{} UTC", at.format(DISPLAY_FORMAT)),
            dst: None,
            occurrence: None,
            excluded: None,
        }
    }

    /// `at` on the clock of `zoned` (UTC without one), marked as a DST fire when it is one.
    fn at(zoned: Option<&ZonedCron>, at: DateTime<Utc>) -> Self {
        match zoned {
            Some(zoned) => FireView::of(zoned, zoned.fire_at(at)),
            None => FireView::utc(at),
        }
    }

    /// The call at `call` of `occurrence`: the call's instant on the clock, the occurrence's
    /// DST mark.
    pub(super) fn call(
        zoned: Option<&ZonedCron>,
        occurrence: DateTime<Utc>,
        call: DateTime<Utc>,
    ) -> Self {
        let of_occurrence = FireView::at(zoned, occurrence);
        if call == occurrence {
            return of_occurrence;
        }
        FireView {
            dst: of_occurrence.dst,
            occurrence: Some(occurrence),
            ..FireView::at(zoned, call)
        }
    }
}

/// The evaluator of a schedule as the API shows it; `None` for one-shots (and for a stored
/// expression or zone that no longer parses, which then shows no fires).
fn zoned_of(view: &ScheduleView) -> Option<ZonedCron> {
    let expr = CronExpr::parse(view.cron.as_deref()?).ok()?;
    let tz = parse_timezone(&view.timezone).ok()?;
    Some(ZonedCron::new(
        expr,
        tz,
        view.on_dst_gap,
        view.on_dst_repeat,
    ))
}

/// The policies that decide a schedule's call instants (jitter and bounds), read back from its
/// view; what does not parse keeps its default.
fn policies_of(view: &ScheduleView) -> Policies {
    Policies {
        max_jitter: parse_duration(&view.max_jitter).unwrap_or_default(),
        start_at: view.start_at,
        end_at: view.end_at,
        pause_on_failure: view.pause_on_failure,
        ..Policies::default()
    }
}

/// Marks the fires whose occurrence `exclude` covers (read on the wall clock of `zoned`), with
/// what excludes it.
pub(super) fn mark_excluded(
    fires: &mut [FireView],
    zoned: Option<&ZonedCron>,
    exclude: &Exclude,
    calendars: &Calendars,
) {
    let Some(zoned) = zoned.filter(|_| !exclude.is_empty()) else {
        return;
    };
    for fire in fires {
        let occurrence = fire.occurrence.unwrap_or(fire.at);
        let wall = zoned.local_time(occurrence).naive_local();
        fire.excluded = exclude.excluding(wall, calendars).map(|e| e.to_string());
    }
}

/// Up to `count` calls of `occurrences`, from `first` (an occurrence and its call) on.
pub(super) fn calls_from(
    zoned: Option<&ZonedCron>,
    occurrences: &Occurrences<'_>,
    first: Option<Call>,
    count: usize,
) -> Vec<FireView> {
    occurrences
        .walk(first)
        .take(count)
        .map(|(occurrence, call)| FireView::call(zoned, occurrence, call))
        .collect()
}

/// The next `count` calls of a schedule: none for completed schedules; an active one's from
/// its stored next call, a paused one's those it would have if resumed now (its first
/// occurrence after now); never more than its remaining runs.
fn upcoming(
    view: &ScheduleView,
    now: DateTime<Utc>,
    count: u32,
    calendars: &Calendars,
) -> Vec<FireView> {
    if !matches!(view.status.as_str(), "active" | "paused") {
        return Vec::new();
    }
    let zoned = zoned_of(view);
    let timing = match (&zoned, view.run_at) {
        (Some(zoned), _) => {
            Timing::Cron(CronTiming::new(view.cron.as_deref().unwrap_or(""), *zoned))
        }
        (None, Some(run_at)) => Timing::Once { run_at },
        // A stored expression that no longer parses: no fires to show.
        (None, None) => return Vec::new(),
    };
    let policies = policies_of(view);
    let occurrences = Occurrences {
        timing: &timing,
        policies: &policies,
        seed: ScheduleId(view.id),
    };
    let first = match view.next_run_at {
        Some(call) if view.status == "active" => Some((occurrences.occurrence_of(call), call)),
        _ => occurrences
            .occurrence_after(now)
            .ok()
            .flatten()
            .map(|occurrence| (occurrence, occurrences.call_at(occurrence))),
    };
    let count = match view.remaining_runs {
        Some(left) => count.min(u32::try_from(left).unwrap_or(0)),
        None => count,
    };
    let mut fires = calls_from(zoned.as_ref(), &occurrences, first, count as usize);
    let exclude = Exclude::from_stored(view.exclude.clone());
    mark_excluded(&mut fires, zoned.as_ref(), &exclude, calendars);
    fires
}

// ---------------------------------------------------------------------------------------------
// Environments
// ---------------------------------------------------------------------------------------------

/// The environments a token grants, for the page's environment picker.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvsView {
    /// The token's subject.
    pub subject: String,
    /// Authenticated with the development token.
    pub dev: bool,
    /// Every environment is granted (admin): the operator names one by its id.
    pub all: bool,
    /// The granted environments, when `all` is false.
    pub envs: Vec<Uuid>,
    /// The token may change things (write or admin scope).
    pub can_write: bool,
    /// When `all` is true: the environments that hold schedules, with how many (not deleted)
    /// each has, to pick from (at most [`MAX_PICKER_ENVS`]; any other one can still be named
    /// by its id).
    pub with_data: Vec<EnvWithData>,
}

/// An environment that holds schedules: its id and a count, nothing of its content.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnvWithData {
    pub env_id: Uuid,
    pub schedules: i64,
}

/// Most environments the picker lists.
pub const MAX_PICKER_ENVS: u32 = 200;

/// The environments the caller's token grants (all of them for admins).
#[utoipa::path(
    get, path = "/v1/admin/envs", tag = "admin",
    responses(
        (status = 200, description = "OK", body = EnvsView),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "No read, write or admin scope", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn envs(State(state): State<Arc<AppState>>, caller: Caller) -> ApiResult<Json<EnvsView>> {
    let principal = &caller.0;
    if !policy::has_any_scope(principal) {
        return Err(ApiError::Forbidden(NO_SCOPE.to_owned()));
    }
    let (all, envs) = match policy::granted_envs(principal) {
        EnvGrant::All => (true, Vec::new()),
        EnvGrant::Some(envs) => (false, envs.into_iter().map(|e| e.0).collect()),
    };
    // Only a token that may address every environment learns which ones hold data.
    let with_data = if all {
        state
            .ops
            .envs_with_data(MAX_PICKER_ENVS)
            .await?
            .into_iter()
            .map(|e| EnvWithData {
                env_id: e.env_id.0,
                schedules: e.schedules,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Json(EnvsView {
        subject: principal.subject.clone(),
        dev: principal.dev,
        all,
        envs,
        can_write: policy::allows(principal, Access::Write),
        with_data,
    }))
}

// ---------------------------------------------------------------------------------------------
// Overview
// ---------------------------------------------------------------------------------------------

/// The ticker's liveness (process-wide, not per environment).
#[derive(Debug, Serialize, ToSchema)]
pub struct TickerView {
    /// `ok`, or `stalled` when no tick completed within three tick intervals.
    pub status: String,
    pub last_tick_at: Option<DateTime<Utc>>,
    pub tick_interval_seconds: u64,
}

/// A failed job with the schedule it belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailureView {
    #[serde(flatten)]
    pub job: JobView,
    /// The schedule's domain and type (absent only if the schedule row is gone).
    pub domain: Option<String>,
    pub schedule_type: Option<String>,
}

/// A schedule's next fire.
#[derive(Debug, Serialize, ToSchema)]
pub struct NextFireView {
    pub schedule_id: Uuid,
    pub domain: String,
    pub schedule_type: String,
    /// `cron` or `once`.
    pub kind: String,
    pub cron: Option<String>,
    pub timezone: String,
    pub fire: FireView,
}

/// One environment at a glance.
#[derive(Debug, Serialize, ToSchema)]
pub struct OverviewView {
    pub env_id: Uuid,
    /// The server's clock, to tell how far away the fires are.
    pub now: DateTime<Utc>,
    /// Schedules (deleted ones left out), jobs and dead letters by status.
    #[schema(value_type = Object)]
    pub counts: EnvCounts,
    pub ticker: TickerView,
    /// The latest failed jobs, newest first.
    pub recent_failures: Vec<FailureView>,
    /// The active schedules that fire soonest.
    pub next_fires: Vec<NextFireView>,
}

/// Counts by status, the dead-letter queue's size, ticker health, recent failures and the next
/// fires of one environment.
#[utoipa::path(
    get, path = "/v1/admin/overview", tag = "admin",
    params(api::EnvQuery),
    responses(
        (status = 200, description = "OK", body = OverviewView),
        (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn overview(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<api::EnvQuery>,
) -> ApiResult<Json<OverviewView>> {
    let env = read_env(&caller, query.target_env_id)?;
    let overview = state
        .ops
        .env_overview(env, OVERVIEW_ITEMS, OVERVIEW_ITEMS)
        .await?;
    let ticker = ticker_state(&state);
    let recent_failures = overview
        .recent_failures
        .into_iter()
        .map(|(job, schedule)| FailureView {
            job: job.into(),
            domain: schedule.as_ref().map(|s| s.domain.clone()),
            schedule_type: schedule.map(|s| s.schedule_type),
        })
        .collect();
    let next_fires = overview
        .upcoming
        .into_iter()
        .filter_map(|schedule| {
            let at = schedule.next_run_at?;
            let zoned = schedule.timing.cron().and_then(|c| c.zoned().ok());
            let fire = FireView::call(zoned, schedule.occurrences().occurrence_of(at), at);
            let timing = schedule.timing.columns();
            Some(NextFireView {
                schedule_id: schedule.id.0,
                fire,
                domain: schedule.domain,
                schedule_type: schedule.schedule_type,
                kind: timing.kind.to_string(),
                cron: timing.cron_expr,
                timezone: timing.timezone,
            })
        })
        .collect();
    Ok(Json(OverviewView {
        env_id: env.0,
        now: state.clock.now(),
        counts: overview.counts,
        ticker: TickerView {
            status: if ticker.ticking { "ok" } else { "stalled" }.to_owned(),
            last_tick_at: ticker.last_tick_at,
            tick_interval_seconds: state.tick_interval.as_secs(),
        },
        recent_failures,
        next_fires,
    }))
}

// ---------------------------------------------------------------------------------------------
// Schedules with their next fires
// ---------------------------------------------------------------------------------------------

/// A schedule with its next fires on its own wall clock.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminScheduleView {
    #[serde(flatten)]
    pub schedule: ScheduleView,
    /// The next fires after now (for a paused schedule: the fires it would have if resumed now;
    /// none for completed ones).
    pub upcoming: Vec<FireView>,
}

/// A page of schedules with their fires, and the server's clock.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminSchedulePage {
    pub items: Vec<AdminScheduleView>,
    pub next_cursor: Option<String>,
    pub now: DateTime<Utc>,
}

/// The filters of `GET /v1/schedules`, plus how many fires to show per schedule.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AdminScheduleQuery {
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    pub domain: Option<String>,
    /// `active`, `paused`, `completed` or `deleted`.
    #[param(value_type = Option<crate::server::api::requests::ScheduleStatusValue>)]
    pub status: Option<String>,
    /// Only schedules whose type contains this text (ASCII case-insensitively).
    pub type_contains: Option<String>,
    /// Only schedules whose labels match (`team=billing,tier in (gold,silver)`).
    pub label_selector: Option<String>,
    /// A page's `next_cursor`.
    #[param(format = Uuid)]
    pub cursor: Option<String>,
    /// 1 to 100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Fires per schedule, 0 to 20, default 3.
    #[param(minimum = 0, maximum = 20)]
    pub fires: Option<u32>,
}

/// Lists schedules as `GET /v1/schedules` does (same filters, same paging, same policy), each
/// with its next fires in its time zone.
#[utoipa::path(
    get, path = "/v1/admin/schedules", tag = "admin",
    params(AdminScheduleQuery),
    responses(
        (status = 200, description = "OK", body = AdminSchedulePage),
        (status = 400, description = "Invalid request: every field problem listed", body = Problem, content_type = "application/problem+json"), (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn schedules(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<AdminScheduleQuery>,
) -> ApiResult<Json<AdminSchedulePage>> {
    let env = read_env(&caller, query.target_env_id)?;
    let fires = query.fires.unwrap_or(DEFAULT_ROW_FIRES);
    if fires > MAX_FIRES {
        return Err(ApiError::field(
            "fires",
            format!("must be between 0 and {MAX_FIRES}"),
        ));
    }
    let list = ScheduleListQuery {
        target_env_id: query.target_env_id,
        domain: query.domain,
        status: query.status,
        type_contains: query.type_contains,
        label_selector: query.label_selector,
        include_deleted: None,
        cursor: query.cursor,
        limit: query.limit,
    };
    let Json(Page { items, next_cursor }) =
        api::list_schedules(State(state.clone()), caller, ApiQuery(list)).await?;
    let now = state.clock.now();
    // The calendars the listed schedules name, read once for the page.
    let names_calendars = items.iter().any(|s| {
        Exclude::from_stored(s.exclude.clone())
            .calendar_names()
            .next()
            .is_some()
    });
    let calendars: Calendars = if names_calendars {
        state
            .ops
            .calendar_list(env)
            .await?
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect()
    } else {
        Calendars::new()
    };
    let items = items
        .into_iter()
        .map(|schedule| AdminScheduleView {
            upcoming: upcoming(&schedule, now, fires, &calendars),
            schedule,
        })
        .collect();
    Ok(Json(AdminSchedulePage {
        items,
        next_cursor,
        now,
    }))
}
