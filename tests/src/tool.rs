//! One tool process under test, confined or control, owned by the test.
//!
//! [`ToolBuilder`] copies a fixture into a fresh directory (so a control run that tampers with
//! its own source never touches the repository), builds the [`LaunchPolicy`] with the
//! environment the supervisor would give, and starts either
//! - [`Mode::Confined`]: `autotool-launcher --policy-fd 3`, the policy JSON on a pipe mapped to
//!   descriptor 3, and with egress the report socket mapped to [`REPORT_FD`]; or
//! - [`Mode::Control`]: the same interpreter, arguments and scrubbed environment, run directly
//!   with the tool directory as working directory and private host directories for `HOME` and
//!   `TMPDIR`.
//!
//! [`ToolProcess`] owns the child: its stdout is read line by line by a thread (the JSON-RPC
//! channel), its stderr collected into a buffer by another, and on drop the whole process group
//! is killed and reaped.

use crate::TIMEOUT;
use crate::locate::{self, Runtime};
use crate::template;
use anyhow::{Context as _, Result, bail};
use autotool_policy::launch::{Egress, HOME_MOUNT, LaunchPolicy, TMP_MOUNT, TOOL_MOUNT};
use command_fds::{CommandFdExt, FdMapping};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Descriptor on which the launcher reads its policy.
pub const POLICY_FD: i32 = 3;
/// Descriptor of the egress report socket in the launcher.
pub const REPORT_FD: i32 = 4;

/// How a tool is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Through `autotool-launcher`: every attack must be blocked.
    Confined,
    /// The same interpreter and environment without the launcher: every attack must work.
    Control,
}

/// The listening sockets the launcher bound inside the tool's network namespace and handed over.
#[derive(Debug)]
pub struct EgressListeners {
    /// The listener on 127.0.0.1.
    pub v4: TcpListener,
    /// The listener on ::1.
    pub v6: TcpListener,
}

/// Prepares one tool process: its private copy of the fixture, its policy, what it inherits.
#[derive(Debug)]
pub struct ToolBuilder {
    tool_dir: TempDir,
    runtime: Runtime,
    policy: LaunchPolicy,
    parent_env: Vec<(OsString, OsString)>,
    inherited: Vec<FdMapping>,
    wrapper: Vec<OsString>,
    raw_policy: Option<Vec<u8>>,
    terminal_stderr: bool,
    fork: Fork,
}

/// Whether a confined tool is forked from the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fork {
    /// Started by the launcher.
    No,
    /// Forked when the template can serve it (`AUTOTOOL_TEST_FORK`).
    IfPossible,
    /// Forked, or not started at all ([`ToolBuilder::forked`]).
    Always,
}

impl ToolBuilder {
    /// A tool running the fixture `tool_file` (from [`locate::tools_dir`]) with a default
    /// policy and the supervisor's environment without keys and without egress.
    pub fn new(tool_file: &str) -> Result<Self> {
        let runtime = locate::runtime()?;
        let source = locate::tools_dir().join(tool_file);
        let tool_dir = if template::enabled() {
            template::tool_dir()?
        } else {
            tempfile::Builder::new()
                .prefix("autotool-tool-")
                .tempdir()
                .context("creating the tool directory")?
        };
        std::fs::copy(&source, tool_dir.path().join(tool_file))
            .with_context(|| format!("copying the tool fixture {source:?}"))?;
        let mut policy = LaunchPolicy::new(
            tool_dir.path(),
            tool_file,
            runtime.python.clone(),
            vec![runtime.venv.clone()],
        );
        policy.env =
            autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
        Ok(ToolBuilder {
            tool_dir,
            runtime,
            policy,
            parent_env: Vec::new(),
            inherited: Vec::new(),
            wrapper: Vec::new(),
            raw_policy: None,
            terminal_stderr: false,
            fork: if template::enabled() {
                Fork::IfPossible
            } else {
                Fork::No
            },
        })
    }

    /// The policy, to adjust limits or features before starting.
    pub fn policy_mut(&mut self) -> &mut LaunchPolicy {
        &mut self.policy
    }

    /// The host directory holding the tool (mounted at `/tool` when confined).
    pub fn tool_dir(&self) -> &Path {
        self.tool_dir.path()
    }

    /// Put another file into the tool directory.
    pub fn with_file(self, name: &str, contents: &[u8]) -> Result<Self> {
        std::fs::write(self.tool_dir.path().join(name), contents)
            .with_context(|| format!("writing {name} into the tool directory"))?;
        Ok(self)
    }

    /// Grant the tool the host directory `path` (read-only, or read-write when `write`) as
    /// the supervisor would: resolved once, now, to its canonical path, its device and inode
    /// taken as what was granted. Only meaningful when confined: the control sees every
    /// directory anyway.
    pub fn with_user_dir(mut self, path: &Path, write: bool) -> Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let path = std::fs::canonicalize(path)
            .with_context(|| format!("resolving the granted directory {path:?}"))?;
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("reading the granted directory {path:?}"))?;
        if !meta.is_dir() {
            bail!("the granted {path:?} is not a directory");
        }
        self.policy.user_dirs.push(autotool_policy::UserDir {
            path,
            write,
            dev: meta.dev(),
            ino: meta.ino(),
        });
        Ok(self)
    }

    /// Give the tool an egress listener on `port` inside its namespace, with the proxy
    /// variables the supervisor sets. Only meaningful when confined.
    pub fn with_egress(mut self, port: u16) -> Self {
        self.policy.egress = Some(Egress {
            report_fd: REPORT_FD,
            port,
        });
        self.policy.env = autotool_policy::launch::tool_environment(
            &BTreeMap::new(),
            &BTreeMap::new(),
            Some(port),
        );
        self
    }

    /// Set a variable in the environment of the process the test starts: the launcher when
    /// confined (which must not pass it on), the interpreter itself in the control.
    pub fn with_parent_env(mut self, key: &str, value: &str) -> Self {
        self.parent_env.push((key.into(), value.into()));
        self
    }

    /// Let the started process inherit `fd` as descriptor `child_fd`.
    pub fn with_inherited_fd(mut self, fd: OwnedFd, child_fd: i32) -> Self {
        self.inherited.push(FdMapping {
            parent_fd: fd,
            child_fd,
        });
        self
    }

    /// Start the launcher (or the control interpreter) through `argv`, which gets the real
    /// command line appended: for example `["sh", "-c", "\"$@\"; :", "sh"]`.
    pub fn with_wrapper(mut self, argv: &[&str]) -> Self {
        self.wrapper = argv.iter().map(OsString::from).collect();
        self
    }

    /// Send these bytes to the launcher instead of the policy's JSON.
    pub fn with_raw_policy(mut self, bytes: &[u8]) -> Self {
        self.raw_policy = Some(bytes.to_vec());
        self
    }

    /// Make the process's stderr a terminal (a fresh pseudo-terminal the test reads), as when
    /// the supervisor runs in a user's terminal.
    pub fn with_terminal_stderr(mut self) -> Self {
        self.terminal_stderr = true;
        self
    }

    /// Fork the confined tool from the shared template (see [`template`]) whatever
    /// `AUTOTOOL_TEST_FORK` says; it fails to start when the template cannot serve it.
    pub fn forked(mut self) -> Result<Self> {
        let root = template::tools_root()?;
        if !self.tool_dir.path().starts_with(root) {
            let dir = template::tool_dir()?;
            for entry in std::fs::read_dir(self.tool_dir.path())? {
                let entry = entry?;
                std::fs::copy(entry.path(), dir.path().join(entry.file_name()))
                    .context("copying the tool into the template's tools directory")?;
            }
            self.policy.tool_dir = dir.path().to_path_buf();
            self.tool_dir = dir;
        }
        self.fork = Fork::Always;
        Ok(self)
    }

    /// Start the confined tool through the launcher whatever `AUTOTOOL_TEST_FORK` says (the
    /// control of a test that compares forked and launched tools).
    pub fn launched(mut self) -> Self {
        self.fork = Fork::No;
        self
    }

    /// Start the process and complete the MCP handshake.
    pub fn start(self, mode: Mode) -> Result<ToolProcess> {
        let mut tool = self.spawn(mode)?;
        tool.initialize()?;
        Ok(tool)
    }

    /// Start the process without talking to it.
    pub fn spawn(self, mode: Mode) -> Result<ToolProcess> {
        let ToolBuilder {
            tool_dir,
            runtime,
            policy,
            parent_env,
            mut inherited,
            wrapper,
            raw_policy,
            terminal_stderr,
            fork: fork_mode,
        } = self;
        let mut control_dirs = None;
        let mut report = None;
        // Tests of the launcher's own command line always start it.
        let launcher_only = !wrapper.is_empty() || raw_policy.is_some() || !inherited.is_empty();
        if mode == Mode::Confined && fork_mode != Fork::No && !launcher_only {
            if template::forkable(&policy)? {
                return fork(tool_dir, policy, terminal_stderr);
            }
            if fork_mode == Fork::Always {
                bail!("the template cannot serve this tool's policy");
            }
        }
        let program: Vec<OsString> = match mode {
            Mode::Confined => {
                let launcher = locate::launcher()?;
                let (reader, mut writer) = std::io::pipe().context("creating the policy pipe")?;
                let json = raw_policy.unwrap_or_else(|| policy.to_json());
                // A policy is a few KiB, far below a pipe's buffer: writing before the launcher
                // runs cannot block.
                writer
                    .write_all(&json)
                    .context("writing the policy into its pipe")?;
                drop(writer);
                inherited.push(FdMapping {
                    parent_fd: reader.into(),
                    child_fd: POLICY_FD,
                });
                if policy.egress.is_some() {
                    let (ours, theirs) =
                        UnixStream::pair().context("creating the egress report socket")?;
                    inherited.push(FdMapping {
                        parent_fd: theirs.into(),
                        child_fd: REPORT_FD,
                    });
                    report = Some(ours);
                }
                vec![
                    launcher.into(),
                    "--policy-fd".into(),
                    POLICY_FD.to_string().into(),
                ]
            }
            Mode::Control => {
                let dirs = ControlDirs::new()?;
                let mut argv = vec![runtime.python.clone().into_os_string()];
                argv.extend(policy.interpreter_args.iter().map(OsString::from));
                argv.push(tool_dir.path().join(&policy.tool_file).into_os_string());
                control_dirs = Some(dirs);
                argv
            }
        };
        let argv: Vec<OsString> = wrapper.into_iter().chain(program).collect();
        let (first, rest) = argv.split_first().context("empty command line")?;
        let mut command = Command::new(first);
        command
            .args(rest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(dirs) = &control_dirs {
            command
                .env_clear()
                .envs(&policy.env)
                .env("HOME", dirs.home.path())
                .env("TMPDIR", dirs.tmp.path())
                .current_dir(tool_dir.path());
        }
        command.envs(parent_env);
        let terminal = if terminal_stderr {
            let (master, slave) = open_terminal()?;
            command.stderr(Stdio::from(slave));
            Some(master)
        } else {
            None
        };
        command
            .fd_mappings(inherited)
            .context("two inherited descriptors share a number")?;
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {argv:?}"))?;
        // Dropping the command closes our copies of the descriptors it handed over, so the
        // report socket sees end-of-file if the launcher dies before reporting.
        drop(command);

        let stdin = child.stdin.take().map(|s| File::from(OwnedFd::from(s)));
        let stdout = child.stdout.take().context("child has no stdout pipe")?;
        let stderr_pipe: Box<dyn Read + Send> = match terminal {
            Some(master) => Box::new(master),
            None => Box::new(child.stderr.take().context("child has no stderr pipe")?),
        };
        let mut tool = ToolProcess::watch(
            Proc::Spawned(child),
            mode,
            policy,
            (stdin, Box::new(stdout), stderr_pipe),
            tool_dir,
            control_dirs,
        );
        if let Some(report) = report {
            let listeners = receive_listeners(&report)
                .with_context(|| format!("receiving the egress listeners{}", tool.context()))?;
            tool.egress = Some(listeners);
        }
        Ok(tool)
    }
}

/// Fork the tool from the template (see [`template`]), its stdio on fresh pipes.
fn fork(tool_dir: TempDir, policy: LaunchPolicy, terminal_stderr: bool) -> Result<ToolProcess> {
    let (stdin_r, stdin_w) = std::io::pipe().context("creating the stdin pipe")?;
    let (stdout_r, stdout_w) = std::io::pipe().context("creating the stdout pipe")?;
    let (stderr_read, stderr_write): (Box<dyn Read + Send>, OwnedFd) = if terminal_stderr {
        let (master, slave) = open_terminal()?;
        (Box::new(master), slave.into())
    } else {
        let (r, w) = std::io::pipe().context("creating the stderr pipe")?;
        (Box::new(r), w.into())
    };
    let (report_ours, report_theirs) = if policy.egress.is_some() {
        let (ours, theirs) = UnixStream::pair().context("creating the egress report socket")?;
        (Some(ours), Some(OwnedFd::from(theirs)))
    } else {
        (None, None)
    };
    let forked = template::shared()?.fork(
        &policy,
        template::Stdio3 {
            stdin: stdin_r.into(),
            stdout: stdout_w.into(),
            stderr: stderr_write,
            report: report_theirs,
        },
    )?;
    let stdin = Some(File::from(OwnedFd::from(stdin_w)));
    let mut tool = ToolProcess::watch(
        Proc::Forked(forked),
        Mode::Confined,
        policy,
        (stdin, Box::new(stdout_r), stderr_read),
        tool_dir,
        None,
    );
    if let Some(report) = report_ours {
        let listeners = receive_listeners(&report)
            .with_context(|| format!("receiving the egress listeners{}", tool.context()))?;
        tool.egress = Some(listeners);
    }
    Ok(tool)
}

/// The started process: the launcher or the control interpreter, or a tool forked from the
/// template.
#[derive(Debug)]
enum Proc {
    Spawned(Child),
    Forked(template::Forked),
}

impl Proc {
    fn id(&self) -> u32 {
        match self {
            Proc::Spawned(c) => c.id(),
            Proc::Forked(f) => f.id(),
        }
    }

    fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        match self {
            Proc::Spawned(c) => c.try_wait().context("waiting for the tool"),
            Proc::Forked(f) => f.try_wait(),
        }
    }

    fn kill_and_wait(&mut self) {
        match self {
            Proc::Spawned(child) => {
                if let Ok(pid) = i32::try_from(child.id())
                    && let Some(pid) = rustix::process::Pid::from_raw(pid)
                {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                let _ = child.kill();
                let _ = child.wait();
            }
            Proc::Forked(f) => {
                f.kill();
                let _ = f.wait();
            }
        }
    }
}

type Pipes = (Option<File>, Box<dyn Read + Send>, Box<dyn Read + Send>);

impl ToolProcess {
    /// Own `proc`: read its stdout line by line and collect its stderr, each on a thread.
    fn watch(
        proc: Proc,
        mode: Mode,
        policy: LaunchPolicy,
        (stdin, stdout, stderr_pipe): Pipes,
        tool_dir: TempDir,
        control_dirs: Option<ControlDirs>,
    ) -> Self {
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        let (stderr_done_tx, stderr_done) = mpsc::channel();
        std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut all) = sink.lock() {
                    all.extend_from_slice(&buf[..n]);
                }
            }
            let _ = stderr_done_tx.send(());
        });
        ToolProcess {
            child: proc,
            mode,
            policy,
            stdin,
            lines,
            stderr,
            stderr_done,
            next_id: 1,
            timeout: TIMEOUT,
            egress: None,
            status: None,
            tool_dir,
            control_dirs,
        }
    }
}

/// The control's private stand-ins for the sandbox's tmpfs home and temporary directory.
#[derive(Debug)]
struct ControlDirs {
    home: TempDir,
    tmp: TempDir,
}

impl ControlDirs {
    fn new() -> Result<Self> {
        Ok(ControlDirs {
            home: tempfile::Builder::new()
                .prefix("autotool-home-")
                .tempdir()
                .context("creating the control's home")?,
            tmp: tempfile::Builder::new()
                .prefix("autotool-tmp-")
                .tempdir()
                .context("creating the control's tmp")?,
        })
    }
}

/// A new pseudo-terminal: the master (for the test to read) and the slave (for the child).
fn open_terminal() -> Result<(File, File)> {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
        .context("opening a pseudo-terminal")?;
    grantpt(&master).context("grantpt")?;
    unlockpt(&master).context("unlockpt")?;
    let name = ptsname(&master, Vec::new()).context("ptsname")?;
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
        .open(OsStr::from_bytes(name.as_bytes()))
        .context("opening the pseudo-terminal's slave")?;
    Ok((File::from(master), slave))
}

/// Receive the two listening sockets the launcher sends on the report socket.
fn receive_listeners(report: &UnixStream) -> Result<EgressListeners> {
    report.set_read_timeout(Some(TIMEOUT))?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 64];
    let msg = rustix::net::recvmsg(
        report,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .context("recvmsg on the report socket (timed out or failed)")?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    if fds.len() != 2 {
        bail!(
            "expected 2 listening sockets in one message, got {} descriptor(s) and {} byte(s)",
            fds.len(),
            msg.bytes
        );
    }
    let v6 = TcpListener::from(fds.pop().context("no ::1 listener")?);
    let v4 = TcpListener::from(fds.pop().context("no 127.0.0.1 listener")?);
    Ok(EgressListeners { v4, v6 })
}

/// A running tool process, killed with its process group when dropped.
#[derive(Debug)]
pub struct ToolProcess {
    child: Proc,
    mode: Mode,
    policy: LaunchPolicy,
    stdin: Option<File>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Signalled when stderr reached end-of-file.
    stderr_done: Receiver<()>,
    pub(crate) next_id: u64,
    timeout: Duration,
    egress: Option<EgressListeners>,
    status: Option<ExitStatus>,
    tool_dir: TempDir,
    control_dirs: Option<ControlDirs>,
}

impl ToolProcess {
    /// How the tool runs.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The policy it was started with.
    pub fn policy(&self) -> &LaunchPolicy {
        &self.policy
    }

    /// The host pid of the started process (the launcher when confined).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The listeners handed over by the launcher, when egress was asked for.
    pub fn egress(&self) -> Option<&EgressListeners> {
        self.egress.as_ref()
    }

    /// The host directory holding the tool's copy of its fixture.
    pub fn host_tool_dir(&self) -> &Path {
        self.tool_dir.path()
    }

    /// The tool's own source file as the tool sees it.
    pub fn tool_path(&self) -> PathBuf {
        match self.mode {
            Mode::Confined => Path::new(TOOL_MOUNT).join(&self.policy.tool_file),
            Mode::Control => self.tool_dir.path().join(&self.policy.tool_file),
        }
    }

    /// The tool's home directory as the tool sees it.
    pub fn home_path(&self) -> PathBuf {
        match &self.control_dirs {
            Some(dirs) => dirs.home.path().to_path_buf(),
            None => PathBuf::from(HOME_MOUNT),
        }
    }

    /// The tool's temporary directory as the tool sees it.
    pub fn tmp_path(&self) -> PathBuf {
        match &self.control_dirs {
            Some(dirs) => dirs.tmp.path().to_path_buf(),
            None => PathBuf::from(TMP_MOUNT),
        }
    }

    /// Change the bound on each following wait.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The bound on each wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Close the tool's stdin (an MCP stdio server exits on end-of-file).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait until the process exits, at most `timeout`; `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The exit status, if the process has exited. Once it has, stderr is read to its end (or
    /// for at most a second, if a descendant still holds it) so [`Self::stderr`] is complete.
    pub fn try_status(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.child.try_wait()?;
            if self.status.is_some() {
                let _ = self.stderr_done.recv_timeout(Duration::from_secs(1));
            }
        }
        Ok(self.status)
    }

    /// All stdout lines received so far that nobody consumed, waiting at most `timeout` for
    /// the stream to end.
    pub fn drain_stdout(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => out.push(line),
                Err(_) => return out,
            }
        }
    }

    /// Write one line to the tool's stdin.
    pub(crate) fn send_line(&mut self, line: &str) -> Result<()> {
        let context = self.context();
        let stdin = self.stdin.as_mut().context("the tool's stdin is closed")?;
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .with_context(|| format!("writing to the tool{context}"))
    }

    /// The next line from the tool's stdout, waiting until `deadline`.
    pub(crate) fn recv_line(&mut self, deadline: Instant) -> Result<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => {
                let timeout = self.timeout;
                bail!(
                    "no answer from the tool within {timeout:?}{}",
                    self.context()
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                // Give the process a moment to be reaped so the status is in the message.
                let _ = self.wait_exit(Duration::from_secs(2));
                bail!("the tool closed its stdout{}", self.context())
            }
        }
    }

    /// A description of the process for error messages: mode, exit status, stderr.
    pub fn context(&mut self) -> String {
        let status = match self.try_status() {
            Ok(Some(s)) => format!("exited: {s}"),
            Ok(None) => "running".to_string(),
            Err(e) => format!("status unknown: {e}"),
        };
        format!(
            " ({:?}, {status}); stderr:\n{}",
            self.mode,
            tail(&self.stderr(), 4000)
        )
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

impl Drop for ToolProcess {
    fn drop(&mut self) {
        self.child.kill_and_wait();
    }
}
