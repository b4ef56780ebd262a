//! The tool's OS process in either sandbox mode: starting it, waiting for it, killing it.
//!
//! `Strict` forks the tool from its runtime's template when one is ready and the spec names the
//! directories it shares ([`ToolSpec::template`], [`crate::tool::template`]): the template
//! reports the forked child's exit on a status socket. Otherwise it runs `autotool-launcher` (a
//! `std::process::Child` from [`crate::tool::launcher::spawn`]);
//! a small thread blocks in `waitid(WNOWAIT)` on its pidfd and says when it has exited (tokio
//! can only watch a pidfd through `unsafe`); the launcher kills the tool when it dies. `Off`
//! runs the interpreter directly with `tokio::process`, as the leader of its own process group,
//! so killing the group takes anything the tool started along with it.
//!
//! With egress, `Strict` maps one end of a fresh unix socket pair into the launcher as the
//! policy's report descriptor (the launcher sends the listeners it bound inside the tool's
//! network namespace on it); `Off` binds a listener on the host's loopback. Either way the
//! tool's proxy variables point at the listener.
//!
//! A tool that declares `USES` gets one end of another socket pair at [`USES_FD`] in every mode
//! (forked, launched or unconfined), named by `AUTOTOOL_USES_FD` ([`uses_channel`]); the
//! supervisor serves the other end.

use super::{SandboxMode, ToolProcError, ToolSpec};
use crate::egress;
use crate::tool::{launcher, template};
use autotool_policy::launch::{DEFAULT_EGRESS_PORT, USES_FD_VARIABLE};
use autotool_policy::{Egress, LaunchPolicy};
use command_fds::{CommandFdExt, FdMapping};
use rustix::process::{Pid, PidfdFlags, Resource, Rlimit, Signal, WaitId, WaitIdOptions};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::oneshot;

/// A started process and its three pipes.
pub(super) struct Spawned {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    /// The supervisor's end of the tool's egress, when the spec asks for egress.
    pub egress: Option<EgressEnd>,
    /// The supervisor's end of the tool's uses channel, when the spec has one.
    pub uses: Option<UnixStream>,
}

/// The supervisor's end of a tool's egress.
#[derive(Debug)]
pub(super) enum EgressEnd {
    /// Confined: the report socket on which the launcher sends the listeners.
    Report(UnixStream),
    /// Unconfined: the listener on the host's loopback the proxy variables point at.
    Host(TcpListener),
}

/// Descriptor on which the launcher finds the egress report socket.
const REPORT_FD: i32 = launcher::POLICY_FD + 1;
/// Descriptor at which a tool that declares `USES` holds its channel, in either mode.
pub(crate) const USES_FD: i32 = launcher::POLICY_FD + 2;

/// The direct child of the supervisor.
pub(super) enum Child {
    /// `--sandbox off`: the interpreter, leader of its own process group, killed on drop.
    Plain {
        child: tokio::process::Child,
        pgid: Option<Pid>,
    },
    /// `--sandbox strict`: the launcher.
    Launcher(LauncherChild),
    /// `--sandbox strict`, forked from its runtime's template.
    Forked(ForkedChild),
}

/// A tool forked from a template: the forked child (its outer waiter), which the template
/// reaps and reports on the status socket.
pub(super) struct ForkedChild {
    pidfd: OwnedFd,
    status: tokio::net::UnixStream,
    /// The child's host pid (0 when it had exited before the template's answer was read).
    host_pid: u32,
    /// What has arrived of the exit report (`X` and 4 bytes), kept across cancelled waits.
    got: Vec<u8>,
    exit: Option<ExitStatus>,
}

/// A launcher started by `std::process`, which tokio cannot wait on by itself.
pub(super) struct LauncherChild {
    child: std::process::Child,
    /// Fires once the process has exited (not yet reaped); `None` when the watcher could not
    /// be started or has fired (then [`Child::wait`] polls).
    exited: Option<oneshot::Receiver<()>>,
    reaped: bool,
}

/// How often to poll for the launcher's exit when its watcher thread is unavailable.
const POLL: Duration = Duration::from_millis(20);

/// The launch policy of `spec`, its environment whole: with egress, the proxy variables point
/// at `egress_port` (inside the sandbox, the launcher binds it and reports on [`REPORT_FD`];
/// unconfined, it is a listener on the host's loopback). Pure: what a tool gets, in one value.
pub(crate) fn launch_policy(spec: &ToolSpec, egress_port: Option<u16>) -> LaunchPolicy {
    let mut policy = spec
        .python
        .launch_policy(&spec.tool_dir, spec.tool_file.clone());
    policy.env = spec.env.clone();
    policy.packages = spec.packages.clone();
    if let Some(port) = egress_port {
        policy.env.extend(egress::proxy_variables(port));
        if spec.sandbox == SandboxMode::Strict {
            policy.egress = Some(Egress {
                report_fd: REPORT_FD,
                port,
            });
        }
    }
    if spec.uses.is_some() {
        policy.uses_fd = Some(USES_FD);
        policy
            .env
            .insert(USES_FD_VARIABLE.into(), USES_FD.to_string());
    }
    policy.limits = spec.limits;
    policy.user_dirs = spec.user_dirs.clone();
    if let Some(npm) = &spec.npm {
        // node is a system binary: no Python runtime is mounted, and the layer takes the
        // packages layer's place.
        policy.interpreter = crate::npm::NODE.into();
        policy.interpreter_args = crate::npm::NODE_ARGS
            .iter()
            .map(|a| a.to_string())
            .collect();
        policy.runtime = None;
        policy.runtime_dirs = Vec::new();
        policy.packages = Some(npm.layer.clone());
        policy.layer_program = Some(autotool_policy::LayerProgram {
            entry: npm.entry.clone().into(),
            args: npm.args.clone(),
        });
    }
    policy
}

/// The uses channel of a tool whose spec has one: the supervisor's end, and the mapping that
/// puts the tool's end at [`USES_FD`] (both modes; the policy names it, [`launch_policy`]).
fn uses_channel(spec: &ToolSpec) -> Result<Option<(UnixStream, FdMapping)>, ToolProcError> {
    if spec.uses.is_none() {
        return Ok(None);
    }
    let (ours, theirs) = UnixStream::pair().map_err(|e| ToolProcError::Spawn {
        program: spec.python.interpreter.clone(),
        source: e,
    })?;
    let mapping = FdMapping {
        parent_fd: theirs.into(),
        child_fd: USES_FD,
    };
    Ok(Some((ours, mapping)))
}

/// Start the process described by `spec`, with its stdio piped.
pub(super) fn spawn(spec: &ToolSpec) -> Result<Spawned, ToolProcError> {
    let (host_listener, port) = match (&spec.egress, spec.sandbox) {
        (None, _) => (None, None),
        (Some(_), SandboxMode::Strict) => (None, Some(DEFAULT_EGRESS_PORT)),
        (Some(_), SandboxMode::Off) => {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(egress_error)?;
            let port = listener.local_addr().map_err(egress_error)?.port();
            (Some(listener), Some(port))
        }
    };
    let policy = launch_policy(spec, port);
    // Both modes refuse what the launcher would (a relative tool directory, a tool file with a
    // path in it, a malformed variable, a zero limit), with the policy's own message rather
    // than a launcher exit status.
    policy.plan()?;
    match spec.sandbox {
        SandboxMode::Strict => {
            let launcher = match &spec.launcher {
                Some(path) => path.clone(),
                None => launcher::locate()?,
            };
            // Which tools a template serves is `LaunchPolicy::fork_mismatch`'s decision.
            if let Some(shares) = &spec.template
                && let Some(forked) = spawn_forked(&launcher, shares, spec, &policy)?
            {
                return Ok(forked);
            }
            let (uses_end, uses_mapping) = uses_channel(spec)?.unzip();
            let (report, extra) = match &spec.egress {
                Some(_) => {
                    let (ours, theirs) = UnixStream::pair().map_err(egress_error)?;
                    let mapping = FdMapping {
                        parent_fd: theirs.into(),
                        child_fd: REPORT_FD,
                    };
                    (Some(EgressEnd::Report(ours)), vec![mapping])
                }
                None => (None, Vec::new()),
            };
            let mut extra = extra;
            extra.extend(uses_mapping);
            let mut spawned = spawn_strict(&launcher, &policy, extra)?;
            spawned.egress = report;
            spawned.uses = uses_end;
            Ok(spawned)
        }
        SandboxMode::Off => {
            let (uses_end, uses_mapping) = uses_channel(spec)?.unzip();
            let mut spawned = spawn_off(spec, &policy.env, uses_mapping)?;
            spawned.egress = host_listener.map(EgressEnd::Host);
            spawned.uses = uses_end;
            Ok(spawned)
        }
    }
}

/// Fork the tool from its runtime's template ([`template::fork`]); `None` when it starts
/// through the launcher instead.
fn spawn_forked(
    launcher: &Path,
    shares: &template::Shares,
    spec: &ToolSpec,
    policy: &LaunchPolicy,
) -> Result<Option<Spawned>, ToolProcError> {
    let fail = |source: std::io::Error| ToolProcError::Spawn {
        program: launcher.to_path_buf(),
        source,
    };
    let (stdin_theirs, stdin_ours) = std::io::pipe().map_err(fail)?;
    let (stdout_ours, stdout_theirs) = std::io::pipe().map_err(fail)?;
    let (stderr_ours, stderr_theirs) = std::io::pipe().map_err(fail)?;
    let (report_ours, report_theirs) = match &spec.egress {
        Some(_) => {
            let (ours, theirs) = UnixStream::pair().map_err(egress_error)?;
            (Some(ours), Some(OwnedFd::from(theirs)))
        }
        None => (None, None),
    };
    let (uses_ours, uses_theirs) = uses_channel(spec)?
        .map(|(ours, mapping)| (ours, mapping.parent_fd))
        .unzip();
    let io = template::ChildIo {
        stdin: stdin_theirs.into(),
        stdout: stdout_theirs.into(),
        stderr: stderr_theirs.into(),
        report: report_theirs,
        uses: uses_theirs,
    };
    let Some(forked) = template::fork(launcher, shares, policy, io) else {
        return Ok(None);
    };
    let pipes = (|| {
        let stdin =
            ChildStdin::from_std(std::process::ChildStdin::from(OwnedFd::from(stdin_ours)))?;
        let stdout =
            ChildStdout::from_std(std::process::ChildStdout::from(OwnedFd::from(stdout_ours)))?;
        let stderr =
            ChildStderr::from_std(std::process::ChildStderr::from(OwnedFd::from(stderr_ours)))?;
        forked.status.set_nonblocking(true)?;
        let status = tokio::net::UnixStream::from_std(forked.status)?;
        Ok::<_, std::io::Error>((stdin, stdout, stderr, status))
    })();
    let (stdin, stdout, stderr, status) = match pipes {
        Ok(p) => p,
        Err(e) => {
            let _ = rustix::process::pidfd_send_signal(&forked.pidfd, Signal::KILL);
            return Err(fail(e));
        }
    };
    Ok(Some(Spawned {
        child: Child::Forked(ForkedChild {
            pidfd: forked.pidfd,
            status,
            host_pid: forked.host_pid,
            got: Vec::new(),
            exit: None,
        }),
        stdin,
        stdout,
        stderr,
        egress: report_ours.map(EgressEnd::Report),
        uses: uses_ours,
    }))
}

fn egress_error(e: std::io::Error) -> ToolProcError {
    ToolProcError::Egress {
        what: e.into(),
        stderr_tail: String::new(),
    }
}

fn spawn_strict(
    launcher: &Path,
    policy: &LaunchPolicy,
    extra: Vec<FdMapping>,
) -> Result<Spawned, ToolProcError> {
    let mut child = launcher::spawn(launcher, policy, extra)?;
    let fail = |source: std::io::Error| ToolProcError::Spawn {
        program: launcher.to_path_buf(),
        source,
    };
    let pipes = (|| {
        let missing = || std::io::Error::other("a stdio pipe was not set up");
        let stdin = ChildStdin::from_std(child.stdin.take().ok_or_else(missing)?)?;
        let stdout = ChildStdout::from_std(child.stdout.take().ok_or_else(missing)?)?;
        let stderr = ChildStderr::from_std(child.stderr.take().ok_or_else(missing)?)?;
        Ok::<_, std::io::Error>((stdin, stdout, stderr))
    })();
    let (stdin, stdout, stderr) = match pipes {
        Ok(p) => p,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(e));
        }
    };
    let exited = watch_exit(Pid::from_child(&child));
    Ok(Spawned {
        child: Child::Launcher(LauncherChild {
            child,
            exited,
            reaped: false,
        }),
        stdin,
        stdout,
        stderr,
        egress: None,
        uses: None,
    })
}

/// A thread that waits, without reaping, for our child `pid` to exit and then says so. Through
/// a pidfd the wait names exactly this process even after it is reaped; without pidfds
/// (Linux < 5.4) it waits on the pid, which stays ours until we reap it.
fn watch_exit(pid: Pid) -> Option<oneshot::Receiver<()>> {
    let (tx, rx) = oneshot::channel();
    let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok();
    let spawned = std::thread::Builder::new()
        .name("autotool-tool-exit".into())
        .spawn(move || {
            let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT;
            loop {
                let id = match &pidfd {
                    Some(fd) => WaitId::PidFd(fd.as_fd()),
                    None => WaitId::Pid(pid),
                };
                match rustix::process::waitid(id, options) {
                    Err(rustix::io::Errno::INTR) => continue,
                    _ => break,
                }
            }
            let _ = tx.send(());
        });
    spawned.ok().map(|_| rx)
}

fn spawn_off(
    spec: &ToolSpec,
    env: &BTreeMap<String, String>,
    uses: Option<FdMapping>,
) -> Result<Spawned, ToolProcError> {
    let node = PathBuf::from(crate::npm::NODE);
    let program = match &spec.npm {
        Some(_) => &node,
        None => &spec.python.interpreter,
    };
    let mut cmd = tokio::process::Command::new(program);
    match &spec.npm {
        // Unconfined, node runs the script where its layer is.
        Some(npm) => {
            cmd.args(crate::npm::NODE_ARGS)
                .arg(npm.layer.join(&npm.entry))
                .args(&npm.args);
        }
        None => {
            cmd.args(["-I", "-B"]);
            // Unconfined there is no `/packages`: the layer is put on `sys.path` where it is.
            let packages = spec.packages.as_ref().map(|d| d.to_string_lossy());
            if let Some(bootstrap) =
                autotool_policy::launch::program(packages.as_deref(), uses.is_some())
            {
                cmd.arg("-c").arg(bootstrap);
            }
        }
    }
    if let Some(mapping) = uses {
        cmd.fd_mappings(vec![mapping])
            .map_err(|e| ToolProcError::Spawn {
                program: program.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
    }
    if spec.npm.is_none() {
        cmd.arg(&spec.tool_file);
    }
    cmd.current_dir(&spec.tool_dir)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = cmd.spawn().map_err(|source| ToolProcError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    if let Some(pid) = pid {
        apply_limits(pid, spec);
    }
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.start_kill();
        return Err(ToolProcError::Spawn {
            program: program.clone(),
            source: std::io::Error::other("a stdio pipe was not set up"),
        });
    };
    Ok(Spawned {
        child: Child::Plain { child, pgid: pid },
        stdin,
        stdout,
        stderr,
        egress: None,
        uses: None,
    })
}

/// Best-effort resource limits for an unconfined tool, set from outside with `prlimit` right
/// after the start (the supervisor has no `pre_exec`: it holds no `unsafe`). The thread limit
/// is left out on purpose: `RLIMIT_NPROC` counts every process of the user, not the tool's.
fn apply_limits(pid: Pid, spec: &ToolSpec) {
    let l = &spec.limits;
    for (resource, value) in [
        (Resource::As, l.memory_bytes),
        (Resource::Nofile, l.open_files),
        (Resource::Fsize, l.file_size_bytes),
        (Resource::Cpu, l.cpu_seconds),
        (Resource::Core, 0),
    ] {
        let limit = Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        if let Err(e) = rustix::process::prlimit(Some(pid), resource, limit) {
            tracing::warn!(?resource, %e, "could not limit the unconfined tool process");
        }
    }
}

impl Child {
    /// The direct child's process id, until it has been reaped.
    pub fn id(&self) -> Option<u32> {
        match self {
            Child::Plain { child, .. } => child.id(),
            Child::Launcher(l) if !l.reaped => Some(l.child.id()),
            Child::Launcher(_) => None,
            Child::Forked(f) if f.exit.is_none() && f.host_pid != 0 => Some(f.host_pid),
            Child::Forked(_) => None,
        }
    }

    /// Wait for the process to exit and reap it. Cancel-safe.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Child::Plain { child, .. } => child.wait().await,
            Child::Launcher(l) => l.wait().await,
            Child::Forked(f) => f.wait().await,
        }
    }

    /// SIGKILL: the whole process group when unconfined, the launcher (and with it the tool)
    /// when confined. Harmless once the process is gone.
    pub fn kill(&mut self) {
        match self {
            Child::Plain { child, pgid } => {
                if let Some(pgid) = pgid {
                    let _ = rustix::process::kill_process_group(*pgid, Signal::KILL);
                }
                let _ = child.start_kill();
            }
            Child::Launcher(l) => {
                if !l.reaped {
                    let _ = l.child.kill();
                }
            }
            Child::Forked(f) => {
                if f.exit.is_none() {
                    let _ = rustix::process::pidfd_send_signal(&f.pidfd, Signal::KILL);
                }
            }
        }
    }

    /// After the direct child has exited: kill whatever it left behind in its process group
    /// (unconfined only; a confined tool's namespace dies with the launcher).
    pub fn kill_leftovers(&mut self) {
        if let Child::Plain {
            pgid: Some(pgid), ..
        } = self
        {
            // The group id cannot be reused while any member is alive, so this reaches only
            // the tool's own leftovers, or nobody.
            let _ = rustix::process::kill_process_group(*pgid, Signal::KILL);
        }
    }
}

impl LauncherChild {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.child.try_wait()? {
                self.reaped = true;
                return Ok(status);
            }
            match self.exited.as_mut() {
                Some(exited) => {
                    let _ = exited.await;
                    self.exited = None;
                }
                None => tokio::time::sleep(POLL).await,
            }
        }
    }
}

impl ForkedChild {
    /// Read the template's exit report. Cancel-safe: what arrived is kept in `got`. The
    /// status socket closing without a report means the template is gone, and with it the
    /// tool's whole PID namespace: reported as killed.
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        use tokio::io::AsyncReadExt;
        const KILLED: i32 = 9;
        while self.exit.is_none() {
            let mut buf = [0u8; 5];
            let want = 5 - self.got.len();
            let n = self.status.read(&mut buf[..want]).await?;
            if n == 0 {
                self.exit = Some(ExitStatus::from_raw(KILLED));
                break;
            }
            self.got.extend_from_slice(&buf[..n]);
            if self.got.len() == 5 {
                if self.got[0] != b'X' {
                    return Err(std::io::Error::other(format!(
                        "the tool template sent {:?} instead of an exit status",
                        self.got
                    )));
                }
                let raw = i32::from_le_bytes([self.got[1], self.got[2], self.got[3], self.got[4]]);
                self.exit = Some(ExitStatus::from_raw(raw));
            }
        }
        self.exit
            .ok_or_else(|| std::io::Error::other("no exit status"))
    }
}

impl Drop for ForkedChild {
    fn drop(&mut self) {
        // The template reaps it; a tool must not outlive its handle.
        if self.exit.is_none() {
            let _ = rustix::process::pidfd_send_signal(&self.pidfd, Signal::KILL);
        }
    }
}

impl Drop for LauncherChild {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // Dropped without being waited for (the runtime went away): the launcher must not
        // outlive its handle. SIGKILL is final; reap it on a small thread so no zombie is left.
        let _ = self.child.kill();
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id();
            std::thread::spawn(move || reap(pid));
        }
    }
}

/// Reap `pid`, our own killed child, without its `Child` handle.
fn reap(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}
