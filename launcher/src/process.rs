//! Process plumbing: dying with the parent, the life line, the outer waiter and the status it
//! relays, sessions and descriptors.

use crate::error::{LaunchError, last};
use crate::sys::{Prctl, Sys};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

/// Ask for SIGKILL when the parent dies, and make sure it has not died already. Returns the
/// parent's pid for [`recheck_parent`].
pub fn die_with_parent(sys: &mut dyn Sys) -> Result<i32, LaunchError> {
    let parent = sys.parent_pid();
    recheck_parent(sys, parent)?;
    Ok(parent)
}

/// Credential changes clear the parent-death signal: set it again and check the parent is still
/// the one we started with.
pub fn recheck_parent(sys: &mut dyn Sys, parent: i32) -> Result<(), LaunchError> {
    sys.prctl(Prctl::ParentDeathSignal(libc::SIGKILL))
        .map_err(LaunchError::ParentDeath)?;
    if sys.parent_pid() != parent {
        return Err(LaunchError::ParentGone);
    }
    Ok(())
}

/// Leave at once, without unwinding or flushing anything shared with the parent.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code) }
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> Result<(OwnedFd, OwnedFd), LaunchError> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(LaunchError::Io {
            what: "pipe2",
            source: last(),
        });
    }
    // SAFETY: pipe2 succeeded, so both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pipe whose write end only the outer launcher holds: when the launcher dies the pipe hangs
/// up. It closes the race between forking the init and arming its parent-death signal: the
/// init arms the signal, then looks at the pipe, so the launcher's death is noticed either way.
#[derive(Debug)]
pub struct LifeLine {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl LifeLine {
    pub fn new() -> Result<Self, LaunchError> {
        let (read, write) = pipe()?;
        Ok(LifeLine {
            read,
            write: Some(write),
        })
    }

    /// For tests: a copy of the outer end, standing for a launcher that is still alive.
    #[cfg(test)]
    pub(crate) fn outer_end(&self) -> std::io::Result<OwnedFd> {
        self.write
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the outer end is gone"))?
            .try_clone()
    }

    /// The descriptor the child keeps while it holds the life line.
    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// In the child: drop our copy of the write end, set the parent-death signal, then make sure
    /// the launcher is still alive (its write end is the only one left). Calling it again
    /// re-arms the signal (a credential change clears it) and looks again.
    pub fn arm(&mut self, sys: &mut dyn Sys) -> Result<(), LaunchError> {
        self.write = None;
        sys.prctl(Prctl::ParentDeathSignal(libc::SIGKILL))
            .map_err(LaunchError::ParentDeath)?;
        let mut pfd = libc::pollfd {
            fd: self.read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: pfd is a valid pollfd array of length 1.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        if n < 0 {
            return Err(LaunchError::ParentDeath(last()));
        }
        if n > 0 && pfd.revents & (libc::POLLHUP | libc::POLLIN | libc::POLLERR) != 0 {
            return Err(LaunchError::ParentGone);
        }
        Ok(())
    }
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_kill(_sig: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; pid is our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// The outer launcher: forward termination to the init (whose death ends the tool's whole PID
/// namespace), wait for it, relay its status.
pub fn wait_as_outer(sys: &mut dyn Sys, child: i32, life: LifeLine) -> Result<u8, LaunchError> {
    drop(life.read);
    CHILD.store(child, Ordering::SeqCst);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a plain handler is valid; forward_kill only calls
        // async-signal-safe functions.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward_kill as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // The tool owns stdin and stdout now; our copies would keep the pipes open after it exits.
    // SAFETY: closing stdin/stdout of this process; nothing in the waiter uses them.
    unsafe {
        libc::close(0);
        libc::close(1);
    }
    let status = sys.wait(child).map_err(|source| LaunchError::Io {
        what: "waiting for the tool's init",
        source,
    })?;
    drop(life.write);
    exit_code(status)
}

/// The exit status a raw wait status is relayed as: the exit code, or 128+N for death by
/// signal N.
pub fn exit_code(status: i32) -> Result<u8, LaunchError> {
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status) as u8)
    } else if libc::WIFSIGNALED(status) {
        Ok((128 + libc::WTERMSIG(status)) as u8)
    } else {
        Err(LaunchError::Child(status))
    }
}

/// A new session: the tool has no controlling terminal to inject input into.
pub fn new_session(sys: &mut dyn Sys) -> Result<(), LaunchError> {
    // A child of the init is never a process-group leader, so this cannot fail with EPERM.
    sys.setsid().map_err(LaunchError::Setsid)
}

/// Close every descriptor above stderr except `keep`; clear close-on-exec on `inherit` (those the
/// policy hands to the tool).
pub fn close_inherited(keep: &[RawFd], inherit: &[RawFd]) -> Result<(), LaunchError> {
    close_all_but(3, keep).map_err(LaunchError::CloseFds)?;
    for &fd in inherit {
        // SAFETY: F_SETFD with 0 clears close-on-exec on a descriptor the policy names.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(LaunchError::CloseFds(last()));
        }
    }
    Ok(())
}

/// Close every descriptor from `from` up, except `keep`.
pub(crate) fn close_all_but(from: u32, keep: &[RawFd]) -> std::io::Result<()> {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .filter(|&fd| fd >= from)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut lo: u32 = from;
    for &fd in keep.iter().chain(std::iter::once(&u32::MAX)) {
        if fd > lo {
            let hi = if fd == u32::MAX { u32::MAX } else { fd - 1 };
            // SAFETY: close_range closes descriptors only. The callers use none of the closed
            // ones again and drop none of their owners: they exec or `_exit` next.
            if unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0) } != 0 {
                return Err(last());
            }
        }
        lo = fd.saturating_add(1);
    }
    Ok(())
}

/// Change to the tool's working directory.
pub fn chdir(path: &Path) -> Result<(), LaunchError> {
    std::env::set_current_dir(path).map_err(|source| LaunchError::Chdir {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
