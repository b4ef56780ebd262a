//! The launcher: confines one tool process in stages, then execs it.
//!
//! This crate is responsible for carrying out a [`autotool_policy::Plan`]; it decides nothing the
//! plan does not say. It is the only crate of the workspace allowed `unsafe`, every block of which
//! carries a `// SAFETY:` comment. It is single-threaded by design: Landlock (before ABI 8) and
//! seccomp apply to the calling thread, and `fork` is only sound in a single-threaded process.
//!
//! Processes: the launcher (`outer`) stays outside the tool's PID namespace as a small waiter
//! that relays the exit status and dies with its parent; the tool is PID 1 of its own PID
//! namespace and dies with the launcher. A short-lived helper writes the user namespace's id
//! maps from the parent namespace.
//!
//! Stages and their modules, in order:
//! 1. [`namespaces`]: user namespace (or file capabilities), then network, mount, PID, IPC, UTS and
//!    cgroup namespaces;
//! 2. [`net`]: loopback up, the egress listener bound and passed to the parent;
//! 3. [`mounts`]: the fresh root and `pivot_root`;
//! 4. [`limits`]: resource limits;
//! 5. [`process`]: session, descriptors, parent-death signal;
//! 6. [`privileges`] and [`landlock`]: no new privileges, capabilities, Landlock;
//! 7. [`seccomp`]: the system-call allow-list;
//! 8. [`exec`]: exec of the interpreter.

pub mod error;
pub mod exec;
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

/// Confine and exec according to `plan`. Returns the tool's exit status (as the outer waiter).
pub fn run(plan: &Plan) -> Result<u8, LaunchError> {
    let parent = process::die_with_parent()?;
    privileges::set_no_new_privs()?;
    landlock::check_abi(plan.min_landlock_abi)?;
    seccomp::check_available()?;
    let entered = namespaces::enter(plan)?;
    let sources = mounts::HostSources::open(plan)?;
    namespaces::become_tool_user(plan, entered)?;
    let shared_tasks = match entered.mode {
        namespaces::Mode::UserNamespace => 0,
        // SAFETY: getuid has no preconditions.
        namespaces::Mode::FileCapabilities => limits::tasks_of_user(unsafe { libc::getuid() }),
    };
    process::recheck_parent(parent)?;
    net::setup(plan)?;
    let life = process::LifeLine::new()?;
    match process::fork()? {
        process::Forked::Child => {
            let err = confine_and_exec(plan, &sources, &life, entered.mode, shared_tasks);
            eprintln!("autotool-launcher: {err}");
            if let Some(hint) = err.hint() {
                eprintln!("autotool-launcher: fix: {hint}");
            }
            process::exit_now(i32::from(LAUNCHER_FAILED))
        }
        process::Forked::Parent(child) => {
            drop(sources);
            process::wait_as_outer(child, life)
        }
    }
}

/// Everything the tool process does to itself after the namespaces exist. Returns only on error.
fn confine_and_exec(
    plan: &Plan,
    sources: &mounts::HostSources,
    life: &process::LifeLine,
    mode: namespaces::Mode,
    shared_tasks: u64,
) -> LaunchError {
    let result = (|| -> Result<std::convert::Infallible, LaunchError> {
        mounts::build_root(plan, sources, &mut sys::RealSys)?;
        limits::apply(&plan.rlimits, shared_tasks)?;
        process::new_session()?;
        let target = exec::Target::prepare(plan)?;
        let mut keep: Vec<i32> = plan.keep_fds.clone();
        keep.extend(life.child_fds());
        process::close_inherited(&keep, &plan.keep_fds)?;
        process::chdir(&plan.working_dir)?;
        privileges::refuse_exec_gain()?;
        privileges::drop_capabilities(mode)?;
        landlock::restrict(plan)?;
        life.arm()?;
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
