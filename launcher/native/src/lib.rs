//! The launcher's native part: the one C entry point a template's Python loads (with
//! `ctypes.PyDLL`) and calls in each child it forks, before any of the tool's code runs. The
//! work is the launcher's own ([`autotool_launcher::native::confine`]); this crate only exports
//! it from a `cdylib`.
//!
//! The launcher's build script builds this library and the launcher carries its bytes; a
//! template receives them in a sealed memory file (see `autotool_launcher::template`), so the
//! launcher binary alone is all a machine needs.

/// Confine the calling process, a child the template just forked, as the tool whose launch
/// policy `policy_fd` holds. See [`autotool_launcher::native::confine`] for the arguments and
/// what comes back.
///
/// # Safety
/// `out` must point to `cap` writable bytes. The process must be single-threaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn autotool_confine(
    policy_fd: i32,
    report_fd: i32,
    uses_fd: i32,
    out: *mut u8,
    cap: usize,
) -> isize {
    // SAFETY: the caller's promises are passed on unchanged; they are `confine`'s own.
    unsafe { autotool_launcher::native::confine(policy_fd, report_fd, uses_fd, out, cap) }
}
