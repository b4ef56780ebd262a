//! Whether a tool may reach a target: the intersection of its keys' lists; without a key that
//! has a list, the hosts it declared and the user granted (`REQUIRED_HOSTS`); the loopback only
//! on an `*_API_BASE` port or where those name it; and a refusal as data that says what the
//! user can do.

use super::allow::KeyLists;
use super::name::{Host, parse_authority};
use std::collections::BTreeMap;
use std::fmt;

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
    /// Set when the tool's declared hosts left the target out: those it was granted, in
    /// canonical spelling (the tool held no key with a list, so they were its whole reach).
    pub reach: Option<Vec<String>>,
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

    /// "weather may reach only the hosts it declares in REQUIRED_HOSTS and the user granted
    /// (api.open-meteo.com); evil.example is not one of them. …"
    fn write_reach(&self, f: &mut fmt::Formatter<'_>, reach: &[String]) -> fmt::Result {
        let (tool, target) = (&self.tool, &self.target);
        let granted = if reach.is_empty() {
            "none".to_owned()
        } else {
            reach.join(", ")
        };
        write!(
            f,
            "{tool} may reach only the hosts it declares in REQUIRED_HOSTS and the user granted \
             ({granted}); {target} is not one of them, so it was refused before any lookup. To \
             reach it, the tool must declare it (REQUIRED_HOSTS = [\"{target}\"]) and the user \
             approve it (`autotool tools approve {tool} --reach`)"
        )?;
        if let Some(loopback) = &self.loopback {
            write!(
                f,
                ", or point a `*_API_BASE` variable of autotool serve's environment at it (for \
                 example `LOCAL_API_BASE=http://localhost:{}`), which every tool may then reach",
                loopback.port
            )?;
        }
        f.write_str(".")
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
        if let Some(reach) = &self.reach {
            return self.write_reach(f, reach);
        }
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
/// environment. In order:
/// 1. an `api_bases` port on the loopback (`localhost`, 127.0.0.0/8, `::1`): allowed;
/// 2. a tool holding at least one key with a list: the target must be on every such list (the
///    intersection), the loopback included only where a list names its port. Its declared
///    hosts neither widen this (the proxy cannot tell which request carries the key, so a key
///    is never sendable beyond its list) nor narrow it;
/// 3. otherwise, a tool with declared reach (`lists.reach`: `REQUIRED_HOSTS` the user
///    granted): exactly those hosts, the loopback only on a port they name;
/// 4. otherwise (a version kept from before reach was declared): any host but the loopback.
///
/// Keys without a list never narrow. The proxy still refuses autotool's own listeners, and
/// checks the addresses a name resolves to ([`check_address`]), after this decision: a name
/// refused here is never looked up.
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
    let reach = match (&lists.reach, listed) {
        (Some(rules), false) => {
            if rules.iter().any(|r| r.matches(host, port)) {
                return Decision::Allow;
            }
            Some(rules.iter().map(ToString::to_string).collect())
        }
        _ => None,
    };
    if reach.is_none() && keys.is_empty() && (listed || !loopback) {
        return Decision::Allow;
    }
    Decision::Deny(Denial {
        reach,
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
