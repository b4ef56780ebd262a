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
//!   An entry naming a public suffix (`*.com`, `*.co.uk`, `*.github.io`, or `co.uk` itself) is
//!   refused ([`is_public_suffix`], the Public Suffix List built into the `psl` crate): the names
//!   under one belong to unrelated owners, so such an entry would send the key to all of them.
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

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Longest host name DNS carries, without the trailing dot.
pub const MAX_NAME_LEN: usize = 253;
/// Longest label DNS carries.
pub const MAX_LABEL_LEN: usize = 63;
/// The ports an allowlist entry without `:port` covers.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];
/// The one name that means the host's own loopback.
pub const LOCALHOST: &str = "localhost";

/// A host in its one canonical spelling.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// A DNS name: lower-case ASCII (international names in their `xn--` form), no trailing dot,
    /// labels of letters, digits, `-` and `_`. Never ends in a number.
    Name(String),
    /// An IPv4 address, however it was spelled (IPv4-mapped IPv6 included).
    V4(Ipv4Addr),
    /// An IPv6 address that is not IPv4-mapped.
    V6(Ipv6Addr),
}

impl Host {
    /// The host's own loopback: the name `localhost`, 127.0.0.0/8 or `::1`.
    pub fn is_localhost(&self) -> bool {
        match self {
            Host::Name(n) => n == LOCALHOST,
            Host::V4(a) => a.is_loopback(),
            Host::V6(a) => a.is_loopback(),
        }
    }

    /// The address, for a host given as one.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Host::Name(_) => None,
            Host::V4(a) => Some(IpAddr::V4(*a)),
            Host::V6(a) => Some(IpAddr::V6(*a)),
        }
    }

    /// The name, for a host given as one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Host::Name(n) => Some(n),
            _ => None,
        }
    }

    /// `host` when `port` is a default port (443 or 80), `host:port` otherwise: the way the user
    /// writes it in an allowlist.
    pub fn with_port(&self, port: u16) -> String {
        if DEFAULT_PORTS.contains(&port) {
            self.to_string()
        } else {
            format!("{self}:{port}")
        }
    }

    /// The allowlist entry that names exactly this host on `port`: [`Self::with_port`], except
    /// that every spelling of the host's loopback is `localhost:PORT`, always with its port.
    pub fn entry(&self, port: u16) -> String {
        if self.is_localhost() {
            format!("{LOCALHOST}:{port}")
        } else {
            self.with_port(port)
        }
    }
}

impl fmt::Display for Host {
    /// Names and IPv4 as they are; IPv6 in brackets, as in a URL.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::V4(a) => write!(f, "{a}"),
            Host::V6(a) => write!(f, "[{a}]"),
        }
    }
}

impl std::str::FromStr for Host {
    type Err = HostError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        canonical_host(s)
    }
}

/// Why a string is not a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("the host is empty")]
    Empty,
    #[error("the host {host:?} contains {what}, which no host name may hold")]
    Character { host: String, what: &'static str },
    #[error("the host {0:?} has an empty label (two dots in a row, or a dot at the start)")]
    EmptyLabel(String),
    #[error("the host name is {0} characters long; DNS allows at most {MAX_NAME_LEN}")]
    TooLong(usize),
    #[error("the label {0:?} is longer than the {MAX_LABEL_LEN} characters DNS allows")]
    LabelTooLong(String),
    #[error("{0:?} is not a valid international host name")]
    Idna(String),
    #[error("{0:?} ends in a number but is not a valid IPv4 address")]
    Ipv4(String),
    #[error("{0:?} is not a valid IPv6 address (an IPv6 host goes in brackets: `[::1]:8080`)")]
    Ipv6(String),
    #[error("{0:?}: the port must be a number from 1 to 65535")]
    Port(String),
}

/// The canonical form of `input`, a host without a port: see the module documentation.
pub fn canonical_host(input: &str) -> Result<Host, HostError> {
    if input.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(what) = input.chars().find_map(forbidden_char) {
        return Err(HostError::Character {
            host: input.to_owned(),
            what,
        });
    }
    if let Some(inner) = input.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| HostError::Ipv6(input.to_owned()))?;
        return parse_ipv6(inner).ok_or_else(|| HostError::Ipv6(input.to_owned()));
    }
    if input.contains(':') {
        return match parse_ipv6(input) {
            Some(host) => Ok(host),
            None if input.matches(':').count() == 1 => Err(HostError::Character {
                host: input.to_owned(),
                what: "`:` (give the port apart from the host)",
            }),
            None => Err(HostError::Ipv6(input.to_owned())),
        };
    }
    if input.contains(['[', ']']) {
        return Err(HostError::Ipv6(input.to_owned()));
    }
    // UTS #46 maps case, full-width forms and ideographic dots, turns Unicode labels into
    // `xn--` labels and checks existing `xn--` labels; URL-forbidden code points are errors.
    let ascii = idna::domain_to_ascii_cow(input.as_bytes(), idna::AsciiDenyList::URL)
        .map_err(|_| HostError::Idna(input.to_owned()))?;
    let name = ascii.strip_suffix('.').unwrap_or(&ascii);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(c) = name
        .chars()
        .find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '-' | '_' | '.'))
    {
        return Err(HostError::Character {
            host: input.to_owned(),
            what: describe_char(c),
        });
    }
    if name.split('.').any(str::is_empty) {
        return Err(HostError::EmptyLabel(input.to_owned()));
    }
    if ends_in_number(name) {
        return parse_ipv4(name)
            .map(Host::V4)
            .ok_or_else(|| HostError::Ipv4(input.to_owned()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(HostError::TooLong(name.len()));
    }
    if let Some(label) = name.split('.').find(|l| l.len() > MAX_LABEL_LEN) {
        return Err(HostError::LabelTooLong(label.to_owned()));
    }
    Ok(Host::Name(name.to_owned()))
}

/// `host[:port]` or `[v6][:port]`: the host canonicalised, and the port when one is given.
pub fn parse_authority(input: &str) -> Result<(Host, Option<u16>), HostError> {
    let (host, port) = if input.starts_with('[') {
        match input.find(']') {
            Some(end) => {
                let (host, rest) = input.split_at(end + 1);
                match rest {
                    "" => (host, None),
                    _ => match rest.strip_prefix(':') {
                        Some(port) => (host, Some(port)),
                        None => return Err(HostError::Ipv6(input.to_owned())),
                    },
                }
            }
            None => return Err(HostError::Ipv6(input.to_owned())),
        }
    } else {
        match input.matches(':').count() {
            0 => (input, None),
            1 => match input.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (input, None),
            },
            _ => return Err(HostError::Ipv6(input.to_owned())),
        }
    };
    let port = port.map(parse_port).transpose()?;
    Ok((canonical_host(host)?, port))
}

/// A port as written in an authority: 1 to 5 digits, 1..=65535.
pub fn parse_port(s: &str) -> Result<u16, HostError> {
    let digits = !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
    match s.parse::<u16>() {
        Ok(port) if digits && port != 0 => Ok(port),
        _ => Err(HostError::Port(s.to_owned())),
    }
}

/// Characters refused before any other processing, with what to call them in an error.
fn forbidden_char(c: char) -> Option<&'static str> {
    match c {
        '\0' => Some("a NUL byte"),
        '\r' => Some("a carriage return"),
        '\n' => Some("a line feed"),
        '@' => Some("`@` (user information)"),
        '%' => Some("`%` (percent-encoding or an IPv6 zone)"),
        '/' | '\\' => Some("a slash (a path)"),
        '?' | '#' => Some("`?` or `#` (a query or fragment)"),
        c if c.is_whitespace() => Some("white space"),
        c if c.is_control() => Some("a control character"),
        _ => None,
    }
}

fn describe_char(c: char) -> &'static str {
    forbidden_char(c).unwrap_or(match c {
        '*' => "`*` (a wildcard belongs only at the start of an allowlist entry: `*.x.com`)",
        _ => "a character outside letters, digits, `-`, `_` and `.`",
    })
}

fn parse_ipv6(s: &str) -> Option<Host> {
    let addr: Ipv6Addr = s.parse().ok()?;
    Some(match addr.to_ipv4_mapped() {
        Some(v4) => Host::V4(v4),
        None => Host::V6(addr),
    })
}

/// The WHATWG URL "ends in a number" test: such a host must be an IPv4 address or nothing.
fn ends_in_number(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or_default();
    !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || ipv4_number(last).is_some())
}

/// One part of a numeric IPv4 spelling: `0x` hexadecimal, leading-zero octal, or decimal.
fn ipv4_number(part: &str) -> Option<u64> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        return (radix == 16).then_some(0);
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// The WHATWG URL IPv4 parser: one to four parts; every part but the last is one byte, the
/// last fills the remaining bytes (`127.1` = 127.0.0.1, `2130706433` = 127.0.0.1).
fn parse_ipv4(name: &str) -> Option<Ipv4Addr> {
    let parts: Vec<u64> = name.split('.').map(ipv4_number).collect::<Option<_>>()?;
    let (last, init) = parts.split_last()?;
    if parts.len() > 4 || init.iter().any(|&p| p > 255) {
        return None;
    }
    let room = 8 * (5 - parts.len() as u32);
    if *last >= 1u64 << room {
        return None;
    }
    let mut value = *last;
    for (i, part) in init.iter().enumerate() {
        value += part << (8 * (3 - i as u32));
    }
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

// ---------------------------------------------------------------------------------------------
// Allowlists

/// Which hosts an allowlist entry covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    /// Exactly this host.
    Exact(Host),
    /// Any subdomain of this name (at any depth), not the name itself.
    SubdomainsOf(String),
}

/// One entry of a key's allowlist: `api.x.com`, `*.x.com`, `api.x.com:8443`, `[::1]:9000`.
/// Without a port it covers 443 and 80; with one, only that port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllowRule {
    pub host: HostPattern,
    pub port: Option<u16>,
}

/// Why an allowlist entry is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("an allowlist entry is empty")]
    Empty,
    #[error(
        "{0:?}: give the host alone, without a scheme or a path (for example `api.x.com`, or `api.x.com:8443` for another port)"
    )]
    NotAHost(String),
    #[error("{0:?}: `*` may only stand for subdomains, at the start: `*.x.com`")]
    Wildcard(String),
    #[error("{0:?}: `*.` must be followed by a domain name, not an address")]
    WildcardAddress(String),
    #[error(
        "{0:?}: the host's loopback needs its port (`localhost:8080`): a tool reaches only the \
         local ports you name, since a local proxy, tunnel or service could carry a key anywhere"
    )]
    LoopbackPort(String),
    #[error("{entry:?}: {source}")]
    Host {
        entry: String,
        #[source]
        source: HostError,
    },
    #[error(
        "{entry:?}: `{suffix}` is a public suffix (on the Public Suffix List): the names under it \
         belong to unrelated owners, so the key could be sent to any of them. Name the service's \
         own hosts instead, for example `api.example{dot_suffix}` or `*.example{dot_suffix}`"
    )]
    PublicSuffix {
        entry: String,
        suffix: String,
        /// `.{suffix}`, for the examples of the message.
        dot_suffix: String,
    },
}

/// Whether `name` (a canonical host name: lower case, ASCII) is itself a public suffix on the
/// Public Suffix List, ICANN's section or the private one (`com`, `co.uk`, `github.io`,
/// `s3.amazonaws.com`): names registered under it belong to unrelated owners. A name under no
/// rule of the list (`internal`, `corp`, a single-label intranet host) is not one: the list's
/// implicit `*` rule is not applied, so private names stay usable.
pub fn is_public_suffix(name: &str) -> bool {
    use psl::Psl;
    psl::List
        .suffix(name.as_bytes())
        .is_some_and(|s| s.is_known() && s.as_bytes() == name.as_bytes())
}

impl AllowRule {
    /// Parse an entry as the user types it.
    pub fn parse(entry: &str) -> Result<AllowRule, RuleError> {
        if entry.is_empty() {
            return Err(RuleError::Empty);
        }
        if entry.contains("://") || entry.contains('/') {
            return Err(RuleError::NotAHost(entry.to_owned()));
        }
        let (wildcard, rest) = match entry.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, entry),
        };
        if rest.contains('*') {
            return Err(RuleError::Wildcard(entry.to_owned()));
        }
        let (host, port) = parse_authority(rest).map_err(|source| RuleError::Host {
            entry: entry.to_owned(),
            source,
        })?;
        let host = match (wildcard, host) {
            // Every spelling of the loopback is one host, and only the ports named are open.
            (false, host) if host.is_localhost() => match port {
                Some(_) => HostPattern::Exact(Host::Name(LOCALHOST.to_owned())),
                None => return Err(RuleError::LoopbackPort(entry.to_owned())),
            },
            (false, host) => HostPattern::Exact(host),
            (true, Host::Name(name)) => HostPattern::SubdomainsOf(name),
            (true, _) => return Err(RuleError::WildcardAddress(entry.to_owned())),
        };
        let name = match &host {
            HostPattern::Exact(Host::Name(name)) | HostPattern::SubdomainsOf(name) => Some(name),
            HostPattern::Exact(_) => None,
        };
        if let Some(name) = name.filter(|n| is_public_suffix(n)) {
            return Err(RuleError::PublicSuffix {
                entry: entry.to_owned(),
                suffix: name.clone(),
                dot_suffix: format!(".{name}"),
            });
        }
        Ok(AllowRule { host, port })
    }

    /// Whether the entry covers `host` on `port`.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok
            && match (&self.host, host) {
                (HostPattern::Exact(h), host) => {
                    h == host || (h.is_localhost() && host.is_localhost())
                }
                (HostPattern::SubdomainsOf(suffix), Host::Name(name)) => is_subdomain(name, suffix),
                (HostPattern::SubdomainsOf(_), _) => false,
            }
    }
}

impl AllowRule {
    /// Whether this entry admits everything `other` admits (so replacing `other` by it does not
    /// narrow a list, and a list of such entries is no wider than one holding this).
    pub fn covers(&self, other: &AllowRule) -> bool {
        let ports_ok = match (self.port, other.port) {
            (None, None) => true,
            (None, Some(p)) => DEFAULT_PORTS.contains(&p),
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        ports_ok
            && match (&self.host, &other.host) {
                (HostPattern::Exact(a), HostPattern::Exact(b)) => a == b,
                (HostPattern::Exact(_), HostPattern::SubdomainsOf(_)) => false,
                (HostPattern::SubdomainsOf(suffix), HostPattern::Exact(Host::Name(name))) => {
                    is_subdomain(name, suffix)
                }
                (HostPattern::SubdomainsOf(_), HostPattern::Exact(_)) => false,
                (HostPattern::SubdomainsOf(a), HostPattern::SubdomainsOf(b)) => {
                    a == b || is_subdomain(b, a)
                }
            }
    }
}

/// Whether `name` is a subdomain of `suffix` (at any depth), not `suffix` itself.
fn is_subdomain(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix)
        .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
}

/// Whether an allowlist `new` lets a key go anywhere `old` did not (`None` is no list: any
/// host). Narrowing, reordering and respelling are not widening.
pub fn widens(new: Option<&[AllowRule]>, old: Option<&[AllowRule]>) -> bool {
    match (new, old) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(new), Some(old)) => new.iter().any(|n| !old.iter().any(|o| o.covers(n))),
    }
}

impl std::str::FromStr for AllowRule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AllowRule::parse(s)
    }
}

impl fmt::Display for AllowRule {
    /// The canonical spelling, which parses back to the same rule.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(h) => write!(f, "{h}")?,
            HostPattern::SubdomainsOf(n) => write!(f, "*.{n}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// One key a tool holds and where that key may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAllowlist {
    pub key: String,
    /// `None`: the key has no list and does not narrow where the tool may go.
    pub rules: Option<Vec<AllowRule>>,
}

impl KeyAllowlist {
    /// A key without a list.
    pub fn unrestricted(key: impl Into<String>) -> Self {
        KeyAllowlist {
            key: key.into(),
            rules: None,
        }
    }

    /// A key and its list as stored (`None` for no list); every entry must parse.
    pub fn parse<S: AsRef<str>>(
        key: impl Into<String>,
        hosts: Option<&[S]>,
    ) -> Result<Self, RuleError> {
        let rules = hosts
            .map(|hosts| {
                hosts
                    .iter()
                    .map(|h| AllowRule::parse(h.as_ref()))
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        Ok(KeyAllowlist {
            key: key.into(),
            rules,
        })
    }

    /// Whether this key may be sent to `host` on `port`.
    pub fn allows(&self, host: &Host, port: u16) -> bool {
        match &self.rules {
            None => true,
            Some(rules) => rules.iter().any(|r| r.matches(host, port)),
        }
    }
}

/// A tool and the keys it holds: what [`decide`] needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyLists {
    pub tool: String,
    pub keys: Vec<KeyAllowlist>,
}

impl KeyLists {
    /// A tool holding no keys: it may go anywhere public the address checks let it, and on
    /// the host's loopback only to the `*_API_BASE` ports ([`ApiBasePorts`]).
    pub fn new(tool: impl Into<String>) -> Self {
        KeyLists {
            tool: tool.into(),
            keys: Vec::new(),
        }
    }

    /// Add a key the tool holds.
    pub fn with_key(mut self, key: KeyAllowlist) -> Self {
        self.keys.push(key);
        self
    }
}

/// Whether a tool may reach a target. Ordered: `Allow < Deny`, so "strictest wins" is `max()`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Decision {
    /// A target on the list of every key the tool holds that has one; on the host's loopback,
    /// an [`ApiBasePorts`] port or one that such lists name.
    Allow,
    /// Left out by at least one key's list, or a loopback port nobody allowed.
    Deny(Denial),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow)
    }
}

/// A refusal: which tool, which keys, which target, and what the user can run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Denial {
    pub tool: String,
    /// The target as an allowlist entry would name it (`api.x.com`, `api.x.com:8443`,
    /// `localhost:8080`).
    pub target: String,
    /// The keys whose lists leave the target out, in the order the tool holds them.
    pub keys: Vec<KeyDenial>,
    /// Set when the target is a port on the host's loopback.
    pub loopback: Option<LoopbackDenial>,
}

/// One key whose list leaves the target out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyDenial {
    pub key: String,
    /// Its list, in canonical spelling.
    pub allowed: Vec<String>,
}

/// What a refusal of a port on the host's loopback needs besides the keys' lists.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LoopbackDenial {
    pub port: u16,
    /// The keys the tool holds without a list: they neither open nor narrow the loopback.
    pub unlisted: Vec<String>,
}

impl Denial {
    /// The commands that would allow the target: `autotool keys allow` replaces a key's list,
    /// so each keeps what the key already allows and adds the target.
    pub fn commands(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| {
                let mut cmd = format!("autotool keys allow {}", k.key);
                for host in k.allowed.iter().chain(std::iter::once(&self.target)) {
                    cmd.push(' ');
                    cmd.push_str(host);
                }
                cmd
            })
            .collect()
    }

    /// "A, which may only be sent to x and B, which may only be sent to y"
    fn write_keys(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                f.write_str(if i + 1 == self.keys.len() {
                    " and "
                } else {
                    ", "
                })?;
            }
            write!(
                f,
                "{}, which may only be sent to {}",
                k.key,
                k.allowed.join(", ")
            )?;
        }
        Ok(())
    }

    fn write_commands(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, cmd) in self.commands().iter().enumerate() {
            if i > 0 {
                f.write_str(" and ")?;
            }
            write!(f, "`{cmd}`")?;
        }
        Ok(())
    }

    fn list_word(&self) -> &'static str {
        if self.keys.len() == 1 {
            "that list"
        } else {
            "those lists"
        }
    }
}

impl fmt::Display for Denial {
    /// "weather holds TAVILY_API_KEY, which may only be sent to api.tavily.com; evil.example is
    /// not on that list. To allow it, the user can run `autotool keys allow TAVILY_API_KEY
    /// api.tavily.com evil.example`."
    ///
    /// On the loopback: "weather may not reach localhost:8080: a port on this machine's
    /// loopback is reachable only when the user allowed it (…). To allow it, the user can run
    /// `…` or set …_API_BASE …".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(loopback) = &self.loopback else {
            write!(f, "{} holds ", self.tool)?;
            self.write_keys(f)?;
            write!(
                f,
                "; {} is not on {}. To allow it, the user can run ",
                self.target,
                self.list_word()
            )?;
            self.write_commands(f)?;
            return f.write_str(".");
        };
        let port = loopback.port;
        write!(
            f,
            "{} may not reach {}: a port on this machine's loopback is reachable only when the \
             user allowed it (a local proxy, tunnel or service there could carry a key anywhere)",
            self.tool, self.target
        )?;
        if !self.keys.is_empty() {
            write!(f, "; {} holds ", self.tool)?;
            self.write_keys(f)?;
            write!(f, ", and {} is not on {}", self.target, self.list_word())?;
        }
        f.write_str(". To allow it, the user can ")?;
        if !self.keys.is_empty() {
            f.write_str("run ")?;
            self.write_commands(f)?;
            f.write_str(", or ")?;
        }
        write!(
            f,
            "point a `*_API_BASE` variable of autotool serve's environment at it (for example \
             `LOCAL_API_BASE=http://localhost:{port}` in the host config's `env` block), which \
             every tool may then reach"
        )?;
        if self.keys.is_empty() && !loopback.unlisted.is_empty() {
            let first = &loopback.unlisted[0];
            write!(
                f,
                ", or give a key it holds a list that names it (`autotool keys allow {first} \
                 localhost:{port}`, which also limits {first} to that list)"
            )?;
        }
        f.write_str(".")
    }
}

/// The suffix of the environment variables that point a tool at another API root
/// (`WEATHER_API_BASE=http://localhost:8080`).
pub const API_BASE_SUFFIX: &str = "_API_BASE";

/// The ports on the host's loopback that the user named in `*_API_BASE` overrides of serve's
/// environment: the user's own statement that this local port is the API, so every tool may
/// reach them (the proxy still refuses autotool's own listeners there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiBasePorts {
    /// Port → the variables that name it.
    ports: BTreeMap<u16, Vec<String>>,
}

impl ApiBasePorts {
    /// From `(name, value)` pairs, such as a process environment: each `*_API_BASE` variable
    /// whose URL is on the host's loopback ([`loopback_port_of_url`]) adds its port.
    pub fn from_vars<K: AsRef<str>, V: AsRef<str>>(vars: impl IntoIterator<Item = (K, V)>) -> Self {
        let mut ports: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for (name, value) in vars {
            let name = name.as_ref();
            if !name.ends_with(API_BASE_SUFFIX) {
                continue;
            }
            if let Some(port) = loopback_port_of_url(value.as_ref()) {
                ports.entry(port).or_default().push(name.to_owned());
            }
        }
        ApiBasePorts { ports }
    }

    /// Whether `port` is one of them.
    pub fn contains(&self, port: u16) -> bool {
        self.ports.contains_key(&port)
    }

    /// The ports, in order.
    pub fn ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.ports.keys().copied()
    }

    /// The variables that name `port`.
    pub fn variables(&self, port: u16) -> &[String] {
        self.ports.get(&port).map_or(&[], Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }
}

/// The port of `url` when it points at the host's loopback (`http://localhost:8080/v1`,
/// `https://127.0.0.1`, `http://[::1]:9000`): the explicit port, else 80 for `http`/`ws` and
/// 443 for `https`/`wss`. `None` for any other host or scheme, or a URL that does not parse.
pub fn loopback_port_of_url(url: &str) -> Option<u16> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        _ => return None,
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match parse_authority(authority) {
        Ok((host, port)) if host.is_localhost() => Some(port.unwrap_or(default)),
        _ => None,
    }
}

/// Whether the tool of `lists` may reach `host` on `port`, given the `api_bases` of serve's
/// environment. Anything but the loopback: when every key with a list covers it (no list, no
/// limit). The loopback (`localhost`, 127.0.0.0/8, `::1`): an `api_bases` port, or a port that
/// at least one list names and every list covers; a tool holding no key with a list reaches
/// only the `api_bases` ports. The proxy still refuses autotool's own listeners, and checks the
/// addresses a name resolves to ([`check_address`]).
pub fn decide(host: &Host, port: u16, lists: &KeyLists, api_bases: &ApiBasePorts) -> Decision {
    let loopback = host.is_localhost();
    if loopback && api_bases.contains(port) {
        return Decision::Allow;
    }
    let keys: Vec<KeyDenial> = lists
        .keys
        .iter()
        .filter(|k| !k.allows(host, port))
        .map(|k| KeyDenial {
            key: k.key.clone(),
            allowed: k.rules.iter().flatten().map(ToString::to_string).collect(),
        })
        .collect();
    let listed = lists.keys.iter().any(|k| k.rules.is_some());
    if keys.is_empty() && (listed || !loopback) {
        return Decision::Allow;
    }
    Decision::Deny(Denial {
        tool: lists.tool.clone(),
        target: host.entry(port),
        keys,
        loopback: loopback.then(|| LoopbackDenial {
            port,
            unlisted: lists
                .keys
                .iter()
                .filter(|k| k.rules.is_none())
                .map(|k| k.key.clone())
                .collect(),
        }),
    })
}

// ---------------------------------------------------------------------------------------------
// Addresses

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

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn host(s: &str) -> Host {
        canonical_host(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }
    fn name(s: &str) -> Host {
        Host::Name(s.to_owned())
    }
    fn v4(s: &str) -> Host {
        Host::V4(s.parse().unwrap())
    }
    fn v6(s: &str) -> Host {
        Host::V6(s.parse().unwrap())
    }
    fn rule(s: &str) -> AllowRule {
        AllowRule::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn names_fold_case_and_one_trailing_dot() {
        for (input, want) in [
            ("api.example.com", "api.example.com"),
            ("API.Example.COM", "api.example.com"),
            ("api.example.com.", "api.example.com"),
            ("LOCALHOST.", "localhost"),
            ("under_score.example", "under_score.example"),
            ("a-b.c-d.example", "a-b.c-d.example"),
            ("1.2.3.example", "1.2.3.example"),
            ("123abc.example", "123abc.example"),
            ("example.com1", "example.com1"),
            ("x", "x"),
        ] {
            assert_eq!(host(input), name(want), "{input:?}");
        }
    }

    #[test]
    fn international_names_become_their_ascii_form() {
        for (input, want) in [
            ("bücher.example", "xn--bcher-kva.example"),
            ("BÜCHER.example", "xn--bcher-kva.example"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
            ("XN--BCHER-KVA.example", "xn--bcher-kva.example"),
            ("例え.テスト", "xn--r8jz45g.xn--zckzah"),
            // Full-width letters and the ideographic full stop.
            ("ｅｘａｍｐｌｅ。com", "example.com"),
            ("münchen.de.", "xn--mnchen-3ya.de"),
        ] {
            assert_eq!(host(input), name(want), "{input:?}");
        }
        // An `xn--` label that is not valid punycode.
        assert!(matches!(
            canonical_host("xn--a.example"),
            Err(HostError::Idna(_))
        ));
        // A full-width solidus maps to `/`, which is refused.
        assert!(canonical_host("evil.com／x.example").is_err());
    }

    #[test]
    fn numeric_ipv4_spellings_fold_to_the_dotted_quad() {
        for input in [
            "127.0.0.1",
            "127.1",
            "127.0.1",
            "0x7f.0.0.1",
            "0X7F.0.0.1",
            "0x7f.1",
            "0177.0.0.1",
            "0177.0.0.01",
            "2130706433",
            "0x7f000001",
            "017700000001",
            "127.0.0.1.",
            "１２７.０.０.１",
        ] {
            assert_eq!(host(input), v4("127.0.0.1"), "{input:?}");
        }
        assert_eq!(host("169.254.43518"), v4("169.254.169.254"));
        assert_eq!(host("0xa9fea9fe"), v4("169.254.169.254"));
        assert_eq!(host("10.1"), v4("10.0.0.1"));
        assert_eq!(host("0"), v4("0.0.0.0"));
        assert_eq!(host("0x"), v4("0.0.0.0"));
        assert_eq!(host("255.255.255.255"), v4("255.255.255.255"));
        assert_eq!(host("4294967295"), v4("255.255.255.255"));
    }

    #[test]
    fn names_ending_in_a_number_must_be_addresses() {
        for input in [
            "1.2.3.4.5",
            "256.0.0.1",
            "1.2.3.256",
            "4294967296",
            "1.16777216",
            "08.0.0.1",
            "0x1g.0.0.1",
            "example.123",
            "example.0x10",
            "99999999999999999999999",
        ] {
            assert!(
                matches!(canonical_host(input), Err(HostError::Ipv4(_))),
                "{input:?}: {:?}",
                canonical_host(input)
            );
        }
    }

    #[test]
    fn ipv6_literals_in_brackets_and_ipv4_mapped() {
        assert_eq!(host("[::1]"), v6("::1"));
        assert_eq!(host("::1"), v6("::1"));
        assert_eq!(host("[2001:DB8::1]"), v6("2001:db8::1"));
        assert_eq!(host("[2001:db8:0:0:0:0:0:1]"), v6("2001:db8::1"));
        assert_eq!(host("[::ffff:127.0.0.1]"), v4("127.0.0.1"));
        assert_eq!(host("::ffff:7f00:1"), v4("127.0.0.1"));
        assert_eq!(host("[::ffff:169.254.169.254]"), v4("169.254.169.254"));
        for bad in [
            "[::1",
            "[::1]x",
            "[nope]",
            "[127.0.0.1]",
            "[::1%lo]",
            "1::2::3",
        ] {
            assert!(canonical_host(bad).is_err(), "{bad:?}");
        }
        assert_eq!(host("[::1]").to_string(), "[::1]");
    }

    #[test]
    fn dangerous_characters_are_refused() {
        for input in [
            "evil.com\0.example",
            "evil.com\r\nX-Injected: 1",
            "evil.com\n",
            "user@api.example.com",
            "api.example.com%2f",
            "api%2eexample.com",
            "api.example.com/path",
            "api.example.com\\x",
            "api example.com",
            " api.example.com",
            "api.example.com\t",
            "api.example.com?q",
            "api.example.com#f",
            "api.exa\u{7f}mple.com",
            "api.example.com:443",
            "*.example.com",
            "exa<mple.com",
            "a|b.example",
        ] {
            assert!(canonical_host(input).is_err(), "{input:?} was accepted");
        }
        let err = canonical_host("a\r\nb").unwrap_err();
        assert!(err.to_string().contains("carriage return"), "{err}");
        assert!(
            !err.to_string().contains('\r'),
            "the message must escape it: {err}"
        );
    }

    #[test]
    fn empty_labels_and_lengths() {
        assert_eq!(canonical_host(""), Err(HostError::Empty));
        assert_eq!(canonical_host("."), Err(HostError::Empty));
        for input in ["a..b", ".a", "a.b..", "..", "a.b.."] {
            assert!(
                matches!(canonical_host(input), Err(HostError::EmptyLabel(_))),
                "{input:?}: {:?}",
                canonical_host(input)
            );
        }
        let label63 = "a".repeat(63);
        assert_eq!(
            host(&format!("{label63}.example")),
            name(&format!("{label63}.example"))
        );
        assert!(matches!(
            canonical_host(&format!("{}.example", "a".repeat(64))),
            Err(HostError::LabelTooLong(_))
        ));
        // 4 × 63 + 3 dots = 255 > 253; 3 × 63 + 61 + 3 = 253 fits, with or without a dot.
        let long = [label63.as_str(); 4].join(".");
        assert_eq!(canonical_host(&long), Err(HostError::TooLong(255)));
        let fits = format!("{}.{}", [label63.as_str(); 3].join("."), "b".repeat(61));
        assert_eq!(fits.len(), 253);
        assert_eq!(host(&fits), name(&fits));
        assert_eq!(host(&format!("{fits}.")), name(&fits));
        assert!(canonical_host(&format!("{fits}b")).is_err());
    }

    #[test]
    fn authorities_carry_a_port() {
        assert_eq!(
            parse_authority("API.example.com:8443").unwrap(),
            (name("api.example.com"), Some(8443))
        );
        assert_eq!(
            parse_authority("api.example.com").unwrap(),
            (name("api.example.com"), None)
        );
        assert_eq!(
            parse_authority("[::1]:9000").unwrap(),
            (v6("::1"), Some(9000))
        );
        assert_eq!(parse_authority("[::1]").unwrap(), (v6("::1"), None));
        assert_eq!(
            parse_authority("127.1:80").unwrap(),
            (v4("127.0.0.1"), Some(80))
        );
        for bad in [
            "a.example:",
            "a.example:0",
            "a.example:65536",
            "a.example:+80",
            "a.example:8o",
            "a.example:080080",
            "::1:80",
            "[::1]80",
            "[::1",
            ":80",
        ] {
            assert!(parse_authority(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_port("00443"), Ok(443));
    }

    #[test]
    fn localhost_is_the_name_and_the_loopback_addresses() {
        for s in [
            "localhost",
            "LocalHost.",
            "127.0.0.1",
            "127.9.9.9",
            "127.1",
            "[::1]",
        ] {
            assert!(host(s).is_localhost(), "{s}");
        }
        assert!(host("[::ffff:127.0.0.1]").is_localhost());
        for s in [
            "localhost.example",
            "a.localhost",
            "10.0.0.1",
            "[::2]",
            "0.0.0.0",
        ] {
            assert!(!host(s).is_localhost(), "{s}");
        }
    }

    #[test]
    fn allow_rules_parse_as_typed() {
        assert_eq!(
            rule("api.x.com"),
            AllowRule {
                host: HostPattern::Exact(name("api.x.com")),
                port: None
            }
        );
        assert_eq!(
            rule("*.X.com."),
            AllowRule {
                host: HostPattern::SubdomainsOf("x.com".into()),
                port: None
            }
        );
        assert_eq!(
            rule("api.x.com:8443"),
            AllowRule {
                host: HostPattern::Exact(name("api.x.com")),
                port: Some(8443)
            }
        );
        assert_eq!(
            rule("*.bücher.example:8080").to_string(),
            "*.xn--bcher-kva.example:8080"
        );
        assert_eq!(rule("0x7f.1:80").to_string(), "localhost:80");
        for typed in [
            "api.x.com",
            "*.x.com",
            "api.x.com:8443",
            "[2001:db8::1]:1",
            "localhost:8080",
        ] {
            assert_eq!(rule(&rule(typed).to_string()), rule(typed), "{typed}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("https://api.x.com", "scheme"),
            ("api.x.com/v1", "path"),
            ("*", "bare star"),
            ("*x.com", "star in a label"),
            ("api.*.x.com", "star in the middle"),
            ("*.*.x.com", "two stars"),
            ("*.127.0.0.1", "wildcard address"),
            ("*.[::1]", "wildcard address"),
            ("api.x.com:0", "port 0"),
            ("user@api.x.com", "userinfo"),
            ("api x.com", "space"),
        ] {
            assert!(AllowRule::parse(bad).is_err(), "{bad:?} ({why})");
        }
        assert!(matches!(
            AllowRule::parse("*.10.0.0.1"),
            Err(RuleError::WildcardAddress(_))
        ));
    }

    #[test]
    fn entries_naming_a_public_suffix_are_refused() {
        for bad in [
            "*.com",
            "*.COM.",
            "*.co.uk",
            "*.github.io",
            "*.s3.amazonaws.com",
            "*.xn--p1ai",
            "*.рф",
            "com",
            "co.uk",
            "github.io:8443",
            "*.com:8443",
            // Under a wildcard rule of the list (`*.ck`), every second-level name is a suffix.
            "*.anything.ck",
        ] {
            match AllowRule::parse(bad) {
                Err(RuleError::PublicSuffix { suffix, .. }) => {
                    assert!(is_public_suffix(&suffix), "{bad:?}: {suffix}")
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let message = AllowRule::parse("*.co.uk").unwrap_err().to_string();
        assert!(message.contains("`co.uk` is a public suffix"), "{message}");
        assert!(message.contains("*.example.co.uk"), "{message}");
        // The control: one label more is someone's own domain, and passes.
        for good in [
            "*.example.com",
            "*.example.co.uk",
            "*.octocat.github.io",
            "example.co.uk",
            "octocat.github.io",
            "*.bucket.s3.amazonaws.com",
            // An exception rule of the list (`!www.ck`): a registrable name, not a suffix.
            "www.ck",
            // No rule of the list names these: the implicit `*` rule is not applied.
            "*.corp",
            "intranet",
            "*.internal",
            "localhost:8080",
            "[2001:db8::1]:1",
        ] {
            assert!(AllowRule::parse(good).is_ok(), "{good:?}");
        }
        // A stored list holding such an entry (written before the rule) allows nothing.
        assert!(KeyAllowlist::parse("K", Some(&["*.com"][..])).is_err());
    }

    #[test]
    fn allow_rules_match_hosts_and_ports() {
        let exact = rule("api.x.com");
        assert!(exact.matches(&name("api.x.com"), 443));
        assert!(exact.matches(&name("api.x.com"), 80));
        assert!(!exact.matches(&name("api.x.com"), 8443));
        assert!(!exact.matches(&name("x.com"), 443));
        assert!(!exact.matches(&name("sub.api.x.com"), 443));
        assert!(!exact.matches(&name("api.x.com.evil.example"), 443));

        let sub = rule("*.x.com");
        assert!(sub.matches(&name("api.x.com"), 443));
        assert!(sub.matches(&name("a.b.x.com"), 80));
        assert!(!sub.matches(&name("x.com"), 443));
        assert!(!sub.matches(&name("evilx.com"), 443));
        assert!(!sub.matches(&name("x.com.evil.example"), 443));
        assert!(!sub.matches(&name("api.x.com"), 22));
        assert!(!sub.matches(&v4("10.0.0.1"), 443));

        let ported = rule("api.x.com:8443");
        assert!(ported.matches(&name("api.x.com"), 8443));
        assert!(!ported.matches(&name("api.x.com"), 443));

        let addr = rule("[2001:db8::1]:9000");
        assert!(addr.matches(&v6("2001:db8::1"), 9000));
        assert!(!addr.matches(&v6("2001:db8::2"), 9000));
        assert!(rule("10.0.0.1:443").matches(&host("0x0a000001"), 443));
    }

    #[test]
    fn every_spelling_of_the_loopback_is_one_entry_with_its_port() {
        for typed in [
            "localhost:8080",
            "LocalHost.:8080",
            "127.0.0.1:8080",
            "127.1:8080",
            "0x7f000001:8080",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:8080",
            "127.9.9.9:8080",
        ] {
            let r = rule(typed);
            assert_eq!(r.to_string(), "localhost:8080", "{typed}");
            for target in ["localhost", "127.0.0.1", "127.0.0.2", "[::1]", "0177.0.0.1"] {
                assert!(r.matches(&host(target), 8080), "{typed} / {target}");
                assert!(!r.matches(&host(target), 8081), "{typed} / {target}");
                assert!(!r.matches(&host(target), 443), "{typed} / {target}");
            }
            assert!(!r.matches(&name("localhost.example"), 8080));
            assert!(!r.matches(&v4("10.0.0.1"), 8080));
        }
        // Without its port, the loopback is refused with the reason.
        for typed in ["localhost", "127.0.0.1", "[::1]", "LOCALHOST."] {
            assert!(
                matches!(AllowRule::parse(typed), Err(RuleError::LoopbackPort(_))),
                "{typed}: {:?}",
                AllowRule::parse(typed)
            );
        }
        let err = AllowRule::parse("localhost").unwrap_err().to_string();
        assert!(err.contains("localhost:8080"), "{err}");
        // Names under localhost are names like any other.
        assert_eq!(rule("a.localhost").to_string(), "a.localhost");
    }

    fn none() -> ApiBasePorts {
        ApiBasePorts::default()
    }

    fn tavily() -> KeyLists {
        KeyLists::new("search_tool")
            .with_key(KeyAllowlist::parse("TAVILY_API_KEY", Some(&["api.tavily.com"][..])).unwrap())
    }

    #[test]
    fn a_tool_without_keys_or_lists_is_not_narrowed() {
        let plain = KeyLists::new("plain");
        assert_eq!(
            decide(&name("anything.example"), 8443, &plain, &none()),
            Decision::Allow
        );
        let unlisted = KeyLists::new("t").with_key(KeyAllowlist::unrestricted("K"));
        assert_eq!(
            decide(&name("anything.example"), 443, &unlisted, &none()),
            Decision::Allow
        );
        assert_eq!(
            KeyAllowlist::parse::<&str>("K", None).unwrap(),
            KeyAllowlist::unrestricted("K")
        );
    }

    #[test]
    fn the_allowed_set_is_the_intersection_of_the_lists() {
        let lists = KeyLists::new("two_keys")
            .with_key(
                KeyAllowlist::parse("A_KEY", Some(&["*.x.com", "shared.example"][..])).unwrap(),
            )
            .with_key(KeyAllowlist::unrestricted("FREE_KEY"))
            .with_key(
                KeyAllowlist::parse("B_KEY", Some(&["api.x.com", "shared.example:8443"][..]))
                    .unwrap(),
            );
        let allowed = |h: &str, port| decide(&host(h), port, &lists, &none()).is_allowed();
        assert!(allowed("api.x.com", 443));
        // On A's list only, on B's only.
        assert!(!allowed("www.x.com", 443));
        assert!(!allowed("shared.example", 443));
        assert!(!allowed("shared.example", 8443));
        // The loopback is a host like any other: no list names it.
        for h in ["localhost", "127.0.0.1", "[::1]", "127.1"] {
            assert!(!allowed(h, 5432), "{h}");
            assert!(!allowed(h, 443), "{h}");
        }
        assert!(!allowed("localhost.evil.example", 443));
    }

    #[test]
    fn a_loopback_port_needs_every_list_or_an_api_base() {
        let a = KeyAllowlist::parse("A_KEY", Some(&["api.x.com", "localhost:8080"][..])).unwrap();
        let b = KeyAllowlist::parse("B_KEY", Some(&["api.x.com"][..])).unwrap();
        let b_too = KeyAllowlist::parse("B_KEY", Some(&["api.x.com", "[::1]:8080"][..])).unwrap();
        let free = KeyAllowlist::unrestricted("FREE_KEY");
        let tool = |keys: &[&KeyAllowlist]| {
            keys.iter()
                .fold(KeyLists::new("t"), |l, k| l.with_key((*k).clone()))
        };
        let api = ApiBasePorts::from_vars([("LOCAL_API_BASE", "http://127.0.0.1:9000/v1")]);
        let allowed =
            |lists: &KeyLists, h: &str, port| decide(&host(h), port, lists, &api).is_allowed();
        for h in ["localhost", "127.0.0.1", "[::1]", "127.0.0.2"] {
            // A alone: its list names the port; others stay closed.
            assert!(allowed(&tool(&[&a]), h, 8080), "{h}");
            assert!(!allowed(&tool(&[&a]), h, 8081), "{h}");
            // A and B: B's list does not name it, so B may not be sent there.
            assert!(!allowed(&tool(&[&a, &b]), h, 8080), "{h}");
            assert!(allowed(&tool(&[&a, &b_too]), h, 8080), "{h}");
            // A key without a list neither opens nor narrows it.
            assert!(allowed(&tool(&[&a, &free]), h, 8080), "{h}");
            assert!(!allowed(&tool(&[&free]), h, 8080), "{h}");
            // No key: only the api-base ports.
            assert!(!allowed(&tool(&[]), h, 8080), "{h}");
            // The api-base port, for every tool, whatever its lists.
            for keys in [&[][..], &[&free][..], &[&a, &b][..]] {
                assert!(allowed(&tool(keys), h, 9000), "{h}");
            }
        }
        // The api-base port opens the loopback only, never a name.
        assert!(!allowed(&tool(&[&a]), "api.x.com", 9000));
        assert!(allowed(&tool(&[]), "api.x.com", 9000));
    }

    #[test]
    fn loopback_refusals_say_how_to_allow_the_port() {
        let lists = KeyLists::new("t")
            .with_key(KeyAllowlist::parse("A_KEY", Some(&["api.x.com"][..])).unwrap());
        let Decision::Deny(d) = decide(&host("127.0.0.1"), 8080, &lists, &none()) else {
            panic!("allowed")
        };
        assert_eq!(d.target, "localhost:8080");
        assert_eq!(
            d.to_string(),
            "t may not reach localhost:8080: a port on this machine's loopback is reachable \
             only when the user allowed it (a local proxy, tunnel or service there could carry \
             a key anywhere); t holds A_KEY, which may only be sent to api.x.com, and \
             localhost:8080 is not on that list. To allow it, the user can run `autotool keys \
             allow A_KEY api.x.com localhost:8080`, or point a `*_API_BASE` variable of \
             autotool serve's environment at it (for example \
             `LOCAL_API_BASE=http://localhost:8080` in the host config's `env` block), which \
             every tool may then reach."
        );
        let Decision::Deny(d) = decide(&host("[::1]"), 80, &KeyLists::new("t"), &none()) else {
            panic!("allowed")
        };
        assert!(d.keys.is_empty() && d.commands().is_empty(), "{d:?}");
        let text = d.to_string();
        assert!(text.starts_with("t may not reach localhost:80: "), "{text}");
        assert!(
            text.contains("LOCAL_API_BASE=http://localhost:80"),
            "{text}"
        );
        assert!(!text.contains("keys allow"), "{text}");
        let free = KeyLists::new("t").with_key(KeyAllowlist::unrestricted("FREE_KEY"));
        let Decision::Deny(d) = decide(&host("localhost"), 5432, &free, &none()) else {
            panic!("allowed")
        };
        assert!(
            d.to_string().contains(
                "or give a key it holds a list that names it (`autotool keys allow FREE_KEY \
                 localhost:5432`, which also limits FREE_KEY to that list)."
            ),
            "{d}"
        );
    }

    #[test]
    fn api_base_urls_on_the_loopback_give_their_port() {
        for (url, port) in [
            ("http://localhost:8080", Some(8080)),
            ("http://localhost:8080/v1?x#y", Some(8080)),
            ("HTTP://LOCALHOST", Some(80)),
            ("https://127.0.0.1", Some(443)),
            ("https://127.1:8443/", Some(8443)),
            ("http://[::1]:9000/api", Some(9000)),
            ("http://user:pw@localhost:7000", Some(7000)),
            (" http://localhost:1 ", Some(1)),
            ("ws://localhost", Some(80)),
            ("http://api.example.com:8080", None),
            ("http://10.0.0.1:8080", None),
            ("http://localhost.example:8080", None),
            ("ftp://localhost:21", None),
            ("localhost:8080", None),
            ("http://localhost:0", None),
            ("http://localhost:99999", None),
            ("", None),
        ] {
            assert_eq!(loopback_port_of_url(url), port, "{url:?}");
        }
        let ports = ApiBasePorts::from_vars([
            ("WEATHER_API_BASE", "http://localhost:8080"),
            ("OTHER_API_BASE", "http://127.0.0.1:8080/v2"),
            ("REMOTE_API_BASE", "https://api.example.com"),
            ("NOT_A_BASE", "http://localhost:7000"),
            ("HN_API_BASE", "http://localhost:9000"),
        ]);
        assert_eq!(ports.ports().collect::<Vec<_>>(), [8080, 9000]);
        assert_eq!(
            ports.variables(8080),
            ["WEATHER_API_BASE", "OTHER_API_BASE"]
        );
        assert!(ports.contains(9000) && !ports.contains(7000) && !ports.contains(443));
    }

    #[test]
    fn a_denial_names_tool_key_host_and_the_command() {
        let Decision::Deny(denial) = decide(&name("evil.example"), 443, &tavily(), &none()) else {
            panic!("allowed")
        };
        assert_eq!(
            denial,
            Denial {
                tool: "search_tool".into(),
                target: "evil.example".into(),
                keys: vec![KeyDenial {
                    key: "TAVILY_API_KEY".into(),
                    allowed: vec!["api.tavily.com".into()],
                }],
                loopback: None,
            }
        );
        assert_eq!(
            denial.to_string(),
            "search_tool holds TAVILY_API_KEY, which may only be sent to api.tavily.com; \
             evil.example is not on that list. To allow it, the user can run \
             `autotool keys allow TAVILY_API_KEY api.tavily.com evil.example`."
        );
        // Another port: the command names it.
        let Decision::Deny(denial) = decide(&name("api.tavily.com"), 8443, &tavily(), &none())
        else {
            panic!("allowed")
        };
        assert_eq!(
            denial.commands(),
            ["autotool keys allow TAVILY_API_KEY api.tavily.com api.tavily.com:8443"]
        );
        // Two keys refuse: both named, both commands given.
        let lists = tavily().with_key(
            KeyAllowlist::parse("OTHER_KEY", Some(&["*.other.example", "[::2]:9"][..])).unwrap(),
        );
        let Decision::Deny(denial) = decide(&v6("2001:db8::1"), 8080, &lists, &none()) else {
            panic!("allowed")
        };
        assert_eq!(denial.target, "[2001:db8::1]:8080");
        assert_eq!(
            denial.to_string(),
            "search_tool holds TAVILY_API_KEY, which may only be sent to api.tavily.com and \
             OTHER_KEY, which may only be sent to *.other.example, [::2]:9; [2001:db8::1]:8080 \
             is not on those lists. To allow it, the user can run `autotool keys allow \
             TAVILY_API_KEY api.tavily.com [2001:db8::1]:8080` and `autotool keys allow \
             OTHER_KEY *.other.example [::2]:9 [2001:db8::1]:8080`."
        );
    }

    #[test]
    fn decisions_are_ordered_strictest_last() {
        let deny = decide(&name("evil.example"), 443, &tavily(), &none());
        assert!(Decision::Allow < deny);
        assert_eq!(
            [Decision::Allow, deny.clone(), Decision::Allow]
                .into_iter()
                .max(),
            Some(deny)
        );
    }

    #[test]
    fn stored_lists_with_a_bad_entry_are_an_error() {
        let err = KeyAllowlist::parse("K", Some(&["ok.example", "https://bad.example/"][..]))
            .unwrap_err();
        assert!(matches!(err, RuleError::NotAHost(_)), "{err}");
    }

    #[test]
    fn forbidden_ipv4_classes() {
        use ForbiddenAddress::*;
        for (addr, class) in [
            ("0.0.0.0", Unspecified),
            ("0.1.2.3", Unspecified),
            ("127.0.0.1", Loopback),
            ("127.255.255.254", Loopback),
            ("10.0.0.1", Private),
            ("172.16.0.1", Private),
            ("172.31.255.255", Private),
            ("192.168.1.1", Private),
            ("100.64.0.1", SharedAddressSpace),
            ("100.127.255.255", SharedAddressSpace),
            ("169.254.0.1", LinkLocal),
            ("169.254.169.254", CloudMetadata),
            ("100.100.100.200", CloudMetadata),
            ("168.63.129.16", CloudMetadata),
            ("224.0.0.1", Multicast),
            ("239.255.255.250", Multicast),
            ("240.0.0.1", Reserved),
            ("255.255.255.255", Broadcast),
            ("192.0.2.1", Reserved),
            ("198.18.0.1", Reserved),
            ("203.0.113.9", Reserved),
        ] {
            assert_eq!(forbidden_class(ip(addr)), Some(class), "{addr}");
            assert!(is_forbidden(ip(addr)));
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "172.15.255.255",
            "93.184.216.34",
        ] {
            assert_eq!(forbidden_class(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn forbidden_ipv6_classes_and_embedded_ipv4() {
        use ForbiddenAddress::*;
        for (addr, class) in [
            ("::", Unspecified),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("::ffff:10.0.0.1", Private),
            ("::ffff:169.254.169.254", CloudMetadata),
            ("::10.0.0.1", Reserved),
            ("fd00:ec2::254", CloudMetadata),
            ("fd12:3456::1", UniqueLocal),
            ("fc00::1", UniqueLocal),
            ("fe80::1", LinkLocal),
            ("febf::1", LinkLocal),
            ("fec0::1", Private),
            ("ff02::1", Multicast),
            ("64:ff9b::a9fe:a9fe", CloudMetadata),
            ("64:ff9b::10.0.0.1", Private),
            ("64:ff9b:1::1", Private),
            ("2002:a9fe:a9fe::1", CloudMetadata),
            ("2002:c0a8:0101::1", Private),
            ("2001:db8::1", Reserved),
            ("2001:0:4136:e378::1", Reserved),
            ("100::1", Reserved),
        ] {
            assert_eq!(forbidden_class(ip(addr)), Some(class), "{addr}");
        }
        for public in [
            "2606:4700:4700::1111",
            "2a00:1450::1",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(forbidden_class(ip(public)), None, "{public}");
        }
    }

    #[test]
    fn loopback_is_allowed_only_when_the_target_is_localhost() {
        assert_eq!(check_address(&name("localhost"), ip("127.0.0.1")), Ok(()));
        assert_eq!(check_address(&name("localhost"), ip("::1")), Ok(()));
        assert_eq!(check_address(&v4("127.0.0.2"), ip("127.0.0.2")), Ok(()));
        assert_eq!(
            check_address(&name("api.example.test"), ip("127.0.0.1")),
            Err(ForbiddenAddress::Loopback)
        );
        assert_eq!(
            check_address(&name("localhost"), ip("10.0.0.1")),
            Err(ForbiddenAddress::Private)
        );
        assert_eq!(
            check_address(&name("api.example.test"), ip("169.254.169.254")),
            Err(ForbiddenAddress::CloudMetadata)
        );
        assert_eq!(
            check_address(&name("api.example.test"), ip("1.1.1.1")),
            Ok(())
        );
    }

    fn rules(entries: &[&str]) -> Vec<AllowRule> {
        entries
            .iter()
            .map(|e| AllowRule::parse(e).unwrap())
            .collect()
    }

    #[test]
    fn which_entries_cover_which() {
        let r = |e: &str| AllowRule::parse(e).unwrap();
        for (wide, narrow) in [
            ("api.x.com", "api.x.com"),
            ("API.X.com.", "api.x.com"),
            ("*.x.com", "api.x.com"),
            ("*.x.com", "a.b.x.com"),
            ("*.x.com", "*.b.x.com"),
            ("*.x.com", "*.x.com"),
            ("api.x.com", "api.x.com:443"),
            ("api.x.com", "api.x.com:80"),
            ("api.x.com:8443", "api.x.com:8443"),
            ("*.x.com", "a.x.com:443"),
        ] {
            assert!(r(wide).covers(&r(narrow)), "{wide} should cover {narrow}");
        }
        for (a, b) in [
            ("api.x.com", "x.com"),
            ("*.x.com", "x.com"),
            ("api.x.com", "*.x.com"),
            ("*.b.x.com", "*.x.com"),
            ("*.x.com", "a.x.co"),
            ("*.x.com", "ax.com"),
            ("api.x.com", "api.x.com:8443"),
            ("api.x.com:443", "api.x.com"),
            ("api.x.com:8443", "api.x.com:443"),
            ("*.x.com", "127.0.0.1:80"),
        ] {
            assert!(!r(a).covers(&r(b)), "{a} should not cover {b}");
        }
    }

    #[test]
    fn widening_is_any_new_reach() {
        let old = rules(&["api.x.com", "*.y.com"]);
        // Same, narrower, respelt, reordered: not wider.
        for new in [
            vec![],
            rules(&["api.x.com"]),
            rules(&["*.y.com", "API.X.COM."]),
            rules(&["a.y.com", "*.b.y.com"]),
        ] {
            assert!(!widens(Some(&new), Some(&old)), "{new:?}");
        }
        for new in [
            rules(&["api.x.com", "z.com"]),
            rules(&["x.com"]),
            rules(&["api.x.com:8443"]),
            rules(&["y.com"]),
        ] {
            assert!(widens(Some(&new), Some(&old)), "{new:?}");
        }
        // Removing the list is the widest change; any list is narrower than none.
        assert!(widens(None, Some(&old)));
        assert!(!widens(Some(&old), None));
        assert!(!widens(None, None));
    }
}
