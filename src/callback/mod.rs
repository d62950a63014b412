//! Proxy-back over HTTP: the [`Dispatcher`](crate::core::dispatch::Dispatcher) the engine uses
//! to call owning services, and the M2M tokens that authenticate those calls.
//!
//! - [`config`]: [`DispatchConfig`], read from `SENTIN8_CRON_*` variables.
//! - [`token`]: the [`TokenSource`] trait, OAuth2 client credentials and the dev static token.
//! - [`http`]: [`HttpDispatcher`], `POST {baseUrl}/v1/internal/schedules/run` over reqwest.

pub mod config;
pub mod egress;
pub mod failure;
pub mod http;
pub mod signing;
pub mod token;

pub use config::{
    ConfigError, DispatchConfig, OAuth2Settings, Secret, TokenSettings, parse_duration,
};
pub use http::{HttpDispatcher, MAX_RESPONSE_BYTES, RUN_PATH, run_url};
pub use token::{OAuth2TokenSource, StaticTokenSource, TokenSource};

/// Why a response body could not be read.
pub(crate) enum BodyError {
    TooLarge,
    Read(reqwest::Error),
}

/// Reads a response body, giving up as soon as it exceeds `limit` bytes so a misbehaving
/// server cannot make us buffer without bound.
pub(crate) async fn read_capped(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response
        .content_length()
        .is_some_and(|len| len > limit as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A reqwest error with its causes ("error sending request: ...: connection refused"), minus
/// the URL. reqwest's own `Display` stops at the outermost layer, which rarely says what
/// went wrong. Headers (and so tokens) never appear in these errors.
pub(crate) fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some layers repeat their inner error in their own message.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
