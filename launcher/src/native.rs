//! The native side of a template's fork: the C entry points the template's Python loads (the
//! launcher crate is also built as a `cdylib`) and calls in each forked child, before a single
//! line of the tool's code runs.
//!
//! [`autotool_confine`] runs the launcher's own stages ([`crate::sandbox`], flavor
//! [`crate::Flavor::Fork`]) in the forked child: a new user namespace nested in the template's,
//! new network, mount, PID, IPC, UTS and cgroup namespaces, the egress listener, the tool's
//! init as PID 1, the tool's root, limits, session, descriptors, no executable-memory gain, no
//! capabilities, Landlock and the tool's seccomp allow-list. The forked child itself stays
//! outside as the outer waiter and the init inside as PID 1, both in the launcher's code, and
//! neither ever returns to Python: only the confined tool does.
//!
//! Both entry points are called through `ctypes.PyDLL`, holding the GIL, in a single-threaded
//! process.

use crate::{Flavor, LAUNCHER_FAILED, Role, process};
use autotool_policy::LaunchPolicy;

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

/// # Safety
/// `ptr` must point to `len` readable bytes (or be null with `len` 0).
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: the caller guarantees `len` readable bytes at `ptr`.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

/// Confine the calling process (a child the template just forked, stdio already the tool's) as
/// the tool `policy` describes, keeping the egress report socket `report_fd` and the uses
/// channel `uses_fd` (each -1 when the policy has none). Returns 0 in the confined tool, and only there; every failure
/// says why on stderr and exits with [`LAUNCHER_FAILED`]. The outer waiter and the init exit
/// with the tool's status.
///
/// # Safety
/// `policy` must point to `len` readable bytes. The process must be single-threaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn autotool_confine(
    policy: *const u8,
    len: usize,
    report_fd: i32,
    uses_fd: i32,
) -> i32 {
    // Nothing of the template but stdio, the report socket and the uses channel goes further.
    let keep: Vec<i32> = [report_fd, uses_fd]
        .into_iter()
        .filter(|fd| *fd > 2)
        .collect();
    if let Err(err) = process::close_all_but(3, &keep) {
        crate::report(&crate::LaunchError::CloseFds(err));
        process::exit_now(i32::from(LAUNCHER_FAILED));
    }
    // SAFETY: the caller guarantees `len` readable bytes.
    let bytes = unsafe { bytes(policy, len) };
    let outcome = forked_policy(bytes, report_fd, uses_fd)
        .and_then(|p| Ok(p.plan()?))
        .and_then(|plan| crate::sandbox(&plan, Flavor::Fork));
    match outcome {
        Ok(Role::Tool) => {
            // Exec'd tools are dumpable again after exec; a forked one inherits the init's
            // refusal, which would hide its own `/proc/self` files from it.
            // SAFETY: prctl with these arguments changes only this process's dumpable flag.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
            0
        }
        Ok(Role::Outer(code)) => process::exit_now(i32::from(code)),
        Err(err) => {
            crate::report(&err);
            process::exit_now(i32::from(LAUNCHER_FAILED))
        }
    }
}

/// Write into `out` (at most `cap` bytes) the JSON `{"argv": [...], "env": [[k, v], ...],
/// "cwd": "..."}` of the plan `policy` turns into: what the tool would have been exec'd with.
/// Returns the length written, or -1 when the policy is invalid or `out` too small.
///
/// # Safety
/// `policy` must point to `len` readable bytes and `out` to `cap` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn autotool_exec_info(
    policy: *const u8,
    len: usize,
    out: *mut u8,
    cap: usize,
) -> isize {
    // SAFETY: the caller guarantees `len` readable bytes.
    let bytes = unsafe { bytes(policy, len) };
    let Ok(plan) = LaunchPolicy::from_json(bytes).map(|p| p.plan()) else {
        return -1;
    };
    let Ok(plan) = plan else {
        return -1;
    };
    let info = serde_json::json!({
        "argv": plan.argv,
        "env": plan.env,
        "cwd": plan.working_dir,
    });
    let Ok(text) = serde_json::to_vec(&info) else {
        return -1;
    };
    if out.is_null() || text.len() > cap {
        return -1;
    }
    // SAFETY: `out` has `cap` >= text.len() writable bytes, and does not overlap `text`.
    unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), out, text.len()) };
    text.len() as isize
}
