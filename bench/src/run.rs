//! Timing one start of a tool process: spawn → exit, or spawn → MCP `initialize` answered.

use crate::variant::Prepared;
use anyhow::{Context, Result, anyhow, bail};
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Where the stopwatch stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The process (the launcher, bwrap or the interpreter itself) has exited, successfully.
    Exit,
    /// The server's answer to an MCP `initialize` request has arrived on its stdout.
    Initialized,
}

/// The request sent to servers: a client of the 2025-06-18 revision, which both the bench's echo
/// server and the SDK answer.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"launcher-bench","version":"0.1.0"}}}"#;

/// How long a server gets to exit after its stdin closes before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Start `prepared`, wait for `until`, and return the wall time from just before the spawn.
/// The process is always reaped before this returns. A failure carries the process's stderr.
pub fn time_once(prepared: Prepared, until: Until, timeout: Duration) -> Result<Duration> {
    let Prepared {
        mut command,
        inherited,
    } = prepared;
    let mut stderr_file = tempfile::tempfile().context("temporary file for stderr")?;
    command.stderr(Stdio::from(
        stderr_file.try_clone().context("clone stderr file")?,
    ));
    let outcome = match until {
        Until::Exit => {
            command.stdin(Stdio::null()).stdout(Stdio::null());
            let start = Instant::now();
            let mut child = command.spawn().context("spawn")?;
            drop(inherited);
            wait_for_exit(&mut child, timeout).map(|at| at - start)
        }
        Until::Initialized => {
            command.stdin(Stdio::piped()).stdout(Stdio::piped());
            let start = Instant::now();
            let mut child = command.spawn().context("spawn")?;
            drop(inherited);
            let answered = await_initialize(&mut child, timeout).map(|()| start.elapsed());
            // Closing stdin asks the server to stop; reap it either way.
            drop(child.stdin.take());
            let exited = wait_for_exit(&mut child, EXIT_GRACE);
            answered.and_then(|elapsed| exited.map(|_| elapsed))
        }
    };
    outcome.map_err(|e| {
        let mut stderr = String::new();
        let _ = stderr_file.rewind();
        let _ = stderr_file.read_to_string(&mut stderr);
        with_stderr(e, &stderr)
    })
}

fn with_stderr(error: anyhow::Error, stderr: &str) -> anyhow::Error {
    let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
    if tail.is_empty() {
        error.context("(no stderr)")
    } else {
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        anyhow!("{error:#}\n    stderr:\n      {}", tail.join("\n      "))
    }
}

/// Send `initialize` and wait for the answer with id 1.
fn await_initialize(child: &mut Child, timeout: Duration) -> Result<()> {
    let mut stdin = child.stdin.take().context("child stdin")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let rx = read_initialize_answer(stdout);
    writeln!(stdin, "{INITIALIZE}").context("write the initialize request")?;
    stdin.flush().context("flush the initialize request")?;
    let answer = rx.recv_timeout(timeout);
    child.stdin = Some(stdin);
    match answer {
        Ok(result) => result,
        Err(_) => {
            let _ = child.kill();
            bail!("no initialize answer within {timeout:?}")
        }
    }
}

/// Read `stdout` on a thread until the answer to `initialize` (id 1) or an error arrives. A
/// thread reads so that a server that never answers cannot hang the bench: the caller's wait
/// has a timeout, and killing the server ends the read.
fn read_initialize_answer(stdout: impl Read + Send + 'static) -> mpsc::Receiver<Result<()>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let answered = serde_json::from_str::<serde_json::Value>(&line)
                .is_ok_and(|v| v["id"] == 1 && v.get("result").is_some());
            if answered {
                let _ = tx.send(Ok(()));
                return;
            }
            if line.contains("\"error\"") {
                let _ = tx.send(Err(anyhow!("server answered with an error: {line}")));
                return;
            }
        }
        let _ = tx.send(Err(anyhow!("stdout closed before the initialize answer")));
    });
    rx
}

/// Wait for the child to exit successfully, killing it after `timeout`; returns when it exited.
/// The wait blocks in the kernel (no polling), so that moment is exact.
fn wait_for_exit(child: &mut Child, timeout: Duration) -> Result<Instant> {
    let pid = Pid::from_raw(i32::try_from(child.id()).context("pid out of range")?);
    // The watchdog kills only while the child is unreaped (it is waited for with WNOWAIT first),
    // so it can never signal a recycled pid.
    let done = Arc::new(Mutex::new(false));
    let (cancel, cancelled) = mpsc::channel::<()>();
    let watchdog = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            if cancelled.recv_timeout(timeout).is_err()
                && let Ok(done) = done.lock()
                && !*done
            {
                let _ = kill(pid, Signal::SIGKILL);
                return true;
            }
            false
        })
    };
    let waited = loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Err(Errno::EINTR) => continue,
            other => break other,
        }
    };
    let exited_at = Instant::now();
    if let Ok(mut done) = done.lock() {
        *done = true;
    }
    let _ = cancel.send(());
    let killed = watchdog.join().unwrap_or(false);
    waited.context("waitid")?;
    let status = child.wait().context("reap")?;
    if killed {
        bail!("still running after {timeout:?}; killed");
    }
    if !status.success() {
        bail!("exited with {status}");
    }
    Ok(exited_at)
}

/// Fork `policy`'s tool from the template, wait for `until`, and return the wall time from
/// just before the start request. The forked child is always waited for before this returns.
pub fn time_forked(
    fork: &crate::variant::Fork,
    policy: &autotool_policy::LaunchPolicy,
    until: Until,
    timeout: Duration,
) -> Result<Duration> {
    let (stdin_r, stdin_w) = std::io::pipe().context("stdin pipe")?;
    let (stdout_r, stdout_w) = std::io::pipe().context("stdout pipe")?;
    let mut stderr_file = tempfile::tempfile().context("temporary file for stderr")?;
    let stderr = stderr_file.try_clone().context("clone stderr file")?;
    let start = Instant::now();
    let mut forked = fork.template.fork(
        policy,
        autotool_tests::template::Stdio3 {
            stdin: stdin_r.into(),
            stdout: stdout_w.into(),
            stderr: stderr.into(),
            report: None,
        },
    )?;
    let outcome = match until {
        Until::Exit => {
            drop(stdin_w);
            let status = forked.wait();
            let elapsed = start.elapsed();
            status.and_then(|s| {
                if s.success() {
                    Ok(elapsed)
                } else {
                    bail!("exited with {s}")
                }
            })
        }
        Until::Initialized => {
            let answered = initialize_over(&stdin_w, stdout_r, timeout).map(|()| start.elapsed());
            drop(stdin_w);
            if answered.is_err() {
                forked.kill();
            }
            let exited = forked.wait();
            answered.and_then(|elapsed| exited.map(|_| elapsed))
        }
    };
    outcome.map_err(|e| {
        let mut stderr = String::new();
        let _ = stderr_file.rewind();
        let _ = stderr_file.read_to_string(&mut stderr);
        with_stderr(e, &stderr)
    })
}

/// Send `initialize` on `stdin` and wait for the answer with id 1 on `stdout`.
fn initialize_over(
    mut stdin: &std::io::PipeWriter,
    stdout: impl Read + Send + 'static,
    timeout: Duration,
) -> Result<()> {
    let rx = read_initialize_answer(stdout);
    writeln!(stdin, "{INITIALIZE}").context("write the initialize request")?;
    stdin.flush().context("flush the initialize request")?;
    rx.recv_timeout(timeout)
        .map_err(|_| anyhow!("no initialize answer within {timeout:?}"))?
}

/// A tool started and initialised, kept running until dropped (its stdin closed, then it is
/// waited for, killed if it lingers).
#[derive(Debug)]
pub enum Warm {
    Spawned(Child, std::io::PipeWriter),
    Forked(autotool_tests::template::Forked, std::io::PipeWriter),
}

impl Warm {
    /// The host pid at the root of the tool's process tree.
    pub fn root(&self) -> u32 {
        match self {
            Warm::Spawned(c, _) => c.id(),
            Warm::Forked(f, _) => f.id(),
        }
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        match self {
            Warm::Spawned(child, _) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Warm::Forked(f, _) => {
                f.kill();
                let _ = f.wait();
            }
        }
    }
}

/// Start `prepared` and wait for its `initialize` answer.
pub fn warm_spawned(prepared: Prepared, timeout: Duration) -> Result<Warm> {
    let Prepared {
        mut command,
        inherited,
    } = prepared;
    let (stdin_r, stdin_w) = std::io::pipe().context("stdin pipe")?;
    command
        .stdin(Stdio::from(stdin_r))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().context("spawn")?;
    drop(inherited);
    let stdout = child.stdout.take().context("child stdout")?;
    let warm = Warm::Spawned(child, stdin_w);
    if let Warm::Spawned(_, stdin) = &warm {
        initialize_over(stdin, stdout, timeout)?;
    }
    Ok(warm)
}

/// Fork `policy`'s tool and wait for its `initialize` answer.
pub fn warm_forked(
    fork: &crate::variant::Fork,
    policy: &autotool_policy::LaunchPolicy,
    timeout: Duration,
) -> Result<Warm> {
    let (stdin_r, stdin_w) = std::io::pipe().context("stdin pipe")?;
    let (stdout_r, stdout_w) = std::io::pipe().context("stdout pipe")?;
    let null = std::fs::File::create("/dev/null").context("/dev/null")?;
    let forked = fork.template.fork(
        policy,
        autotool_tests::template::Stdio3 {
            stdin: stdin_r.into(),
            stdout: stdout_w.into(),
            stderr: null.into(),
            report: None,
        },
    )?;
    let warm = Warm::Forked(forked, stdin_w);
    if let Warm::Forked(_, stdin) = &warm {
        initialize_over(stdin, stdout_r, timeout)?;
    }
    Ok(warm)
}

/// Proportional set size and private dirty memory of a process tree, in KiB, from each
/// process's `/proc/<pid>/smaps_rollup`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub pss_kib: u64,
    pub private_dirty_kib: u64,
    pub processes: usize,
}

/// [`Memory`] of `root` and every descendant of it.
pub fn tree_memory(root: u32) -> Memory {
    let mut m = Memory::default();
    for pid in std::iter::once(root).chain(autotool_tests::host::descendants(root)) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) else {
            continue;
        };
        m.processes += 1;
        for line in text.lines() {
            let field = |name: &str| {
                line.strip_prefix(name)
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            };
            if let Some(v) = field("Pss:") {
                m.pss_kib += v;
            }
            if let Some(v) = field("Private_Dirty:") {
                m.private_dirty_kib += v;
            }
        }
    }
    m
}
