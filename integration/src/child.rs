//! [`OwnedChild`]: one child process the test owns, in its own process group.
//!
//! Its stdout is read line by line on a thread, each line stamped with its arrival time (the
//! tests measure how fast a change reaches another process). Its stderr is captured in full
//! for failure messages. On drop, stdin is closed first (a serve or client shuts down cleanly
//! when its input ends), and whatever is still running of the group a moment later is killed.

use anyhow::{Context as _, Result, bail};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most stderr kept per child.
const STDERR_CAP: usize = 8 << 20;

/// How long a child gets to exit after its stdin closes, on drop, before its group is killed.
const GRACE: Duration = Duration::from_secs(5);

/// One line of a child's stdout and when it arrived.
#[derive(Debug, Clone)]
pub struct Line {
    pub at: Instant,
    pub text: String,
}

/// A child process in its own process group, killed with its group on drop.
#[derive(Debug)]
pub struct OwnedChild {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    stderr: Arc<Mutex<String>>,
    stderr_thread: Option<std::thread::JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl OwnedChild {
    /// Spawn `cmd` (stdin, stdout and stderr piped) as the leader of a new process group.
    pub fn spawn(name: &str, mut cmd: Command) -> Result<OwnedChild> {
        use std::os::unix::process::CommandExt as _;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let mut stderr_pipe = child.stderr.take().context("no stderr pipe")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(text) = line else { break };
                if tx
                    .send(Line {
                        at: Instant::now(),
                        text,
                    })
                    .is_err()
                {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let stderr_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match stderr_pipe.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
                        if s.len() < STDERR_CAP {
                            s.push_str(&String::from_utf8_lossy(&buf[..n]));
                        }
                    }
                }
            }
        });
        Ok(OwnedChild {
            name: name.to_string(),
            child,
            stdin,
            lines,
            stderr,
            stderr_thread: Some(stderr_thread),
            status: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write one line (a newline is added) to the child's stdin.
    pub fn send_line(&mut self, line: &str) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .with_context(|| format!("{}: stdin already closed", self.name))?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .with_context(|| format!("{}: writing to stdin", self.name))
    }

    /// The next stdout line, waiting at most `timeout`; `None` on timeout, an error once stdout
    /// has ended.
    pub fn next_line(&self, timeout: Duration) -> Result<Option<Line>> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => bail!("{}: stdout closed", self.name),
        }
    }

    /// Every stdout line until stdout ends or `deadline` passes.
    pub fn read_to_end(&self, deadline: Instant) -> (Vec<Line>, bool) {
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => lines.push(line),
                Err(RecvTimeoutError::Disconnected) => return (lines, true),
                Err(RecvTimeoutError::Timeout) => return (lines, false),
            }
        }
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait for the child to exit, at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().context("waiting for the child")? {
                self.status = Some(s);
                return Ok(Some(s));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The child's stderr once it has ended (waits briefly for the reader to drain the pipe).
    pub fn final_stderr(&mut self) -> String {
        if let Some(t) = self.stderr_thread.take() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        self.stderr()
    }

    /// `kill -9` of this process alone (not its group).
    pub fn kill9(&mut self) -> Result<()> {
        kill9(self.pid())
    }

    /// `kill -9` of the whole process group.
    pub fn kill_group(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// `kill -9 PID`.
pub fn kill9(pid: u32) -> Result<()> {
    let p = rustix::process::Pid::from_raw(pid as i32).context("pid 0")?;
    rustix::process::kill_process(p, rustix::process::Signal::KILL)
        .with_context(|| format!("kill -9 {pid}"))
}

impl Drop for OwnedChild {
    fn drop(&mut self) {
        self.close_stdin();
        let exited = matches!(self.wait_exit(GRACE), Ok(Some(_)));
        // Kill what is left of the group either way: grandchildren may outlive the leader.
        self.kill_group();
        if !exited {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
