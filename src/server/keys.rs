//! `GET /.well-known/jwks.json`: the public keys proxy-back calls are signed with, for
//! receivers verifying `Sentin8-Signature` offline. Unauthenticated (the keys are public) and
//! cacheable; a rotation publishes the new key and keeps the previous ones, so a receiver's
//! cached copy is refreshed on an unknown `kid`.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::Value;

pub use crate::callback::signing::JWKS_PATH;

/// How long receivers may cache the key set.
pub const CACHE_CONTROL: &str = "public, max-age=300";

/// The key set, as documented in the API document (the route is [`router`]'s).
#[utoipa::path(
    get, path = "/.well-known/jwks.json", tag = "system",
    responses(
        (status = 200, description = "The public keys of signed proxy-back calls (an RFC 7517 key set); cacheable for 5 minutes", content_type = "application/jwk-set+json", body = Object),
        (status = 404, description = "This server does not sign its calls", body = crate::server::error::Problem, content_type = "application/problem+json"),
    )
)]
#[allow(dead_code)]
pub(crate) fn key_set() {}

/// The key set route (`jwks` is [`CallSigner::jwks`]; without one, a 404 that says why).
///
/// [`CallSigner::jwks`]: crate::callback::signing::CallSigner::jwks
pub fn router(jwks: Option<Arc<Value>>) -> Router {
    let Some(jwks) = jwks else {
        // Routed all the same, so the answer says why there is no key set.
        return Router::new().route(
            JWKS_PATH,
            get(|| async {
                crate::server::error::ApiError::NotFound(
                    "this server does not sign its calls: it publishes no key set".to_owned(),
                )
                .into_response()
            }),
        );
    };
    let body = Arc::new(jwks.to_string());
    Router::new().route(
        JWKS_PATH,
        get(move || {
            let body = body.clone();
            async move {
                (
                    [
                        (header::CONTENT_TYPE, "application/jwk-set+json"),
                        (header::CACHE_CONTROL, CACHE_CONTROL),
                    ],
                    body.as_ref().clone(),
                )
                    .into_response()
            }
        }),
    )
}
