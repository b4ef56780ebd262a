//! Granting a tool a directory of the user's (`READ_DIRS`, `WRITE_DIRS`): the declared path
//! resolved once, here, into the [`UserDir`] its launch policy carries.
//!
//! [`resolve_grant`] expands a leading `~/`, requires an absolute path, resolves symlinks and
//! `..` (once: the launcher later opens exactly the resulting path without following any
//! symlink, and refuses it if it is no longer the directory granted, by device and inode),
//! requires an existing directory and applies [`autotool_policy::dirs::refusal`]: never `/`,
//! the home itself, `~/.ssh`, `~/.gnupg`, `~/.aws`, `~/.config`, autotool's own home, `/etc`,
//! `/proc`, other users' homes, the places the sandbox mounts itself, nor a directory holding
//! one of them, unless the user widened that rule explicitly (where it can be widened).
//!
//! [`resolve_widening`] checks a directory the user widens the rules for (`autotool dirs
//! widen`): the same resolution, and never a rule that cannot be widened.

use autotool_policy::UserDir;
use autotool_policy::dirs::refusal;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Resolve the directory a tool declared (`~/notes`, `/srv/data`) for a grant: read-only, or
/// read-write when `write`. `home` is the user's home, `autotool_home` autotool's own home,
/// `widened` the paths the user widened deny rules for. The error says why, in words a user
/// reads.
pub fn resolve_grant(
    declared: &str,
    write: bool,
    home: &Path,
    autotool_home: &Path,
    widened: &[PathBuf],
) -> Result<UserDir, String> {
    let path = expand(declared, home)?;
    let canonical = std::fs::canonicalize(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{declared} does not exist"),
        std::io::ErrorKind::PermissionDenied => {
            format!("{declared} cannot be reached: permission denied")
        }
        _ => format!("{declared} cannot be resolved: {e}"),
    })?;
    // The final component is not followed: canonical names no symlink, and one put there since
    // is refused below (and again by the launcher).
    let meta = std::fs::symlink_metadata(&canonical)
        .map_err(|e| format!("{declared} ({}) cannot be read: {e}", canonical.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "{declared} ({}) is not a directory",
            canonical.display()
        ));
    }
    let again = std::fs::canonicalize(&canonical).ok();
    if again.as_deref() != Some(canonical.as_path()) {
        return Err(format!(
            "{declared} changed while it was being resolved; ask again"
        ));
    }
    let home_link = home_link(declared, &path, home);
    let home = canonical_or_same(home);
    let autotool_home = canonical_or_same(autotool_home);
    let widened: Vec<PathBuf> = widened.iter().map(|w| canonical_or_same(w)).collect();
    if let Some(refused) = refusal(&canonical, &home, &autotool_home, &widened) {
        return Err(if canonical == path {
            refused.to_string()
        } else {
            format!("{declared} resolves to {}: {refused}", canonical.display())
        });
    }
    Ok(UserDir {
        path: canonical,
        write,
        dev: meta.dev(),
        ino: meta.ino(),
        home_link,
    })
}

/// Resolve a directory the user asks to widen the deny rules for (`autotool dirs widen
/// PATH`): `~` expanded, symlinks and `..` resolved once, an existing directory. Returns its
/// canonical path and the rule it widens, in words. Refused, with the reason, when no rule
/// refuses it (there is nothing to widen), or when a rule that can never be widened still
/// would (`/`, autotool's own home and what holds it, the kernel's interfaces, the sandbox's
/// own places): widening never reaches those.
pub fn resolve_widening(
    declared: &str,
    home: &Path,
    autotool_home: &Path,
) -> Result<(PathBuf, String), String> {
    let path = expand(declared, home)?;
    let canonical =
        std::fs::canonicalize(&path).map_err(|e| format!("{declared} cannot be resolved: {e}"))?;
    if !canonical.is_dir() {
        return Err(format!(
            "{declared} ({}) is not a directory",
            canonical.display()
        ));
    }
    let home = canonical_or_same(home);
    let autotool_home = canonical_or_same(autotool_home);
    let Some(refused) = refusal(&canonical, &home, &autotool_home, &[]) else {
        return Err(format!(
            "{declared} ({}) is refused by no deny rule: there is nothing to widen (a tool that \
             declares it is asked about it as it is)",
            canonical.display()
        ));
    };
    if let Some(still) = refusal(
        &canonical,
        &home,
        &autotool_home,
        std::slice::from_ref(&canonical),
    ) {
        return Err(format!("the rule cannot be widened: {still}"));
    }
    use autotool_policy::dirs::Why;
    let why = match refused.why {
        Why::Home => "your home itself".to_owned(),
        Why::Secrets(what) | Why::Host(what) => format!("where {what} are kept"),
        Why::OtherUser => "another user's home".to_owned(),
        _ => "denied".to_owned(),
    };
    let what = format!(
        "{}: {why}",
        autotool_policy::dirs::shown(&refused.place, &home)
    );
    Ok((canonical, what))
}

/// Where the tool's code finds the grant below its own home: the declared path's place below
/// `~` (`~/notes` is `notes`, `~/a/../b` is `b`), or, for a path written in full, its place below
/// the user's home when it lies there. `None` when it lies elsewhere (the tool names it by its
/// full path, where it is mounted).
fn home_link(declared: &str, expanded: &Path, home: &Path) -> Option<PathBuf> {
    let rest = match declared.strip_prefix("~/") {
        Some(rest) => PathBuf::from(rest),
        None => expanded.strip_prefix(home).ok()?.to_path_buf(),
    };
    let mut plain = PathBuf::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => plain.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                if !plain.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!plain.as_os_str().is_empty()).then_some(plain)
}

/// `declared` with a leading `~` or `~/` put in terms of `home`; it must then be absolute.
fn expand(declared: &str, home: &Path) -> Result<PathBuf, String> {
    if declared.is_empty() {
        return Err("an empty directory name cannot be granted".into());
    }
    if declared.contains('\0') {
        return Err(format!("{declared:?} holds a NUL byte"));
    }
    let path = if declared == "~" {
        home.to_path_buf()
    } else if let Some(rest) = declared.strip_prefix("~/") {
        home.join(rest.trim_start_matches('/'))
    } else if declared.starts_with('~') {
        return Err(format!(
            "{declared}: only your own home can be written `~`; write another user's directory \
             in full"
        ));
    } else {
        PathBuf::from(declared)
    };
    if !path.is_absolute() || !path.components().any(|c| c == Component::RootDir) {
        return Err(format!(
            "{declared} is not an absolute path; write it from `/` or `~/`"
        ));
    }
    Ok(path)
}

/// The canonical form of a path that exists; the path itself otherwise.
fn canonical_or_same(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests;
