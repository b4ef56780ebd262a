//! Privileges: no new privileges, no executable-memory gain, and every capability dropped.
//!
//! Capabilities are only ever used to build the sandbox: those of the user namespace, or, on a
//! machine without unprivileged user namespaces, the launcher's file capabilities
//! ([`BUILD_CAPABILITIES`]). The tool never holds any: bounding, ambient, inheritable, permitted
//! and effective sets are all emptied before exec.

use crate::error::LaunchError;
use crate::namespaces::Mode;
use crate::sys::{CapSet, Prctl, Sys};
use caps::Capability;

/// What building the sandbox needs without a user namespace: namespaces, mounts and
/// `pivot_root` (`CAP_SYS_ADMIN`), bringing up `lo` (`CAP_NET_ADMIN`), emptying the bounding set
/// (`CAP_SETPCAP`). The file capabilities `autotool setup --launcher` installs are exactly these.
pub const BUILD_CAPABILITIES: [Capability; 3] = [
    Capability::CAP_SYS_ADMIN,
    Capability::CAP_NET_ADMIN,
    Capability::CAP_SETPCAP,
];

/// `PR_SET_NO_NEW_PRIVS`: nothing exec'd from here on gains privileges (setuid bits, file
/// capabilities), and Landlock and seccomp may be applied without privileges.
pub fn set_no_new_privs(sys: &mut dyn Sys) -> Result<(), LaunchError> {
    sys.prctl(Prctl::NoNewPrivs)
        .map_err(LaunchError::NoNewPrivs)
}

/// `PR_SET_MDWE`: memory that was ever writable can never become executable, and no mapping is
/// created writable and executable at once. Kept across exec.
pub fn refuse_exec_gain(sys: &mut dyn Sys) -> Result<(), LaunchError> {
    sys.prctl(Prctl::RefuseExecGain).map_err(LaunchError::Mdwe)
}

/// Whether this process holds the file capabilities that replace a user namespace.
pub fn has_build_capabilities(sys: &mut dyn Sys) -> bool {
    let Ok(permitted) = sys.caps_read(CapSet::Permitted) else {
        return false;
    };
    BUILD_CAPABILITIES.iter().all(|c| permitted.contains(c))
}

/// Make the build capabilities effective.
pub fn raise_build_capabilities(sys: &mut dyn Sys) -> Result<(), LaunchError> {
    for c in BUILD_CAPABILITIES {
        sys.caps_raise(CapSet::Effective, c)
            .map_err(|e| LaunchError::DropCaps(format!("raising {c}: {e}")))?;
    }
    Ok(())
}

/// Keep only `keep`, for a template started by root: the bounding set shrinks to `keep`, the
/// ambient and inheritable sets empty, and `keep` stays permitted and effective (a process of
/// uid 0 keeps its permitted set across exec).
pub fn keep_only(sys: &mut dyn Sys, keep: &[Capability]) -> Result<(), LaunchError> {
    let err = |what: String| move |e: std::io::Error| LaunchError::DropCaps(format!("{what}: {e}"));
    for c in sys.caps_supported() {
        if !keep.contains(&c) {
            sys.caps_drop(CapSet::Bounding, c)
                .map_err(err(format!("dropping {c} from the bounding set")))?;
        }
    }
    let kept: crate::sys::Caps = keep.iter().copied().collect();
    for set in [CapSet::Ambient, CapSet::Inheritable] {
        sys.caps_clear(set)
            .map_err(err(format!("clearing the {set:?} set")))?;
    }
    for set in [CapSet::Effective, CapSet::Permitted] {
        sys.caps_set(set, &kept)
            .map_err(err(format!("setting the {set:?} set")))?;
    }
    Ok(())
}

/// Empty every capability set. After this and `no_new_privs`, exec grants none back.
pub fn drop_capabilities(sys: &mut dyn Sys, mode: Mode) -> Result<(), LaunchError> {
    let err = |what: String| move |e: std::io::Error| LaunchError::DropCaps(format!("{what}: {e}"));
    // The bounding set first: dropping from it needs CAP_SETPCAP, still held here.
    for c in sys.caps_supported() {
        sys.caps_drop(CapSet::Bounding, c)
            .map_err(err(format!("dropping {c} from the bounding set")))?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        sys.caps_clear(set)
            .map_err(err(format!("clearing the {set:?} set")))?;
    }
    let left = sys
        .caps_read(CapSet::Permitted)
        .map_err(err("reading the permitted set".into()))?;
    if !left.is_empty() {
        let mut left: Vec<Capability> = left.into_iter().collect();
        left.sort_by_key(Capability::index);
        return Err(LaunchError::DropCaps(format!(
            "still permitted after clearing ({mode:?}): {left:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
