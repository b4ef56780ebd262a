//! Tools forked from a template: one confined Python process per runtime that has imported the
//! SDK once and forks a tool per start (`autotool-launcher --template`, see the launcher's
//! `template` module for what the template is and what each child does before any tool code
//! runs).
//!
//! Only a long-lived process makes templates: `serve` calls [`warm`] at its start, once the
//! runtime is ready, which starts the runtime's template ahead of the first tool. A start asks
//! for a template with [`fork`]. The first ask for a runtime starts its template
//! in the background and answers "not yet": that start goes through the launcher as before, and
//! so does every start while the template is coming up, when it cannot be made (no user
//! namespaces, a launcher that cannot hand its template the native library it carries), or
//! when the tool's policy is not one it can fork (a runtime other than the template's, a
//! directory it does not share). A
//! template that dies or cannot be made is logged once, and tried again after a back-off that
//! grows with each failure, up to [`MAX_BACKOFF`]. Nothing changes for the tool: a forked tool
//! and a launched one get the same policy and the same confinement.
//!
//! One template serves every tool of a runtime: it shares the home's `tools/` directory
//! (read-only, noexec) and `layers/` (read-only, exec: package layers hold compiled extensions),
//! from which each child binds its own tool directory and layer. It is keyed by the launcher,
//! its policy (interpreter, runtime and system directories) and the identity of the runtime's
//! files (device, inode and modification time of the interpreter and the virtual
//! environment's `pyvenv.cfg`): a runtime rebuilt in place gets a new template, and the old one
//! is stopped.
//!
//! The protocol is the launcher's ([`autotool_policy::fork`]): a start request naming only which
//! descriptors come with it and, by `SCM_RIGHTS`, the tool's stdin, stdout, stderr, a status
//! socket, its launch policy in a sealed memory file (which the template passes to its child
//! unread: no key, environment or host path of a tool ever enters the template's memory), with
//! egress its report socket and with `USES` its uses channel (the template puts it at the
//! descriptor the request names); the template answers on
//! the status socket `P` + pid and a pidfd of the forked child, then `X` + wait status when it
//! exits (or `E` + reason when it refused the start).

use autotool_policy::LaunchPolicy;
use autotool_policy::fork::StartRequest;
use command_fds::{CommandFdExt, FdMapping};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use std::collections::{BTreeMap, HashMap};
use std::io::{IoSlice, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

/// Descriptor of the control socket in the template's launcher.
const CONTROL_FD: i32 = 4;
/// Descriptor of the template's policy in its launcher.
const POLICY_FD: i32 = 3;
/// How long a template may take to import the SDK and say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a fork may take to be answered (the template answers right after `fork()`).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// The first wait before a template that failed is tried again; doubled per failure.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait before a template that keeps failing is tried again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// The directories a template shares with its children: where tool directories and package
/// layers live (the home's `tools/` and `layers/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shares {
    pub tools: PathBuf,
    pub layers: PathBuf,
}

/// A tool's stdio and, with egress, its report socket, and with `USES` its uses channel: what
/// the template hands the child.
#[derive(Debug)]
pub(crate) struct ChildIo {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub report: Option<OwnedFd>,
    pub uses: Option<OwnedFd>,
}

/// A tool forked from a template: the forked child (the tool's outer waiter; killing it ends
/// the tool's whole PID namespace) and the status socket its exit is reported on.
#[derive(Debug)]
pub(crate) struct Forked {
    pub pidfd: OwnedFd,
    pub status: UnixStream,
    /// The child's pid on the host; 0 when it had exited before the answer was read.
    pub host_pid: u32,
}

/// A running template: the supervisor's end of its control socket.
#[derive(Debug)]
struct Template {
    control: Mutex<OwnedFd>,
    /// Cleared by the thread that waits on the template when it exits.
    alive: Arc<AtomicBool>,
    launcher_pid: u32,
}

/// What is known of the template of one key.
#[derive(Debug)]
enum Slot {
    /// Being started in the background.
    Starting,
    Ready(Arc<Template>),
    /// Failed `failures` times in a row; not tried again before `until`.
    Down {
        until: Instant,
        failures: u32,
    },
}

/// Which template a tool can come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    launcher: PathBuf,
    policy: Vec<u8>,
    shares: Shares,
    runtime_files: Vec<(u64, u64, i64)>,
}

static TEMPLATES: LazyLock<Mutex<HashMap<Key, Slot>>> = LazyLock::new(Mutex::default);

/// Whether this process makes templates: set by [`warm`], which `serve` calls at its start. A
/// one-shot command (`tools pull` verifying a tool, say) starts its few tools through the
/// launcher rather than pay for a template it would not keep.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// The template's policy for the runtime of `tool`: a tool's, with no key, no egress and no
/// tool directory of its own.
fn template_policy(tool: &LaunchPolicy, shares: &Shares) -> LaunchPolicy {
    let mut policy = LaunchPolicy::new(
        &shares.tools,
        "template",
        &tool.interpreter,
        tool.runtime_dirs.clone(),
    );
    policy.runtime = tool.runtime.clone();
    policy.interpreter_args = tool.interpreter_args.clone();
    policy.system_dirs = tool.system_dirs.clone();
    policy.etc_files = tool.etc_files.clone();
    policy.env =
        autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
    policy
}

/// Identity of the runtime's files: changes when the runtime is rebuilt in place.
fn runtime_files(policy: &LaunchPolicy) -> Vec<(u64, u64, i64)> {
    let mut files = vec![policy.interpreter.clone()];
    if let Some(venv) = &policy.runtime {
        files.push(venv.join("pyvenv.cfg"));
    }
    files
        .iter()
        .map(|f| match std::fs::metadata(f) {
            Ok(m) => (m.dev(), m.ino(), m.mtime()),
            Err(_) => (0, 0, 0),
        })
        .collect()
}

/// Fork the tool of `policy` from its runtime's template, when there is one ready and it can
/// fork this policy. `None`: start the tool through the launcher (the template is starting,
/// down, or cannot fork this policy); the descriptors in `io` are then dropped unused.
pub(crate) fn fork(
    launcher: &Path,
    shares: &Shares,
    policy: &LaunchPolicy,
    io: ChildIo,
) -> Option<Forked> {
    let template_policy = template_policy(policy, shares);
    let share_dirs = [shares.tools.clone(), shares.layers.clone()];
    if let Some(why) = policy.fork_mismatch(&template_policy, &share_dirs) {
        tracing::debug!(%why, "this tool starts through the launcher, not its template");
        return None;
    }
    let key = Key {
        launcher: launcher.to_path_buf(),
        policy: template_policy.to_json(),
        shares: shares.clone(),
        runtime_files: runtime_files(policy),
    };
    let template = ready(&key, &template_policy)?;
    match send(&template, policy, io) {
        Ok(forked) => Some(forked),
        Err(why) => {
            // A template that cannot fork is as good as dead: stop it, start the next one
            // after the back-off.
            tracing::warn!(%why, launcher_pid = template.launcher_pid,
                "the tool template could not fork a tool; it is stopped, and this tool starts through the launcher");
            template.alive.store(false, Ordering::SeqCst);
            kill_pid(template.launcher_pid);
            mark_down(&key);
            None
        }
    }
}

/// Start the template of `python` if it is not running yet, so the first tool forks from it.
pub fn warm(launcher: &Path, shares: &Shares, python: &crate::tool::runtime::Python) {
    ENABLED.store(true, Ordering::SeqCst);
    let tool = python.launch_policy(&shares.tools.join("warm"), "tool.py");
    let template_policy = template_policy(&tool, shares);
    let key = Key {
        launcher: launcher.to_path_buf(),
        policy: template_policy.to_json(),
        shares: shares.clone(),
        runtime_files: runtime_files(&tool),
    };
    let _ = ready(&key, &template_policy);
}

/// The template of `key` if it is ready; else start it in the background (once, and again
/// after its back-off) and answer `None`.
fn ready(key: &Key, policy: &LaunchPolicy) -> Option<Arc<Template>> {
    if !ENABLED.load(Ordering::SeqCst) {
        return None;
    }
    let mut all = TEMPLATES.lock().ok()?;
    match all.get(key) {
        Some(Slot::Ready(t)) if t.alive.load(Ordering::SeqCst) => return Some(t.clone()),
        Some(Slot::Starting) => return None,
        Some(Slot::Down { until, .. }) if Instant::now() < *until => return None,
        _ => {}
    }
    // A template of the same launcher and shares on other runtime files is stale: the runtime
    // was rebuilt. Stop it.
    let stale: Vec<Key> = all
        .keys()
        .filter(|k| {
            k.launcher == key.launcher
                && k.shares == key.shares
                && k.policy == key.policy
                && k.runtime_files != key.runtime_files
        })
        .cloned()
        .collect();
    for k in stale {
        if let Some(Slot::Ready(t)) = all.remove(&k) {
            tracing::info!(
                launcher_pid = t.launcher_pid,
                "the tool runtime changed; its old template is stopped"
            );
            t.alive.store(false, Ordering::SeqCst);
            kill_pid(t.launcher_pid);
        }
    }
    let failures = match all.insert(key.clone(), Slot::Starting) {
        Some(Slot::Down { failures, .. }) => failures,
        _ => 0,
    };
    drop(all);
    let (key, policy) = (key.clone(), policy.clone());
    let started = std::thread::Builder::new()
        .name("autotool-template".into())
        .spawn(move || run_template(key, policy, failures));
    if let Err(e) = started {
        tracing::warn!(%e, "could not start the tool template's thread");
    }
    None
}

/// Mark the template of `key` down, for a back-off that grows with its failures in a row.
fn mark_down(key: &Key) {
    let Ok(mut all) = TEMPLATES.lock() else {
        return;
    };
    let failures = match all.get(key) {
        Some(Slot::Down { failures, .. }) => failures.saturating_add(1),
        _ => 1,
    };
    all.insert(
        key.clone(),
        Slot::Down {
            until: Instant::now() + backoff(failures),
            failures,
        },
    );
}

fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

/// The template's life, on a thread of its own (the launcher's parent-death signal is tied to
/// the thread that started it): start it, wait until it is ready, publish it, wait for it to
/// exit, mark it down.
fn run_template(key: Key, policy: LaunchPolicy, failures: u32) {
    let set = |slot: Slot| {
        if let Ok(mut all) = TEMPLATES.lock() {
            all.insert(key.clone(), slot);
        }
    };
    let down = |failures: u32| Slot::Down {
        until: Instant::now() + backoff(failures),
        failures,
    };
    let started = Instant::now();
    let (mut child, control) = match start(&key, &policy) {
        Ok(started) => started,
        Err(why) => {
            // Logged at warn only on the first failure in a row: once, not at every retry.
            if failures == 0 {
                tracing::warn!(%why, "no tool template: tools start through the launcher (retried later)");
            } else {
                tracing::debug!(%why, failures, "the tool template failed again");
            }
            set(down(failures + 1));
            return;
        }
    };
    let alive = Arc::new(AtomicBool::new(true));
    let launcher_pid = child.id();
    set(Slot::Ready(Arc::new(Template {
        control: Mutex::new(control),
        alive: alive.clone(),
        launcher_pid,
    })));
    tracing::info!(
        launcher_pid,
        ready_ms = started.elapsed().as_millis() as u64,
        "tool template ready: tools of this runtime are forked from it"
    );
    let status = child.wait();
    let was_alive = alive.swap(false, Ordering::SeqCst);
    if !was_alive {
        // Stopped on purpose (stale, or it could not fork): nothing to restart here.
        return;
    }
    tracing::warn!(
        ?status,
        launcher_pid,
        "the tool template exited; tools start through the launcher until it is started again"
    );
    // A template that lived a while starts again at once; one that died young backs off.
    let failures = if started.elapsed() > Duration::from_secs(60) {
        0
    } else {
        failures + 1
    };
    let wait = backoff(failures.max(1));
    set(Slot::Down {
        until: Instant::now() + wait,
        failures,
    });
    // Started again after the back-off, unless the runtime changed meanwhile (the next tool
    // start makes the new runtime's template) or the slot was taken over.
    std::thread::sleep(wait);
    let current = matches!(
        TEMPLATES
            .lock()
            .ok()
            .as_deref()
            .and_then(|all| all.get(&key)),
        Some(Slot::Down { .. })
    );
    if current && runtime_files(&policy) == key.runtime_files {
        let _ = ready(&key, &policy);
    }
}

/// Start the template of `key` and wait until it says it is ready.
fn start(key: &Key, policy: &LaunchPolicy) -> Result<(std::process::Child, OwnedFd), String> {
    for dir in [&key.shares.tools, &key.shares.layers] {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {dir:?}: {e}"))?;
    }
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("creating the control socket: {e}"))?;
    let (reader, mut writer) =
        std::io::pipe().map_err(|e| format!("creating the policy pipe: {e}"))?;
    let mut command = Command::new(&key.launcher);
    command
        .args(["--template", "--policy-fd"])
        .arg(POLICY_FD.to_string())
        .arg("--control-fd")
        .arg(CONTROL_FD.to_string())
        .arg("--share")
        .arg(&key.shares.tools)
        .arg("--share-exec")
        .arg(&key.shares.layers);
    command
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
        .fd_mappings(vec![
            FdMapping {
                parent_fd: reader.into(),
                child_fd: POLICY_FD,
            },
            FdMapping {
                parent_fd: theirs,
                child_fd: CONTROL_FD,
            },
        ])
        .map_err(|e| format!("mapping the template's descriptors: {e}"))?;
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting {:?} --template: {e}", key.launcher))?;
    drop(command);
    let stderr = child.stderr.take();
    // The template's stderr: kept as a bounded tail for the reason it failed, then drained.
    let tail = Arc::new(Mutex::new(String::new()));
    if let Some(mut stderr) = stderr {
        let tail = tail.clone();
        let _ = std::thread::Builder::new()
            .name("autotool-template-err".into())
            .spawn(move || drain(&mut stderr, &tail));
    }
    let ready = (|| {
        writer
            .write_all(&policy.to_json())
            .map_err(|e| format!("writing the template's policy: {e}"))?;
        drop(writer);
        set_timeout(ours.as_fd(), Some(READY_TIMEOUT))?;
        let mut byte = [0u8; 8];
        let n = rustix::io::read(&ours, &mut byte)
            .map_err(|e| format!("waiting for the template to be ready: {e}"))?;
        if n != 1 || byte[0] != b'R' {
            return Err("the template exited before it was ready".to_string());
        }
        set_timeout(ours.as_fd(), None)
    })();
    match ready {
        Ok(()) => Ok((child, ours)),
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            // Give the stderr thread a moment to take the last lines.
            std::thread::sleep(Duration::from_millis(50));
            let said = tail
                .lock()
                .map(|t| t.trim().to_string())
                .unwrap_or_default();
            Err(if said.is_empty() {
                why
            } else {
                format!("{why}: {said}")
            })
        }
    }
}

/// Keep the last 2 KiB of what the template writes to stderr.
fn drain(stderr: &mut impl std::io::Read, tail: &Mutex<String>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf) {
        if n == 0 {
            return;
        }
        if let Ok(mut t) = tail.lock() {
            t.push_str(&String::from_utf8_lossy(&buf[..n]));
            if t.len() > 2048 {
                let cut = t.len() - 2048;
                let cut = (cut..t.len()).find(|i| t.is_char_boundary(*i)).unwrap_or(0);
                t.drain(..cut);
            }
        }
    }
}

fn set_timeout(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> Result<(), String> {
    rustix::net::sockopt::set_socket_timeout(fd, rustix::net::sockopt::Timeout::Recv, timeout)
        .map_err(|e| format!("setting a socket timeout: {e}"))
}

fn kill_pid(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Ask `template` to fork the tool of `policy`; wait for its pid and pidfd.
fn send(template: &Template, policy: &LaunchPolicy, io: ChildIo) -> Result<Forked, String> {
    let (status, theirs) =
        UnixStream::pair().map_err(|e| format!("creating the status socket: {e}"))?;
    // The policy goes in a descriptor the template passes on unread, never in the request:
    // what the template reads stays in the memory every later child inherits.
    let request = StartRequest::of(policy);
    let sealed = policy_file(&policy.to_json())?;
    let mut fds: Vec<BorrowedFd<'_>> = vec![
        io.stdin.as_fd(),
        io.stdout.as_fd(),
        io.stderr.as_fd(),
        theirs.as_fd(),
        sealed.as_fd(),
    ];
    // The order the template reads them in: the report socket, then the uses channel.
    fds.extend(io.report.as_ref().map(AsFd::as_fd));
    fds.extend(io.uses.as_ref().map(AsFd::as_fd));
    if fds.len() != request.descriptors() {
        return Err(format!(
            "the start request names {} descriptors, not the {} it carries",
            request.descriptors(),
            fds.len()
        ));
    }
    let json = request.to_json();
    {
        let control = template
            .control
            .lock()
            .map_err(|_| "the control socket's lock is poisoned".to_string())?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(7))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err("no room for the descriptors".into());
        }
        rustix::net::sendmsg(
            &*control,
            &[IoSlice::new(&json)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )
        .map_err(|e| format!("sending the start request: {e}"))?;
    }
    drop(fds);
    drop(theirs);
    drop(sealed);
    drop(io);
    set_timeout(status.as_fd(), Some(ANSWER_TIMEOUT))?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let mut buf = [0u8; 1024];
    let msg = rustix::net::recvmsg(
        &status,
        &mut [IoSliceMut::new(&mut buf)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| format!("waiting for the template's answer: {e}"))?;
    let mut pidfd = None;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            pidfd = rights.into_iter().next();
        }
    }
    let answer = &buf[..msg.bytes];
    set_timeout(status.as_fd(), None)?;
    match (answer.first(), pidfd) {
        (Some(b'P'), Some(pidfd)) if answer.len() == 5 => {
            let host_pid = host_pid(&pidfd).unwrap_or(0);
            Ok(Forked {
                pidfd,
                status,
                host_pid,
            })
        }
        (Some(b'E'), _) => Err(format!(
            "the template refused the start: {}",
            String::from_utf8_lossy(&answer[1..])
        )),
        _ => Err(format!("the template answered {answer:?}")),
    }
}

/// A sealed memory file holding `bytes`, read from its start by the forked child.
pub(crate) fn policy_file(bytes: &[u8]) -> Result<OwnedFd, String> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        "autotool-policy",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .map_err(|e| format!("creating the policy file: {e}"))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)
        .map_err(|e| format!("writing the policy file: {e}"))?;
    let fd = OwnedFd::from(file);
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE,
    )
    .map_err(|e| format!("sealing the policy file: {e}"))?;
    Ok(fd)
}

/// The host pid a pidfd refers to, from its `fdinfo` (the kernel shows -1 once it is gone).
fn host_pid(pidfd: &OwnedFd) -> Option<u32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd())).ok()?;
    let pid: i64 = info
        .lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|p| p.trim().parse().ok())?;
    u32::try_from(pid).ok()
}

/// The host pids of the templates running now (for memory reports and tests).
pub fn running() -> Vec<u32> {
    TEMPLATES
        .lock()
        .map(|all| {
            all.values()
                .filter_map(|s| match s {
                    Slot::Ready(t) if t.alive.load(Ordering::SeqCst) => Some(t.launcher_pid),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_back_off_doubles_from_one_second_and_stops_at_its_bound() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(40), MAX_BACKOFF);
    }

    #[test]
    fn a_template_policy_holds_no_key_and_no_egress_and_forks_its_runtimes_tools() {
        let shares = Shares {
            tools: "/home/u/.autotool/tools".into(),
            layers: "/home/u/.autotool/layers".into(),
        };
        let mut tool = LaunchPolicy::new(
            "/home/u/.autotool/tools/weather/3",
            "tool.py",
            "/home/u/.autotool/runtime/bin/python3",
            vec![],
        );
        tool.runtime = Some("/home/u/.autotool/runtime".into());
        tool.env.insert("WEATHER_KEY".into(), "v".into());
        let template = template_policy(&tool, &shares);
        assert!(!template.env.contains_key("WEATHER_KEY"));
        assert!(template.egress.is_none());
        let dirs = [shares.tools.clone(), shares.layers.clone()];
        assert_eq!(tool.fork_mismatch(&template, &dirs), None);
        // Control: a tool elsewhere, or on another interpreter, is not forked.
        let mut elsewhere = tool.clone();
        elsewhere.tool_dir = "/srv/tools/weather".into();
        assert!(elsewhere.fork_mismatch(&template, &dirs).is_some());
        let mut other = tool.clone();
        other.interpreter = "/usr/bin/python3".into();
        assert!(other.fork_mismatch(&template, &dirs).is_some());
    }
}
