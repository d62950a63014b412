//! The HTTP side of `serve`: the `/v1` API, health and metrics, the OpenAPI document, bearer
//! authentication and the tenant policy. Handlers stay thin: they authenticate, resolve the
//! addressed environment through the policy, and call [`crate::core::ops::Ops`]. The admin
//! pages ([`admin`]) are part of the same application and use the same endpoints.

pub mod admin;
pub mod api;
pub mod auth;
pub mod error;
pub mod event_schemas;
pub mod extract;
mod http_metrics;
pub mod keys;
pub mod listener;
pub mod policy;
mod process_metrics;
pub mod rate;
pub mod system;
pub mod tls;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, Request};
use axum::response::IntoResponse;
use axum::routing::get;
use chrono::{DateTime, Utc};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::core::clock::Clock;
use crate::core::metrics::Metrics;
use crate::core::ops::Ops;
use crate::core::snapshot::StatsSnapshot;
use crate::core::store::Store;
use auth::Authenticator;
use error::ApiError;

/// The request id header: set when absent, echoed on the response, logged with every line.
pub const REQUEST_ID: &str = "x-request-id";

/// Request bodies larger than this are refused (schedule payloads are capped at 64 KiB).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// What every handler shares.
pub struct AppState {
    pub ops: Ops,
    pub store: Arc<dyn Store>,
    pub auth: Arc<dyn Authenticator>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    /// The ticker's safety interval; health is stale after three of them.
    pub tick_interval: Duration,
    pub started_at: DateTime<Utc>,
    /// The store-wide counts and reachability that health and metrics report.
    pub stats: Arc<StatsSnapshot>,
    /// `/metrics` is served on its own listener, so this one answers 404 for it.
    pub metrics_elsewhere: bool,
    /// The public keys of signed proxy-back calls, served at `/.well-known/jwks.json`.
    pub jwks: Option<Arc<serde_json::Value>>,
    /// When health reports `degraded`.
    pub health: system::HealthRules,
    /// The API's request rate limits.
    pub rate: Arc<rate::RateLimits>,
    /// The API's own requests, by route, method and status class.
    pub http: Arc<http_metrics::HttpMetrics>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "sentin8-cron",
        description = "Multi-tenant scheduler: cron and one-shot schedules called back over authenticated HTTP, with retries, a dead-letter queue and a transactional outbox. Every environment-scoped call requires `target_env_id`.",
    ),
    paths(
        system::openapi_document,
        keys::key_set,
        event_schemas::event_types,
        event_schemas::event_schema
    ),
    // Schemas only parameters refer to are not collected with the operations.
    components(schemas(
        error::Problem,
        api::requests::ScheduleStatusValue,
        api::requests::JobStatusValue
    )),
    modifiers(&BearerAuth),
    tags(
        (name = "schedules", description = "Cron and one-shot schedules"),
        (name = "jobs", description = "Execution records"),
        (name = "dlq", description = "Dead-letter queue"),
        (name = "calendars", description = "Named lists of exclusions (holidays, freezes) that schedules name in their exclude"),
        (name = "audit", description = "The audit journal: who changed what"),
        (name = "system", description = "Health, metrics, and the documents that describe the contract (this API, the key set, the event schemas)"),
        (name = "admin", description = "Read models of the admin pages (changes go through the endpoints above)"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// The API routes with their OpenAPI document, generated from the same registrations.
pub fn api(state: Arc<AppState>) -> (Router, utoipa::openapi::OpenApi) {
    let (router, mut document) = registered_routes().with_state(state).split_for_parts();
    optional_bodies(&mut document);
    (router, document)
}

/// Marks the bodies that may be left out (a pause's note) as not required: the generator
/// would otherwise have every client send one.
fn optional_bodies(document: &mut utoipa::openapi::OpenApi) {
    let pause = document
        .paths
        .paths
        .get_mut("/v1/schedules/{id}/pause")
        .and_then(|item| item.post.as_mut())
        .and_then(|operation| operation.request_body.as_mut());
    if let Some(utoipa::openapi::RefOr::T(body)) = pause {
        body.required = Some(utoipa::openapi::Required::False);
    }
}

/// The OpenAPI document of the API, built from the same route registrations as [`api`] but
/// without state, so it is available without a store (the registration uses it).
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = registered_routes().into_openapi();
    optional_bodies(&mut document);
    document
}

/// Every documented route, each registered together with its OpenAPI operation.
fn registered_routes() -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(api::create_schedule, api::list_schedules))
        .routes(routes!(
            api::get_schedule,
            api::patch_schedule,
            api::delete_schedule
        ))
        .routes(routes!(api::delete_schedule_post))
        .routes(routes!(api::bulk::bulk_schedules))
        .routes(routes!(api::pause_schedule))
        .routes(routes!(api::resume_schedule))
        .routes(routes!(api::trigger_schedule))
        .routes(routes!(api::backfill_schedule))
        .routes(routes!(api::describe::describe_schedule))
        .routes(routes!(api::list_jobs))
        .routes(routes!(api::get_job))
        .routes(routes!(api::retry_job))
        .routes(routes!(api::list_dlq))
        .routes(routes!(api::get_dlq, api::lifecycle::discard_dlq))
        .routes(routes!(api::republish_dlq))
        .routes(routes!(api::lifecycle::list_audit))
        .routes(routes!(api::calendars::list_calendars))
        .routes(routes!(
            api::calendars::get_calendar,
            api::calendars::put_calendar,
            api::calendars::delete_calendar
        ))
        .routes(routes!(admin::data::envs))
        .routes(routes!(admin::data::overview))
        .routes(routes!(admin::data::schedules))
        .routes(routes!(admin::preview::preview))
        .routes(routes!(admin::runs::runs))
        .routes(routes!(api::whoami::whoami))
        .routes(routes!(system::health))
        .routes(routes!(system::metrics))
}

/// The whole application: API, OpenAPI document, admin pages, `extra` routes, and the
/// cross-cutting layers.
pub fn app(state: Arc<AppState>, extra: Router) -> Router {
    let jwks = keys::router(state.jwks.clone());
    let metrics_elsewhere = state.metrics_elsewhere;
    let http = state.http.clone();
    let (router, mut openapi) = api(state);
    // The document says what this listener serves.
    if metrics_elsewhere {
        openapi.paths.paths.remove("/metrics");
    }
    let document = Arc::new(openapi);
    let request_id = HeaderName::from_static(REQUEST_ID);
    router
        .route(
            "/v1/openapi.json",
            get(move || {
                let document = document.clone();
                async move { axum::Json(document.as_ref().clone()) }
            }),
        )
        .merge(admin::pages())
        .merge(jwks)
        .merge(event_schemas::router())
        .merge(extra)
        .fallback(|| async { ApiError::NotFound("no such route".to_owned()).into_response() })
        .layer(axum::middleware::from_fn_with_state(
            http,
            http_metrics::record,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &Request<_>| {
                let id = request
                    .headers()
                    .get(REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-");
                tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), request_id = %id)
            }),
        )
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
}
