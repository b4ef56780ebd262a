//! The launcher: confines one tool process in stages, then execs it.
//!
//! This crate is responsible for carrying out a [`autotool_policy::Plan`]; it decides nothing the
//! plan does not say. It is the only crate of the workspace allowed `unsafe`, every block of which
//! carries a `// SAFETY:` comment. It is single-threaded by design: Landlock (before ABI 8) and
//! seccomp apply to the calling thread, and `fork` is only sound in a single-threaded process.
//!
//! Processes, outermost first:
//! - the launcher (`outer`), started by the supervisor, stays outside the tool's PID namespace
//!   as a small waiter that relays the exit status; it dies with its parent;
//! - the [`init`] of the tool's PID namespace (PID 1), the launcher's own code, dies with the
//!   outer launcher, and its death takes every process of the namespace with it;
//! - the tool (PID 2), which confines itself and execs the interpreter.
//!
//! A short-lived helper writes the user namespace's id maps from the parent namespace.
//!
//! Stages and their modules, in order:
//! 1. [`namespaces`]: user namespace (or file capabilities), then network, mount, PID, IPC, UTS and
//!    cgroup namespaces;
//! 2. [`net`]: loopback up, the egress listener bound and passed to the parent;
//! 3. [`init`]: the namespace's PID 1, which builds the root ([`mounts`], `pivot_root`) and
//!    forks the tool;
//! 4. [`limits`]: resource limits;
//! 5. [`process`]: session, descriptors;
//! 6. [`privileges`] and [`landlock`]: no new privileges, capabilities, Landlock;
//! 7. [`seccomp`]: the system-call allow-list;
//! 8. [`exec`]: exec of the interpreter.
//!
//! Every privileged or process-changing call of the namespace, init, mount, limit, process and
//! privilege stages goes through [`sys::Sys`], so their logic is unit-tested with its recording
//! twin; Landlock, seccomp, the network namespace's sockets and exec are checked end to end.

pub mod error;
pub mod exec;
pub mod init;
pub mod landlock;
pub mod limits;
pub mod mounts;
pub mod namespaces;
pub mod net;
pub mod privileges;
pub mod probe;
pub mod process;
pub mod seccomp;
pub mod sys;

pub use error::LaunchError;

use autotool_policy::{LaunchPolicy, Plan};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use sys::{Forked, RealSys, Sys};

/// Exit status of the launcher when it, not the tool, failed.
pub const LAUNCHER_FAILED: u8 = 125;

/// Parse the command line and run. Returns the exit status to use.
pub fn cli(args: &[String]) -> Result<u8, LaunchError> {
    let mut policy_fd = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--policy-fd" => {
                let v = it
                    .next()
                    .ok_or_else(|| LaunchError::Usage("--policy-fd needs a value".into()))?;
                policy_fd = Some(
                    v.parse::<i32>()
                        .map_err(|_| LaunchError::Usage(format!("bad descriptor {v:?}")))?,
                );
            }
            "--probe" => return Ok(probe::run()),
            "--version" => {
                eprintln!("autotool-launcher {}", env!("CARGO_PKG_VERSION"));
                return Ok(0);
            }
            other => return Err(LaunchError::Usage(format!("unknown argument {other:?}"))),
        }
    }
    let fd = policy_fd.ok_or_else(|| LaunchError::Usage("--policy-fd is required".into()))?;
    let policy = read_policy(fd)?;
    let plan = policy.plan()?;
    run(&plan)
}

fn read_policy(fd: i32) -> Result<LaunchPolicy, LaunchError> {
    if fd <= 2 {
        return Err(LaunchError::Usage(format!(
            "descriptor {fd} is stdio; pass the policy on another descriptor"
        )));
    }
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(LaunchError::ReadPolicy {
            fd,
            source: error::last(),
        });
    }
    // SAFETY: the descriptor is open (checked above) and handed to us by our parent for this
    // purpose alone; taking ownership closes it after reading.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    let mut buf = Vec::new();
    file.by_ref()
        .take(1 << 20)
        .read_to_end(&mut buf)
        .map_err(|source| LaunchError::ReadPolicy { fd, source })?;
    Ok(LaunchPolicy::from_json(&buf)?)
}

/// Say on stderr why the launcher failed, and what to do about it.
pub fn report(err: &LaunchError) {
    eprintln!("autotool-launcher: {err}");
    if let Some(hint) = err.hint() {
        eprintln!("autotool-launcher: fix: {hint}");
    }
}

/// Confine and exec according to `plan`. Returns the tool's exit status (as the outer waiter).
pub fn run(plan: &Plan) -> Result<u8, LaunchError> {
    let sys = &mut RealSys;
    let parent = process::die_with_parent(sys)?;
    privileges::set_no_new_privs(sys)?;
    landlock::check_abi(plan.min_landlock_abi)?;
    seccomp::check_available()?;
    let entered = namespaces::enter(sys, plan)?;
    let sources = mounts::HostSources::open(plan)?;
    namespaces::become_tool_user(sys, plan, entered)?;
    let shared_tasks = shared_tasks(sys, entered.mode);
    process::recheck_parent(sys, parent)?;
    net::setup(plan)?;
    let mut life = process::LifeLine::new()?;
    match sys.fork().map_err(|source| LaunchError::Io {
        what: "fork of the tool's init",
        source,
    })? {
        Forked::Child => {
            let code = init::run(sys, plan, &sources, &mut life, entered.mode, |sys| {
                confine_and_exec(sys, plan, entered.mode, shared_tasks)
            });
            process::exit_now(code)
        }
        Forked::Parent(init) => {
            drop(sources);
            process::wait_as_outer(sys, init, life)
        }
    }
}

/// Tasks that share the tool's user id and count against its thread limit: its init, and
/// without a user namespace every task of the invoking user on the machine.
fn shared_tasks(sys: &mut dyn Sys, mode: namespaces::Mode) -> u64 {
    let init = 1;
    match mode {
        namespaces::Mode::UserNamespace => init,
        namespaces::Mode::FileCapabilities => init + limits::tasks_of_user(sys.uid()),
    }
}

/// Everything the tool process does to itself in its new root, as the init's child. Returns
/// only on error.
fn confine_and_exec(
    sys: &mut dyn Sys,
    plan: &Plan,
    mode: namespaces::Mode,
    shared_tasks: u64,
) -> LaunchError {
    let result = (|| -> Result<std::convert::Infallible, LaunchError> {
        limits::apply(sys, &plan.rlimits, shared_tasks)?;
        process::new_session(sys)?;
        let target = exec::Target::prepare(plan)?;
        process::close_inherited(&plan.keep_fds, &plan.keep_fds)?;
        process::chdir(&plan.working_dir)?;
        privileges::refuse_exec_gain(sys)?;
        privileges::drop_capabilities(sys, mode)?;
        landlock::restrict(plan)?;
        let cookie = exec::Cookie::new()?;
        let filter = seccomp::build(&cookie)?;
        seccomp::install(&filter)?;
        Err(target.exec(&cookie))
    })();
    match result {
        Err(e) => e,
        Ok(never) => match never {},
    }
}
