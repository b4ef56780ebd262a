//! The addresses the proxy never dials: private, loopback unless the target is localhost,
//! link-local, CGNAT, unique-local, multicast, reserved and metadata ranges, IPv4 embedded in
//! IPv6 included.

use super::name::Host;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is never dialled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ForbiddenAddress {
    /// 0.0.0.0/8, `::`.
    Unspecified,
    /// 127.0.0.0/8, `::1`, reached by another name than localhost.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, deprecated IPv6 site-local, local-use NAT64.
    Private,
    /// 100.64.0.0/10 (carrier-grade NAT).
    SharedAddressSpace,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// fc00::/7.
    UniqueLocal,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 169.254.169.254, fd00:ec2::254, 100.100.100.200, 168.63.129.16.
    CloudMetadata,
    /// Documentation, benchmarking, future-use and other special-purpose ranges, IPv4-compatible
    /// IPv6, Teredo.
    Reserved,
}

impl ForbiddenAddress {
    /// How to name the class in a refusal.
    pub fn describe(self) -> &'static str {
        match self {
            ForbiddenAddress::Unspecified => "an unspecified address",
            ForbiddenAddress::Loopback => {
                "a loopback address (reach the host's loopback as `localhost` instead)"
            }
            ForbiddenAddress::Private => "a private-network address",
            ForbiddenAddress::SharedAddressSpace => "a carrier-grade NAT (100.64.0.0/10) address",
            ForbiddenAddress::LinkLocal => "a link-local address",
            ForbiddenAddress::UniqueLocal => "a unique-local IPv6 address",
            ForbiddenAddress::Multicast => "a multicast address",
            ForbiddenAddress::Broadcast => "the broadcast address",
            ForbiddenAddress::CloudMetadata => "a cloud metadata endpoint",
            ForbiddenAddress::Reserved => "a reserved, special-purpose address",
        }
    }
}

impl fmt::Display for ForbiddenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The class of an address the proxy never dials for a name, or `None` for a public one.
pub fn forbidden_class(ip: IpAddr) -> Option<ForbiddenAddress> {
    match ip {
        IpAddr::V4(a) => v4_class(a),
        IpAddr::V6(a) => v6_class(a),
    }
}

/// Whether the proxy refuses `ip` for any target but localhost.
pub fn is_forbidden(ip: IpAddr) -> bool {
    forbidden_class(ip).is_some()
}

/// Whether `ip`, an address `target` resolved to, may be dialled: a loopback address only when
/// the target is localhost (the name, 127.0.0.0/8 or `::1`), every other forbidden class never.
pub fn check_address(target: &Host, ip: IpAddr) -> Result<(), ForbiddenAddress> {
    match forbidden_class(ip) {
        None => Ok(()),
        Some(ForbiddenAddress::Loopback) if target.is_localhost() => Ok(()),
        Some(class) => Err(class),
    }
}

fn in_v4(a: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(a) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn v4_class(a: Ipv4Addr) -> Option<ForbiddenAddress> {
    use ForbiddenAddress::*;
    const METADATA: [[u8; 4]; 3] = [
        [169, 254, 169, 254], // AWS, GCP, Azure, OpenStack, …
        [100, 100, 100, 200], // Alibaba Cloud
        [168, 63, 129, 16],   // Azure WireServer (a public address)
    ];
    const TABLE: [([u8; 4], u32, ForbiddenAddress); 17] = [
        ([255, 255, 255, 255], 32, Broadcast),
        ([0, 0, 0, 0], 8, Unspecified),
        ([127, 0, 0, 0], 8, Loopback),
        ([10, 0, 0, 0], 8, Private),
        ([172, 16, 0, 0], 12, Private),
        ([192, 168, 0, 0], 16, Private),
        ([100, 64, 0, 0], 10, SharedAddressSpace),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([224, 0, 0, 0], 4, Multicast),
        ([240, 0, 0, 0], 4, Reserved),
        ([192, 0, 0, 0], 24, Reserved),
        ([192, 0, 2, 0], 24, Reserved),
        ([192, 88, 99, 0], 24, Reserved),
        ([198, 18, 0, 0], 15, Reserved),
        ([198, 51, 100, 0], 24, Reserved),
        ([203, 0, 113, 0], 24, Reserved),
        ([192, 31, 196, 0], 24, Reserved),
    ];
    if METADATA.iter().any(|m| a.octets() == *m) {
        return Some(CloudMetadata);
    }
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v4(a, *net, *prefix))
        .map(|(_, _, class)| *class)
}

fn in_v6(a: Ipv6Addr, net: [u16; 8], prefix: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
    u128::from(a) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn v6_class(a: Ipv6Addr) -> Option<ForbiddenAddress> {
    use ForbiddenAddress::*;
    if a == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some(CloudMetadata);
    }
    if a.is_unspecified() {
        return Some(Unspecified);
    }
    if a.is_loopback() {
        return Some(Loopback);
    }
    if let Some(v4) = a.to_ipv4_mapped() {
        return v4_class(v4);
    }
    let bits = u128::from(a);
    // IPv4 carried inside IPv6: NAT64 (64:ff9b::/96) in the low 32 bits, 6to4 (2002::/16) in
    // bits 16..48. Such an address reaches whatever the IPv4 address does.
    if in_v6(a, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return v4_class(Ipv4Addr::from((bits & 0xffff_ffff) as u32));
    }
    if in_v6(a, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return v4_class(Ipv4Addr::from((bits >> 80) as u32));
    }
    const TABLE: [([u16; 8], u32, ForbiddenAddress); 10] = [
        ([0, 0, 0, 0, 0, 0, 0, 0], 96, Reserved), // IPv4-compatible (deprecated)
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Multicast),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Private), // site-local (deprecated)
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, UniqueLocal),
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, Private), // local-use NAT64
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Reserved), // documentation
        ([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, Reserved),   // Teredo
        ([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48, Reserved), // benchmarking
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Reserved),    // discard-only
    ];
    TABLE
        .iter()
        .find(|(net, prefix, _)| in_v6(a, *net, *prefix))
        .map(|(_, _, class)| *class)
}
