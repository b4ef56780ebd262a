//! Which directories of the user's a tool may be granted (`READ_DIRS`, `WRITE_DIRS`).
//!
//! [`refusal`] is the one decision: given a directory's canonical path (symlinks and `..`
//! already resolved, once, by the caller), the user's home, autotool's own home and the paths
//! the user widened explicitly, it says why the directory cannot be granted, or nothing. The
//! rules are data ([`deny_rules`]), each a place and why it is denied:
//! - `/` and the home itself (grant the directories below it a tool needs);
//! - `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.config` (keys, credentials, application tokens);
//! - autotool's own home (its keys, approvals, ledger and tools: a tool could approve itself);
//! - `/etc`, `/proc`, `/sys`, `/dev`, `/run`, `/boot`;
//! - other users' homes (anything under `/home` outside the user's own home, and `/root`
//!   unless that is the user's home);
//! - the places the sandbox mounts itself (the system directories, `/tmp`, `/tool`, …), which
//!   cannot also show a directory of the user's.
//!
//! A directory is refused when it lies at or under a denied place, and also when it *holds*
//! one: granting `~` or a parent of autotool's home would expose them. Granting `~/work` is
//! fine, since `~/.ssh` is not under it.
//!
//! Some rules can be widened: a directory at or under a path the user widened explicitly is
//! not refused by them. The rules that cannot be widened are those whose breach would undo the
//! sandbox itself: `/`, autotool's own home, the kernel's interfaces (`/proc`, `/sys`, `/dev`)
//! and the sandbox's own places.
//!
//! Pure: no file is looked at; the caller canonicalises every path it passes.

use crate::launch::{
    HOME_MOUNT, PACKAGES_MOUNT, RUNTIME_MOUNT, SYSTEM_DIRS, TMP_MOUNT, TOOL_MOUNT,
};
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a place is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// `/`: the whole machine.
    Root,
    /// The user's home directory itself.
    Home,
    /// A directory of the home holding keys or credentials; the text says which.
    Secrets(&'static str),
    /// autotool's own home: keys, approvals, the ledger, the tools.
    AutotoolHome,
    /// A directory of the host's configuration or state; the text says which.
    Host(&'static str),
    /// A kernel interface (`/proc`, `/sys`, `/dev`).
    Kernel,
    /// Another user's home.
    OtherUser,
    /// A place the sandbox mounts itself.
    Sandbox,
}

impl Why {
    /// Whether the user may widen this rule explicitly.
    pub fn widenable(self) -> bool {
        !matches!(
            self,
            Why::Root | Why::AutotoolHome | Why::Kernel | Why::Sandbox
        )
    }
}

/// How a rule's place is matched against a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The place and everything below it, and any directory holding it.
    Subtree,
    /// Only the place itself and any directory holding it (the home: what lies below it is
    /// judged by the other rules).
    Itself,
    /// Everything below the place except the user's home and what lies in it, and any
    /// directory holding the place (`/home`: other users' homes).
    SubtreeButHome,
}

/// One denied place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyRule {
    pub place: PathBuf,
    pub reach: Reach,
    pub why: Why,
}

/// The deny rules for a user whose home is `home` and whose autotool home is `autotool_home`
/// (both canonical), in the order they are checked.
pub fn deny_rules(home: &Path, autotool_home: &Path) -> Vec<DenyRule> {
    let rule = |place: PathBuf, reach, why| DenyRule { place, reach, why };
    let mut rules = vec![
        rule("/".into(), Reach::Itself, Why::Root),
        rule(home.to_path_buf(), Reach::Itself, Why::Home),
        rule(
            autotool_home.to_path_buf(),
            Reach::Subtree,
            Why::AutotoolHome,
        ),
    ];
    for (dir, what) in [
        (".ssh", "SSH keys"),
        (".gnupg", "GnuPG keys"),
        (".aws", "AWS credentials"),
        (".config", "applications' settings and tokens"),
    ] {
        rules.push(rule(home.join(dir), Reach::Subtree, Why::Secrets(what)));
    }
    for dir in ["/proc", "/sys", "/dev"] {
        rules.push(rule(dir.into(), Reach::Subtree, Why::Kernel));
    }
    for (dir, what) in [
        ("/etc", "the machine's configuration and password hashes"),
        ("/run", "running services' sockets and state"),
        ("/boot", "the kernel and the boot loader"),
    ] {
        rules.push(rule(dir.into(), Reach::Subtree, Why::Host(what)));
    }
    rules.push(rule("/home".into(), Reach::SubtreeButHome, Why::OtherUser));
    if !home.starts_with("/root") {
        rules.push(rule("/root".into(), Reach::Subtree, Why::OtherUser));
    }
    for dir in SYSTEM_DIRS.iter().chain(&[
        TMP_MOUNT,
        TOOL_MOUNT,
        RUNTIME_MOUNT,
        PACKAGES_MOUNT,
        HOME_MOUNT,
    ]) {
        rules.push(rule(dir.into(), Reach::Subtree, Why::Sandbox));
    }
    rules
}

impl DenyRule {
    /// Whether granting `path` breaks this rule, for a user whose home is `home`.
    pub fn denies(&self, path: &Path, home: &Path) -> bool {
        let holds = self.place.starts_with(path);
        holds
            || match self.reach {
                Reach::Itself => false,
                Reach::Subtree => path.starts_with(&self.place),
                Reach::SubtreeButHome => path.starts_with(&self.place) && !path.starts_with(home),
            }
    }
}

/// Why a directory cannot be granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The directory asked for.
    pub path: PathBuf,
    /// The denied place it is, lies in or holds.
    pub place: PathBuf,
    pub why: Why,
    /// The user's home, to write paths below it as `~/…`.
    home: PathBuf,
}

impl Refusal {
    /// Whether the user may widen the rule explicitly.
    pub fn widenable(&self) -> bool {
        self.why.widenable()
    }
}

/// `path` as the user writes it: `~`, `~/…` below the home.
pub fn shown(path: &Path, home: &Path) -> String {
    if home.parent().is_some() {
        if path == home {
            return "~".into();
        }
        if let Ok(rest) = path.strip_prefix(home) {
            return format!("~/{}", rest.display());
        }
    }
    path.display().to_string()
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = shown(&self.path, &self.home);
        let place = shown(&self.place, &self.home);
        let what = match self.why {
            Why::Root => "the whole machine".to_string(),
            Why::Home => "your home directory itself; grant only the directories below it the \
                          tool needs"
                .into(),
            Why::Secrets(what) | Why::Host(what) => format!("where {what} are kept"),
            Why::AutotoolHome => "autotool's own home (its keys, approvals, ledger and tools), \
                                  which no tool is ever granted"
                .into(),
            Why::Kernel => "a kernel interface, which no tool is ever granted".into(),
            Why::OtherUser => "another user's home".into(),
            Why::Sandbox => "a place the sandbox mounts itself, so it cannot also show a \
                             directory of yours there; keep the directory elsewhere"
                .into(),
        };
        if self.path == self.place {
            write!(f, "{path} is {what}")?;
        } else if self.why == Why::OtherUser {
            if self.path.starts_with(&self.place) {
                write!(f, "{path} is {what}")?;
            } else {
                write!(f, "{path} holds other users' homes")?;
            }
        } else if self.path.starts_with(&self.place) {
            write!(f, "{path} lies in {place}, {what}")?;
        } else {
            write!(f, "{path} holds {place}, {what}")?;
        }
        if self.widenable() {
            write!(
                f,
                " (to grant it anyway, widen the rule for {path} explicitly)"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Refusal {}

/// Why the directory at the canonical `path` cannot be granted to a tool, or `None` when it
/// can. `home` and `autotool_home` are the user's home and autotool's own home, canonical;
/// `widened` the paths the user widened explicitly (a directory at or under one of them is
/// not refused by a rule that can be widened).
pub fn refusal(
    path: &Path,
    home: &Path,
    autotool_home: &Path,
    widened: &[PathBuf],
) -> Option<Refusal> {
    let is_widened = widened.iter().any(|w| path.starts_with(w));
    deny_rules(home, autotool_home)
        .into_iter()
        .find(|rule| rule.denies(path, home) && !(is_widened && rule.why.widenable()))
        .map(|rule| Refusal {
            path: path.to_path_buf(),
            place: rule.place,
            why: rule.why,
            home: home.to_path_buf(),
        })
}

#[cfg(test)]
mod tests;
