//! One entry of the allow list, `[scheme://]host[/prefix][:port]`, parsed, and what it names:
//! a scheme, a host pattern (name, `*.domain`, IP literal or network) and a port rule.

use std::net::IpAddr;

use url::Host;

use super::address::{in_v4, in_v6};
use super::{EgressConfigError, RESERVED_NAMES};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scheme {
    Https,
    Http,
}

impl Scheme {
    pub(super) fn name(self) -> &'static str {
        match self {
            Scheme::Https => "https",
            Scheme::Http => "http",
        }
    }

    pub(super) fn default_port(self) -> u16 {
        match self {
            Scheme::Https => 443,
            Scheme::Http => 80,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostPattern {
    /// An exact, normalized name (no trailing dot).
    Name(String),
    /// `*.domain`, stored as `.domain`.
    Below(String),
    /// An IP literal (canonical).
    Ip(IpAddr),
    /// A network.
    Net(IpAddr, u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PortRule {
    Default,
    Any,
    Exact(u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) scheme: Scheme,
    pub(super) host: HostPattern,
    pub(super) port: PortRule,
}

impl Entry {
    pub(super) fn parse(raw: &str) -> Result<Self, EgressConfigError> {
        let entry = || raw.to_owned();
        let host_err = |reason| EgressConfigError::Host {
            entry: entry(),
            reason,
        };
        let (scheme, rest) = match raw.split_once("://") {
            Some((s, rest)) => match s.to_ascii_lowercase().as_str() {
                "https" => (Scheme::Https, rest),
                "http" => (Scheme::Http, rest),
                _ => return Err(EgressConfigError::Scheme { entry: entry() }),
            },
            None => (Scheme::Https, raw),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(host_err("no host"));
        }
        if rest.contains(['@', '?', '#', '\\']) {
            return Err(host_err(
                "only a host, an optional prefix length and a port",
            ));
        }
        // host[/prefix][:port]; IPv6 in brackets.
        let (host, after) = if let Some(inner) = rest.strip_prefix('[') {
            let (v6, after) = inner
                .split_once(']')
                .ok_or_else(|| host_err("unclosed ["))?;
            (format!("[{v6}]"), after)
        } else {
            match rest.find(['/', ':']) {
                Some(i) => (rest[..i].to_owned(), &rest[i..]),
                None => (rest.to_owned(), ""),
            }
        };
        let (prefix, port) = match after.strip_prefix('/') {
            Some(p) => match p.split_once(':') {
                Some((prefix, port)) => (Some(prefix), Some(port)),
                None => (Some(p), None),
            },
            None if after.is_empty() => (None, None),
            None => match after.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return Err(host_err("unexpected text after the host")),
            },
        };
        let port = match port {
            None => PortRule::Default,
            Some("*") => PortRule::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => PortRule::Exact(n),
                _ => return Err(EgressConfigError::Port { entry: entry() }),
            },
        };
        let host = if let Some(domain) = host.strip_prefix("*.") {
            match Host::parse(domain) {
                Ok(Host::Domain(d)) if !d.contains('*') && prefix.is_none() => {
                    let d = d.trim_end_matches('.');
                    if d.is_empty() {
                        return Err(host_err("a wildcard needs a domain"));
                    }
                    HostPattern::Below(format!(".{d}"))
                }
                _ => return Err(host_err("a wildcard is *. followed by a domain name")),
            }
        } else {
            match Host::parse(&host) {
                Ok(Host::Domain(d)) => {
                    let d = d.trim_end_matches('.');
                    if d.is_empty() || d.contains('*') || prefix.is_some() {
                        return Err(host_err(
                            "a name, *.domain, an IP address or a network (10.0.0.0/8)",
                        ));
                    }
                    HostPattern::Name(d.to_owned())
                }
                Ok(Host::Ipv4(v4)) => ip_pattern(IpAddr::V4(v4), prefix, host_err)?,
                Ok(Host::Ipv6(v6)) => ip_pattern(IpAddr::V6(v6), prefix, host_err)?,
                Err(_) => return Err(host_err("not a valid host")),
            }
        };
        Ok(Self { scheme, host, port })
    }

    pub(super) fn port_matches(&self, port: u16) -> bool {
        match self.port {
            PortRule::Default => port == self.scheme.default_port(),
            PortRule::Any => true,
            PortRule::Exact(p) => p == port,
        }
    }

    pub(super) fn matches_name(&self, name: &str) -> bool {
        match &self.host {
            HostPattern::Name(n) => n == name,
            HostPattern::Below(suffix) => name.len() > suffix.len() && name.ends_with(suffix),
            HostPattern::Ip(_) | HostPattern::Net(..) => false,
        }
    }

    pub(super) fn names_addr(&self, ip: IpAddr) -> bool {
        match self.host {
            HostPattern::Ip(own) => own == ip,
            HostPattern::Net(net, prefix) => net_contains(net, prefix, ip),
            HostPattern::Name(_) | HostPattern::Below(_) => false,
        }
    }
}

pub(super) fn ip_pattern(
    ip: IpAddr,
    prefix: Option<&str>,
    host_err: impl Fn(&'static str) -> EgressConfigError,
) -> Result<HostPattern, EgressConfigError> {
    let ip = ip.to_canonical();
    let Some(prefix) = prefix else {
        return Ok(HostPattern::Ip(ip));
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    match prefix.parse::<u8>() {
        Ok(p) if p <= max && prefix.bytes().all(|b| b.is_ascii_digit()) => {
            Ok(HostPattern::Net(ip, p))
        }
        _ => Err(host_err("the prefix length is out of range")),
    }
}

pub(super) fn net_contains(net: IpAddr, prefix: u8, ip: IpAddr) -> bool {
    match (net, ip.to_canonical()) {
        (IpAddr::V4(net), IpAddr::V4(ip)) => in_v4(u32::from(ip), net.octets(), u32::from(prefix)),
        (IpAddr::V6(net), IpAddr::V6(ip)) => {
            in_v6(u128::from(ip), u128::from(net), u32::from(prefix))
        }
        _ => false,
    }
}

pub(super) fn is_reserved_name(name: &str) -> bool {
    RESERVED_NAMES.contains(&name) || name.ends_with(".localhost")
}

pub(super) fn is_loopback_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}
