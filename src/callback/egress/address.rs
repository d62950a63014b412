//! The classes of IP addresses the egress policy refuses unless an entry names them, in every
//! form that reaches them (IPv6 forms embedding an IPv4 address take its class).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of address an IP is, for the egress policy. Everything but
/// [`AddrClass::Public`] is refused unless an entry names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrClass {
    /// Globally routable unicast.
    Public,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918, deprecated IPv6 site-local, local-use NAT64.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT (also where some clouds put metadata).
    SharedCgnat,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// Cloud metadata endpoints.
    Metadata,
    /// `fc00::/7`.
    UniqueLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// The documentation ranges.
    Documentation,
    /// Everything else that is not global unicast (benchmarking, IETF assignments, class E,
    /// Teredo, discard, IPv4-compatible IPv6, outside 2000::/3).
    Reserved,
}

impl AddrClass {
    /// Whether this class may be connected to without an entry naming it.
    pub fn is_public(self) -> bool {
        self == AddrClass::Public
    }
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddrClass::Public => "public",
            AddrClass::Unspecified => "unspecified",
            AddrClass::Loopback => "loopback",
            AddrClass::Private => "private",
            AddrClass::SharedCgnat => "shared (CGNAT)",
            AddrClass::LinkLocal => "link-local",
            AddrClass::Metadata => "cloud metadata",
            AddrClass::UniqueLocal => "unique-local",
            AddrClass::Multicast => "multicast",
            AddrClass::Broadcast => "broadcast",
            AddrClass::Documentation => "documentation",
            AddrClass::Reserved => "reserved",
        })
    }
}

pub(super) fn in_v4(ip: u32, net: [u8; 4], prefix: u32) -> bool {
    let net = u32::from_be_bytes(net);
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    ip & mask == net & mask
}

pub(super) fn in_v6(ip: u128, net: u128, prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    ip & mask == net & mask
}

/// Classifies an IPv4 address.
pub fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let n = u32::from(ip);
    let table: &[([u8; 4], u32, AddrClass)] = &[
        ([169, 254, 169, 254], 32, AddrClass::Metadata),
        // Azure's platform endpoint (wireserver) sits in public space.
        ([168, 63, 129, 16], 32, AddrClass::Metadata),
        ([0, 0, 0, 0], 8, AddrClass::Unspecified),
        ([10, 0, 0, 0], 8, AddrClass::Private),
        ([100, 64, 0, 0], 10, AddrClass::SharedCgnat),
        ([127, 0, 0, 0], 8, AddrClass::Loopback),
        ([169, 254, 0, 0], 16, AddrClass::LinkLocal),
        ([172, 16, 0, 0], 12, AddrClass::Private),
        ([192, 0, 0, 0], 24, AddrClass::Reserved),
        ([192, 0, 2, 0], 24, AddrClass::Documentation),
        ([192, 88, 99, 0], 24, AddrClass::Reserved),
        ([192, 168, 0, 0], 16, AddrClass::Private),
        ([198, 18, 0, 0], 15, AddrClass::Reserved),
        ([198, 51, 100, 0], 24, AddrClass::Documentation),
        ([203, 0, 113, 0], 24, AddrClass::Documentation),
        ([224, 0, 0, 0], 4, AddrClass::Multicast),
        ([255, 255, 255, 255], 32, AddrClass::Broadcast),
        ([240, 0, 0, 0], 4, AddrClass::Reserved),
    ];
    table
        .iter()
        .find(|(net, prefix, _)| in_v4(n, *net, *prefix))
        .map_or(AddrClass::Public, |(_, _, class)| *class)
}

/// The IPv4 address an IPv6 address embeds, for the forms that reach it: mapped
/// (`::ffff:a.b.c.d`), translated (`::ffff:0:a.b.c.d`), compatible (`::a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::`).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let n = u128::from(ip);
    let low32 = Ipv4Addr::from((n & 0xffff_ffff) as u32);
    if in_v6(n, 0xffff_0000_0000, 96)
        || in_v6(n, 0xffff_0000_0000_0000, 96)
        || in_v6(n, 0x0064_ff9b << 96, 96)
    {
        return Some(low32);
    }
    if in_v6(n, 0, 96) && n > 1 {
        return Some(low32);
    }
    if in_v6(n, 0x2002 << 112, 16) {
        return Some(Ipv4Addr::from(((n >> 80) & 0xffff_ffff) as u32));
    }
    None
}

/// Classifies an IPv6 address; forms embedding an IPv4 address take its class.
pub fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    let n = u128::from(ip);
    if n == 0 {
        return AddrClass::Unspecified;
    }
    if n == 1 {
        return AddrClass::Loopback;
    }
    if let Some(v4) = embedded_v4(ip) {
        let class = classify_v4(v4);
        // IPv4-compatible addresses are deprecated: never public.
        let compatible = in_v6(n, 0, 96);
        return if compatible && class.is_public() {
            AddrClass::Reserved
        } else {
            class
        };
    }
    let metadata = u128::from(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254));
    let table: &[(u128, u32, AddrClass)] = &[
        (metadata, 128, AddrClass::Metadata),
        (0x0064_ff9b_0001 << 80, 48, AddrClass::Private),
        (0x0100 << 112, 64, AddrClass::Reserved),
        (0x2001_0db8 << 96, 32, AddrClass::Documentation),
        (0x3fff << 112, 20, AddrClass::Documentation),
        (0x2001 << 112, 23, AddrClass::Reserved),
        (0xfc00 << 112, 7, AddrClass::UniqueLocal),
        (0xfe80 << 112, 10, AddrClass::LinkLocal),
        (0xfec0 << 112, 10, AddrClass::Private),
        (0xff00 << 112, 8, AddrClass::Multicast),
    ];
    if let Some((_, _, class)) = table.iter().find(|(net, p, _)| in_v6(n, *net, *p)) {
        return *class;
    }
    if in_v6(n, 0x2000 << 112, 3) {
        AddrClass::Public
    } else {
        AddrClass::Reserved
    }
}

/// Classifies an address.
pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}
