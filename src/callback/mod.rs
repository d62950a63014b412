//! Proxy-back over HTTP: the [`Dispatcher`](crate::core::dispatch::Dispatcher) the engine uses
//! to call owning services, and the M2M tokens that authenticate those calls.
//!
//! - [`config`]: [`CallbackArgs`] (the proxy-back settings, flags or `SENTIN8_CRON_*`
//!   variables) and the [`DispatchConfig`] they convert to.
//! - [`token`]: the [`TokenSource`] trait, OAuth2 client credentials and the dev static token.
//! - [`http`]: [`HttpDispatcher`], `POST {baseUrl}/v1/internal/schedules/run` over reqwest,
//!   signed ([`signing`]), checked by the egress policy ([`egress`]), failures reported by
//!   class ([`failure`]).
//! - [`setup`]: start-up wiring (the signer, the development key, the operator's warnings).

pub mod config;
pub mod egress;
pub mod failure;
pub mod http;
pub mod setup;
pub mod signing;
pub mod token;

pub use config::{
    CallbackArgs, ConfigError, DispatchConfig, OAuth2Settings, Secret, SigningSettings,
    TargetAllowArgs, TokenSettings,
};
pub use http::{HttpDispatcher, MAX_RESPONSE_BYTES, RUN_PATH, run_url};
pub use token::{OAuth2TokenSource, StaticTokenSource, TokenSource};

pub(crate) use crate::util::http::{BodyError, describe, read_capped};
