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
pub mod native;
pub mod net;
pub mod privileges;
pub mod probe;
pub mod process;
pub mod seccomp;
pub mod sys;
pub mod template;

pub use error::LaunchError;

use autotool_policy::{LaunchPolicy, Mount, Plan};
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use sys::{Forked, RealSys, Sys};

/// Exit status of the launcher when it, not the tool, failed.
pub const LAUNCHER_FAILED: u8 = 125;

/// Parse the command line and run. Returns the exit status to use.
pub fn cli(args: &[String]) -> Result<u8, LaunchError> {
    let mut policy_fd = None;
    let mut template = None::<template::Options>;
    let mut it = args.iter();
    let fd_value = |v: Option<&String>, flag: &str| -> Result<i32, LaunchError> {
        let v = v.ok_or_else(|| LaunchError::Usage(format!("{flag} needs a value")))?;
        v.parse::<i32>()
            .map_err(|_| LaunchError::Usage(format!("bad descriptor {v:?}")))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--policy-fd" => policy_fd = Some(fd_value(it.next(), arg)?),
            "--template" => template = Some(template.unwrap_or_default()),
            "--control-fd" | "--share" | "--share-exec" | "--native" => {
                let opts = template.get_or_insert_with(Default::default);
                let value = it
                    .next()
                    .ok_or_else(|| LaunchError::Usage(format!("{arg} needs a value")))?;
                match arg.as_str() {
                    "--control-fd" => opts.control_fd = Some(fd_value(Some(value), arg)?),
                    "--share" => opts.shares.push((value.into(), false)),
                    "--share-exec" => opts.shares.push((value.into(), true)),
                    _ => opts.native = Some(value.into()),
                }
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
    if let Some(options) = template {
        return template::run(&policy, options);
    }
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
    match sandbox(plan, Flavor::Exec)? {
        Role::Outer(code) => Ok(code),
        // An exec'd tool never comes back; its branch exits on every error.
        Role::Tool => Ok(LAUNCHER_FAILED),
    }
}

/// What the innermost process does once the namespaces, the network and the root are made.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Flavor<'a> {
    /// Confine itself and exec the interpreter: a tool started by the launcher.
    Exec,
    /// Harden itself as a template and exec the interpreter with the template script.
    Template(&'a template::Template),
    /// Confine itself and come back: a tool forked from a template, whose code runs next in
    /// this very process.
    Fork,
}

/// Which process came back from [`sandbox`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// The outer waiter, done: the status to relay.
    Outer(u8),
    /// The confined tool ([`Flavor::Fork`] only).
    Tool,
}

/// The stages every flavor shares, in order (the module docs list them).
pub(crate) fn sandbox(plan: &Plan, flavor: Flavor<'_>) -> Result<Role, LaunchError> {
    let granted = plan
        .mounts
        .iter()
        .any(|m| matches!(m, Mount::UserDir { .. }));
    if granted && !matches!(flavor, Flavor::Exec) {
        // The template's mount namespace does not hold the user's directories, and must not.
        return Err(LaunchError::ForkRequest(
            "a tool granted directories of the user's is started by the launcher, never forked \
             from a template"
                .into(),
        ));
    }
    let sys = &mut RealSys;
    let parent = process::die_with_parent(sys)?;
    privileges::set_no_new_privs(sys)?;
    landlock::check_abi(plan.min_landlock_abi)?;
    seccomp::check_available()?;
    let entered = match flavor {
        Flavor::Template(_) => namespaces::enter_template(sys, plan)?,
        Flavor::Exec | Flavor::Fork => namespaces::enter(sys, plan)?,
    };
    let sources = mounts::HostSources::open(plan)?;
    if !(matches!(flavor, Flavor::Template(_)) && entered.was_root) {
        namespaces::become_tool_user(sys, plan, entered)?;
    }
    let shared_tasks = shared_tasks(sys, entered.mode);
    process::recheck_parent(sys, parent)?;
    net::setup(plan)?;
    let mut life = process::LifeLine::new()?;
    match sys.fork().map_err(|source| LaunchError::Io {
        what: "fork of the tool's init",
        source,
    })? {
        Forked::Child => {
            let role = init::run(
                sys,
                plan,
                &sources,
                &mut life,
                entered.mode,
                |sys| match flavor {
                    Flavor::Exec => Err(confine_and_exec(sys, plan, entered.mode, shared_tasks)),
                    Flavor::Template(t) => Err(t.harden_and_exec(sys, plan, entered)),
                    Flavor::Fork => confine(sys, plan, entered.mode, shared_tasks),
                },
            );
            match role {
                init::Role::Init(code) => process::exit_now(code),
                init::Role::Tool => {
                    // Their descriptors were closed with every other inherited one; dropping
                    // the owners now would close numbers the tool may reuse.
                    std::mem::forget(sources);
                    std::mem::forget(life);
                    Ok(Role::Tool)
                }
            }
        }
        Forked::Parent(init) => {
            drop(sources);
            process::wait_as_outer(sys, init, life).map(Role::Outer)
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
        let target = exec::Target::prepare(plan)?;
        let cookie = confine_as(sys, plan, mode, shared_tasks)?;
        Err(target.exec(&cookie))
    })();
    match result {
        Err(e) => e,
        Ok(never) => match never {},
    }
}

/// The same, for a tool forked from a template: everything but the exec. The seccomp filter is
/// built around a cookie that is dropped here, so no exec can ever pass it.
fn confine(
    sys: &mut dyn Sys,
    plan: &Plan,
    mode: namespaces::Mode,
    shared_tasks: u64,
) -> Result<(), LaunchError> {
    confine_as(sys, plan, mode, shared_tasks).map(drop)
}

/// Limits, session, descriptors, working directory, no executable-memory gain, no
/// capabilities, Landlock, seccomp; returns the cookie the filter lets one exec through with.
fn confine_as(
    sys: &mut dyn Sys,
    plan: &Plan,
    mode: namespaces::Mode,
    shared_tasks: u64,
) -> Result<exec::Cookie, LaunchError> {
    limits::apply(sys, &plan.rlimits, shared_tasks)?;
    process::new_session(sys)?;
    process::close_inherited(&plan.keep_fds, &plan.keep_fds)?;
    process::chdir(&plan.working_dir)?;
    privileges::refuse_exec_gain(sys)?;
    privileges::drop_capabilities(sys, mode)?;
    landlock::restrict(plan)?;
    let cookie = exec::Cookie::new()?;
    let filter = seccomp::build(&cookie)?;
    seccomp::install(&filter)?;
    Ok(cookie)
}
