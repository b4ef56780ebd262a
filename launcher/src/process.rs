//! Process plumbing: dying with the parent, forking the tool, the outer waiter, sessions and
//! descriptors.

use crate::error::{LaunchError, last};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

/// Ask for SIGKILL when the parent dies, and make sure it has not died already. Returns the
/// parent's pid for [`recheck_parent`].
pub fn die_with_parent() -> Result<i32, LaunchError> {
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    set_pdeathsig()?;
    recheck_parent(parent)?;
    Ok(parent)
}

fn set_pdeathsig() -> Result<(), LaunchError> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; the remaining arguments are unused.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(LaunchError::ParentDeath(last()));
    }
    Ok(())
}

/// Credential changes clear the parent-death signal: set it again and check the parent is still
/// the one we started with.
pub fn recheck_parent(parent: i32) -> Result<(), LaunchError> {
    set_pdeathsig()?;
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        return Err(LaunchError::ParentGone);
    }
    Ok(())
}

/// Result of [`fork`].
#[derive(Debug)]
pub enum Forked {
    Parent(i32),
    Child,
}

/// Fork. Sound here because the launcher is single-threaded.
pub fn fork() -> Result<Forked, LaunchError> {
    // SAFETY: the launcher never starts a thread, so the child inherits a consistent address
    // space; glibc's fork keeps its own bookkeeping (tid, locks) right.
    match unsafe { libc::fork() } {
        -1 => Err(LaunchError::Io {
            what: "fork",
            source: last(),
        }),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// Leave at once, without unwinding or flushing anything shared with the parent.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code) }
}

/// Wait for `pid`, retrying on EINTR. Returns the raw wait status.
pub fn wait_for(pid: i32, what: &'static str) -> Result<i32, LaunchError> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid int for waitpid to fill.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        let err = last();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(LaunchError::Io { what, source: err });
        }
    }
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

/// A pipe whose write end only the outer launcher holds: when the launcher dies the tool sees
/// the pipe hang up. It closes the race between forking the tool and its parent-death signal.
#[derive(Debug)]
pub struct LifeLine {
    read: OwnedFd,
    write: OwnedFd,
}

impl LifeLine {
    pub fn new() -> Result<Self, LaunchError> {
        let (read, write) = pipe()?;
        Ok(LifeLine { read, write })
    }

    /// Descriptors the tool side must keep until exec (they are close-on-exec).
    pub fn child_fds(&self) -> [RawFd; 2] {
        [self.read.as_raw_fd(), self.write.as_raw_fd()]
    }

    /// In the tool: drop our copy of the write end, set the parent-death signal, then make sure
    /// the launcher is still alive (its write end is the only one left).
    pub fn arm(&self) -> Result<(), LaunchError> {
        // SAFETY: closing our own copy of the write end; the OwnedFd is not used again in this
        // process (we exec or exit next) and never closed twice because exec discards it.
        unsafe { libc::close(self.write.as_raw_fd()) };
        set_pdeathsig()?;
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

/// The outer launcher: forward termination to the tool, wait for it, relay its status.
pub fn wait_as_outer(child: i32, life: LifeLine) -> Result<u8, LaunchError> {
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
    let status = wait_for(child, "waiting for the tool")?;
    drop(life.write);
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status) as u8)
    } else if libc::WIFSIGNALED(status) {
        Ok((128 + libc::WTERMSIG(status)) as u8)
    } else {
        Err(LaunchError::Child(status))
    }
}

/// A new session: the tool has no controlling terminal to inject input into.
pub fn new_session() -> Result<(), LaunchError> {
    // SAFETY: setsid has no preconditions; PID 1 of a new namespace is not a group leader.
    if unsafe { libc::setsid() } < 0 {
        return Err(LaunchError::Setsid(last()));
    }
    Ok(())
}

/// Close every descriptor above stderr except `keep`; clear close-on-exec on `inherit` (those the
/// policy hands to the tool).
pub fn close_inherited(keep: &[RawFd], inherit: &[RawFd]) -> Result<(), LaunchError> {
    let mut keep: Vec<u32> = keep
        .iter()
        .filter(|&&fd| fd > 2)
        .map(|&fd| fd as u32)
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut lo: u32 = 3;
    for &fd in keep.iter().chain(std::iter::once(&u32::MAX)) {
        if fd > lo {
            let hi = if fd == u32::MAX { u32::MAX } else { fd - 1 };
            // SAFETY: close_range closes descriptors only; none of the closed ones is used again
            // (the kept ones are excluded).
            if unsafe { libc::syscall(libc::SYS_close_range, lo, hi, 0) } != 0 {
                return Err(LaunchError::CloseFds(last()));
            }
        }
        lo = fd.saturating_add(1);
    }
    for &fd in inherit {
        // SAFETY: F_SETFD with 0 clears close-on-exec on a descriptor the policy names.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(LaunchError::CloseFds(last()));
        }
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
