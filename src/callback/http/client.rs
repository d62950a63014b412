//! The reqwest clients of proxy-back: one for targets (through the egress policy) and one for
//! the operator's token endpoint, with the same TLS roots, user agent and timeout.

use std::sync::Arc;

use super::super::config::{ConfigError, DispatchConfig};
use super::super::describe;
use super::super::egress::{EgressPolicy, egress_client_builder};

/// The clients a dispatcher uses.
pub(super) struct Clients {
    /// Targets: names resolved by the egress policy, no proxy from the environment, no
    /// redirects.
    pub target: reqwest::Client,
    /// The token endpoint, which the operator configured: not subject to the tenants' egress
    /// policy (it may well sit on a private network), but redirects are still not followed.
    pub token: reqwest::Client,
}

pub(super) fn build(config: &DispatchConfig) -> Result<Clients, ConfigError> {
    let roots = extra_roots(config)?;
    let finish = |builder: reqwest::ClientBuilder| {
        let builder = builder
            .user_agent(config.user_agent.clone())
            // A redirect would turn the POST into a GET or carry a credential elsewhere; a
            // target that redirects is misconfigured, and its 3xx is reported as such.
            .redirect(reqwest::redirect::Policy::none())
            // A backstop for the per-call timeout, which also bounds token fetches made
            // outside a dispatch.
            .timeout(config.job_timeout);
        match &roots {
            Some((path, certs)) => {
                builder
                    .tls_certs_merge(certs.clone())
                    .build()
                    .map_err(|e| ConfigError::CaFile {
                        path: path.clone(),
                        reason: format!("not usable as trust roots: {}", describe(e)),
                    })
            }
            None => builder
                .build()
                .map_err(|e| ConfigError::Client(describe(e))),
        }
    };
    Ok(Clients {
        target: finish(egress_client_builder(Arc::new(config.egress.clone())))?,
        token: finish(reqwest::Client::builder())?,
    })
}

/// The policy a dispatcher checks URLs with, shared with its resolver's copy by value.
pub(super) fn policy(config: &DispatchConfig) -> Arc<EgressPolicy> {
    Arc::new(config.egress.clone())
}

fn extra_roots(
    config: &DispatchConfig,
) -> Result<Option<(String, Vec<reqwest::Certificate>)>, ConfigError> {
    let Some(path) = &config.ca_file else {
        return Ok(None);
    };
    let shown = path.display().to_string();
    let ca_error = |reason: String| ConfigError::CaFile {
        path: shown.clone(),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| ca_error(format!("cannot read it: {e}")))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| ca_error(format!("not a PEM certificate bundle: {}", describe(e))))?;
    if certs.is_empty() {
        return Err(ca_error("contains no PEM certificates".into()));
    }
    // The certificates' DER is only decoded when the TLS stack is built, so a failure there
    // is almost always a malformed certificate in the bundle.
    Ok(Some((shown, certs)))
}

/// At most `max` bytes of a response body (the rest is not read).
pub(super) async fn read_prefix(
    response: &mut reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while body.len() < max {
        let Some(chunk) = response.chunk().await? else {
            break;
        };
        let room = max - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok(body)
}
