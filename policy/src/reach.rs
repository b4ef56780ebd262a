//! A tool's declared reach, as data: the hosts it may reach without a key (`REQUIRED_HOSTS`)
//! and the directories it may read (`READ_DIRS`) or write (`WRITE_DIRS`), what the user has
//! granted of it, and what is still to be asked.
//!
//! - [`DeclaredReach`]: what a version's code declares, hosts in the canonical spelling of an
//!   allowlist entry ([`AllowRule`]: the same parser, public suffixes refused), directories as
//!   declared (`~/notes` or absolute; [`dir_entry`]).
//! - A grant is per tool × item ([`ReachItem`]) and outlives rewrites: what a version declares
//!   beyond what was granted (or, for hosts, what the user allows every tool: `autotool hosts
//!   allow`) is asked again ([`DeclaredReach::uncovered`]). So a trusted version's reach is a
//!   ceiling: a rewrite that widens it asks.
//! - A directory granted for writing covers reading it; a host entry covers what it matches
//!   ([`AllowRule::covers`]: `*.x.com` covers `api.x.com`).
//! - [`ReachPreset`]: how the whole machine answers (ask, or grant declared hosts on a trusted
//!   single-user box).

use crate::hosts::{AllowRule, RuleError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Most hosts one tool may declare.
pub const MAX_HOSTS: usize = 32;
/// Most directories one tool may declare (read and write together).
pub const MAX_DIRS: usize = 16;
/// Longest directory entry.
pub const MAX_DIR_LEN: usize = 1024;

/// What a version declares it may reach besides its keys' hosts.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeclaredReach {
    /// `REQUIRED_HOSTS`, each an allowlist entry in canonical spelling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// `READ_DIRS`, as declared (`~/notes`, `/srv/data`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_dirs: Vec<String>,
    /// `WRITE_DIRS`, as declared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_dirs: Vec<String>,
}

/// What one item of reach is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReachKind {
    /// A host (allowlist entry) reached without a key.
    Host,
    /// A directory read.
    Read,
    /// A directory read and written.
    Write,
}

impl ReachKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReachKind::Host => "host",
            ReachKind::Read => "read",
            ReachKind::Write => "write",
        }
    }

    pub fn parse(s: &str) -> Option<ReachKind> {
        match s {
            "host" => Some(ReachKind::Host),
            "read" => Some(ReachKind::Read),
            "write" => Some(ReachKind::Write),
            _ => None,
        }
    }
}

/// One item of reach: a host entry, or a directory and its mode.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReachItem {
    pub kind: ReachKind,
    pub entry: String,
}

impl ReachItem {
    pub fn new(kind: ReachKind, entry: impl Into<String>) -> ReachItem {
        ReachItem {
            kind,
            entry: entry.into(),
        }
    }
}

impl fmt::Display for ReachItem {
    /// `api.open-meteo.com`, `read ~/notes`, `read and write ~/exports`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ReachKind::Host => f.write_str(&self.entry),
            ReachKind::Read => write!(f, "read {}", self.entry),
            ReachKind::Write => write!(f, "read and write {}", self.entry),
        }
    }
}

/// Why a directory entry is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirError {
    #[error("{0:?}: a directory is `~/path` (under the user's home) or an absolute path `/path`")]
    NotAPath(String),
    #[error("{0:?}: a directory may not hold control characters")]
    Control(String),
    #[error("a directory entry is longer than {MAX_DIR_LEN} bytes")]
    TooLong,
}

/// A declared directory in one spelling: `~/path` or `/path`, without a trailing `/` (the root
/// and the home themselves are entries like others here; which directories may be granted is
/// decided when they are resolved).
pub fn dir_entry(entry: &str) -> Result<String, DirError> {
    if entry.len() > MAX_DIR_LEN {
        return Err(DirError::TooLong);
    }
    if entry.chars().any(char::is_control) {
        return Err(DirError::Control(entry.to_owned()));
    }
    let ok = entry == "~" || entry.starts_with("~/") || entry.starts_with('/');
    if !ok {
        return Err(DirError::NotAPath(entry.to_owned()));
    }
    let trimmed = entry.trim_end_matches('/');
    Ok(if trimmed.is_empty() {
        "/".to_owned()
    } else {
        trimmed.to_owned()
    })
}

impl DeclaredReach {
    /// Nothing declared.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.read_dirs.is_empty() && self.write_dirs.is_empty()
    }

    /// From declared entries: hosts parsed as allowlist entries (public suffixes refused),
    /// directories as [`dir_entry`]; repeats counted once, a directory both read and written
    /// kept as written only.
    pub fn parse<S: AsRef<str>>(
        hosts: &[S],
        read_dirs: &[S],
        write_dirs: &[S],
    ) -> Result<DeclaredReach, ReachError> {
        let mut reach = DeclaredReach::default();
        for h in hosts {
            let rule = AllowRule::parse(h.as_ref())?.to_string();
            if !reach.hosts.contains(&rule) {
                reach.hosts.push(rule);
            }
        }
        for d in write_dirs {
            let d = dir_entry(d.as_ref())?;
            if !reach.write_dirs.contains(&d) {
                reach.write_dirs.push(d);
            }
        }
        for d in read_dirs {
            let d = dir_entry(d.as_ref())?;
            if !reach.read_dirs.contains(&d) && !reach.write_dirs.contains(&d) {
                reach.read_dirs.push(d);
            }
        }
        if reach.hosts.len() > MAX_HOSTS {
            return Err(ReachError::TooManyHosts(reach.hosts.len()));
        }
        let dirs = reach.read_dirs.len() + reach.write_dirs.len();
        if dirs > MAX_DIRS {
            return Err(ReachError::TooManyDirs(dirs));
        }
        Ok(reach)
    }

    /// Every item, hosts first, then directories read, then written.
    pub fn items(&self) -> Vec<ReachItem> {
        let hosts = self
            .hosts
            .iter()
            .map(|h| ReachItem::new(ReachKind::Host, h));
        let read = self
            .read_dirs
            .iter()
            .map(|d| ReachItem::new(ReachKind::Read, d));
        let write = self
            .write_dirs
            .iter()
            .map(|d| ReachItem::new(ReachKind::Write, d));
        hosts.chain(read).chain(write).collect()
    }

    /// From items, in their order.
    pub fn from_items<'a>(items: impl IntoIterator<Item = &'a ReachItem>) -> DeclaredReach {
        let mut reach = DeclaredReach::default();
        for item in items {
            let list = match item.kind {
                ReachKind::Host => &mut reach.hosts,
                ReachKind::Read => &mut reach.read_dirs,
                ReachKind::Write => &mut reach.write_dirs,
            };
            if !list.contains(&item.entry) {
                list.push(item.entry.clone());
            }
        }
        reach
    }

    /// The host entries as rules. An entry that no longer parses is left out: it allows
    /// nothing, never everything.
    pub fn host_rules(&self) -> Vec<AllowRule> {
        self.hosts
            .iter()
            .filter_map(|h| AllowRule::parse(h).ok())
            .collect()
    }

    /// The part of this reach that `granted` (the items the user approved for the tool) and
    /// `preallowed` (the hosts the user allows every tool that declares them) cover.
    pub fn covered(&self, granted: &[ReachItem], preallowed: &[AllowRule]) -> DeclaredReach {
        let items: Vec<ReachItem> = self
            .items()
            .into_iter()
            .filter(|i| covers(granted, preallowed, i))
            .collect();
        DeclaredReach::from_items(&items)
    }

    /// The part of this reach that `granted` and `preallowed` leave uncovered: what the user
    /// must still be asked.
    pub fn uncovered(&self, granted: &[ReachItem], preallowed: &[AllowRule]) -> DeclaredReach {
        let items: Vec<ReachItem> = self
            .items()
            .into_iter()
            .filter(|i| !covers(granted, preallowed, i))
            .collect();
        DeclaredReach::from_items(&items)
    }

    /// `reach api.open-meteo.com and *.wikipedia.org without a key, read ~/notes, and read
    /// and write ~/exports`: what a consent question names.
    pub fn phrase(&self) -> String {
        let mut parts = Vec::new();
        if !self.hosts.is_empty() {
            parts.push(format!("reach {} without a key", join_and(&self.hosts)));
        }
        if !self.read_dirs.is_empty() {
            parts.push(format!("read {}", join_and(&self.read_dirs)));
        }
        if !self.write_dirs.is_empty() {
            parts.push(format!("read and write {}", join_and(&self.write_dirs)));
        }
        join_and(&parts)
    }
}

/// Whether `item` is covered by an approval or, for a host, by the user's hosts for every tool.
fn covers(granted: &[ReachItem], preallowed: &[AllowRule], item: &ReachItem) -> bool {
    match item.kind {
        ReachKind::Host => {
            let Ok(want) = AllowRule::parse(&item.entry) else {
                return false;
            };
            let rules = granted
                .iter()
                .filter(|g| g.kind == ReachKind::Host)
                .filter_map(|g| AllowRule::parse(&g.entry).ok());
            preallowed.iter().any(|r| r.covers(&want)) || rules.into_iter().any(|r| r.covers(&want))
        }
        ReachKind::Read => granted
            .iter()
            .any(|g| g.kind != ReachKind::Host && g.entry == item.entry),
        ReachKind::Write => granted
            .iter()
            .any(|g| g.kind == ReachKind::Write && g.entry == item.entry),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Why a declared reach is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReachError {
    #[error("{0}")]
    Host(#[from] RuleError),
    #[error("{0}")]
    Dir(#[from] DirError),
    #[error("REQUIRED_HOSTS lists {0} hosts; a tool may declare at most {MAX_HOSTS}")]
    TooManyHosts(usize),
    #[error("READ_DIRS and WRITE_DIRS list {0} directories; a tool may declare at most {MAX_DIRS}")]
    TooManyDirs(usize),
}

/// How the machine answers a tool's declared reach (the setting `reach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReachPreset {
    /// Every declared host the user does not allow every tool (`autotool hosts allow`), and
    /// every declared directory, is a consent question.
    #[default]
    Ask,
    /// A trusted single-user box: declared hosts are granted without asking (still enforced:
    /// nothing undeclared is reached or looked up). Directories are still asked.
    Trusted,
}

impl ReachPreset {
    pub fn as_str(self) -> &'static str {
        match self {
            ReachPreset::Ask => "ask",
            ReachPreset::Trusted => "trusted",
        }
    }

    pub fn parse(s: &str) -> Option<ReachPreset> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ask" => Some(ReachPreset::Ask),
            "trusted" => Some(ReachPreset::Trusted),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn reach(hosts: &[&str], read: &[&str], write: &[&str]) -> DeclaredReach {
        DeclaredReach::parse(hosts, read, write).unwrap()
    }

    fn host(h: &str) -> ReachItem {
        ReachItem::new(ReachKind::Host, h)
    }

    #[test]
    fn entries_are_read_in_one_spelling_once_each() {
        let r = reach(
            &[
                "API.Open-Meteo.com.",
                "api.open-meteo.com",
                "*.wikipedia.org",
                "x.example:8443",
            ],
            &["~/notes/", "~/exports"],
            &["~/exports", "/srv/out"],
        );
        assert_eq!(
            r.hosts,
            ["api.open-meteo.com", "*.wikipedia.org", "x.example:8443"]
        );
        assert_eq!(r.read_dirs, ["~/notes"]);
        assert_eq!(r.write_dirs, ["~/exports", "/srv/out"]);
        assert_eq!(
            r.phrase(),
            "reach api.open-meteo.com, *.wikipedia.org and x.example:8443 without a key, read \
             ~/notes and read and write ~/exports and /srv/out"
        );
    }

    #[test]
    fn what_an_allowlist_refuses_a_declaration_refuses() {
        for bad in [
            "*.com",
            "*.co.uk",
            "github.io",
            "evil.com/.wikipedia.org",
            "https://api.x.com",
            "a.*.x.com",
            "localhost",
            "",
        ] {
            assert!(DeclaredReach::parse(&[bad], &[], &[]).is_err(), "{bad:?}");
        }
        for bad in ["notes", "./notes", "~user/notes", "", "/a\nb"] {
            assert!(DeclaredReach::parse(&[], &[bad], &[]).is_err(), "{bad:?}");
            assert!(DeclaredReach::parse(&[], &[], &[bad]).is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_HOSTS).map(|i| format!("h{i}.example")).collect();
        assert!(DeclaredReach::parse(&many, &[], &[]).is_err());
    }

    #[test]
    fn what_is_asked_is_what_no_grant_covers() {
        let r = reach(&["api.x.com", "en.wikipedia.org"], &["~/notes"], &["~/out"]);
        // Nothing granted: everything asked.
        assert_eq!(r.uncovered(&[], &[]), r);
        // A wildcard grant covers a host under it; a write grant covers reading.
        let granted = [
            host("*.wikipedia.org"),
            ReachItem::new(ReachKind::Write, "~/notes"),
        ];
        assert_eq!(
            r.uncovered(&granted, &[]),
            reach(&["api.x.com"], &[], &["~/out"])
        );
        // A read grant does not cover writing; the user's hosts cover hosts only.
        let granted = [ReachItem::new(ReachKind::Read, "~/out")];
        let pre = [AllowRule::parse("api.x.com").unwrap()];
        assert_eq!(
            r.uncovered(&granted, &pre),
            reach(&["en.wikipedia.org"], &["~/notes"], &["~/out"])
        );
        assert_eq!(r.covered(&granted, &pre), reach(&["api.x.com"], &[], &[]));
        // A narrower grant does not cover a wider declaration.
        let wide = reach(&["*.x.com"], &[], &[]);
        assert_eq!(wide.uncovered(&[host("api.x.com")], &[]), wide);
        // Another port is another host.
        let port = reach(&["api.x.com:8443"], &[], &[]);
        assert_eq!(port.uncovered(&[host("api.x.com")], &[]), port);
    }

    #[test]
    fn items_round_trip() {
        let r = reach(&["a.example"], &["~/n"], &["/w"]);
        assert_eq!(DeclaredReach::from_items(&r.items()), r);
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<DeclaredReach>(&json).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<DeclaredReach>("{}").unwrap(),
            DeclaredReach::default()
        );
    }
}
