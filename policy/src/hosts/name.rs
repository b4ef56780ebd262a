//! One spelling per host: case, a trailing dot, IDNA, numeric IPv4 spellings and IPv4-mapped
//! IPv6 folded to one [`Host`]; dangerous characters, empty labels and over-long names refused.

use super::{DEFAULT_PORTS, LOCALHOST, MAX_LABEL_LEN, MAX_NAME_LEN};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
pub(super) fn ends_in_number(name: &str) -> bool {
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
