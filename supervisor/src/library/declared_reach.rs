//! A tool's declared reach in the library: what of it the user granted (per tool × item, the
//! hosts allowed for every tool, the machine's preset, or `--dangerously-allow-all-tools`),
//! what is still to be asked, and the hosts its egress proxy holds it to.
//!
//! A version kept from before reach was declared (`Version::reach` is `None`) is neither
//! asked nor narrowed: it reaches any public host, as it did, and is shown so with the one
//! command that narrows it (`autotool tools narrow NAME`).

use super::Library;
use crate::consent::ReachAsk;
use crate::version::Subject;
use autotool_policy::hosts::AllowRule;
use autotool_policy::reach::{DeclaredReach, ReachItem, ReachPreset};

impl Library {
    /// The hosts the user allows every tool that declares them (`autotool hosts allow`).
    /// Unreadable: none (fail closed: then each is asked).
    pub fn preallowed_hosts(&self) -> Vec<AllowRule> {
        match self.registry.ledger().allowed_hosts() {
            Ok(rows) => rows
                .iter()
                .filter_map(|h| AllowRule::parse(&h.entry).ok())
                .collect(),
            Err(e) => {
                tracing::warn!("reading the hosts allowed for every tool: {e}");
                Vec::new()
            }
        }
    }

    /// The directories the user widened the deny rules for (`autotool dirs widen`), as every
    /// grant of a directory is resolved against them. Unreadable: none (fail closed: the rules
    /// hold).
    pub fn widened_dirs(&self) -> Vec<std::path::PathBuf> {
        widened_dirs(self.registry.ledger())
    }

    /// The items the user granted `tool`. Unreadable: none (fail closed).
    fn reach_grants_of(&self, tool: &str) -> Vec<ReachItem> {
        match self.registry.ledger().reach_grants(tool) {
            Ok(rows) => rows.into_iter().map(|g| g.item).collect(),
            Err(e) => {
                tracing::warn!("reading the reach granted to {tool}: {e}");
                Vec::new()
            }
        }
    }

    /// What of `subject`'s declared reach is granted now; `None` for a version kept from
    /// before reach was declared (any public host).
    pub fn reach_granted(&self, subject: Subject<'_>) -> Option<DeclaredReach> {
        let declared = subject.reach?;
        if self.settings.allow_all_keys {
            return Some(declared.clone());
        }
        let mut granted = declared.covered(
            &self.reach_grants_of(subject.tool.as_str()),
            &self.preallowed_hosts(),
        );
        if self.settings.reach == ReachPreset::Trusted {
            granted.hosts = declared.hosts.clone();
        }
        Some(granted)
    }

    /// What of `subject`'s declared reach the user must still be asked (none under
    /// `--dangerously-allow-all-tools`, nor for a version kept from before reach was declared).
    pub fn reach_ask(&self, subject: Subject<'_>) -> Option<ReachAsk> {
        let declared = subject.reach?;
        if self.settings.allow_all_keys || declared.is_empty() {
            return None;
        }
        let mut ask = declared.uncovered(
            &self.reach_grants_of(subject.tool.as_str()),
            &self.preallowed_hosts(),
        );
        if self.settings.reach == ReachPreset::Trusted {
            ask.hosts.clear();
        }
        (!ask.is_empty()).then(|| ReachAsk::new(ask))
    }

    /// Record the user's yes to what of `subject`'s reach was still to be asked.
    pub fn approve_reach(
        &self,
        subject: Subject<'_>,
        via: &str,
    ) -> Result<(), crate::ledger::LedgerError> {
        match self.reach_ask(subject) {
            Some(ask) => self
                .registry
                .ledger()
                .grant_reach(subject.tool.as_str(), &ask.reach, via),
            None => Ok(()),
        }
    }
}

/// The directories `ledger` holds widened (`autotool dirs widen`). Unreadable: none (fail
/// closed: the rules hold).
pub fn widened_dirs(ledger: &crate::ledger::Ledger) -> Vec<std::path::PathBuf> {
    match ledger.widened_dirs() {
        Ok(rows) => rows.into_iter().map(|w| w.path.into()).collect(),
        Err(e) => {
            tracing::warn!("reading the widened deny rules: {e}");
            Vec::new()
        }
    }
}

/// How many refused destinations a tool's page shows.
pub const REFUSALS_SHOWN: u32 = 5;

/// The words shown for a version kept from before reach was declared.
pub const ANY_PUBLIC_HOST: &str = "any public host (from before declared reach)";

/// What a tool may reach and why, as `tools show`, `tool_info`, the console's tool page and
/// `/api/library` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReachView {
    /// Set for a version kept from before reach was declared: what it reaches and the command
    /// that narrows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub any_public_host: Option<String>,
    /// Each host it may reach (or declared and may not yet), and why.
    pub hosts: Vec<HostReach>,
    /// Each directory it declared, its mode, and whether it is granted.
    pub directories: Vec<DirReach>,
    /// The destinations its egress proxy refused lately, newest first.
    pub refused: Vec<Refused>,
}

/// One host a tool may reach, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostReach {
    /// An allowlist entry: `api.open-meteo.com`, `*.wikipedia.org`, `localhost:9000`.
    pub host: String,
    /// `declared and granted`, `declared, allowed for every tool`, `declared, not granted
    /// yet`, `TAVILY_API_KEY's allowlist`, `WEATHER_API_BASE in serve's environment`.
    pub why: String,
    /// Whether it is reachable now.
    pub reachable: bool,
}

/// One directory a tool declared.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DirReach {
    pub path: String,
    /// `read` or `read and write`.
    pub mode: String,
    pub granted: bool,
    /// Granted, but not mounted at launch, and why (a deny rule not widened, `autotool dirs
    /// widen`; gone; not a directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_mounted: Option<String>,
}

/// One refusal of the egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refused {
    pub at: String,
    /// `host:port` as the tool asked for it.
    pub target: String,
    pub why: String,
}

/// What [`view`] needs besides the version.
#[derive(Debug)]
pub struct ViewInputs<'a> {
    pub ledger: &'a crate::ledger::Ledger,
    /// Every key's allowlist (canonical entries); a key missing has none.
    pub allowlists: &'a std::collections::BTreeMap<String, Vec<String>>,
    /// `*_API_BASE` variables of serve's environment (name → URL).
    pub api_bases: &'a std::collections::BTreeMap<String, String>,
    /// What grants declared reach without asking (`--dangerously-allow-all-tools`), and what
    /// grants declared hosts (`reach = trusted`), in words; `None`: asked.
    /// [`crate::serving::granting`] tells a view outside serve.
    pub allow_all: Option<&'a str>,
    pub trusted_hosts: Option<&'a str>,
    /// The user's home and autotool's, to tell whether a granted directory is mounted (as
    /// launch resolves it); `None`: not told.
    pub homes: Option<(&'a std::path::Path, &'a std::path::Path)>,
}

/// What `version` may reach and why, and what its proxy refused lately.
pub fn view(version: &crate::version::Version, inputs: &ViewInputs<'_>) -> ReachView {
    let tool = version.name.as_str();
    let ledger = inputs.ledger;
    let mut hosts = Vec::new();
    // The keys with a list: their intersection is the reach for keyed traffic.
    let listed: Vec<(&str, &Vec<String>)> = version
        .required_env
        .iter()
        .filter_map(|k| Some((k.as_str(), inputs.allowlists.get(k.as_str())?)))
        .collect();
    for (key, list) in &listed {
        for h in list.iter() {
            hosts.push(HostReach {
                host: h.clone(),
                why: format!("{key}'s allowlist"),
                reachable: listed.iter().all(|(_, l)| l.contains(h)),
            });
        }
    }
    let mut directories = Vec::new();
    let any_public_host = match &version.reach {
        None => Some(format!(
            "{ANY_PUBLIC_HOST}; `autotool tools narrow {tool}` limits it to what its code declares"
        )),
        Some(declared) => {
            let grants: Vec<ReachItem> = ledger
                .reach_grants(tool)
                .unwrap_or_default()
                .into_iter()
                .map(|g| g.item)
                .collect();
            let pre: Vec<AllowRule> = ledger
                .allowed_hosts()
                .unwrap_or_default()
                .iter()
                .filter_map(|h| AllowRule::parse(&h.entry).ok())
                .collect();
            let by_grant = declared.covered(&grants, &[]);
            let by_pre = declared.covered(&[], &pre);
            for h in &declared.hosts {
                let (why, granted) = if let Some(by) = inputs.allow_all {
                    (format!("declared, granted to every tool by {by}"), true)
                } else if by_grant.hosts.contains(h) {
                    ("declared and granted".to_owned(), true)
                } else if by_pre.hosts.contains(h) {
                    (
                        "declared, allowed for every tool (`autotool hosts allow`)".to_owned(),
                        true,
                    )
                } else if let Some(by) = inputs.trusted_hosts {
                    (format!("declared, granted by {by}"), true)
                } else {
                    ("declared, not granted yet".to_owned(), false)
                };
                let why = if listed.is_empty() {
                    why
                } else {
                    format!("{why}; unreachable while it holds a key with an allowlist")
                };
                hosts.push(HostReach {
                    host: h.clone(),
                    why,
                    reachable: granted && listed.is_empty(),
                });
            }
            let granted_dirs = declared.covered(&grants, &[]);
            let widened = widened_dirs(ledger);
            for (list, write, granted_list) in [
                (&declared.read_dirs, false, &granted_dirs.read_dirs),
                (&declared.write_dirs, true, &granted_dirs.write_dirs),
            ] {
                for d in list {
                    let granted = inputs.allow_all.is_some() || granted_list.contains(d);
                    // As launch resolves it (`Library::user_dirs`).
                    let not_mounted = inputs.homes.filter(|_| granted).and_then(|(user, own)| {
                        crate::tool::dirs::resolve_grant(d, write, user, own, &widened).err()
                    });
                    directories.push(DirReach {
                        path: d.clone(),
                        mode: if write { "read and write" } else { "read" }.to_owned(),
                        granted,
                        not_mounted,
                    });
                }
            }
            None
        }
    };
    let bases = autotool_policy::hosts::ApiBasePorts::from_vars(inputs.api_bases.iter());
    for port in bases.ports() {
        hosts.push(HostReach {
            host: format!("localhost:{port}"),
            why: format!(
                "{} in serve's environment (every tool)",
                bases.variables(port).join(", ")
            ),
            reachable: true,
        });
    }
    let refused = ledger
        .egress_refusals(tool, REFUSALS_SHOWN)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let (target, why) = e.detail.split_once(": ").unwrap_or(("", e.detail.as_str()));
            Refused {
                at: crate::ledger::format_ms(e.at),
                target: target.to_owned(),
                why: why.to_owned(),
            }
        })
        .collect();
    ReachView {
        any_public_host,
        hosts,
        directories,
        refused,
    }
}

impl ReachView {
    /// The view as lines of text, for `tools show`.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        match &self.any_public_host {
            Some(any) => out.push(format!("reach: {any}")),
            None if self.hosts.is_empty() => {
                out.push("reach: no host without a key (it declares none)".to_owned())
            }
            None => out.push("reach:".to_owned()),
        }
        for h in &self.hosts {
            out.push(format!(
                "  {}  {}{}",
                h.host,
                h.why,
                if h.reachable { "" } else { " (refused)" }
            ));
        }
        if self.directories.is_empty() {
            out.push("directories: none".to_owned());
        } else {
            out.push("directories:".to_owned());
            for d in &self.directories {
                let state = match (&d.not_mounted, d.granted) {
                    (Some(why), _) => format!(", granted but not mounted: {why}"),
                    (None, true) => String::new(),
                    (None, false) => ", not granted yet".to_owned(),
                };
                out.push(format!("  {}  {}{state}", d.path, d.mode));
            }
        }
        if self.refused.is_empty() {
            out.push("refused lately: nothing".to_owned());
        } else {
            out.push("refused lately:".to_owned());
            for r in &self.refused {
                out.push(format!("  {}  {}  {}", r.at, r.target, r.why));
            }
        }
        out
    }
}

impl Library {
    /// What `version` may reach and why, as this serve grants it.
    pub fn reach_view(&self, version: &crate::version::Version) -> ReachView {
        let allowlists = self
            .secrets()
            .allowlists()
            .iter()
            .map(|(k, rules)| {
                (
                    k.to_string(),
                    rules.iter().map(ToString::to_string).collect(),
                )
            })
            .collect();
        let user_home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        view(
            version,
            &ViewInputs {
                ledger: self.registry.ledger(),
                allowlists: &allowlists,
                api_bases: &self.api_bases,
                allow_all: self
                    .settings
                    .allow_all_keys
                    .then_some("this serve's --dangerously-allow-all-tools"),
                trusted_hosts: (self.settings.reach == ReachPreset::Trusted)
                    .then_some("this serve's preset `reach = trusted`"),
                homes: user_home.as_deref().map(|h| (h, self.home.root())),
            },
        )
    }
}
