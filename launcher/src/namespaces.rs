//! Namespaces: a new user namespace (or, where those are off, the launcher's file capabilities),
//! then new network, mount, PID, IPC, UTS and cgroup namespaces.
//!
//! In the user namespace the tool is user and group [`autotool_policy::launch::TOOL_ID`]. It maps
//! to the invoking user, or to `nobody` (65534) when the launcher runs as root, so that a tool
//! started by root holds no root-owned file. The id maps are written by a short-lived helper
//! that stays in the parent namespace: only there may root map another id.

use crate::error::LaunchError;
use crate::privileges;
use crate::process;
use crate::sys::{CapSet, Forked, Prctl, Sys};
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

/// Every namespace but the user namespace, made in one `unshare`.
pub const OTHER_NAMESPACES: libc::c_int = libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

/// `nobody`: who the tool is outside when the launcher runs as root.
pub const NOBODY: u32 = 65534;

/// The id the tool's user maps to outside.
fn outside_ids(sys: &mut dyn Sys) -> (u32, u32) {
    let (uid, gid) = (sys.euid(), sys.egid());
    if uid == 0 {
        (NOBODY, NOBODY)
    } else {
        (uid, gid)
    }
}

/// The namespaces entered, and who entered them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entered {
    pub mode: Mode,
    /// The launcher was started by root (its ids are switched away from root afterwards).
    pub was_root: bool,
}

/// Enter every namespace. On return the caller is inside all of them but the PID namespace,
/// which only its children enter, and still has its original ids: host objects to bind are
/// opened now, in the new mount namespace, before [`become_tool_user`].
pub fn enter(sys: &mut dyn Sys, plan: &Plan) -> Result<Entered, LaunchError> {
    enter_as(sys, plan, false)
}

/// Enter every namespace for a template process (see [`crate::template`]): only in a user
/// namespace, never with file capabilities. Started by root, the template stays root inside
/// (mapped to root, with `nobody` mapped too), so the tools it forks can still open root's own
/// tool directories before they become `nobody`, as a launcher started by root does; started
/// by another user, the map is a tool's.
pub fn enter_template(sys: &mut dyn Sys, plan: &Plan) -> Result<Entered, LaunchError> {
    let entered = enter_as(sys, plan, true)?;
    if entered.mode != Mode::UserNamespace {
        return Err(LaunchError::TemplateUserNamespace);
    }
    Ok(entered)
}

fn enter_as(sys: &mut dyn Sys, plan: &Plan, template: bool) -> Result<Entered, LaunchError> {
    let was_root = sys.euid() == 0;
    if template {
        return match enter_user_namespace(sys, plan, was_root)? {
            UserNs::Entered => {
                sys.unshare(OTHER_NAMESPACES)
                    .map_err(LaunchError::Namespaces)?;
                Ok(Entered {
                    mode: Mode::UserNamespace,
                    was_root,
                })
            }
            UserNs::Unavailable(_) => Err(LaunchError::TemplateUserNamespace),
        };
    }
    // A launcher holding file capabilities is not dumpable, so no helper of the same user could
    // write its id maps; it builds the sandbox with those capabilities instead. Root prefers a
    // user namespace (the tool then maps to `nobody`).
    let mode = if !was_root && privileges::has_build_capabilities(sys) {
        privileges::raise_build_capabilities(sys)?;
        Mode::FileCapabilities
    } else {
        match enter_user_namespace(sys, plan, false)? {
            UserNs::Entered => Mode::UserNamespace,
            UserNs::Unavailable(err) => {
                if privileges::has_build_capabilities(sys) {
                    privileges::raise_build_capabilities(sys)?;
                    Mode::FileCapabilities
                } else {
                    return Err(LaunchError::UserNamespace(err));
                }
            }
        }
    };
    sys.unshare(OTHER_NAMESPACES)
        .map_err(LaunchError::Namespaces)?;
    Ok(Entered { mode, was_root })
}

/// Leave the invoking user's ids for the tool's: inside a user namespace, the tool's id (mapped
/// to the invoking user, or to `nobody` for root); with file capabilities, `nobody` when started
/// by root and the invoking user otherwise. The capabilities that build the sandbox stay
/// effective until [`crate::privileges::drop_capabilities`].
pub fn become_tool_user(
    sys: &mut dyn Sys,
    plan: &Plan,
    entered: Entered,
) -> Result<(), LaunchError> {
    match entered.mode {
        Mode::UserNamespace => switch_ids(sys, plan.uid, plan.gid, entered.was_root),
        Mode::FileCapabilities if entered.was_root => {
            switch_ids(sys, NOBODY, NOBODY, true)?;
            privileges::raise_build_capabilities(sys)
        }
        Mode::FileCapabilities => Ok(()),
    }
}

/// Outcome of trying a user namespace.
#[derive(Debug)]
enum UserNs {
    Entered,
    /// `unshare(CLONE_NEWUSER)` itself failed; nothing changed, another way may be tried.
    Unavailable(std::io::Error),
}

/// What the launcher tells the id-map helper.
const GO: u8 = b'u';

fn enter_user_namespace(
    sys: &mut dyn Sys,
    plan: &Plan,
    identity_root: bool,
) -> Result<UserNs, LaunchError> {
    let (outer_uid, outer_gid) = outside_ids(sys);
    let me = sys.pid();
    let root = sys.euid() == 0;
    let (mut go_read, mut go_write) = pipe()?;
    let helper = match sys.fork().map_err(|source| LaunchError::Io {
        what: "fork of the id-map helper",
        source,
    })? {
        Forked::Child => {
            drop(go_write);
            let maps = IdMaps {
                pid: me,
                root,
                uid: plan.uid,
                gid: plan.gid,
                outer_uid,
                outer_gid,
                identity_root,
            };
            process::exit_now(id_map_helper(sys, &mut go_read, &maps))
        }
        Forked::Parent(pid) => pid,
    };
    let unshared = sys.unshare(libc::CLONE_NEWUSER);
    if unshared.is_ok() {
        go_write
            .write_all(&[GO])
            .map_err(|source| LaunchError::IdMap {
                what: "signalling the helper",
                source,
            })?;
    }
    // The helper reads end-of-file once our write end is gone: the sign to give up.
    drop(go_write);
    drop(go_read);
    let status = sys.wait(helper).map_err(|source| LaunchError::Io {
        what: "waiting for the id-map helper",
        source,
    })?;
    if let Err(err) = unshared {
        return Ok(UserNs::Unavailable(err));
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(LaunchError::IdMap {
            what: "helper failed",
            source: std::io::Error::other(format!("wait status {status}")),
        });
    }
    Ok(UserNs::Entered)
}

/// The maps the helper writes for the launcher's new user namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IdMaps {
    /// The launcher, whose user namespace it is.
    pid: i32,
    /// The launcher runs as root (then no `setgroups` deny is needed, and root's groups are
    /// dropped later instead).
    root: bool,
    uid: u32,
    gid: u32,
    outer_uid: u32,
    outer_gid: u32,
    /// A template started by root: root and `nobody` mapped to themselves instead.
    identity_root: bool,
}

/// The helper's whole life: wait for the word, write the maps. Returns its exit status: 0 when
/// the maps are written, 1 when writing failed, 2 when the launcher gave up.
fn id_map_helper(sys: &mut dyn Sys, go: &mut impl Read, maps: &IdMaps) -> i32 {
    let mut byte = [0u8; 1];
    match go.read(&mut byte) {
        Ok(1) if byte[0] == GO => match write_maps(sys, maps) {
            Ok(()) => 0,
            Err(err) => {
                eprintln!("autotool-launcher: {err}");
                1
            }
        },
        _ => 2,
    }
}

fn write_maps(sys: &mut dyn Sys, m: &IdMaps) -> Result<(), LaunchError> {
    let mut put = |what: &'static str, file: &'static str, contents: String| {
        sys.write_id_map(m.pid, file, &contents)
            .map_err(|source| LaunchError::IdMap { what, source })
    };
    if !m.root {
        // Required before an unprivileged process may write gid_map.
        put("setgroups", "setgroups", "deny".into())?;
    }
    if m.identity_root {
        let identity = format!("0 0 1\n{NOBODY} {NOBODY} 1\n");
        put("uid_map", "uid_map", identity.clone())?;
        put("gid_map", "gid_map", identity)?;
        return Ok(());
    }
    put(
        "uid_map",
        "uid_map",
        format!("{} {} 1\n", m.uid, m.outer_uid),
    )?;
    put(
        "gid_map",
        "gid_map",
        format!("{} {} 1\n", m.gid, m.outer_gid),
    )?;
    Ok(())
}

/// Switch ids, keeping the capabilities for building the sandbox (all dropped before exec).
fn switch_ids(sys: &mut dyn Sys, uid: u32, gid: u32, was_root: bool) -> Result<(), LaunchError> {
    if was_root {
        // Root's supplementary groups (group 0 among them) must not follow the tool.
        sys.clear_groups().map_err(LaunchError::SetIds)?;
    }
    sys.set_gid(gid).map_err(LaunchError::SetIds)?;
    sys.prctl(Prctl::KeepCaps).map_err(LaunchError::SetIds)?;
    sys.set_uid(uid).map_err(LaunchError::SetIds)?;
    let permitted = sys
        .caps_read(CapSet::Permitted)
        .map_err(LaunchError::SetIds)?;
    sys.caps_set(CapSet::Effective, &permitted)
        .map_err(LaunchError::SetIds)?;
    Ok(())
}

fn pipe() -> Result<(std::fs::File, std::fs::File), LaunchError> {
    let (r, w) = process::pipe()?;
    Ok((r.into(), w.into()))
}

#[cfg(test)]
mod tests;
