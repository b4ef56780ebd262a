//! Allowlist entries as the user types them (`api.x.com`, `*.x.com`, `localhost:PORT`), which
//! entries cover which, and a key's list and a tool's lists.

use super::name::{Host, HostError, parse_authority};
use super::{DEFAULT_PORTS, LOCALHOST};
use std::fmt;

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

/// A tool, the keys it holds and the hosts it declared: what [`decide`] needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyLists {
    pub tool: String,
    pub keys: Vec<KeyAllowlist>,
    /// The hosts the tool declared in `REQUIRED_HOSTS` and the user granted: where it may go
    /// when it holds no key with a list. `None`: a version kept from before reach was declared,
    /// which reaches any public host ([`decide`]).
    pub reach: Option<Vec<AllowRule>>,
}

impl KeyLists {
    /// A tool holding no keys, kept from before reach was declared: it may go anywhere public
    /// the address checks let it, and on the host's loopback only to the `*_API_BASE` ports
    /// ([`ApiBasePorts`]). [`KeyLists::with_reach`] limits it to declared hosts.
    pub fn new(tool: impl Into<String>) -> Self {
        KeyLists {
            tool: tool.into(),
            keys: Vec::new(),
            reach: None,
        }
    }

    /// Add a key the tool holds.
    pub fn with_key(mut self, key: KeyAllowlist) -> Self {
        self.keys.push(key);
        self
    }

    /// The hosts the tool declared and the user granted (`REQUIRED_HOSTS`): without a key
    /// that has a list, the tool reaches these and nothing else.
    pub fn with_reach(mut self, hosts: Vec<AllowRule>) -> Self {
        self.reach = Some(hosts);
        self
    }
}
