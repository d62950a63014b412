//! `GET /v1/admin/preview`: a timing tried out before it is declared (a cron expression with
//! its zone and policies, or a one-shot instant), checked as a declaration is and answered
//! with its next calls, nothing stored.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::data::*;
use crate::core::calendar::{Calendars, Exclude};
use crate::core::cron::{OnDstGap, OnDstRepeat};
use crate::core::decl::{FieldError, ScheduleDecl, Timing};
use crate::core::model::ScheduleId;
use crate::core::policies::{Occurrences, Policies, format_duration};
use crate::core::target::{BASE_URL_FIELD, BaseUrl};
use crate::server::AppState;
use crate::server::error::{ApiError, ApiResult, Problem};
use crate::server::extract::{ApiQuery, Caller};

/// A timing to try out: a cron expression with its zone and policies, or a one-shot instant.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PreviewQuery {
    #[param(required = true)]
    pub target_env_id: Option<Uuid>,
    /// A cron expression or an interval `@every 90s`; exactly one of `cron`, `every` and
    /// `run_at`.
    pub cron: Option<String>,
    /// An interval of whole seconds (`90s`).
    pub every: Option<String>,
    /// With `every`: how far past each multiple of it (`15s`).
    pub phase: Option<String>,
    /// An RFC 3339 instant.
    pub run_at: Option<String>,
    /// IANA zone of a cron expression (default UTC).
    pub timezone: Option<String>,
    /// `shift` (default) or `skip`.
    pub on_dst_gap: Option<String>,
    /// `once` (default) or `twice`.
    pub on_dst_repeat: Option<String>,
    /// A callback base URL to check as creating a schedule would (`target_config.baseUrl`).
    pub base_url: Option<String>,
    /// Fires to list, 1 to 20, default 5.
    #[param(minimum = 1, maximum = 20)]
    pub count: Option<u32>,
    /// The schedule's `max_jitter` (`30s`): the fires are then its calls, each after its
    /// occurrence by the schedule's jitter.
    pub max_jitter: Option<String>,
    /// The schedule's `start_at` (RFC 3339): no fire before.
    pub start_at: Option<String>,
    /// The schedule's `end_at` (RFC 3339): no fire after.
    pub end_at: Option<String>,
    /// The schedule's `remaining_runs`: no more fires than that.
    pub remaining_runs: Option<String>,
    /// The schedule whose calls to list (its id seeds the jitter). Without it the fires are
    /// the occurrences themselves: a schedule not created yet has no id to seed its jitter
    /// (each call then comes within `max_jitter` of its occurrence).
    pub schedule_id: Option<String>,
    /// The schedule's exclusions, separated by `;`: dates, `a..b` ranges, cron-like specs and
    /// names of the environment's calendars; the fires they cover are marked `excluded`.
    pub exclude: Option<String>,
    /// List the calls strictly after this RFC 3339 instant, walking from call to call as the
    /// engine does (an existing schedule's, from just before its `next_run_at`); default: the
    /// calls of a schedule created or resumed now.
    pub after: Option<String>,
}

/// A valid timing and its next fires.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewView {
    /// `cron` or `once`.
    pub kind: String,
    /// The expression as it would be stored.
    pub cron: Option<String>,
    pub timezone: String,
    /// Fixed-time expressions follow the DST policies; interval ones follow elapsed time.
    pub fixed_time: bool,
    pub now: DateTime<Utc>,
    /// The jitter validated (`0s`: none).
    pub max_jitter: String,
    /// The schedule whose calls the fires are (its jitter applied); absent when none was
    /// named, and the fires are occurrences.
    pub schedule_id: Option<Uuid>,
    pub fires: Vec<FireView>,
}

/// An empty text field counts as absent (forms send them).
fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// Validates a timing with its jitter and bounds (and, when given, a base URL) exactly as
/// creating a schedule would and lists its next calls. A 400 names each invalid field (`cron`,
/// `run_at`, `timezone`, `on_dst_gap`, `on_dst_repeat`, `max_jitter`, `start_at`, `end_at`,
/// `remaining_runs`, `schedule_id`, `after`, `target_config.baseUrl`, `count`).
#[utoipa::path(
    get, path = "/v1/admin/preview", tag = "admin",
    params(PreviewQuery),
    responses(
        (status = 200, description = "OK", body = PreviewView),
        (status = 400, description = "Invalid (every field problem listed)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No valid token", body = Problem, content_type = "application/problem+json"), (status = 429, description = "Too many requests: Retry-After says when to come back", body = Problem, content_type = "application/problem+json"), (status = 403, description = "The token may not do this here (scope or environment)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = ["sentin8:cron:read"]))
)]
pub async fn preview(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiQuery(query): ApiQuery<PreviewQuery>,
) -> ApiResult<Json<PreviewView>> {
    let env = read_env(&caller, query.target_env_id)?;
    let now = state.clock.now();
    let mut errors = Vec::new();
    let exclude_texts: Vec<String> = given(query.exclude)
        .map(|text| {
            text.split(';')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let count = query.count.unwrap_or(DEFAULT_PREVIEW_FIRES);
    if !(1..=MAX_FIRES).contains(&count) {
        errors.push(FieldError::new(
            "count",
            format!("must be between 1 and {MAX_FIRES}"),
        ));
    }
    let on_dst_gap = given(query.on_dst_gap).and_then(|v| {
        v.parse::<OnDstGap>()
            .map_err(|e| errors.push(FieldError::new("on_dst_gap", e.to_string())))
            .ok()
    });
    let on_dst_repeat = given(query.on_dst_repeat).and_then(|v| {
        v.parse::<OnDstRepeat>()
            .map_err(|e| errors.push(FieldError::new("on_dst_repeat", e.to_string())))
            .ok()
    });
    let remaining_runs = given(query.remaining_runs).and_then(|v| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| {
                errors.push(FieldError::new(
                    "remaining_runs",
                    format!("{v:?} is not a whole number of runs"),
                ))
            })
            .ok()
    });
    let seed = given(query.schedule_id).map(|v| {
        Uuid::parse_str(v.trim())
            .map_err(|_| {
                errors.push(FieldError::new(
                    "schedule_id",
                    format!("{v:?} is not a uuid"),
                ))
            })
            .ok()
    });
    let after = given(query.after).and_then(|v| {
        DateTime::parse_from_rfc3339(v.trim())
            .map(|t| t.with_timezone(&Utc))
            .map_err(|_| {
                errors.push(FieldError::new(
                    "after",
                    format!("{v:?} is not an RFC 3339 timestamp"),
                ))
            })
            .ok()
    });
    // The same checks as creating a schedule: the parser, then the egress policy.
    if let Some(raw) = given(query.base_url) {
        let checked = BaseUrl::parse(&raw)
            .map_err(|e| e.to_string())
            .and_then(|url| state.ops.target_policy().check(&url));
        if let Err(problem) = checked {
            errors.push(FieldError::new(BASE_URL_FIELD, problem));
        }
    }
    // The same validation as a new schedule's timing and policies; the type is a placeholder.
    let decl = ScheduleDecl {
        schedule_type: "preview".to_owned(),
        cron: given(query.cron),
        every: given(query.every),
        phase: given(query.phase),
        run_at: given(query.run_at),
        timezone: given(query.timezone),
        on_dst_gap,
        on_dst_repeat,
        max_jitter: given(query.max_jitter),
        start_at: given(query.start_at),
        end_at: given(query.end_at),
        remaining_runs,
        exclude: Some(exclude_texts),
        ..ScheduleDecl::default()
    };
    let spec = decl
        .validate(now)
        .map_err(|mut problems| errors.append(&mut problems))
        .ok();
    let (spec, seed) = match (spec, seed) {
        (Some(spec), None) if errors.is_empty() => (spec, None),
        (Some(spec), Some(Some(seed))) if errors.is_empty() => (spec, Some(seed)),
        _ => return Err(ApiError::fields(errors)),
    };
    // Without a schedule there is no seed: the occurrences are listed, unshifted.
    let listed = Policies {
        max_jitter: if seed.is_some() {
            spec.policies.max_jitter
        } else {
            std::time::Duration::ZERO
        },
        ..spec.policies
    };
    let occurrences = Occurrences {
        timing: &spec.timing,
        policies: &listed,
        seed: ScheduleId(seed.unwrap_or(Uuid::nil())),
    };
    let first = match after {
        Some(after) => occurrences.next_with_occurrence(after).ok().flatten(),
        None => occurrences
            .occurrence_after(now)
            .ok()
            .flatten()
            .map(|occurrence| (occurrence, occurrences.call_at(occurrence))),
    };
    let count = spec.remaining_runs.map_or(count, |left| count.min(left)) as usize;
    let calendars = calendars_named(&state, env, &spec.exclude).await?;
    let max_jitter = format_duration(spec.policies.max_jitter);
    let view = match &spec.timing {
        Timing::Cron(cron) => {
            let zoned = cron
                .zoned()
                .map_err(|e| ApiError::fields(vec![FieldError::new("cron", e.to_string())]))?;
            PreviewView {
                kind: "cron".to_owned(),
                cron: Some(cron.expression.clone()),
                timezone: cron.timezone.clone(),
                fixed_time: zoned.expr.is_fixed_time(),
                now,
                max_jitter,
                schedule_id: seed,
                fires: {
                    let mut fires = calls_from(Some(zoned), &occurrences, first, count);
                    mark_excluded(&mut fires, Some(zoned), &spec.exclude, &calendars);
                    fires
                },
            }
        }
        Timing::Once { run_at } => PreviewView {
            kind: "once".to_owned(),
            cron: None,
            timezone: "UTC".to_owned(),
            fixed_time: true,
            now,
            max_jitter,
            schedule_id: seed,
            fires: vec![FireView::call(None, *run_at, occurrences.call_at(*run_at))],
        },
    };
    Ok(Json(view))
}

/// The environment's calendars that `exclude` names; a name it does not have is a field error.
async fn calendars_named(
    state: &AppState,
    env: crate::core::model::EnvId,
    exclude: &Exclude,
) -> ApiResult<Calendars> {
    let names: Vec<&str> = exclude.calendar_names().collect();
    if names.is_empty() {
        return Ok(Calendars::new());
    }
    let calendars: Calendars = state
        .ops
        .calendar_list(env)
        .await?
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    let missing: Vec<FieldError> = names
        .iter()
        .filter(|n| !calendars.contains_key(**n))
        .map(|n| {
            FieldError::new(
                "exclude",
                format!("no calendar named {n:?} in this environment"),
            )
        })
        .collect();
    if missing.is_empty() {
        Ok(calendars)
    } else {
        Err(ApiError::fields(missing))
    }
}
