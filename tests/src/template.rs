//! Tools forked from a template process instead of started by the launcher.
//!
//! With `AUTOTOOL_TEST_FORK=1`, every [`crate::Mode::Confined`] tool of the suite is forked
//! from one template per test process (`autotool-launcher --template`, see the launcher's
//! `template` module), so the escape suite runs unchanged against forked tools. Tests that
//! exercise the launcher's own command line (a wrapper around it, a raw policy, descriptors
//! handed to it) start the launcher's way whatever the switch says. [`start_template`] starts
//! a private template, for tests about the template itself.
//!
//! The template is started from a thread that lives as long as the test process: the
//! launcher's parent-death signal is tied to the thread that started it.

use crate::TIMEOUT;
use crate::locate;
use anyhow::{Context as _, Result, bail};
use autotool_policy::fork::StartRequest;
use autotool_policy::launch::LaunchPolicy;
use command_fds::{CommandFdExt, FdMapping};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use std::collections::BTreeMap;
use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;
use tempfile::TempDir;

/// Descriptor of the control socket in the launcher.
const CONTROL_FD: i32 = 4;

/// Whether confined tools are forked from a template (`AUTOTOOL_TEST_FORK`). Never with file
/// capabilities instead of user namespaces: a template needs user namespaces, and tools there
/// start the launcher's way.
pub fn enabled() -> bool {
    std::env::var("AUTOTOOL_TEST_FORK").is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "yes"))
        && available_or_why().is_none()
}

/// Why no template can be made on this machine, if none can: file capabilities instead of
/// user namespaces.
pub fn available_or_why() -> Option<&'static str> {
    crate::capabilities_mode().then_some(
        "file-capabilities mode: a template needs user namespaces (tools start the launcher's way)",
    )
}

/// The directory every forked tool's directory is made in: the template sees it (read-only,
/// at its own path), as a supervisor's template sees its tools directory.
pub fn tools_root() -> Result<&'static Path> {
    static ROOT: OnceLock<Result<TempDir, String>> = OnceLock::new();
    ROOT.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("autotool-fork-tools-")
            .tempdir()
            .map_err(|e| format!("creating the forked tools' directory: {e}"))
    })
    .as_ref()
    .map(TempDir::path)
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Whether a tool with `policy` can be forked from the shared template (otherwise it starts
/// the launcher's way: a policy that adds a runtime directory, say).
pub fn forkable(policy: &LaunchPolicy) -> Result<bool> {
    let template = template_policy()?;
    Ok(policy
        .fork_mismatch(&template, &[tools_root()?.to_path_buf()])
        .is_none())
}

/// A running template: the supervisor's end of its control socket.
#[derive(Debug)]
pub struct Template {
    control: Mutex<OwnedFd>,
    /// Host pid of the launcher that runs the template.
    pub launcher_pid: u32,
}

/// The template every forked tool of this test process comes from, started on first use.
pub fn shared() -> Result<&'static Template> {
    static SHARED: OnceLock<Result<Template, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| start_template().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("starting the template: {e}"))
}

/// The template's policy: a tool's, on the test runtime, with no key and no egress.
fn template_policy() -> Result<LaunchPolicy> {
    let runtime = locate::runtime()?;
    let mut policy = LaunchPolicy::new(
        tools_root()?,
        "template",
        runtime.python.clone(),
        vec![runtime.venv.clone()],
    );
    policy.env =
        autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
    Ok(policy)
}

/// Start a template of its own (for the tests about templates), from a thread that outlives
/// the test, and wait until it is ready.
pub fn start_template() -> Result<Template> {
    start_template_at(&locate::launcher()?, &template_policy()?, tools_root()?)
}

/// Start a template with `launcher` and `policy`, sharing `root` (where its tools' directories
/// are), from a thread that outlives the caller's, and wait until it is ready.
pub fn start_template_at(launcher: &Path, policy: &LaunchPolicy, root: &Path) -> Result<Template> {
    let (launcher, policy, root) = (launcher.to_path_buf(), policy.clone(), root.to_path_buf());
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .context("creating the control socket")?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("template-parent".into())
        .spawn(move || {
            let started = spawn_template(&launcher, &policy, &root, theirs);
            match started {
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    // Stay alive as the template's parent until it exits.
                    let _ = child.wait();
                    loop {
                        std::thread::park();
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        })
        .context("starting the template's parent thread")?;
    let launcher_pid = rx
        .recv_timeout(TIMEOUT)
        .context("the template's parent thread did not answer")??;
    set_timeout(ours.as_fd(), Some(TIMEOUT))?;
    let mut byte = [0u8; 8];
    let n = rustix::io::read(&ours, &mut byte).context("waiting for the template to be ready")?;
    if n != 1 || byte[0] != b'R' {
        bail!("the template failed to start (see its stderr above)");
    }
    Ok(Template {
        control: Mutex::new(ours),
        launcher_pid,
    })
}

fn spawn_template(
    launcher: &Path,
    policy: &LaunchPolicy,
    root: &Path,
    control: OwnedFd,
) -> Result<std::process::Child> {
    let (reader, mut writer) = std::io::pipe().context("creating the policy pipe")?;
    writer.write_all(&policy.to_json())?;
    drop(writer);
    let mut command = Command::new(launcher);
    command
        .args(["--template", "--policy-fd", "3", "--control-fd"])
        .arg(CONTROL_FD.to_string())
        .arg("--share")
        .arg(root)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
        .fd_mappings(vec![
            FdMapping {
                parent_fd: reader.into(),
                child_fd: 3,
            },
            FdMapping {
                parent_fd: control,
                child_fd: CONTROL_FD,
            },
        ])
        .context("mapping the template's descriptors")?;
    command
        .spawn()
        .with_context(|| format!("starting {launcher:?} --template"))
}

fn set_timeout(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> Result<()> {
    rustix::net::sockopt::set_socket_timeout(fd, rustix::net::sockopt::Timeout::Recv, timeout)
        .context("setting a socket timeout")
}

/// The stdio of a tool to fork, and the egress report socket when it has egress.
#[derive(Debug)]
pub struct Stdio3 {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub report: Option<OwnedFd>,
}

impl Template {
    /// Fork a tool: send the policy and its descriptors, wait for its pid and pidfd.
    pub fn fork(&self, policy: &LaunchPolicy, io: Stdio3) -> Result<Forked> {
        let (status, theirs) = UnixStream::pair().context("creating the status socket")?;
        // As serve does: the policy in a sealed memory file the template passes on unread.
        let request = StartRequest::of(policy);
        let sealed = policy_file(&policy.to_json())?;
        let mut fds: Vec<BorrowedFd<'_>> = vec![
            io.stdin.as_fd(),
            io.stdout.as_fd(),
            io.stderr.as_fd(),
            theirs.as_fd(),
            sealed.as_fd(),
        ];
        if let Some(r) = &io.report {
            fds.push(r.as_fd());
        }
        if fds.len() != request.descriptors() {
            bail!("the request names {} descriptors", request.descriptors());
        }
        let json = request.to_json();
        {
            let control = self
                .control
                .lock()
                .map_err(|_| anyhow::anyhow!("the control socket's lock is poisoned"))?;
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(6))];
            let mut ancillary = SendAncillaryBuffer::new(&mut space);
            if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
                bail!("no room for the descriptors");
            }
            rustix::net::sendmsg(
                &*control,
                &[IoSlice::new(&json)],
                &mut ancillary,
                SendFlags::NOSIGNAL,
            )
            .context("sending the start request to the template")?;
        }
        drop(theirs);
        drop(sealed);
        drop(io);
        set_timeout(status.as_fd(), Some(TIMEOUT))?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        let mut buf = [0u8; 1024];
        let msg = rustix::net::recvmsg(
            &status,
            &mut [IoSliceMut::new(&mut buf)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        )
        .context("waiting for the template's answer")?;
        let mut pidfd = None;
        for message in ancillary.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = message {
                pidfd = rights.into_iter().next();
            }
        }
        let answer = &buf[..msg.bytes];
        match (answer.first(), pidfd) {
            (Some(b'P'), Some(pidfd)) if answer.len() == 5 => {
                let host_pid = host_pid(&pidfd)?;
                Ok(Forked {
                    pidfd,
                    status,
                    host_pid,
                    exit: None,
                })
            }
            (Some(b'E'), _) => bail!(
                "the template refused the start: {}",
                String::from_utf8_lossy(&answer[1..])
            ),
            _ => bail!("the template answered {answer:?}"),
        }
    }
}

/// A sealed memory file holding `bytes`.
fn policy_file(bytes: &[u8]) -> Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        "autotool-policy",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    let fd = OwnedFd::from(file);
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )?;
    Ok(fd)
}

/// The host pid a pidfd refers to, from its `fdinfo`; 0 when the process is already gone (the
/// kernel then shows -1).
fn host_pid(pidfd: &OwnedFd) -> Result<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd()))
        .context("reading the pidfd's fdinfo")?;
    let pid: i64 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|p| p.trim().parse().ok())
        .context("no pid in the pidfd's fdinfo")?;
    Ok(u32::try_from(pid).unwrap_or(0))
}

/// A tool forked from a template: its outer waiter, watched through the status socket.
#[derive(Debug)]
pub struct Forked {
    pidfd: OwnedFd,
    status: UnixStream,
    host_pid: u32,
    exit: Option<ExitStatus>,
}

impl Forked {
    /// The host pid of the forked child (the tool's outer waiter); 0 when it had already exited
    /// by the time the template answered.
    pub fn id(&self) -> u32 {
        self.host_pid
    }

    /// The exit status, if the template has reported it.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.exit.is_none() {
            self.status.set_nonblocking(true)?;
            let mut buf = [0u8; 16];
            match rustix::io::read(&self.status, &mut buf) {
                Ok(5) if buf[0] == b'X' => {
                    let raw = i32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
                    self.exit = Some(ExitStatus::from_raw(raw));
                }
                Ok(0) => bail!("the template closed the status socket without a status"),
                Ok(n) => bail!("the template sent {:?}", &buf[..n]),
                Err(rustix::io::Errno::AGAIN) => {}
                Err(e) => return Err(e).context("reading the status socket"),
            }
        }
        Ok(self.exit)
    }

    /// Kill the forked child (and with it the tool's whole PID namespace).
    pub fn kill(&self) {
        let _ = rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL);
    }

    /// Wait for the exit status, at most [`TIMEOUT`] (a blocking read: no polling).
    pub fn wait(&mut self) -> Result<ExitStatus> {
        if let Some(s) = self.exit {
            return Ok(s);
        }
        self.status.set_nonblocking(false)?;
        set_timeout(self.status.as_fd(), Some(TIMEOUT))?;
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&self.status, &mut buf)
            .context("no exit status from the template in time")?;
        if n != 5 || buf[0] != b'X' {
            bail!(
                "the template sent {:?} instead of an exit status",
                &buf[..n]
            );
        }
        let raw = i32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
        let status = ExitStatus::from_raw(raw);
        self.exit = Some(status);
        Ok(status)
    }
}

/// A tool directory for a forked tool: inside [`tools_root`].
pub fn tool_dir() -> Result<TempDir> {
    tempfile::Builder::new()
        .prefix("tool-")
        .tempdir_in(tools_root()?)
        .context("creating the tool directory")
}
