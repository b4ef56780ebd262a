//! Privileges: no new privileges, no executable-memory gain, and every capability dropped.
//!
//! Capabilities are only ever used to build the sandbox: those of the user namespace, or, on a
//! machine without unprivileged user namespaces, the launcher's file capabilities
//! ([`BUILD_CAPABILITIES`]). The tool never holds any: bounding, ambient, inheritable, permitted
//! and effective sets are all emptied before exec.

use crate::error::{LaunchError, last};
use crate::namespaces::Mode;
use caps::{CapSet, Capability};

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
pub fn set_no_new_privs() -> Result<(), LaunchError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(LaunchError::NoNewPrivs(last()));
    }
    Ok(())
}

const PR_SET_MDWE: libc::c_int = 65;
const PR_MDWE_REFUSE_EXEC_GAIN: libc::c_ulong = 1;

/// `PR_SET_MDWE`: memory that was ever writable can never become executable, and no mapping is
/// created writable and executable at once. Kept across exec.
pub fn refuse_exec_gain() -> Result<(), LaunchError> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) } != 0 {
        return Err(LaunchError::Mdwe(last()));
    }
    Ok(())
}

/// Whether this process holds the file capabilities that replace a user namespace.
pub fn has_build_capabilities() -> bool {
    BUILD_CAPABILITIES
        .iter()
        .all(|c| caps::has_cap(None, CapSet::Permitted, *c).unwrap_or(false))
}

/// Make the build capabilities effective.
pub fn raise_build_capabilities() -> Result<(), LaunchError> {
    let err = |e: caps::errors::CapsError| LaunchError::DropCaps(e.to_string());
    for c in BUILD_CAPABILITIES {
        caps::raise(None, CapSet::Effective, c).map_err(err)?;
    }
    Ok(())
}

/// Empty every capability set. After this and `no_new_privs`, exec grants none back.
pub fn drop_capabilities(mode: Mode) -> Result<(), LaunchError> {
    let err = |e: caps::errors::CapsError| LaunchError::DropCaps(e.to_string());
    // The bounding set first: dropping from it needs CAP_SETPCAP, still held here.
    for c in caps::runtime::thread_all_supported() {
        caps::drop(None, CapSet::Bounding, c).map_err(err)?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(err)?;
    }
    let left = caps::read(None, CapSet::Permitted).map_err(err)?;
    if !left.is_empty() {
        return Err(LaunchError::DropCaps(format!(
            "still permitted after clearing ({mode:?}): {left:?}"
        )));
    }
    Ok(())
}
