//! Namespaces: a new user namespace (or, where those are off, the launcher's file capabilities),
//! then new network, mount, PID, IPC, UTS and cgroup namespaces.
//!
//! In the user namespace the tool is user and group [`autotool_policy::launch::TOOL_ID`]. It maps
//! to the invoking user, or to `nobody` (65534) when the launcher runs as root, so that a tool
//! started by root holds no root-owned file. The id maps are written by a short-lived helper
//! that stays in the parent namespace: only there may root map another id.

use crate::error::{LaunchError, last};
use crate::process::{self, Forked};
use autotool_policy::Plan;
use std::io::{Read, Write};

/// How the namespaces were made; decides how capabilities are dropped later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A user namespace: the capabilities held are only those inside it.
    UserNamespace,
    /// No user namespace (unavailable); the launcher's file capabilities built the sandbox.
    FileCapabilities,
}

const OTHER_NAMESPACES: libc::c_int = libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

/// The id the tool's user maps to outside.
fn outside_ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 { (65534, 65534) } else { (uid, gid) }
}

/// The namespaces entered, and who entered them.
#[derive(Debug, Clone, Copy)]
pub struct Entered {
    pub mode: Mode,
    /// The launcher was started by root (its ids are switched away from root afterwards).
    pub was_root: bool,
}

/// Enter every namespace. On return the caller is inside all of them but the PID namespace,
/// which only its children enter, and still has its original ids: host objects to bind are
/// opened now, in the new mount namespace, before [`become_tool_user`].
pub fn enter(plan: &Plan) -> Result<Entered, LaunchError> {
    // SAFETY: geteuid has no preconditions.
    let was_root = unsafe { libc::geteuid() } == 0;
    // A launcher holding file capabilities is not dumpable, so no helper of the same user could
    // write its id maps; it builds the sandbox with those capabilities instead. Root prefers a
    // user namespace (the tool then maps to `nobody`).
    let mode = if !was_root && crate::privileges::has_build_capabilities() {
        crate::privileges::raise_build_capabilities()?;
        Mode::FileCapabilities
    } else {
        match enter_user_namespace(plan)? {
            UserNs::Entered => Mode::UserNamespace,
            UserNs::Unavailable(err) => {
                if crate::privileges::has_build_capabilities() {
                    crate::privileges::raise_build_capabilities()?;
                    Mode::FileCapabilities
                } else {
                    return Err(LaunchError::UserNamespace(err));
                }
            }
        }
    };
    // SAFETY: unshare with namespace flags only changes this process's namespaces.
    if unsafe { libc::unshare(OTHER_NAMESPACES) } != 0 {
        return Err(LaunchError::Namespaces(last()));
    }
    Ok(Entered { mode, was_root })
}

/// Leave the invoking user's ids for the tool's: inside a user namespace, the tool's id (mapped
/// to the invoking user, or to `nobody` for root); with file capabilities, `nobody` when started
/// by root and the invoking user otherwise. The capabilities that build the sandbox stay
/// effective until [`crate::privileges::drop_capabilities`].
pub fn become_tool_user(plan: &Plan, entered: Entered) -> Result<(), LaunchError> {
    match entered.mode {
        Mode::UserNamespace => switch_ids(plan.uid, plan.gid, entered.was_root),
        Mode::FileCapabilities if entered.was_root => {
            switch_ids(65534, 65534, true)?;
            crate::privileges::raise_build_capabilities()
        }
        Mode::FileCapabilities => Ok(()),
    }
}

/// Outcome of trying a user namespace.
enum UserNs {
    Entered,
    /// `unshare(CLONE_NEWUSER)` itself failed; nothing changed, another way may be tried.
    Unavailable(std::io::Error),
}

fn enter_user_namespace(plan: &Plan) -> Result<UserNs, LaunchError> {
    let (outer_uid, outer_gid) = outside_ids();
    // SAFETY: getpid/geteuid have no preconditions.
    let (me, euid) = unsafe { (libc::getpid(), libc::geteuid()) };
    let (mut go_read, mut go_write) = pipe()?;
    let helper = match process::fork()? {
        Forked::Child => {
            drop(go_write);
            let mut byte = [0u8; 1];
            let code = match go_read.read(&mut byte) {
                Ok(1) if byte[0] == b'u' => {
                    match write_maps(me, euid == 0, plan.uid, plan.gid, outer_uid, outer_gid) {
                        Ok(()) => 0,
                        Err(err) => {
                            eprintln!("autotool-launcher: {err}");
                            1
                        }
                    }
                }
                // The launcher gave up on a user namespace.
                _ => 2,
            };
            process::exit_now(code)
        }
        Forked::Parent(pid) => pid,
    };
    drop(go_read);
    // SAFETY: unshare(CLONE_NEWUSER) only changes this process's user namespace.
    let unshared = unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0;
    let unshare_err = last();
    if unshared {
        go_write
            .write_all(b"u")
            .map_err(|source| LaunchError::IdMap {
                what: "signalling the helper",
                source,
            })?;
    }
    drop(go_write);
    let status = wait(helper)?;
    if !unshared {
        return Ok(UserNs::Unavailable(unshare_err));
    }
    if status != 0 {
        return Err(LaunchError::IdMap {
            what: "helper failed",
            source: std::io::Error::other(format!("exit status {status}")),
        });
    }
    Ok(UserNs::Entered)
}

fn write_maps(
    pid: i32,
    root: bool,
    uid: u32,
    gid: u32,
    outer_uid: u32,
    outer_gid: u32,
) -> Result<(), LaunchError> {
    let put = |what: &'static str, file: &str, contents: String| {
        std::fs::write(format!("/proc/{pid}/{file}"), contents)
            .map_err(|source| LaunchError::IdMap { what, source })
    };
    if !root {
        // Required before an unprivileged process may write gid_map.
        put("setgroups", "setgroups", "deny".into())?;
    }
    put("uid_map", "uid_map", format!("{uid} {outer_uid} 1\n"))?;
    put("gid_map", "gid_map", format!("{gid} {outer_gid} 1\n"))?;
    Ok(())
}

/// Switch ids, keeping the capabilities for building the sandbox (all dropped before exec).
fn switch_ids(uid: u32, gid: u32, was_root: bool) -> Result<(), LaunchError> {
    if was_root {
        // Root's supplementary groups (group 0 among them) must not follow the tool.
        // SAFETY: an empty group list with a null pointer is valid for setgroups.
        if unsafe { libc::setgroups(0, std::ptr::null()) } != 0 {
            return Err(LaunchError::SetIds(last()));
        }
    }
    // SAFETY: plain id-setting calls with valid ids; PR_SET_KEEPCAPS keeps the permitted set.
    unsafe {
        if libc::setresgid(gid, gid, gid) != 0 {
            return Err(LaunchError::SetIds(last()));
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 {
            return Err(LaunchError::SetIds(last()));
        }
        if libc::setresuid(uid, uid, uid) != 0 {
            return Err(LaunchError::SetIds(last()));
        }
    }
    let permitted = caps::read(None, caps::CapSet::Permitted)
        .map_err(|e| LaunchError::SetIds(std::io::Error::other(e.to_string())))?;
    caps::set(None, caps::CapSet::Effective, &permitted)
        .map_err(|e| LaunchError::SetIds(std::io::Error::other(e.to_string())))?;
    Ok(())
}

fn pipe() -> Result<(std::fs::File, std::fs::File), LaunchError> {
    let (r, w) = process::pipe()?;
    Ok((r.into(), w.into()))
}

fn wait(pid: i32) -> Result<i32, LaunchError> {
    let status = process::wait_for(pid, "waiting for the id-map helper")?;
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    })
}
