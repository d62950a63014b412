//! `GET /v1/events/schemas` and `GET /v1/events/schemas/{type}`: the JSON Schema of each event
//! type the relay publishes (see [`crate::core::events::schema`]). Unauthenticated (they
//! describe the contract, not a tenant's data) and cacheable.

use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::core::events::schema::{self, SCHEMAS_PATH};
use crate::server::error::ApiError;

/// How long consumers may cache a schema: a published version never changes in a way that
/// breaks them.
const CACHE_CONTROL: &str = "public, max-age=3600";

/// The list of event types, as documented in the API document (the route is [`router`]'s).
#[utoipa::path(
    get, path = "/v1/events/schemas", tag = "system",
    responses(
        (status = 200, description = "Every event type the relay publishes, with where its JSON Schema is served", content_type = "application/json", body = Object),
    )
)]
#[allow(dead_code)]
pub(crate) fn event_types() {}

/// One type's schema, as documented in the API document.
#[utoipa::path(
    get, path = "/v1/events/schemas/{type}", tag = "system",
    params(("type" = String, Path, description = "An event type, e.g. `io.sentin8.cron.job.succeeded.v1`")),
    responses(
        (status = 200, description = "The JSON Schema (draft 2020-12) of the whole CloudEvent of this type", content_type = "application/schema+json", body = Object),
        (status = 404, description = "No such event type", body = crate::server::error::Problem, content_type = "application/problem+json"),
    )
)]
#[allow(dead_code)]
pub(crate) fn event_schema() {}

/// The two routes.
pub fn router() -> Router {
    Router::new()
        .route(
            SCHEMAS_PATH,
            get(|| async {
                (
                    [(header::CACHE_CONTROL, CACHE_CONTROL)],
                    axum::Json(schema::index()),
                )
                    .into_response()
            }),
        )
        .route(
            &format!("{SCHEMAS_PATH}/{{type}}"),
            get(|Path(event_type): Path<String>| async move { one(&event_type) }),
        )
}

fn one(event_type: &str) -> Response {
    match schema::schema(event_type) {
        Some(schema) => (
            [
                (header::CONTENT_TYPE, "application/schema+json"),
                (header::CACHE_CONTROL, CACHE_CONTROL),
            ],
            schema.to_string(),
        )
            .into_response(),
        None => ApiError::NotFound(format!(
            "no event type {event_type:?}: {SCHEMAS_PATH} lists them"
        ))
        .into_response(),
    }
}
