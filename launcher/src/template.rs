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
//! It then execs `python -I -B -c` [`SCRIPT`], which loads the native confinement
//! ([`crate::native`]), imports the SDK, serves a throwaway server one session over in-memory
//! streams (its lazy caches then live in shared pages), puts back the global state that
//! changed, joins the worker thread that used, calls `gc.freeze()` and waits, single-threaded,
//! on the control socket, a `SOCK_SEQPACKET` socket only the supervisor holds the other end of.
//!
//! The protocol, one message per start (see [`SCRIPT`] for the template's side):
//! - to the template: the tool's launch policy (JSON) with, by `SCM_RIGHTS`, the tool's stdin,
//!   stdout and stderr, a status socket, and with egress the policy's report socket;
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
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The template's Python side (run with `-c`; argv: the control and native descriptors).
pub const SCRIPT: &str = include_str!("template.py");

/// File name of the native confinement library, beside the launcher binary.
pub const NATIVE_LIBRARY: &str = "libautotool_launcher.so";

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

/// The native library's default place: beside this launcher.
fn default_native() -> Result<PathBuf, LaunchError> {
    let exe = std::env::current_exe().map_err(|source| LaunchError::Io {
        what: "finding the launcher's own path",
        source,
    })?;
    Ok(exe.parent().unwrap_or(Path::new("/")).join(NATIVE_LIBRARY))
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
    let native_path = match options.native {
        Some(p) => p,
        None => default_native()?,
    };
    let native: OwnedFd = std::fs::File::open(&native_path)
        .map_err(|source| LaunchError::OpenSource {
            path: native_path.clone(),
            source,
        })?
        .into();
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
        });
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
