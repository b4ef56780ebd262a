//! Consent per tool × key: whether a tool version may hold a key on the strength of an earlier
//! approval, or the user must be asked (again), and the words of the question.
//!
//! The rules (docs/keys.md):
//! - A key *with* an allowlist, the sandbox on: an approval holds for every later version of the
//!   tool, because where the key can go is fixed by the list, not by the code. It lapses when
//!   the list is widened (any new reach, or the list removed) or the tool declares keys it did
//!   not declare when it was approved.
//! - A key *without* an allowlist, or the sandbox off: the code decides where the key goes, so
//!   an approval holds for that code only (its hash); every new version is asked again.
//! - Narrowing a list, or declaring fewer keys, never re-asks.

use crate::hosts::{AllowRule, widens};
use crate::names::KeyName;
use std::collections::BTreeSet;
use std::fmt;

/// One recorded approval of a key for a tool, with what the user saw when giving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub key: KeyName,
    /// The code it was given for (sha256 of `tool.py`, lowercase hex).
    pub code_hash: String,
    /// The key's allowlist then (`None`: it had none).
    pub allowlist: Option<Vec<AllowRule>>,
    /// Every key the tool declared then.
    pub declared: BTreeSet<KeyName>,
    /// Whether tools ran confined (`--sandbox strict`) when it was given.
    pub sandboxed: bool,
}

/// A tool version that wants a key, as things stand now.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub key: &'a KeyName,
    pub code_hash: &'a str,
    /// The key's allowlist now.
    pub allowlist: Option<&'a [AllowRule]>,
    /// Every key this version declares.
    pub declared: &'a BTreeSet<KeyName>,
    pub sandboxed: bool,
}

/// Whether the user must be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    Ask(Reason),
}

/// Why the user is asked, for the question and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Never approved for this tool.
    First,
    /// Approved for other code, and the key has no allowlist (or tools run unconfined).
    NewVersion { allowlist: bool, sandboxed: bool },
    /// The key's allowlist was widened since it was approved.
    Widened,
    /// The tool now declares keys it did not when this one was approved.
    MoreKeys(Vec<KeyName>),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::First => f.write_str("first use"),
            Reason::NewVersion {
                sandboxed: false, ..
            } => f.write_str(
                "new code, and tools run unconfined (--sandbox off), so an approval covers one \
                 version only",
            ),
            Reason::NewVersion { .. } => f.write_str(
                "new code, and the key has no allowlist, so an approval covers one version only",
            ),
            Reason::Widened => f.write_str("the key's allowlist was widened since it was approved"),
            Reason::MoreKeys(keys) => write!(
                f,
                "the tool now also wants {}",
                keys.iter()
                    .map(KeyName::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Whether one of `approvals` (of this tool, any key, newest first) covers `wanted`.
pub fn decide(wanted: &Wanted<'_>, approvals: &[Approval]) -> Verdict {
    let mut reason = None;
    for a in approvals.iter().filter(|a| &a.key == wanted.key) {
        let why = lapse(wanted, a);
        match why {
            None => return Verdict::Approved,
            Some(why) => {
                reason.get_or_insert(why);
            }
        }
    }
    Verdict::Ask(reason.unwrap_or(Reason::First))
}

/// Why approval `a` does not cover `wanted`, or `None` when it does.
fn lapse(wanted: &Wanted<'_>, a: &Approval) -> Option<Reason> {
    let more: Vec<KeyName> = wanted.declared.difference(&a.declared).cloned().collect();
    if !more.is_empty() {
        return Some(Reason::MoreKeys(more));
    }
    if widens(wanted.allowlist, a.allowlist.as_deref()) {
        return Some(Reason::Widened);
    }
    let list_holds =
        wanted.allowlist.is_some() && a.allowlist.is_some() && wanted.sandboxed && a.sandboxed;
    if list_holds || wanted.code_hash == a.code_hash {
        None
    } else {
        Some(Reason::NewVersion {
            allowlist: wanted.allowlist.is_some(),
            sandboxed: wanted.sandboxed,
        })
    }
}

/// Where a key may be sent, as the question says it: "only to api.x.com" or "to any host".
pub fn reach(key: &KeyName, allowlist: Option<&[AllowRule]>) -> String {
    match allowlist {
        Some([]) => "nowhere: its allowlist is empty".to_string(),
        Some(rules) => format!(
            "only to {}",
            rules
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => {
            format!(
                "to any host: it has no allowlist (`autotool keys allow {key} HOST…` sets one; \
                 set it before you say yes, since a list set after a yes is asked about again)"
            )
        }
    }
}

/// One key a question is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub key: KeyName,
    pub allowlist: Option<Vec<AllowRule>>,
    pub reason: Reason,
}

/// The question put to the user: "Allow weather to use WEATHER_API_KEY? It can send it only to
/// api.weather.example." It names the tool, each key and where each may be sent; it never asks
/// for a value.
pub fn question(tool: &str, asks: &[Ask]) -> String {
    let mut q = format!("Allow the tool `{tool}` to use ");
    let names: Vec<&str> = asks.iter().map(|a| a.key.as_str()).collect();
    q.push_str(&join_and(&names));
    q.push_str("? ");
    for a in asks {
        q.push_str(&format!(
            "It can send {} {}. ",
            a.key,
            reach(&a.key, a.allowlist.as_deref())
        ));
    }
    let again: Vec<String> = asks
        .iter()
        .filter(|a| a.reason != Reason::First)
        .map(|a| format!("{}: {}", a.key, a.reason))
        .collect();
    if !again.is_empty() {
        q.push_str(&format!("Asked again ({}). ", again.join("; ")));
    }
    q.push_str("autotool keeps the value; the model never sees it.");
    q
}

fn join_and(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests;
