//! `autotool-launcher`: confines one tool process, then execs it.
//!
//! Started by the supervisor (or a test) as `autotool-launcher --policy-fd N`, with the tool's
//! launch policy (JSON, `autotool_policy::LaunchPolicy`) readable on descriptor N. Stages, in
//! order, each failing closed with an error that names the missing feature and the fix:
//!
//! 1. namespaces: new user (or file capabilities), network, mount, PID, IPC, UTS and cgroup
//!    namespaces; the launcher stays outside as a waiter, its own init becomes PID 1 inside
//!    (when it dies, the kernel kills the whole namespace) and the tool its only child;
//! 2. network: only `lo`, up; the egress listener bound on 127.0.0.1 and ::1 and its descriptors
//!    sent to the parent;
//! 3. mounts: a fresh read-only root of bind mounts, private tmpfs for `/tmp` and the home, a
//!    fresh `/proc`, a minimal `/dev`, then `pivot_root`;
//! 4. limits: address space, threads, open files, file size, CPU seconds, no core dumps;
//! 5. process: `setsid`, every inherited descriptor closed but stdio and those the policy keeps,
//!    the environment exactly as the policy gives it;
//! 6. privileges: no new privileges, no executable-memory gain, every capability dropped,
//!    Landlock (filesystem, TCP and scopes) as a hard requirement;
//! 7. seccomp: an allow-list, other architectures killed;
//! 8. exec of the resolved interpreter ELF with `-I -B` and the tool file.
//!
//! Exit status: the tool's own, 128+N when it died of signal N, 125 when the launcher failed.
//!
//! With `--template --control-fd M [--share DIR]…` it starts a template process instead (see
//! `autotool_launcher::template`): the same stages with a template's plan, then Python with the
//! SDK imported, forking one tool per request; each child runs these stages itself through the
//! native library this binary carries (built from `native/` by `build.rs`) before the tool's
//! code.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match autotool_launcher::cli(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            autotool_launcher::report(&err);
            ExitCode::from(autotool_launcher::LAUNCHER_FAILED)
        }
    }
}
