//! The proxy-back client's DNS resolver and client builder, which apply the policy after
//! resolution so a connection only ever goes to a checked address.

use std::sync::Arc;

use super::EgressPolicy;

/// A reqwest resolver that applies the egress policy after resolution: it resolves with the
/// system resolver (through tokio), keeps only the addresses the policy permits and fails when
/// none remain, so reqwest connects only to checked addresses.
#[derive(Debug, Clone)]
pub struct EgressResolver {
    policy: Arc<EgressPolicy>,
}

impl EgressResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<EgressPolicy>) -> Self {
        Self { policy }
    }
}

impl reqwest::dns::Resolve for EgressResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            policy.check_name(&host)?;
            // A failed lookup (SERVFAIL, a resolver timeout) is a transient transport error,
            // retried like any other; only addresses the policy refuses are a refusal.
            let resolved = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed = policy.filter_resolved(&host, resolved)?;
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// The client builder the proxy-back client must start from: proxies from the environment
/// ignored (`no_proxy`), names resolved through [`EgressResolver`], redirects not followed.
/// Callers add timeouts, TLS and the user agent.
pub fn egress_client_builder(policy: Arc<EgressPolicy>) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(EgressResolver::new(policy)))
}
