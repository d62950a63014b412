//! The proxy-back client of `serve` and `tick`: its settings checked, the call signer loaded
//! (in development mode, a generated key kept beside the embedded database) and the
//! dispatcher built, signing every call and applying the egress policy.

use std::sync::Arc;

use anyhow::Context as _;

use super::CallbackArgs;
use crate::callback::setup::{DevKey, call_signer, warn_about};
use crate::callback::signing::CallSigner;
use crate::callback::{DispatchConfig, HttpDispatcher};
use crate::core::clock::Clock;
use crate::store::Backend;

/// A configured proxy-back client.
pub struct ProxyBack {
    pub config: DispatchConfig,
    pub dispatcher: HttpDispatcher,
    pub signer: Arc<CallSigner>,
}

/// Whether the settings describe development mode: the embedded store and no authentication.
/// `serve`, `tick` and `enroll` all read the authentication settings, so a deployment that
/// authenticates its API is never development mode for any of them.
pub fn dev_mode(database_url: &str, auth_configured: bool) -> anyhow::Result<bool> {
    Ok(Backend::from_url(database_url)?.embedded() && !auth_configured)
}

/// Checks the settings only (nothing is read from disk): for a command to fail before it
/// opens anything.
pub fn config(args: &CallbackArgs, dev_mode: bool) -> anyhow::Result<DispatchConfig> {
    Ok(DispatchConfig::from_args(args, dev_mode)?)
}

/// Loads the signing key and builds the dispatcher for `config`.
pub fn build(
    config: DispatchConfig,
    database_url: &str,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<ProxyBack> {
    let dev_key = DevKey::for_database(database_url, config.egress.dev_mode());
    let signer = Arc::new(call_signer(&config.signing, &dev_key)?);
    if let DevKey::File(path) = &dev_key
        && config.signing.key_file.is_none()
    {
        tracing::info!(path = %path.display(), kid = signer.current().kid(), "development mode: proxy-back calls are signed with a generated key kept beside the database");
    }
    warn_about(&config);
    let dispatcher = HttpDispatcher::with_clock(&config, clock)
        .context("cannot build the proxy-back client")?
        .signed(signer.clone());
    Ok(ProxyBack {
        config,
        dispatcher,
        signer,
    })
}
