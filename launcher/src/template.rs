//! Template processes: a Python runtime that has imported the SDK once, under confinement, and
//! forks a tool per start; each child confines itself as a tool before any of its code runs.
//!
//! Started as `autotool-launcher --template --policy-fd N --control-fd M [--share DIR]…
//! [--share-exec DIR]… [--native PATH]`, the launcher builds the template's sandbox with the
//! stages a tool gets ([`crate::sandbox`]), with these differences:
//! - its user namespace maps the invoking user to the tool's id, or, started by root, root and
//!   `nobody` to themselves (the template stays root inside, holding only `CAP_SETUID` and
//!   `CAP_SETGID`, which its children need to map `nobody` in their own user namespaces);
//! - its network namespace has only `lo` and no egress listener: the template reaches nothing;
//! - its root is a tool's (system directories, `/etc` files, the runtime at `/runtime`, `/dev`,
//!   private `/tmp` and home), without the masks over `/proc` (a child can mount its own
//!   `/proc` only where one is fully visible; the child masks its own) and with `/proc`
//!   writable (a child's id-map helper writes there); the runtime and each `--share`d directory
//!   (tools, package layers) are also bound read-only at their own host paths, from which each
//!   child binds its own tool directory, runtime and layer; `--share` is noexec, `--share-exec`
//!   (package layers, whose compiled extensions are mapped executable) and the runtime keep exec;
//! - no Landlock (a Landlock domain forbids the mounts every child makes), and a deny-list
//!   seccomp filter ([`crate::seccomp::build_template`]): no exec but its own, no ptrace,
//!   `process_vm_*`, `pidfd_getfd`, bpf, perf, userfaultfd, io_uring, keyring, modules, kexec,
//!   `memfd_create` or `setns`; the filter stacks under every child's own allow-list;
//! - not dumpable, so no process of the same user can read its memory or trace it;
//! - its environment is the policy's (no key is ever given to a template), its descriptors
//!   stdio, the control socket and the native library, which Python loads from
//!   `/proc/self/fd`.
//!
//! The native library (crate `autotool-launcher-native`: [`crate::native`] behind a C entry
//! point) is carried inside the launcher ([`NATIVE`], put there by the build script) and handed
//! to the template as a memory file written once and sealed before the template exists: no
//! write, resize or mode change can follow, and the file itself cannot be exec'd
//! (`MFD_NOEXEC_SEAL` where the kernel has it). Python maps it as it maps any library, so no
//! memory is ever writable and then executable, which the template's MDWE would refuse anyway.
//! Nothing is read from beside the launcher: copying the launcher alone keeps fast starts.
//! `--native PATH` loads a library file instead (to try a rebuilt native part); a launcher
//! holding file capabilities refuses it.
//!
//! It then execs `python -I -B -c` [`SCRIPT`], which loads the native confinement
//! ([`crate::native`]), imports the SDK, serves a throwaway server one session over in-memory
//! streams (its lazy caches then live in shared pages), puts back the global state that
//! changed, joins the worker thread that used, calls `gc.freeze()` and waits, single-threaded,
//! on the control socket, a `SOCK_SEQPACKET` socket only the supervisor holds the other end of.
//!
//! The protocol, one message per start (see [`SCRIPT`] for the template's side):
//! - to the template: a start request ([`autotool_policy::fork::StartRequest`], JSON naming only
//!   which descriptors follow) with, by `SCM_RIGHTS`, the tool's stdin, stdout and stderr, a
//!   status socket, the tool's launch policy in a sealed memory file (passed to the child unread:
//!   the template's memory, which every later child inherits, never holds a tool's key,
//!   environment or host paths), with egress the report socket and with `USES` the uses channel;
//! - on the status socket: `P` with the pid (4 bytes, little-endian, in the template's PID
//!   namespace) and a pidfd of the forked child (the outer waiter of the tool; killing it kills
//!   the tool's whole PID namespace), then `X` with its wait status (4 bytes) when it exits;
//!   `E` and a reason when the start was refused;
//! - on the control socket, once: `R` when the template is ready.

use crate::error::LaunchError;
use crate::namespaces::Entered;
use crate::sys::{Prctl, Sys};
use crate::{Flavor, Role, exec, privileges, process, seccomp};
use autotool_policy::launch::{HOME_MOUNT, PACKAGES_MOUNT, RUNTIME_MOUNT, TOOL_MOUNT};
use autotool_policy::{LaunchPolicy, Mount, Plan};
use caps::Capability;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The template's Python side (run with `-c`; argv: the control and native descriptors).
pub const SCRIPT: &str = include_str!("template.py");

/// The native library (`libautotool_launcher_native.so`, built by `build.rs`), carried by the
/// launcher. Empty only in the build of that library itself, which needs no copy of itself.
pub static NATIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/native.so"));

/// The name the native library's memory file carries (seen in `/proc/PID/maps`).
const NATIVE_NAME: &std::ffi::CStr = c"autotool-launcher-native";

/// What a template started by root keeps: its children write `nobody`'s id maps.
const ROOT_KEEPS: [Capability; 2] = [Capability::CAP_SETUID, Capability::CAP_SETGID];

/// Places a shared directory may not be (the sandbox builds them itself).
const NOT_SHARED: [&str; 7] = [
    "/proc",
    "/dev",
    "/etc",
    TOOL_MOUNT,
    RUNTIME_MOUNT,
    PACKAGES_MOUNT,
    HOME_MOUNT,
];

/// The template's command line, parsed.
#[derive(Debug, Default)]
pub struct Options {
    pub control_fd: Option<i32>,
    /// Host directories bound read-only at their own path: `(path, exec)`.
    pub shares: Vec<(PathBuf, bool)>,
    pub native: Option<PathBuf>,
}

/// What the template's innermost process needs besides the plan.
#[derive(Debug)]
pub struct Template {
    /// The native library, open: its descriptor is passed to Python.
    native: OwnedFd,
}

impl Template {
    /// Harden the template process (PID 2 of its namespace) and exec Python. Returns only on
    /// error.
    pub(crate) fn harden_and_exec(
        &self,
        sys: &mut dyn Sys,
        plan: &Plan,
        entered: Entered,
    ) -> LaunchError {
        let result = (|| -> Result<std::convert::Infallible, LaunchError> {
            process::new_session(sys)?;
            let target = exec::Target::prepare(plan)?;
            process::close_inherited(&plan.keep_fds, &plan.keep_fds)?;
            process::chdir(&plan.working_dir)?;
            sys.prctl(Prctl::NotDumpable)
                .map_err(|source| LaunchError::Io {
                    what: "making the template not dumpable",
                    source,
                })?;
            privileges::refuse_exec_gain(sys)?;
            if entered.was_root {
                privileges::keep_only(sys, &ROOT_KEEPS)?;
            } else {
                privileges::drop_capabilities(sys, entered.mode)?;
            }
            let cookie = exec::Cookie::new()?;
            seccomp::install(&seccomp::build_template(&cookie)?)?;
            Err(target.exec(&cookie))
        })();
        match result {
            Err(e) => e,
            Ok(never) => match never {},
        }
    }
}

/// The native library this launcher carries, in a sealed memory file: written once, then
/// sealed against writes, resizing, mode changes and further seals; not executable where the
/// kernel can say so (`MFD_NOEXEC_SEAL`, Linux 6.3+). Close-on-exec until the template's plan
/// keeps it.
pub fn sealed_native() -> Result<OwnedFd, LaunchError> {
    if !NATIVE.starts_with(b"\x7fELF") {
        return Err(LaunchError::Template(
            "this launcher carries no native library (a build of that library itself); tools \
             start through the launcher"
                .into(),
        ));
    }
    let io = |what: &'static str| move |source| LaunchError::Io { what, source };
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    let mut seals =
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: memfd_create reads the NUL-terminated name and returns a new descriptor or -1.
    let mut fd = unsafe { libc::memfd_create(NATIVE_NAME.as_ptr(), base | libc::MFD_NOEXEC_SEAL) };
    if fd < 0 && crate::error::last().raw_os_error() == Some(libc::EINVAL) {
        // A kernel before 6.3: no exec seal to ask for (the template's seccomp filter refuses
        // every exec but its own either way).
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(NATIVE_NAME.as_ptr(), base) };
    } else {
        seals |= libc::F_SEAL_EXEC;
    }
    if fd < 0 {
        return Err(io("creating the native library's memory file")(
            crate::error::last(),
        ));
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nothing else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    file.write_all(NATIVE)
        .map_err(io("writing the native library's memory file"))?;
    // SAFETY: F_ADD_SEALS only changes the seals of the open memory file.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io("sealing the native library's memory file")(
            crate::error::last(),
        ));
    }
    // SAFETY: F_GET_SEALS only reads the seals of the open memory file.
    let held = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if held < 0 || held & seals != seals {
        return Err(LaunchError::Template(format!(
            "the native library's memory file holds seals {held:#x}, not {seals:#x}"
        )));
    }
    Ok(file.into())
}

/// The native library named by `--native`: refused to a launcher holding file capabilities
/// (whoever runs it must not choose what its template maps).
fn native_file(path: &Path) -> Result<OwnedFd, LaunchError> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && crate::privileges::has_build_capabilities(&mut crate::sys::RealSys) {
        return Err(LaunchError::Usage(
            "--native is refused to a launcher holding file capabilities".into(),
        ));
    }
    let file = std::fs::File::open(path)
        .map_err(|e| LaunchError::Template(format!("opening the native library {path:?}: {e}")))?;
    Ok(file.into())
}

/// The template's plan: a tool's, turned into a template's (see the module docs).
pub fn plan(
    policy: &LaunchPolicy,
    shares: &[(PathBuf, bool)],
    control_fd: i32,
    native_fd: i32,
) -> Result<Plan, LaunchError> {
    if !policy.user_dirs.is_empty() {
        return Err(LaunchError::Template(
            "a template is never granted directories of the user's (every tool forked from it \
             would see them)"
                .into(),
        ));
    }
    let mut policy = policy.clone();
    policy.egress = None;
    policy.keep_fds = vec![control_fd, native_fd];
    let mut plan = policy.plan()?;
    plan.mounts
        .retain(|m| !matches!(m, Mount::MaskFile { .. } | Mount::MaskDir { .. }));
    for m in &mut plan.mounts {
        if let Mount::Proc { target } = m {
            *m = Mount::WritableProc {
                target: std::mem::take(target),
            };
        }
    }
    let mut all: Vec<(PathBuf, bool)> = policy
        .runtime
        .iter()
        .map(|r| (r.clone(), true))
        .chain(policy.packages.iter().map(|p| (p.clone(), true)))
        .collect();
    all.extend(shares.iter().cloned());
    for (dir, exec) in all {
        if !dir.is_absolute() || dir.parent().is_none() {
            return Err(LaunchError::Template(format!(
                "a shared directory must be absolute and not `/`: {dir:?}"
            )));
        }
        if let Some(bad) = NOT_SHARED.iter().find(|r| dir.starts_with(r)) {
            return Err(LaunchError::Template(format!(
                "a shared directory cannot lie in {bad}: {dir:?}"
            )));
        }
        plan.mounts.push(Mount::Bind {
            source: dir.clone(),
            target: dir,
            exec,
            optional: false,
        });
    }
    let script_args = [
        "-c".to_string(),
        SCRIPT.to_string(),
        control_fd.to_string(),
        native_fd.to_string(),
    ];
    plan.argv = std::iter::once(plan.exec_path.to_string_lossy().into_owned())
        .chain(["-I".to_string(), "-B".to_string()])
        .chain(script_args)
        .collect();
    Ok(plan)
}

/// Run as a template: build its sandbox and exec Python. Returns the template's exit status
/// (as the outer waiter).
pub fn run(policy: &LaunchPolicy, options: Options) -> Result<u8, LaunchError> {
    let control_fd = options
        .control_fd
        .ok_or_else(|| LaunchError::Usage("--template needs --control-fd".into()))?;
    if control_fd <= 2 {
        return Err(LaunchError::Usage(format!(
            "descriptor {control_fd} is stdio; pass the control socket on another descriptor"
        )));
    }
    let native = match &options.native {
        Some(path) => native_file(path)?,
        None => sealed_native()?,
    };
    let plan = plan(policy, &options.shares, control_fd, native.as_raw_fd())?;
    let template = Template { native };
    let role = crate::sandbox(&plan, Flavor::Template(&template))?;
    drop(template.native);
    match role {
        Role::Outer(code) => Ok(code),
        Role::Tool => Ok(crate::LAUNCHER_FAILED),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn granted(policy: &mut LaunchPolicy) {
        policy.user_dirs.push(autotool_policy::UserDir {
            path: "/srv/data".into(),
            write: true,
            dev: 1,
            ino: 2,
            home_link: None,
        });
    }

    #[test]
    fn the_native_library_is_carried_and_handed_over_sealed() {
        use std::io::{Read, Seek};
        use std::os::unix::fs::PermissionsExt;
        assert!(NATIVE.starts_with(b"\x7fELF"), "no library carried");
        assert!(
            NATIVE.windows(16).any(|w| w == b"autotool_confine"),
            "the library does not export autotool_confine"
        );
        let mut file = std::fs::File::from(sealed_native().unwrap());
        let mut held = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut held).unwrap();
        assert!(held == NATIVE, "the memory file does not hold the library");
        // SAFETY: F_GET_SEALS only reads the seals of the open memory file.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        let want = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
        assert_eq!(seals & want, want, "seals {seals:#x}");
        file.rewind().unwrap();
        let err = file.write_all(b"x").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{err}");
        assert_eq!(
            file.set_len(1).unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        if seals & libc::F_SEAL_EXEC != 0 {
            let mode = file.metadata().unwrap().permissions().mode();
            assert_eq!(mode & 0o111, 0, "an executable memory file: {mode:o}");
        }
    }

    #[test]
    fn a_template_is_never_granted_directories_of_the_users() {
        let mut policy = LaunchPolicy::new("/srv/tools", "template", "/usr/bin/python3", vec![]);
        assert!(plan(&policy, &[], 5, 6).is_ok());
        granted(&mut policy);
        let err = plan(&policy, &[], 5, 6).unwrap_err();
        assert!(
            err.to_string().contains("never granted directories"),
            "{err}"
        );
    }

    #[test]
    fn a_tool_granted_directories_is_never_confined_as_a_fork() {
        let mut policy = LaunchPolicy::new("/srv/tools/t", "t.py", "/usr/bin/python3", vec![]);
        granted(&mut policy);
        let plan = policy.plan().unwrap();
        // Refused before any system call: the template's mount namespace lacks the directory,
        // and a template must never hold one.
        let template = Template {
            native: std::fs::File::open("/").unwrap().into(),
        };
        for flavor in [Flavor::Fork, Flavor::Template(&template)] {
            let err = crate::sandbox(&plan, flavor).unwrap_err();
            assert!(
                matches!(&err, LaunchError::ForkRequest(why) if why.contains("never forked")),
                "{err:?}"
            );
        }
    }
}
