//! Observers on the host side of an attack: did anything arrive, which processes exist.
//!
//! Network tests never trust the tool's own report: they bind real listeners on the host and
//! check, with a timeout, whether a connection or datagram came in.

use anyhow::{Context as _, Result};
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::Duration;
use tempfile::TempDir;

/// A fresh directory the current user owns, outside `/tmp` when possible (a tool's `/tmp` is
/// its own tmpfs, so a host path elsewhere is the stronger test, and the policy refuses runtime
/// directories under `/tmp`): the first of `AUTOTOOL_TEST_SCRATCH`, `<workspace>/target/tmp` and
/// `/var/tmp` where one can be created, else the system temporary directory.
pub fn scratch_dir(prefix: &str) -> Result<TempDir> {
    let mut bases: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("AUTOTOOL_TEST_SCRATCH") {
        bases.push(dir.into());
    }
    bases.push(crate::locate::workspace_dir().join("target/tmp"));
    bases.push(PathBuf::from("/var/tmp"));
    // Outside /tmp first (a checkout may itself live under /tmp), then anywhere.
    let (outside, inside): (Vec<&PathBuf>, Vec<&PathBuf>) =
        bases.iter().partition(|b| !b.starts_with("/tmp"));
    for base in outside.into_iter().chain(inside) {
        if std::fs::create_dir_all(base).is_ok()
            && let Ok(dir) = tempfile::Builder::new().prefix(prefix).tempdir_in(base)
        {
            return Ok(dir);
        }
    }
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .context("creating a scratch directory")
}

/// Whether `fd` becomes readable (a connection or datagram is waiting) within `timeout`.
pub fn wait_readable(fd: impl AsFd, timeout: Duration) -> Result<bool> {
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let ready = rustix::event::poll(&mut fds, Some(&timeout)).context("poll")?;
    Ok(ready > 0)
}

/// Read what a peer sends until it closes or goes quiet for a second.
fn read_payload(mut stream: impl Read) -> Vec<u8> {
    let mut payload = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 || payload.len() > 1 << 20 {
            break;
        }
        payload.extend_from_slice(&buf[..n]);
    }
    payload
}

/// The payload of a TCP connection accepted within `timeout`, or `None` if none came.
pub fn tcp_arrival(listener: &TcpListener, timeout: Duration) -> Result<Option<Vec<u8>>> {
    if !wait_readable(listener, timeout)? {
        return Ok(None);
    }
    let (stream, _) = listener.accept().context("accept")?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    Ok(Some(read_payload(stream)))
}

/// The payload of a unix-socket connection accepted within `timeout`, or `None` if none came.
pub fn unix_arrival(listener: &UnixListener, timeout: Duration) -> Result<Option<Vec<u8>>> {
    if !wait_readable(listener, timeout)? {
        return Ok(None);
    }
    let (stream, _) = listener.accept().context("accept")?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    Ok(Some(read_payload(stream)))
}

/// A datagram received within `timeout`, or `None` if none came.
pub fn udp_arrival(socket: &UdpSocket, timeout: Duration) -> Result<Option<Vec<u8>>> {
    if !wait_readable(socket, timeout)? {
        return Ok(None);
    }
    let mut buf = [0u8; 65536];
    let (n, _) = socket.recv_from(&mut buf).context("recv_from")?;
    Ok(Some(buf[..n].to_vec()))
}

/// Every descendant of `pid` (children, grandchildren, …), from `/proc/<pid>/task/*/children`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !found.contains(&child) {
                    found.push(child);
                    queue.push(child);
                }
            }
        }
    }
    found
}

/// Whether `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may contain anything.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, Some("Z") | Some("X") | None)
}

/// Live processes (zombies excluded) that have a thread named `name`, found by scanning every
/// `/proc/<pid>/task/<tid>/comm` of the host: wherever they were reparented, whatever session
/// or process group they moved to. Names are cut to 15 bytes by the kernel.
pub fn processes_named(name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(tasks) = std::fs::read_dir(entry.path().join("task")) else {
            continue;
        };
        let named = tasks.flatten().any(|task| {
            std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        });
        if named && is_alive(pid) {
            found.push(pid);
        }
    }
    found.sort_unstable();
    found
}

/// Kills, on drop, every process still named `name` (see [`processes_named`]): a test whose
/// control lets a tool escape its parent cleans up after it even when an assertion fails.
#[derive(Debug)]
pub struct KillNamedOnDrop(pub String);

impl Drop for KillNamedOnDrop {
    fn drop(&mut self) {
        for pid in processes_named(&self.0) {
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// The command line of `pid`, arguments separated by spaces.
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Whether the host is still healthy enough to start a process.
pub fn can_spawn() -> bool {
    std::process::Command::new("true")
        .status()
        .is_ok_and(|s| s.success())
}

/// The effective user id of the test process.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}
