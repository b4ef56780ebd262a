//! The official MCP Python SDK as a host, in the test runtime's interpreter.
//!
//! - [`run_summary`]: a one-shot client script (`integration/python/*.py`) that runs a whole
//!   session against its own `autotool serve` and prints one JSON summary line.
//! - [`Driver`]: `driver.py`, a long-lived host the test drives command by command, for tests
//!   that interleave several serve processes, or several hosts of one HTTP serve
//!   ([`Driver::connect`]). Its unprompted lines (list-change notifications, subscription
//!   events) are kept with their arrival times.
//!
//! The script is the leader of its own process group; `autotool serve` is started by the SDK's
//! stdio client in a session of its own, so the [`crate::TestHome`] reaper is what guarantees
//! no serve outlives its test.

use crate::child::{Line, OwnedChild};
use crate::home::TestHome;
use crate::locate;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

/// The protocol era a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` at 2025-11-25; list changes as `notifications/tools/list_changed`.
    Legacy,
    /// `server/discover` at 2026-07-28; list changes on `subscriptions/listen`.
    Modern,
}

impl Era {
    pub fn arg(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

fn script_command(home: &TestHome, script: &str, era: Era) -> Command {
    let s = &home.setup;
    let mut cmd = python_command(home, script, era);
    cmd.arg("--autotool")
        .arg(&s.autotool)
        .arg("--sandbox")
        .arg(&s.sandbox);
    cmd
}

fn python_command(home: &TestHome, script: &str, era: Era) -> Command {
    let mut cmd = Command::new(&home.setup.python);
    cmd.arg("-u")
        .arg(locate::python_dir().join(script))
        .arg("--era")
        .arg(era.arg())
        .current_dir(locate::python_dir())
        .envs(home.env())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME");
    cmd
}

/// What a one-shot script reported.
#[derive(Debug)]
pub struct Summary {
    pub json: Value,
    /// The script's stderr, the server's stderr included.
    pub stderr: String,
    pub elapsed: Duration,
}

/// Run `script --era ERA` against a serve on `home`, at most `timeout`; its last stdout line is
/// the JSON summary.
pub fn run_summary(home: &TestHome, script: &str, era: Era, timeout: Duration) -> Result<Summary> {
    let started = Instant::now();
    let mut child = OwnedChild::spawn(script, script_command(home, script, era))?;
    child.close_stdin();
    let (lines, ended) = child.read_to_end(started + timeout);
    let status = child.wait_exit(Duration::from_secs(10))?;
    if !ended {
        child.kill_group();
    }
    let stderr = child.final_stderr();
    let elapsed = started.elapsed();
    if !ended {
        bail!(
            "{script} ({}) did not finish within {timeout:?}; stdout: {:?}\nstderr:\n{stderr}",
            era.arg(),
            lines.iter().map(|l| &l.text).collect::<Vec<_>>()
        );
    }
    let last = lines
        .iter()
        .rev()
        .find(|l| !l.text.trim().is_empty())
        .with_context(|| {
            format!("{script} printed no summary (exit {status:?}); stderr:\n{stderr}")
        })?;
    let json = serde_json::from_str(&last.text).with_context(|| {
        format!(
            "{script}'s last line is not JSON: {:?}; stderr:\n{stderr}",
            last.text
        )
    })?;
    Ok(Summary {
        json,
        stderr,
        elapsed,
    })
}

/// A long-lived Python SDK host (`driver.py`) on its own `autotool serve`.
#[derive(Debug)]
pub struct Driver {
    pub name: String,
    child: OwnedChild,
    next_id: u64,
    /// The `ready` line: negotiated version, server info, the serve's pid.
    pub ready: Value,
    /// Unprompted lines seen so far (notifications, subscription events), with arrival times.
    pub events: Vec<(Instant, Value)>,
    /// Replies that arrived while waiting for another, by id.
    replies: Vec<(Instant, Value)>,
}

impl Driver {
    /// Start a host of `era` on `home`; returns once its session is up (at most `timeout`).
    pub fn start(home: &TestHome, name: &str, era: Era, timeout: Duration) -> Result<Driver> {
        Driver::launch(name, script_command(home, "driver.py", era), timeout)
    }

    /// A host of `era` connected to a running `serve --transport http` at `url`, sending the
    /// token in `token_file` (none: no `Authorization`); returns once its session is up.
    pub fn connect(
        home: &TestHome,
        name: &str,
        era: Era,
        url: &str,
        token_file: Option<&std::path::Path>,
        timeout: Duration,
    ) -> Result<Driver> {
        let mut cmd = python_command(home, "driver.py", era);
        cmd.arg("--url").arg(url);
        if let Some(f) = token_file {
            cmd.arg("--token-file").arg(f);
        }
        Driver::launch(name, cmd, timeout)
    }

    fn launch(name: &str, cmd: Command, timeout: Duration) -> Result<Driver> {
        let child = OwnedChild::spawn(name, cmd)?;
        let mut d = Driver {
            name: name.to_string(),
            child,
            next_id: 1,
            ready: Value::Null,
            events: Vec::new(),
            replies: Vec::new(),
        };
        let deadline = Instant::now() + timeout;
        loop {
            let (at, v) = d.next(deadline).with_context(|| {
                format!(
                    "{name}: waiting for the session to start; stderr:\n{}",
                    d.stderr()
                )
            })?;
            match v.get("event").and_then(Value::as_str) {
                Some("ready") => {
                    d.ready = v;
                    return Ok(d);
                }
                Some("fatal") => bail!("{name} could not start: {v}\nstderr:\n{}", d.stderr()),
                _ => d.events.push((at, v)),
            }
        }
    }

    /// The serve's pid (the driver's only child).
    pub fn server_pid(&self) -> Option<u32> {
        match self.ready.get("server_pids").and_then(Value::as_array) {
            Some(pids) if pids.len() == 1 => pids[0].as_u64().map(|p| p as u32),
            _ => None,
        }
    }

    pub fn stderr(&self) -> String {
        self.child.stderr()
    }

    fn next(&mut self, deadline: Instant) -> Result<(Instant, Value)> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(Line { at, text }) = self.child.next_line(left)? else {
                bail!("{}: nothing within the time allowed", self.name);
            };
            if text.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: not JSON: {text:?}", self.name))?;
            return Ok((at, v));
        }
    }

    /// Send a command; returns its id without waiting.
    pub fn send(&mut self, mut cmd: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        if let Some(obj) = cmd.as_object_mut() {
            obj.insert("id".into(), json!(id));
        }
        self.child.send_line(&cmd.to_string())?;
        Ok(id)
    }

    /// Wait for the reply to `id` (events arriving meanwhile are kept).
    pub fn reply(&mut self, id: u64, timeout: Duration) -> Result<(Instant, Value)> {
        if let Some(i) = self
            .replies
            .iter()
            .position(|(_, v)| v.get("id").and_then(Value::as_u64) == Some(id))
        {
            return Ok(self.replies.remove(i));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let (at, v) = self.next(deadline).with_context(|| {
                format!(
                    "{}: waiting for the reply to command {id}; stderr:\n{}",
                    self.name,
                    self.stderr()
                )
            })?;
            if v.get("event").is_some() {
                self.events.push((at, v));
                continue;
            }
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok((at, v));
            }
            self.replies.push((at, v));
        }
    }

    /// The reply to `id` if it has arrived already (it stays available to [`Driver::reply`]).
    pub fn drain_pending_reply(&mut self, id: u64) -> Option<Value> {
        self.drain_events(Duration::from_millis(10));
        self.replies
            .iter()
            .find(|(_, v)| v.get("id").and_then(Value::as_u64) == Some(id))
            .map(|(_, v)| v.clone())
    }

    /// Send a command and wait for its reply.
    pub fn cmd(&mut self, cmd: Value, timeout: Duration) -> Result<(Instant, Value)> {
        let id = self.send(cmd)?;
        self.reply(id, timeout)
    }

    /// The tool names the server lists now.
    pub fn list(&mut self) -> Result<Vec<String>> {
        let (_, v) = self.cmd(json!({"op": "list"}), Duration::from_secs(30))?;
        let names = v
            .get("names")
            .and_then(Value::as_array)
            .with_context(|| format!("{}: list failed: {v}", self.name))?;
        Ok(names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect())
    }

    /// Call a tool; the `result` object (a call result, or a JSON-RPC error).
    pub fn call(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let (_, v) = self.cmd(
            json!({"op": "call", "name": name, "arguments": arguments}),
            Duration::from_secs(90),
        )?;
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }

    /// The first unprompted line satisfying `pred`, among those seen or arriving before
    /// `deadline`; removed from [`Driver::events`].
    pub fn wait_event(
        &mut self,
        deadline: Instant,
        pred: impl Fn(&Value) -> bool,
    ) -> Result<Option<(Instant, Value)>> {
        if let Some(i) = self.events.iter().position(|(_, v)| pred(v)) {
            return Ok(Some(self.events.remove(i)));
        }
        loop {
            if Instant::now() >= deadline {
                return Ok(None);
            }
            let (at, v) = match self.next(deadline) {
                Ok(x) => x,
                Err(_) if Instant::now() >= deadline => return Ok(None),
                Err(e) => return Err(e),
            };
            if v.get("event").is_none() {
                self.replies.push((at, v));
                continue;
            }
            if pred(&v) {
                return Ok(Some((at, v)));
            }
            self.events.push((at, v));
        }
    }

    /// Read (without waiting longer than `for_`) whatever unprompted lines arrive.
    pub fn drain_events(&mut self, for_: Duration) {
        let deadline = Instant::now() + for_;
        while let Ok((at, v)) = self.next(deadline) {
            if v.get("event").is_some() {
                self.events.push((at, v));
            } else {
                self.replies.push((at, v));
            }
        }
    }

    /// Close the session; the driver and its serve exit.
    pub fn close(mut self, timeout: Duration) -> Result<String> {
        let _ = self.send(json!({"op": "close"}));
        self.child.close_stdin();
        let status = self.child.wait_exit(timeout)?;
        let stderr = self.child.final_stderr();
        if status.is_none() {
            bail!(
                "{} did not exit within {timeout:?} of closing; stderr:\n{stderr}",
                self.name
            );
        }
        Ok(stderr)
    }
}

/// Whether `v` is a `notifications/tools/list_changed` or a tool-list subscription event.
pub fn is_list_change(v: &Value) -> bool {
    match v.get("event").and_then(Value::as_str) {
        Some("notification") => {
            v.get("method").and_then(Value::as_str) == Some("notifications/tools/list_changed")
        }
        Some("subscription") => v.get("type").and_then(Value::as_str) == Some("ToolsListChanged"),
        _ => false,
    }
}
