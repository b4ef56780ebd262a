//! Landlock: a second wall behind the mounts. Every filesystem right of ABI 6 is handled, so a
//! path not covered by a rule of the plan is unreachable even if a mount exposed it; TCP bind is
//! denied and TCP connect allowed only to the egress listener's port; abstract unix sockets and
//! signals outside the sandbox are out of scope. A directory of the user's granted for writing
//! gets read, write, create, rename and remove, never execute, and no symlink, device node,
//! fifo or socket can be made in it (a planted symlink would be followed by the user's own
//! programs later). Applied as a hard requirement: a kernel that
//! cannot enforce all of it is an error, never a partial sandbox.

use crate::error::LaunchError;
use ::landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use autotool_policy::{FsAccess, Plan};

/// The ABI whose rights the ruleset handles (and the kernel must offer at least).
const HANDLED: ABI = ABI::V6;

/// The kernel's Landlock ABI, or the reason there is none.
pub fn kernel_abi() -> Result<i32, std::io::Error> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call only returns the ABI.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(abi as i32)
    }
}

/// Refuse to go on when the kernel's ABI is below what the plan requires.
pub fn check_abi(need: u8) -> Result<(), LaunchError> {
    let have = kernel_abi().map_err(LaunchError::LandlockMissing)?;
    if have < i32::from(need) {
        return Err(LaunchError::LandlockAbi { have, need });
    }
    Ok(())
}

fn rights(access: FsAccess) -> BitFlags<AccessFs> {
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    match access {
        FsAccess::Read => read,
        FsAccess::ReadExec => read | AccessFs::Execute,
        FsAccess::ReadWrite => {
            read | AccessFs::WriteFile
                | AccessFs::Truncate
                | AccessFs::RemoveDir
                | AccessFs::RemoveFile
                | AccessFs::MakeDir
                | AccessFs::MakeReg
                | AccessFs::MakeSym
                | AccessFs::Refer
        }
        // No execute, and no symlink, device node, fifo or socket made in the user's directory.
        FsAccess::UserWrite => {
            read | AccessFs::WriteFile
                | AccessFs::Truncate
                | AccessFs::RemoveDir
                | AccessFs::RemoveFile
                | AccessFs::MakeDir
                | AccessFs::MakeReg
                | AccessFs::Refer
        }
        FsAccess::Device => {
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
        }
    }
}

/// Build the plan's ruleset and apply it to this (single) thread.
pub fn restrict(plan: &Plan) -> Result<(), LaunchError> {
    let err = |e: &dyn std::fmt::Display| LaunchError::LandlockRestrict(e.to_string());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(HANDLED))
        .map_err(|e| err(&e))?
        .handle_access(AccessNet::from_all(HANDLED))
        .map_err(|e| err(&e))?
        .scope(Scope::from_all(HANDLED))
        .map_err(|e| err(&e))?
        .create()
        .map_err(|e| err(&e))?;
    for rule in &plan.landlock {
        // Optional system directories the host lacks were not mounted: nothing to grant.
        if !rule.path.exists() {
            continue;
        }
        let fd = PathFd::new(&rule.path).map_err(|e| {
            LaunchError::LandlockRestrict(format!("opening {:?} for a rule: {e}", rule.path))
        })?;
        let mut access = rights(rule.access);
        // Directory-only rights on a file are refused by the kernel; keep the file rights.
        if !rule.path.is_dir() {
            access &= AccessFs::from_file(HANDLED);
        }
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err(&e))?;
    }
    for &port in &plan.connect_ports {
        ruleset = ruleset
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(|e| err(&e))?;
    }
    let status = ruleset.restrict_self().map_err(|e| err(&e))?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(LaunchError::LandlockRestrict(format!(
            "the kernel enforced it only partly ({:?})",
            status.ruleset
        )));
    }
    Ok(())
}
