//! Hosts as the egress proxy and `autotool keys allow` understand them, and whether a tool may
//! reach one.
//!
//! Pure functions and data, no system calls (the proxy in the supervisor performs them):
//! - [`canonical_host`]: one spelling per host. Case, one trailing dot, IDNA (UTS #46, as browsers
//!   do it), numeric IPv4 spellings (`127.1`, `0x7f.0.0.1`, `0177.0.0.1`, `2130706433`) and
//!   IPv4-mapped IPv6 all fold to one [`Host`]; NUL, CR, LF, `@`, `%`, `/`, white space, empty
//!   labels and over-long names are refused. [`parse_authority`] adds the port (`host:port`,
//!   `[v6]:port`).
//! - [`AllowRule`]: one entry of a key's allowlist as the user types it to
//!   `autotool keys allow NAME host…`: `api.x.com` (exactly that host), `*.x.com` (any subdomain,
//!   not `x.com` itself), with `:port` for a port other than 443 and 80. The host's loopback is
//!   one host, `localhost:PORT`, however it is spelt (`127.0.0.1:PORT`, `[::1]:PORT`), and always
//!   with its port.
//! - [`KeyLists`] and [`decide`]: a tool may reach the intersection of the allowlists of the keys
//!   it holds (a key without a list does not narrow it). The host's loopback is a host like any
//!   other, stricter only in that no list at all does not open it: a port there is reachable
//!   when it is an [`ApiBasePorts`] port (a `*_API_BASE` override the user set in serve's
//!   environment: allowed for every tool), or when at least one key the tool holds has a list
//!   and every such list names `localhost:PORT`. A refusal is data ([`Denial`]) that names the
//!   tool, the keys, the host and what the user can do to allow it.
//! - [`forbidden_class`] and [`check_address`]: the addresses the proxy never dials (private,
//!   loopback unless the target *is* localhost, link-local, shared CGNAT space, unique-local,
//!   multicast, unspecified, broadcast, reserved ranges, cloud metadata endpoints), IPv4 embedded
//!   in IPv6 included.
//!
//! Layout: `name` (canonical hosts and authorities), `allow` (allowlist entries and lists),
//! `decide` (the decision and its refusal), `address` (addresses never dialled).

mod address;
mod allow;
mod decide;
mod name;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

pub use address::{ForbiddenAddress, check_address, forbidden_class, is_forbidden};
pub use allow::{AllowRule, HostPattern, KeyAllowlist, KeyLists, RuleError, widens};
pub use decide::{
    API_BASE_SUFFIX, ApiBasePorts, Decision, Denial, KeyDenial, LoopbackDenial, decide,
    loopback_port_of_url,
};
pub use name::{Host, HostError, canonical_host, parse_authority, parse_port};

/// Longest host name DNS carries, without the trailing dot.
pub const MAX_NAME_LEN: usize = 253;
/// Longest label DNS carries.
pub const MAX_LABEL_LEN: usize = 63;
/// The ports an allowlist entry without `:port` covers.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];
/// The one name that means the host's own loopback.
pub const LOCALHOST: &str = "localhost";
