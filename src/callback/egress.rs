//! The egress policy: which origins sentin8-cron may call back, and which addresses it may
//! connect to for them.
//!
//! A tenant chooses its schedules' `baseUrl`, so without a policy it could make sentin8-cron
//! send requests (and, before signed calls, the platform's bearer token) to cloud metadata,
//! to databases on the private network or to loopback. The policy is checked twice:
//!
//! 1. at create and update, [`EgressPolicy::check_url`] (an error is a field error on
//!    `target_config.baseUrl`);
//! 2. at dispatch, after DNS resolution, by [`EgressResolver`]: it resolves the name itself
//!    and hands reqwest only the addresses the policy permits, so the connection goes to an
//!    address that was checked (a second lookup cannot rebind it). [`EgressPolicy::check_addr`]
//!    is the same decision for one URL and one address.
//!
//! **The proxy-back client must be built with [`egress_client_builder`]** (or, equivalently,
//! with `.no_proxy()` and `.dns_resolver(EgressResolver)` and no redirects): a proxy from the
//! environment would resolve and connect on its own, bypassing the resolver. IP-literal hosts
//! are never resolved, so `check_url` must have passed for the URL of every call.
//!
//! # Entries
//!
//! The allow list (`SENTIN8_CRON_TARGET_ALLOW`) is a list of `[scheme://]host[/prefix][:port]`:
//!
//! - `host` is a name (`billing.internal`), a wildcard (`*.svc.example.com`: any name below
//!   the domain, not the domain itself), an IP literal (`127.0.0.1`, `[::1]`) or a network
//!   (`10.0.0.0/8`, `[fd00::]/8`);
//! - `scheme` is `https` (the default) or `http`: plain http is allowed only where an entry
//!   names it;
//! - `port` is a number or `*`; without one, only the scheme's default port is allowed.
//!
//! With no entries and a platform domain, the policy is `https://*.{platform domain}`; with
//! neither, no origin is allowed (except loopback in development mode).
//!
//! # Addresses
//!
//! Loopback, private (RFC 1918), CGNAT (100.64/10), link-local, cloud metadata
//! (169.254.169.254, fd00:ec2::254, 168.63.129.16), unique-local (fc00::/7), unspecified,
//! broadcast, documentation, benchmarking, multicast and reserved addresses, and IPv6 forms
//! embedding such an IPv4 address (mapped, compatible, 6to4, NAT64), are refused unless an
//! entry names them: an IP entry for that literal host, or a network entry containing them.
//! Names resolve only to permitted addresses; the names `metadata.google.internal`,
//! `metadata` and `localhost` (and names under `.localhost`) are refused unless an entry names
//! them exactly. Development mode allows loopback (`localhost`, 127/8, ::1) on any scheme and
//! port. The URL is compared in its normalized form (the `url` crate lowercases, applies IDNA
//! and turns `2130706433`, `0x7f000001`, `0177.0.0.1` and `127.1` into `127.0.0.1`), and a
//! trailing dot on a name is ignored.

use std::net::{IpAddr, SocketAddr};

use url::{Host, Url};

use super::config::ENV_TARGET_ALLOW;

mod address;
mod entry;
mod resolver;

pub use address::{AddrClass, classify, classify_v4, classify_v6, embedded_v4};
use entry::{Entry, HostPattern, PortRule, Scheme, is_loopback_name, is_reserved_name};
pub use resolver::{EgressResolver, egress_client_builder};

/// The names refused unless an entry names them exactly.
const RESERVED_NAMES: &[&str] = &["metadata.google.internal", "metadata", "localhost"];

/// Why an allow-list entry could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressConfigError {
    /// The scheme is neither `https` nor `http`.
    #[error("egress entry {entry:?}: scheme must be https or http")]
    Scheme {
        /// The entry as given.
        entry: String,
    },
    /// The host is not a name, `*.domain`, an IP literal or a network.
    #[error("egress entry {entry:?}: {reason}")]
    Host {
        /// The entry as given.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The port is not a number from 1 to 65535 or `*`.
    #[error("egress entry {entry:?}: port must be 1-65535 or *")]
    Port {
        /// The entry as given.
        entry: String,
    },
    /// The platform domain is not a valid domain name.
    #[error("platform domain {domain:?} is not a valid domain name")]
    PlatformDomain {
        /// The domain as given.
        domain: String,
    },
}

/// Why the policy refuses a target or an address. The messages name the URL's origin or the
/// address, never a credential, and fit a field error on `target_config.baseUrl`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressDenied {
    /// Not http or https.
    #[error(
        "scheme {scheme:?} is not allowed: baseUrl must be https (or http where the egress policy names it)"
    )]
    Scheme {
        /// The URL's scheme.
        scheme: String,
    },
    /// The URL carries a user name or password.
    #[error("baseUrl must not embed credentials")]
    Credentials,
    /// The URL has no host.
    #[error("baseUrl has no host")]
    NoHost,
    /// No entry of the policy allows the origin.
    #[error("{origin} is not allowed by the egress policy")]
    NotAllowed {
        /// `scheme://host:port` as normalized.
        origin: String,
    },
    /// A reserved name (metadata, localhost) that no entry names exactly.
    #[error("{host} is a reserved name that the egress policy does not name")]
    ReservedName {
        /// The normalized host name.
        host: String,
    },
    /// An address of a refused class that no entry names.
    #[error("{addr} is a {class} address, which the egress policy does not name")]
    RefusedAddress {
        /// The address (canonical form).
        addr: IpAddr,
        /// Its class.
        class: AddrClass,
    },
    /// An address other than the URL's own IP literal was offered for it.
    #[error("{addr} is not the address in baseUrl")]
    AddressMismatch {
        /// The offered address.
        addr: IpAddr,
    },
    /// A name resolved to no address the policy permits (or did not resolve).
    #[error("{host} resolves to no address the egress policy allows")]
    NoAllowedAddress {
        /// The name that was resolved.
        host: String,
    },
}

/// The egress policy. See the [module documentation](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    entries: Vec<Entry>,
    dev_mode: bool,
}

impl EgressPolicy {
    /// Parses the allow list. Each string may hold several entries separated by commas or
    /// whitespace; empty ones are ignored. With no entries and a `platform_domain`, the
    /// policy is `https://*.{platform_domain}`. `dev_mode` also allows loopback.
    pub fn parse(
        entries: &[String],
        platform_domain: Option<&str>,
        dev_mode: bool,
    ) -> Result<Self, EgressConfigError> {
        let mut parsed = entries
            .iter()
            .flat_map(|s| s.split(|c: char| c == ',' || c.is_whitespace()))
            .filter(|s| !s.is_empty())
            .map(Entry::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if parsed.is_empty()
            && let Some(domain) = platform_domain.map(str::trim).filter(|d| !d.is_empty())
        {
            let bare = domain.trim_start_matches("*.").trim_start_matches('.');
            let entry = Entry::parse(&format!("https://*.{bare}")).map_err(|_| {
                EgressConfigError::PlatformDomain {
                    domain: domain.to_owned(),
                }
            })?;
            parsed.push(entry);
        }
        Ok(Self {
            entries: parsed,
            dev_mode,
        })
    }

    /// Whether development mode (loopback allowed) is on.
    pub fn dev_mode(&self) -> bool {
        self.dev_mode
    }

    /// Whether the policy allows no origin at all outside development loopback.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether an entry names `url`'s origin exactly (an exact name or IP literal, not a
    /// wildcard or network): such origins may receive the static development token.
    pub fn names_origin_explicitly(&self, url: &Url) -> bool {
        let Ok(target) = Target::of(url) else {
            return false;
        };
        // A wildcard port names no origin: a tenant could aim its base URL at its own port
        // on the same host.
        self.entries.iter().any(|e| {
            e.scheme == target.scheme
                && e.port != PortRule::Any
                && e.port_matches(target.port)
                && match (&e.host, &target.host) {
                    (HostPattern::Name(n), TargetHost::Name(name)) => n == name,
                    (HostPattern::Ip(own), TargetHost::Ip(ip)) => own == ip,
                    _ => false,
                }
        })
    }

    /// Checks a target URL (at create and update, and before every call): its scheme, host
    /// and port must match an entry, and an IP-literal host of a refused class must be named
    /// by an entry.
    pub fn check_url(&self, url: &Url) -> Result<(), EgressDenied> {
        let target = Target::of(url)?;
        let entries = || {
            self.entries
                .iter()
                .filter(|e| e.scheme == target.scheme && e.port_matches(target.port))
        };
        match &target.host {
            TargetHost::Name(name) => {
                if self.dev_mode && is_loopback_name(name) {
                    return Ok(());
                }
                let mut matching = entries().filter(|e| e.matches_name(name)).peekable();
                if matching.peek().is_none() {
                    return Err(target.not_allowed());
                }
                let exact = matching.any(|e| matches!(e.host, HostPattern::Name(_)));
                if is_reserved_name(name) && !exact {
                    return Err(EgressDenied::ReservedName { host: name.clone() });
                }
                Ok(())
            }
            TargetHost::Ip(ip) => {
                if entries().any(|e| e.names_addr(*ip)) {
                    return Ok(());
                }
                let class = classify(*ip);
                if self.dev_mode && class == AddrClass::Loopback {
                    return Ok(());
                }
                if class.is_public() {
                    Err(target.not_allowed())
                } else {
                    Err(EgressDenied::RefusedAddress { addr: *ip, class })
                }
            }
        }
    }

    /// [`check_url`](Self::check_url) with its refusal explained for the one who can change
    /// it: the message names the setting that would allow the target (an entry of
    /// `SENTIN8_CRON_TARGET_ALLOW` for its origin, or development mode for loopback). Used at
    /// create and update (the API's field error, `enroll`, the CLI's checks).
    pub fn check_url_explained(&self, url: &Url) -> Result<(), String> {
        let Err(denied) = self.check_url(url) else {
            return Ok(());
        };
        let Ok(target) = Target::of(url) else {
            return Err(denied.to_string());
        };
        let origin = &target.origin;
        let add = format!("add {origin} to {ENV_TARGET_ALLOW}");
        let hint = match &denied {
            EgressDenied::NotAllowed { .. } => Some(format!("not on the egress allow list: {add}")),
            EgressDenied::RefusedAddress {
                class: AddrClass::Loopback,
                ..
            } => Some(format!(
                "{add}, or use development mode (the embedded store without authentication), \
                 which allows loopback"
            )),
            EgressDenied::ReservedName { host } if is_loopback_name(host) => Some(format!(
                "{add}, or use development mode (the embedded store without authentication), \
                 which allows loopback"
            )),
            EgressDenied::RefusedAddress { .. } | EgressDenied::ReservedName { .. } => {
                Some(format!("{add} to allow it"))
            }
            _ => None,
        };
        Err(match (denied, hint) {
            (EgressDenied::NotAllowed { origin }, Some(hint)) => format!("{origin} is {hint}"),
            (denied, Some(hint)) => format!("{denied}: {hint}"),
            (denied, None) => denied.to_string(),
        })
    }

    /// Checks a connection to `addr` for `url` (after DNS resolution): the URL must pass
    /// [`check_url`](Self::check_url); an IP-literal URL may only connect to its own
    /// address; a name may connect to a public address, to one inside a network entry, or
    /// (development mode) to loopback.
    pub fn check_addr(&self, url: &Url, addr: IpAddr) -> Result<(), EgressDenied> {
        self.check_url(url)?;
        let addr = addr.to_canonical();
        match Target::of(url)?.host {
            TargetHost::Ip(ip) if ip == addr => Ok(()),
            TargetHost::Ip(_) => Err(EgressDenied::AddressMismatch { addr }),
            TargetHost::Name(_) => self.check_resolved(addr),
        }
    }

    /// The address rule for names: public, inside a network entry, or development loopback.
    fn check_resolved(&self, addr: IpAddr) -> Result<(), EgressDenied> {
        let addr = addr.to_canonical();
        let class = classify(addr);
        if class.is_public()
            || (self.dev_mode && class == AddrClass::Loopback)
            || self
                .entries
                .iter()
                .any(|e| matches!(e.host, HostPattern::Net(..)) && e.names_addr(addr))
        {
            Ok(())
        } else {
            Err(EgressDenied::RefusedAddress { addr, class })
        }
    }

    /// Whether `name` (as the resolver sees it) may be resolved at all.
    fn check_name(&self, name: &str) -> Result<(), EgressDenied> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if !is_reserved_name(&name) || (self.dev_mode && is_loopback_name(&name)) {
            return Ok(());
        }
        let named = self
            .entries
            .iter()
            .any(|e| matches!(&e.host, HostPattern::Name(n) if *n == name));
        if named {
            Ok(())
        } else {
            Err(EgressDenied::ReservedName { host: name })
        }
    }

    /// The permitted subset of `addrs` resolved for `name`, or why there is none.
    pub fn filter_resolved(
        &self,
        name: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, EgressDenied> {
        self.check_name(name)?;
        let allowed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| self.check_resolved(a.ip()).is_ok())
            .collect();
        if allowed.is_empty() {
            Err(EgressDenied::NoAllowedAddress {
                host: name.trim_end_matches('.').to_ascii_lowercase(),
            })
        } else {
            Ok(allowed)
        }
    }
}

enum TargetHost {
    Name(String),
    Ip(IpAddr),
}

/// The host of `url` as the policy judges it: a name lowercased (the `url` crate applied IDNA)
/// without its trailing dot, or an address, an IPv4-mapped IPv6 one as the IPv4 address it is.
fn judged_host(url: &Url) -> Result<TargetHost, EgressDenied> {
    match url.host() {
        Some(Host::Domain(d)) => {
            let name = d.trim_end_matches('.').to_ascii_lowercase();
            if name.is_empty() {
                return Err(EgressDenied::NoHost);
            }
            Ok(TargetHost::Name(name))
        }
        Some(Host::Ipv4(v4)) => Ok(TargetHost::Ip(IpAddr::V4(v4))),
        Some(Host::Ipv6(v6)) => Ok(TargetHost::Ip(IpAddr::V6(v6).to_canonical())),
        None => Err(EgressDenied::NoHost),
    }
}

/// `url`'s host as the policy judged it, written for an origin: a name, an IPv4 address, or
/// a bracketed IPv6 address (`None` without a host).
pub(crate) fn judged_origin_host(url: &Url) -> Option<String> {
    Some(match judged_host(url).ok()? {
        TargetHost::Name(name) => name,
        TargetHost::Ip(IpAddr::V4(v4)) => v4.to_string(),
        TargetHost::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
    })
}

struct Target {
    scheme: Scheme,
    host: TargetHost,
    port: u16,
    origin: String,
}

impl Target {
    fn of(url: &Url) -> Result<Self, EgressDenied> {
        let scheme = match url.scheme() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            other => {
                return Err(EgressDenied::Scheme {
                    scheme: other.to_owned(),
                });
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(EgressDenied::Credentials);
        }
        let port = url.port().unwrap_or(scheme.default_port());
        let host = judged_host(url)?;
        // Messages show an address as it was written.
        let shown = match (&host, url.host()) {
            (_, Some(Host::Ipv6(v6))) => format!("[{v6}]"),
            (TargetHost::Name(name), _) => name.clone(),
            (TargetHost::Ip(ip), _) => ip.to_string(),
        };
        Ok(Self {
            scheme,
            host,
            port,
            origin: format!("{}://{shown}:{port}", scheme.name()),
        })
    }

    fn not_allowed(&self) -> EgressDenied {
        EgressDenied::NotAllowed {
            origin: self.origin.clone(),
        }
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;
