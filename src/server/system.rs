//! Unauthenticated operational endpoints: health (ticker liveness and counts) and Prometheus
//! metrics. Both expose aggregate numbers only, never tenant data, and both read the counts
//! from the in-memory snapshot: no request runs a cross-tenant query.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::ApiError;
use crate::core::store::StoreStats;

/// Ticker liveness and store-wide counts.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, `stalled` (no tick within 3× the interval) or `degraded` (the store did not answer).
    pub status: String,
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

/// Healthy when the last tick (or start-up, before the first tick) is within three tick
/// intervals and the store answers.
#[utoipa::path(
    get, path = "/v1/health", tag = "system",
    responses((status = 200, body = Health), (status = 503, description = "Stalled or degraded", body = Health))
)]
pub async fn health(State(state): State<Arc<AppState>>) -> (StatusCode, Json<Health>) {
    let TickerState {
        ticking,
        last_tick_at,
    } = ticker_state(&state);
    let reachable = state
        .stats
        .reachable(state.store.as_ref(), state.clock.as_ref())
        .await;
    let counts = state.stats.counts();
    let status = match (ticking, reachable) {
        (true, true) => "ok",
        (false, _) => "stalled",
        (true, false) => "degraded",
    };
    let code = if status == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        Json(Health {
            status: status.to_owned(),
            backend: state.store.capabilities().backend.to_owned(),
            last_tick_at,
            tick_interval_seconds: state.tick_interval.as_secs(),
            counts: counts.as_ref().map(|c| c.stats.clone()),
            counts_at: counts.map(|c| c.at),
            outbox_parked: state.metrics.events_parked.load(Ordering::Relaxed),
            tz_database: TzDatabaseView::current(),
        }),
    )
}

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
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
