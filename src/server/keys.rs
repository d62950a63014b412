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

/// The key set route, when calls are signed (`jwks` is [`CallSigner::jwks`]).
///
/// [`CallSigner::jwks`]: crate::callback::signing::CallSigner::jwks
pub fn router(jwks: Option<Arc<Value>>) -> Router {
    let Some(jwks) = jwks else {
        return Router::new();
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
