//! The init of the tool's PID namespace: PID 1 is the launcher's own code, and the tool is its
//! only child.
//!
//! When PID 1 of a PID namespace dies, the kernel kills every other process in it, and no
//! process can leave its PID namespace. The init arms its parent-death signal against the outer
//! launcher, the process the supervisor started and kills; so whenever that launcher dies (a
//! call timeout, the supervisor going away, `SIGKILL` from anyone), the init dies with it and
//! the tool with the init. Nothing here relies on the tool's own parent-death signal, which a
//! tool could clear: the tool holds none, and needs none.
//!
//! In order, the init:
//! 1. makes itself not dumpable (the tool runs as the same user; this closes `/proc/1/*` and
//!    ptrace to it) and arms the life line: the parent-death signal, then a look at a pipe only
//!    the outer launcher holds open, so a launcher that died a moment earlier is noticed too;
//! 2. builds the tool's root ([`crate::mounts`]): the fresh `/proc` must be mounted from inside
//!    the PID namespace;
//! 3. forks the tool, which confines itself and execs (see [`crate::run`]);
//! 4. closes every descriptor but stderr and the life line (stdin and stdout are the tool's),
//!    drops every capability, and arms the life line again;
//! 5. reaps children until the tool is reaped, then exits with the tool's status (128+N for
//!    signal N), which the outer launcher relays.
//!
//! The tool cannot reach its init: the init is outside the tool's Landlock domain, whose
//! signal and ptrace scopes stop at its edge; seccomp refuses ptrace; the init is not dumpable;
//! and signals sent from inside a PID namespace to its init are dropped unless it set a handler
//! (it sets none).

use crate::error::LaunchError;
use crate::mounts::{self, HostSources};
use crate::namespaces::Mode;
use crate::privileges;
use crate::process::{self, LifeLine};
use crate::sys::{Forked, Prctl, Sys};
use autotool_policy::Plan;

/// Which process came back from [`run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The init, done: its exit status (the tool's, or [`crate::LAUNCHER_FAILED`]).
    Init(i32),
    /// The tool, confined by `tool`, which returned `Ok`: only a tool forked from a template
    /// (which runs its code in this very process) ever gets here; an exec'd tool never returns.
    Tool,
}

/// Be the init: build the root, fork the tool (which runs `tool`: it either never comes back,
/// or comes back confined as [`Role::Tool`]), serve as its init. The init's own exit status is
/// the tool's, or [`crate::LAUNCHER_FAILED`] when the init failed (after saying why on stderr).
pub fn run(
    sys: &mut dyn Sys,
    plan: &Plan,
    sources: &HostSources,
    life: &mut LifeLine,
    mode: Mode,
    tool: impl FnOnce(&mut dyn Sys) -> Result<(), LaunchError>,
) -> Role {
    match serve(sys, plan, sources, life, mode, tool) {
        Ok(Some(code)) => Role::Init(i32::from(code)),
        Ok(None) => Role::Tool,
        Err(err) => {
            crate::report(&err);
            Role::Init(i32::from(crate::LAUNCHER_FAILED))
        }
    }
}

fn serve(
    sys: &mut dyn Sys,
    plan: &Plan,
    sources: &HostSources,
    life: &mut LifeLine,
    mode: Mode,
    tool: impl FnOnce(&mut dyn Sys) -> Result<(), LaunchError>,
) -> Result<Option<u8>, LaunchError> {
    sys.prctl(Prctl::NotDumpable)
        .map_err(|source| LaunchError::Io {
            what: "making the tool's init not dumpable",
            source,
        })?;
    life.arm(sys)?;
    mounts::build_root(plan, sources, sys)?;
    let pid = match sys.fork().map_err(|source| LaunchError::Io {
        what: "fork of the tool",
        source,
    })? {
        Forked::Child => match tool(sys) {
            Ok(()) => return Ok(None),
            Err(err) => {
                crate::report(&err);
                process::exit_now(i32::from(crate::LAUNCHER_FAILED))
            }
        },
        Forked::Parent(pid) => pid,
    };
    if let Err(err) = harden(sys, life, mode) {
        // The tool must not run under an init that is not what this module promises.
        let _ = sys.kill(pid, libc::SIGKILL);
        return Err(err);
    }
    reap(sys, pid).map(Some)
}

/// Keep nothing the tool could use: no descriptor but stderr and the life line, no capability.
fn harden(sys: &mut dyn Sys, life: &mut LifeLine, mode: Mode) -> Result<(), LaunchError> {
    sys.close_fds(&[2, life.read_fd()])
        .map_err(LaunchError::CloseFds)?;
    privileges::drop_capabilities(sys, mode)?;
    // Dropping capabilities keeps the parent-death signal (it clears only on a change of ids
    // or on gaining capabilities), but the life line costs one prctl and one poll to be sure.
    life.arm(sys)
}

/// Reap every child until `tool` is reaped; its status as the init's exit status.
fn reap(sys: &mut dyn Sys, tool: i32) -> Result<u8, LaunchError> {
    loop {
        let (pid, status) = sys.wait_any().map_err(|source| LaunchError::Io {
            what: "waiting for the tool",
            source,
        })?;
        if pid == tool {
            return process::exit_code(status);
        }
    }
}

#[cfg(test)]
mod tests;
