//! The native side of a template's fork: what the template's Python calls in each forked child,
//! before a single line of the tool's code runs, through the C entry point `autotool_confine` of
//! the launcher's native library (crate `autotool-launcher-native`, which exports [`confine`]
//! from a `cdylib`; the launcher carries it, see [`crate::template`]).
//!
//! [`confine`] reads the tool's launch policy from a descriptor the template passed on
//! unread ([`autotool_policy::fork`]), then runs the launcher's own stages ([`crate::sandbox`], flavor
//! [`crate::Flavor::Fork`]) in the forked child: a new user namespace nested in the template's,
//! new network, mount, PID, IPC, UTS and cgroup namespaces, the egress listener, the tool's
//! init as PID 1, the tool's root, limits, session, descriptors, no executable-memory gain, no
//! capabilities, Landlock and the tool's seccomp allow-list. The forked child itself stays
//! outside as the outer waiter and the init inside as PID 1, both in the launcher's code, and
//! neither ever returns to Python: only the confined tool does.
//!
//! The entry point is called through `ctypes.PyDLL`, holding the GIL, in a single-threaded
//! process.

use crate::{Flavor, LAUNCHER_FAILED, Role, process};
use autotool_policy::LaunchPolicy;
use autotool_policy::fork::MAX_POLICY_BYTES;

/// The policy the bytes hold, made a forked tool's: the egress report socket is the one the
/// template received, the uses channel is where the policy names it (the template put it
/// there), and nothing else is kept. A policy naming a descriptor the template did not receive,
/// or the other way round, is refused.
fn forked_policy(
    bytes: &[u8],
    report_fd: i32,
    uses_fd: i32,
) -> Result<LaunchPolicy, crate::LaunchError> {
    let mut policy = LaunchPolicy::from_json(bytes)?;
    policy.keep_fds.clear();
    let mismatch =
        |what: &str| crate::LaunchError::ForkRequest(format!("they disagree about {what}"));
    match policy.egress.as_mut() {
        Some(egress) if report_fd > 2 => egress.report_fd = report_fd,
        None if report_fd < 0 => {}
        _ => return Err(mismatch("the egress report socket")),
    }
    match policy.uses_fd {
        Some(fd) if fd == uses_fd => {}
        None if uses_fd < 0 => {}
        _ => return Err(mismatch("the uses channel")),
    }
    Ok(policy)
}

/// Read the launch policy from `fd` (a memory file the supervisor wrote, read from its start),
/// at most [`MAX_POLICY_BYTES`].
fn read_policy(fd: i32) -> Result<Vec<u8>, crate::LaunchError> {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::fs::FileExt;
    let failed = |what: String| crate::LaunchError::ForkRequest(what);
    if fd <= 2 {
        return Err(failed(format!("the policy descriptor {fd} is stdio")));
    }
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(failed(format!("the policy descriptor {fd} is not open")));
    }
    // SAFETY: the descriptor is open (checked above) and was handed to this child, unread, by
    // the template for this purpose alone; owning it closes it once read.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut buf = vec![0u8; 64 << 10];
    let mut len = 0;
    loop {
        if len == buf.len() {
            if buf.len() >= MAX_POLICY_BYTES {
                return Err(failed(format!(
                    "the policy is larger than {MAX_POLICY_BYTES} bytes"
                )));
            }
            // Grown in place of a copy: the old buffer is wiped before it is freed.
            let mut bigger = vec![0u8; (buf.len() * 2).min(MAX_POLICY_BYTES)];
            bigger[..len].copy_from_slice(&buf[..len]);
            wipe(&mut buf);
            buf = bigger;
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed(format!("reading the policy: {e}"))),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// Say why the forked child cannot become its tool, and exit.
fn fail(err: &crate::LaunchError) -> ! {
    crate::report(err);
    process::exit_now(i32::from(LAUNCHER_FAILED))
}

/// Overwrite `bytes` with zeros in a way the compiler keeps.
fn wipe(bytes: &mut [u8]) {
    for b in bytes.iter_mut() {
        // SAFETY: `b` is a valid, aligned, exclusive reference to one byte.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// Have the C library overwrite every block it frees (on) or stop doing so (off). While on,
/// what the child parsed of its policy and freed does not linger in its heap, which the tool
/// inherits.
fn perturb_freed(on: bool) {
    // SAFETY: mallopt only changes an allocator setting of this (single-threaded) process.
    unsafe { libc::mallopt(libc::M_PERTURB, if on { 0xa5 } else { 0 }) };
}

/// Confine the calling process (a child the template just forked, stdio already the tool's) as
/// the tool whose launch policy `policy_fd` holds, keeping the egress report socket `report_fd`
/// and the uses channel `uses_fd` (each -1 when the policy has none), and write into `out` (at
/// most `cap` bytes) the JSON `{"argv": [...], "env": [[k, v], ...], "cwd": "..."}` the tool
/// would have been exec'd with. Returns the length written, in the confined tool and only
/// there; every failure says why on stderr and exits with [`LAUNCHER_FAILED`]. The outer waiter
/// and the init exit with the tool's status.
///
/// The policy is read here, after the fork, from a descriptor the template never read: the
/// template's memory, which every later child inherits, holds no key, environment or host
/// path of any tool. The bytes read are wiped once parsed, and every block freed while the
/// child confines itself is overwritten by the C library, so the tool finds nothing of its
/// policy in its heap beyond what `out` gives it.
///
/// # Safety
/// `out` must point to `cap` writable bytes. The process must be single-threaded.
pub unsafe fn confine(
    policy_fd: i32,
    report_fd: i32,
    uses_fd: i32,
    out: *mut u8,
    cap: usize,
) -> isize {
    perturb_freed(true);
    let mut bytes = read_policy(policy_fd).unwrap_or_else(|e| fail(&e));
    // Nothing of the template but stdio, the report socket and the uses channel goes further.
    let keep: Vec<i32> = [report_fd, uses_fd]
        .into_iter()
        .filter(|fd| *fd > 2)
        .collect();
    if let Err(err) = process::close_all_but(3, &keep) {
        fail(&crate::LaunchError::CloseFds(err));
    }
    let policy = forked_policy(&bytes, report_fd, uses_fd);
    wipe(&mut bytes);
    drop(bytes);
    let plan = policy
        .and_then(|p| Ok(p.plan()?))
        .unwrap_or_else(|e| fail(&e));
    let info = serde_json::json!({
        "argv": plan.argv,
        "env": plan.env,
        "cwd": plan.working_dir,
    });
    let mut info = serde_json::to_vec(&info).unwrap_or_default();
    if out.is_null() || info.is_empty() || info.len() > cap {
        fail(&crate::LaunchError::ForkRequest(format!(
            "the tool's environment ({} bytes) does not fit the {cap} bytes given for it",
            info.len()
        )));
    }
    match crate::sandbox(&plan, Flavor::Fork) {
        Ok(Role::Tool) => {
            // SAFETY: `out` has `cap` >= info.len() writable bytes (checked above), and does
            // not overlap `info`.
            unsafe { std::ptr::copy_nonoverlapping(info.as_ptr(), out, info.len()) };
            let len = info.len() as isize;
            wipe(&mut info);
            drop(info);
            drop(plan);
            perturb_freed(false);
            len
        }
        Ok(Role::Outer(code)) => process::exit_now(i32::from(code)),
        Err(err) => fail(&err),
    }
}
