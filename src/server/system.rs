//! Unauthenticated operational endpoints: health (ticker liveness; its detail and store-wide
//! counts only for an admin token) and Prometheus metrics (meant for a listener of its own).
//! Both expose aggregate numbers only, never tenant data, and both read the counts from the
//! in-memory snapshot: no request runs a cross-tenant query.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use std::time::Duration;

use super::AppState;
use super::error::ApiError;
use super::policy;
use crate::core::snapshot::Counts;
use crate::core::store::StoreStats;

/// When health reports `degraded` (still HTTP 200: the service works, but needs attention).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthRules {
    /// The bus unreachable for longer than this is a reason.
    pub bus_unreachable_after: Duration,
    /// The oldest event not relayed yet being older than this is a reason.
    pub outbox_backlog_age: Duration,
}

impl Default for HealthRules {
    fn default() -> Self {
        Self {
            bus_unreachable_after: Duration::from_secs(300),
            outbox_backlog_age: Duration::from_secs(600),
        }
    }
}

/// Ticker liveness; with an admin token, the detail behind it and store-wide counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`; `degraded` (HTTP 200, see `reasons`; also while the store searches for a database
    /// host during a failover); `stalled` (HTTP 503: no tick within 3× the interval) or
    /// `unavailable` (HTTP 503: the database did not answer).
    pub status: String,
    /// Why the status is not `ok`, one sentence each.
    pub reasons: Vec<String>,
    /// Shown only to a token with the admin scope: the counts are summed over every tenant.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<HealthDetail>,
}

/// What health shows an administrator beyond its status.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthDetail {
    /// Age in seconds of the oldest outbox event not relayed yet (as of `counts_at`).
    pub outbox_backlog_age_seconds: Option<i64>,
    /// Since when the relay has found the bus unreachable, if it has.
    pub bus_unreachable_since: Option<DateTime<Utc>>,
    pub backend: String,
    pub last_tick_at: Option<DateTime<Utc>>,
    pub tick_interval_seconds: u64,
    /// Store-wide counts, computed in the background (see `counts_at`).
    #[schema(value_type = Option<Object>)]
    pub counts: Option<StoreStats>,
    /// When `counts` were computed.
    pub counts_at: Option<DateTime<Utc>>,
    /// Outbox events parked after repeated relay failures (need an operator).
    pub outbox_parked: i64,
    /// The time-zone database schedules are evaluated with.
    pub tz_database: TzDatabaseView,
}

/// The time-zone database in use.
#[derive(Debug, Serialize, ToSchema)]
pub struct TzDatabaseView {
    /// The tz database release, e.g. `2025b`, or `unknown`.
    pub version: String,
    /// `bundled`, `system` or `directory`.
    pub source: String,
}

impl TzDatabaseView {
    fn current() -> TzDatabaseView {
        let database = crate::core::cron::tzdb::database();
        TzDatabaseView {
            version: database.version().to_owned(),
            source: database.source().to_owned(),
        }
    }
}

/// Whether the ticker is alive, as health and the admin overview judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickerState {
    /// The last tick (or start-up, before the first tick) is within three tick intervals.
    pub ticking: bool,
    pub last_tick_at: Option<DateTime<Utc>>,
}

/// The ticker's liveness now.
pub fn ticker_state(state: &AppState) -> TickerState {
    let now = state.clock.now();
    let last_tick = state.metrics.last_tick_unix.load(Ordering::Relaxed);
    let last_tick_at = (last_tick > 0)
        .then(|| DateTime::from_timestamp(last_tick, 0))
        .flatten();
    let reference = last_tick_at.unwrap_or(state.started_at);
    let limit =
        chrono::Duration::from_std(state.tick_interval * 3).unwrap_or(chrono::Duration::MAX);
    TickerState {
        ticking: now - reference <= limit,
        last_tick_at,
    }
}

/// Since when the relay has found the bus unreachable (none while it is reachable).
pub fn bus_unreachable_since(state: &AppState) -> Option<DateTime<Utc>> {
    let since = state
        .metrics
        .bus_unreachable_since_unix
        .load(Ordering::Relaxed);
    (since > 0)
        .then(|| DateTime::from_timestamp(since, 0))
        .flatten()
}

/// The outbox backlog's age in seconds as of the last counts (none without a backlog).
pub fn outbox_backlog_age(counts: Option<&Counts>) -> Option<i64> {
    counts.and_then(|c| {
        c.stats
            .outbox_oldest_unrelayed_at
            .map(|oldest| (c.at - oldest).num_seconds().max(0))
    })
}

/// The reasons health is `degraded`: each a rule of [`HealthRules`] that does not hold.
fn degraded_reasons(
    state: &AppState,
    bus_since: Option<DateTime<Utc>>,
    backlog_age: Option<i64>,
) -> Vec<String> {
    let rules = &state.health;
    let mut reasons = Vec::new();
    if let Some(since) = bus_since {
        let down = (state.clock.now() - since).num_seconds();
        if down > secs(rules.bus_unreachable_after) {
            reasons.push(format!("the bus has been unreachable for {down} s"));
        }
    }
    if let Some(age) = backlog_age
        && age > secs(rules.outbox_backlog_age)
    {
        reasons.push(format!(
            "the oldest outbox event not relayed yet is {age} s old"
        ));
    }
    reasons
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// `ok` when the ticker is alive, the store answers and nothing needs attention; `degraded`
/// (still 200) with its reasons when the bus has been unreachable too long, the outbox backlog
/// is too old, or the store is searching for a database host during a failover; 503 only when the ticker
/// is stalled or the database does not answer (and no search explains it). Everything but the
/// cached reachability probe is read from memory.
#[utoipa::path(
    get, path = "/v1/health", tag = "system",
    responses((status = 200, description = "ok or degraded", body = Health), (status = 503, description = "Stalled, or the database is unavailable", body = Health))
)]
pub async fn health(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> (StatusCode, Json<Health>) {
    let detail = is_admin_request(&state, &headers).await;
    health_report(&state, detail).await
}

/// Health as answered, with its detail when `detail` (an admin, or the metrics listener).
pub async fn health_report(state: &AppState, detail: bool) -> (StatusCode, Json<Health>) {
    let TickerState {
        ticking,
        last_tick_at,
    } = ticker_state(state);
    let reachable = state
        .stats
        .reachable(state.store.as_ref(), state.clock.as_ref())
        .await;
    let counts = state.stats.counts();
    let bus_since = bus_unreachable_since(state);
    let backlog_age = outbox_backlog_age(counts.as_ref());
    // A failover under way: the store is searching for its host and will recover by itself,
    // so the database not answering meanwhile is a reason to look, not to restart.
    let host_search = state.store.host_search();
    let mut reasons = Vec::new();
    if !ticking {
        reasons.push("the ticker has not ticked within three tick intervals".to_owned());
    }
    if let Some(search) = &host_search {
        reasons.push(search.clone());
    } else if !reachable {
        reasons.push("the database did not answer".to_owned());
    }
    reasons.extend(degraded_reasons(state, bus_since, backlog_age));
    let (status, code) = match (ticking, reachable || host_search.is_some()) {
        (false, _) => ("stalled", StatusCode::SERVICE_UNAVAILABLE),
        (true, false) => ("unavailable", StatusCode::SERVICE_UNAVAILABLE),
        (true, true) if reasons.is_empty() => ("ok", StatusCode::OK),
        (true, true) => ("degraded", StatusCode::OK),
    };
    let detail = detail.then(|| HealthDetail {
        outbox_backlog_age_seconds: backlog_age,
        bus_unreachable_since: bus_since,
        backend: state.store.capabilities().backend.to_owned(),
        last_tick_at,
        tick_interval_seconds: state.tick_interval.as_secs(),
        counts: counts.as_ref().map(|c| c.stats.clone()),
        counts_at: counts.map(|c| c.at),
        outbox_parked: state.metrics.events_parked.load(Ordering::Relaxed),
        tz_database: TzDatabaseView::current(),
    });
    (
        code,
        Json(Health {
            status: status.to_owned(),
            reasons,
            detail,
        }),
    )
}

/// Whether the request carries a valid token with the admin scope. Anything else (no token,
/// an invalid one, a tenant's token) gets the status alone: probes need no credential, and
/// health never answers 401.
async fn is_admin_request(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(authorization) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let authorization = authorization.to_str().ok();
    state
        .auth
        .authenticate(authorization)
        .await
        .is_ok_and(|principal| policy::is_admin(&principal))
}

/// This document: the API's OpenAPI 3.1 description (the route is the application's).
#[utoipa::path(
    get, path = "/v1/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object))
)]
#[allow(dead_code)]
pub(crate) fn openapi_document() {}

/// Prometheus text exposition: fires, failures, retries, DLQ landings, lateness, tick
/// duration, outbox backlog and more.
#[utoipa::path(
    get, path = "/metrics", tag = "system",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    if state.metrics_elsewhere {
        return ApiError::NotFound("no such route".to_owned()).into_response();
    }
    metrics_text(&state)
}

/// The Prometheus text, wherever it is served.
pub fn metrics_text(state: &AppState) -> Response {
    let counts = state.stats.counts();
    let mut body = state.metrics.render(counts.as_ref().map(|c| &c.stats));
    body.push_str(&format!(
        "# HELP sentin8_cron_outbox_backlog_age_seconds Age of the oldest outbox event not relayed yet (0 without a backlog).\n\
         # TYPE sentin8_cron_outbox_backlog_age_seconds gauge\n\
         sentin8_cron_outbox_backlog_age_seconds {}\n\
         # HELP sentin8_cron_bus_unreachable_seconds How long the relay has found the bus unreachable (0 while reachable).\n\
         # TYPE sentin8_cron_bus_unreachable_seconds gauge\n\
         sentin8_cron_bus_unreachable_seconds {}\n",
        outbox_backlog_age(counts.as_ref()).unwrap_or(0),
        bus_unreachable_since(state)
            .map(|since| (state.clock.now() - since).num_seconds().max(0))
            .unwrap_or(0)
    ));
    body.push_str(&format!(
        "# HELP sentin8_cron_database_host_search 1 while the store is searching for its database host (a failover under way), else 0.\n\
         # TYPE sentin8_cron_database_host_search gauge\n\
         sentin8_cron_database_host_search {}\n",
        u8::from(state.store.host_search().is_some())
    ));
    state.rate.render(&mut body);
    state.http.render(&mut body);
    super::process_metrics::render_build_info(&mut body);
    super::process_metrics::render_process(&mut body);
    let zones = TzDatabaseView::current();
    body.push_str(&format!(
        "# HELP sentin8_cron_tz_database_info The time-zone database in use.\n\
         # TYPE sentin8_cron_tz_database_info gauge\n\
         sentin8_cron_tz_database_info{{version=\"{}\",source=\"{}\"}} 1\n",
        label_value(&zones.version),
        label_value(&zones.source)
    ));
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// A Prometheus label value: backslash, double quote and newline escaped.
pub(super) fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
