//! A harness for end-to-end tests of `autotool serve`: the real binary on a fresh home, spoken
//! to as a host app would, over newline-delimited JSON-RPC on its stdio.
//!
//! - [`autotool_bin`]: where the `autotool` binary is (`AUTOTOOL_BIN`, else next to the test
//!   binary's profile directory, else the workspace's `target/debug`).
//! - [`ServeHome`]: a temporary `$AUTOTOOL_HOME`, kept across server restarts.
//! - [`Serve`]: how to start the server (sandbox, timeouts, output cap).
//! - [`Server`]: the running server. Its own process group is killed on drop; stderr is
//!   captured (its tail); every line it writes to stdout is kept and checked to be JSON-RPC 2.0.
//!   Every wait, writes included, is bounded by [`crate::TIMEOUT`] or less; a whole command by
//!   [`crate::COMMAND_TIMEOUT`].
//!
//! The server finds the Python runtime through `AUTOTOOL_RUNTIME`, set to the test runtime
//! ([`crate::locate::runtime`]), and the launcher through `AUTOTOOL_LAUNCHER` when the test's
//! environment sets it, else beside its own binary.

use crate::locate;
use crate::{COMMAND_TIMEOUT, TIMEOUT};
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The protocol revision of the older era the tests speak (`initialize` first).
pub const LEGACY_PROTOCOL: &str = "2025-11-25";

/// The revision without a handshake, where every request carries its version in `_meta`.
pub const MODERN_PROTOCOL: &str = "2026-07-28";

/// One write to the server's stdin, and where to say it is done.
type StdinWrite = (Vec<u8>, SyncSender<std::io::Result<()>>);

/// How much of the server's stderr is kept (the newest bytes).
const STDERR_KEEP: usize = 1 << 20;

/// The `autotool` binary: `AUTOTOOL_BIN`, else the one next to the running test binary's
/// profile directory (`target/<profile>/autotool`), else `target/debug` of the workspace.
pub fn autotool_bin() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("AUTOTOOL_BIN") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("AUTOTOOL_BIN points at {path:?}, which is not a file");
        }
        return Ok(path);
    }
    let mut candidates = Vec::new();
    // Test binaries live in target/<profile>/deps/.
    if let Ok(exe) = std::env::current_exe()
        && let Some(profile) = exe.parent().and_then(Path::parent)
    {
        candidates.push(profile.join("autotool"));
    }
    candidates.push(locate::workspace_dir().join("target/debug/autotool"));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "autotool not found (looked at {candidates:?}): build it with \
                 `cargo build -p autotool`, or set AUTOTOOL_BIN"
            )
        })
}

/// The directory of the `serve` tests' Python tools: `<tools>/serve`.
pub fn fixtures_dir() -> PathBuf {
    locate::tools_dir().join("serve")
}

/// The source of fixture `file` (in [`fixtures_dir`]).
pub fn fixture(file: &str) -> Result<String> {
    let path = fixtures_dir().join(file);
    std::fs::read_to_string(&path).with_context(|| format!("reading the fixture {path:?}"))
}

/// A temporary `$AUTOTOOL_HOME`, removed when dropped.
#[derive(Debug)]
pub struct ServeHome {
    dir: TempDir,
}

impl ServeHome {
    pub fn new() -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("autotool-serve-home-")
            .tempdir()
            .context("creating a temporary AUTOTOOL_HOME")?;
        Ok(ServeHome { dir })
    }

    /// A temporary `$AUTOTOOL_HOME` inside `parent` (a home placed below a directory others
    /// may write).
    pub fn in_dir(parent: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("autotool-serve-home-")
            .tempdir_in(parent)
            .with_context(|| format!("creating a temporary AUTOTOOL_HOME in {parent:?}"))?;
        Ok(ServeHome { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Run `autotool <args>` (not `serve`) on this home, bounded by [`COMMAND_TIMEOUT`]; returns
    /// (exit status, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> Result<(ExitStatus, String, String)> {
        self.cli_with(args, &[])
    }

    /// [`Self::cli`] with further environment variables.
    pub fn cli_with(
        &self,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Result<(ExitStatus, String, String)> {
        let bin = autotool_bin()?;
        let mut child = Command::new(&bin)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .env("AUTOTOOL_HOME", self.path())
            .env("AUTOTOOL_RUNTIME", &locate::runtime()?.venv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {bin:?} {args:?}"))?;
        let out = reader_thread(child.stdout.take().context("no stdout")?);
        let err = reader_thread(child.stderr.take().context("no stderr")?);
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if Instant::now() >= deadline {
                kill_group(&mut child);
                bail!(
                    "`autotool {}` did not finish within {COMMAND_TIMEOUT:?}",
                    args.join(" ")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let left = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
        let stdout = out.recv_timeout(left).unwrap_or_default();
        let stderr = err.recv_timeout(left).unwrap_or_default();
        Ok((status, stdout, stderr))
    }
}

/// Read `pipe` to its end on a thread; the text arrives on the returned channel.
fn reader_thread(mut pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    rx
}

/// Kill `child`'s process group (it leads one) and reap it. A child already reaped is left
/// alone: its pid, and so its group id, may belong to someone else by now.
fn kill_group(child: &mut Child) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id())
        && let Some(pid) = rustix::process::Pid::from_raw(pid)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sandbox {
    /// The default: every tool confined through `autotool-launcher`.
    Strict,
    /// Tools as plain subprocesses.
    Off,
}

/// How to start `autotool serve`.
#[derive(Debug, Clone)]
pub struct Serve {
    pub sandbox: Sandbox,
    pub call_timeout: Option<u64>,
    pub idle_timeout: Option<u64>,
    pub max_output_bytes: Option<usize>,
    /// Further arguments to `serve`.
    pub extra_args: Vec<String>,
    /// Further environment variables for `serve` (the host config's `env` block).
    pub env: Vec<(String, String)>,
    /// Run `autotool <these>` instead of `autotool serve …` (e.g. `connect`, the stdio bridge
    /// to a service), spoken to the same way.
    pub command: Option<Vec<String>>,
}

impl Serve {
    pub fn new(sandbox: Sandbox) -> Self {
        Serve {
            sandbox,
            call_timeout: None,
            idle_timeout: None,
            max_output_bytes: None,
            extra_args: Vec::new(),
            env: Vec::new(),
            command: None,
        }
    }

    /// Run `autotool ARGS` (instead of `serve`) on the home, as a host would spawn it.
    pub fn instead(mut self, args: &[&str]) -> Self {
        self.command = Some(args.iter().map(|a| a.to_string()).collect());
        self
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.extra_args.push(arg.to_string());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn call_timeout(mut self, secs: u64) -> Self {
        self.call_timeout = Some(secs);
        self
    }

    pub fn idle_timeout(mut self, secs: u64) -> Self {
        self.idle_timeout = Some(secs);
        self
    }

    pub fn max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = Some(bytes);
        self
    }

    /// Start the server on `home` (no handshake yet).
    pub fn start(&self, home: &ServeHome) -> Result<Server> {
        let bin = autotool_bin()?;
        let runtime = locate::runtime()?;
        let mut command = Command::new(&bin);
        if let Some(args) = &self.command {
            command.args(args);
        } else {
            command
                .arg("serve")
                .arg("--sandbox")
                .arg(match self.sandbox {
                    Sandbox::Strict => "strict",
                    Sandbox::Off => "off",
                });
        }
        if let Some(s) = self.call_timeout {
            command.arg("--call-timeout").arg(s.to_string());
        }
        if let Some(s) = self.idle_timeout {
            command.arg("--idle-timeout").arg(s.to_string());
        }
        if let Some(n) = self.max_output_bytes {
            command.arg("--max-output-bytes").arg(n.to_string());
        }
        command
            .env("AUTOTOOL_HOME", home.path())
            .env("AUTOTOOL_RUNTIME", &runtime.venv)
            // A create_tool is answered with its outcome however long verification takes (the
            // tests of the hold set it back with `.env`).
            .env("AUTOTOOL_CREATE_HOLD", "0")
            .env_remove("AUTOTOOL_SANDBOX")
            .env_remove("AUTOTOOL_CONSENT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        command.args(&self.extra_args);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {bin:?} serve"))?;
        let stdin = child.stdin.take().context("no stdin pipe")?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let stderr_pipe = child.stderr.take().context("no stderr pipe")?;

        // Writes go through a thread, so a server that stops reading cannot block a test.
        let (to_writer, writes) = mpsc::sync_channel::<StdinWrite>(0);
        std::thread::spawn(move || {
            let mut stdin = stdin;
            for (bytes, done) in writes {
                let result = stdin.write_all(&bytes).and_then(|()| stdin.flush());
                let _ = done.send(result);
            }
        });

        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if line.last() == Some(&b'\n') {
                            line.pop();
                        }
                        if tx
                            .send(String::from_utf8_lossy(&line).into_owned())
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        let stderr_bytes = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&stderr_bytes);
        std::thread::spawn(move || {
            let mut pipe = stderr_pipe;
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                counter.fetch_add(n as u64, Ordering::Relaxed);
                if let Ok(mut all) = sink.lock() {
                    all.extend_from_slice(&buf[..n]);
                    if all.len() > 2 * STDERR_KEEP {
                        let cut = all.len() - STDERR_KEEP;
                        all.drain(..cut);
                    }
                }
            }
        });

        Ok(Server {
            child: Some(child),
            writer: Some(to_writer),
            lines,
            stdout_lines: Vec::new(),
            inbox: VecDeque::new(),
            stderr,
            stderr_bytes,
            next_id: 1000,
        })
    }

    /// Start the server on `home` and complete the older era's handshake.
    pub fn start_initialized(&self, home: &ServeHome) -> Result<Server> {
        let mut server = self.start(home)?;
        server.initialize()?;
        Ok(server)
    }
}

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// The whole answer.
    pub raw: Value,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

/// The result of a `tools/call` that got a result (not a JSON-RPC error).
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The text content blocks, joined by newlines.
    pub text: String,
    /// The number of content blocks.
    pub blocks: usize,
    pub structured: Option<Value>,
    pub is_error: bool,
    /// How long the answer took.
    pub elapsed: Duration,
    /// The result's `_meta`, when it has one.
    pub meta: Option<Value>,
}

impl CallResult {
    /// Read a `tools/call` result.
    pub fn from_result(result: &Value, elapsed: Duration) -> Self {
        let blocks = result
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let text = blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n");
        CallResult {
            text,
            blocks: blocks.len(),
            structured: result.get("structuredContent").cloned(),
            is_error: result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            elapsed,
            meta: result.get("_meta").cloned(),
        }
    }
}

/// A running `autotool serve`.
#[derive(Debug)]
pub struct Server {
    child: Option<Child>,
    writer: Option<SyncSender<StdinWrite>>,
    lines: Receiver<String>,
    /// Every line received on stdout, in order.
    stdout_lines: Vec<String>,
    /// Messages received but not consumed yet.
    inbox: VecDeque<Value>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// How many bytes the server wrote to stderr in all.
    stderr_bytes: Arc<AtomicU64>,
    next_id: u64,
}

/// Whether a message's `id` is `id`.
fn has_id(message: &Value, id: u64) -> bool {
    message.get("id").and_then(Value::as_u64) == Some(id)
        && (message.get("result").is_some() || message.get("error").is_some())
}

impl Server {
    /// The server's pid (the leader of its process group).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// The newest part of the server's stderr.
    pub fn stderr(&self) -> String {
        let bytes = self.stderr.lock().map(|b| b.clone()).unwrap_or_default();
        let start = bytes.len().saturating_sub(8 << 10);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// How many bytes the server has written to stderr so far.
    pub fn stderr_bytes(&self) -> u64 {
        self.stderr_bytes.load(Ordering::Relaxed)
    }

    /// Context for failures: whether it runs, and its stderr's tail.
    pub fn context(&mut self) -> String {
        let status = match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(s))) => format!("exited: {s}"),
            Some(Ok(None)) => "running".into(),
            Some(Err(e)) => format!("status unknown: {e}"),
            None => "gone".into(),
        };
        format!(" (autotool serve {status}); its stderr:\n{}", self.stderr())
    }

    /// Write raw bytes to the server's stdin, waiting at most [`TIMEOUT`].
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let writer = self.writer.as_ref().context("stdin already closed")?;
        let (done_tx, done) = mpsc::sync_channel(1);
        writer
            .send((bytes.to_vec(), done_tx))
            .context("the stdin writer thread is gone")?;
        match done.recv_timeout(TIMEOUT) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                let context = self.context();
                Err(e).with_context(|| format!("writing to the server{context}"))
            }
            Err(_) => {
                let context = self.context();
                bail!(
                    "the server did not read {} bytes within {TIMEOUT:?}{context}",
                    bytes.len()
                )
            }
        }
    }

    /// Send one message (a line).
    pub fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line)
    }

    /// A fresh request id.
    pub fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Receive one line from stdout into the inbox, waiting until `deadline`. `Ok(false)` on
    /// timeout.
    fn pump(&mut self, deadline: Instant) -> Result<bool> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                let parsed = serde_json::from_str::<Value>(&line).unwrap_or(Value::Null);
                self.stdout_lines.push(line);
                match parsed {
                    Value::Object(_) => self.inbox.push_back(parsed),
                    // A batch of answers (to a batch the test sent): each is a message.
                    Value::Array(items) => self
                        .inbox
                        .extend(items.into_iter().filter(Value::is_object)),
                    _ => {}
                }
                Ok(true)
            }
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => {
                let context = self.context();
                bail!("the server closed its stdout{context}")
            }
        }
    }

    /// Start a request; returns its id.
    pub fn start_request(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.fresh_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    /// Wait (at most `timeout`, capped at [`TIMEOUT`]) for the answer to request `id`: the
    /// whole message. Other messages stay in the inbox.
    pub fn wait_answer(&mut self, id: u64, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout.min(TIMEOUT);
        loop {
            if let Some(i) = self.inbox.iter().position(|m| has_id(m, id)) {
                return Ok(self.inbox.remove(i).unwrap_or(Value::Null));
            }
            if !self.pump(deadline)? {
                let context = self.context();
                bail!("no answer to request {id} within {timeout:?}{context}");
            }
        }
    }

    /// Send a request and wait for its whole answer.
    pub fn exchange(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.start_request(method, params)?;
        self.wait_answer(id, TIMEOUT)
            .with_context(|| format!("waiting for the answer to {method}"))
    }

    /// Send a request; its `result`, or its JSON-RPC error.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Result<Value, RpcError>> {
        let answer = self.exchange(method, params)?;
        Ok(split_answer(&answer))
    }

    /// Send a request; its `result` (a JSON-RPC error is an `Err`).
    pub fn request_ok(&mut self, method: &str, params: Value) -> Result<Value> {
        match self.request(method, params)? {
            Ok(result) => Ok(result),
            Err(e) => bail!("{method} failed: {e}"),
        }
    }

    /// Send a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// The older era's handshake: `initialize`, then `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<Value> {
        let result = self.request_ok(
            "initialize",
            json!({
                "protocolVersion": LEGACY_PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "autotool-tests", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(result)
    }

    /// `tools/list`: the names, in the order given.
    pub fn tool_names(&mut self) -> Result<Vec<String>> {
        let result = self.request_ok("tools/list", json!({}))?;
        let tools = result
            .get("tools")
            .and_then(Value::as_array)
            .with_context(|| format!("tools/list without tools: {result}"))?;
        Ok(tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .map(str::to_string)
            .collect())
    }

    /// `tools/call`: its result, or its JSON-RPC error.
    pub fn call(&mut self, name: &str, arguments: Value) -> Result<Result<CallResult, RpcError>> {
        let started = Instant::now();
        let answer = self.exchange("tools/call", json!({"name": name, "arguments": arguments}))?;
        let elapsed = started.elapsed();
        Ok(split_answer(&answer).map(|r| CallResult::from_result(&r, elapsed)))
    }

    /// `tools/call` that must get a result (possibly `isError`), not a JSON-RPC error.
    pub fn call_result(&mut self, name: &str, arguments: Value) -> Result<CallResult> {
        match self.call(name, arguments)? {
            Ok(r) => Ok(r),
            Err(e) => bail!("tools/call {name}: {e}"),
        }
    }

    /// `tools/call` that must succeed; its text.
    pub fn call_text(&mut self, name: &str, arguments: Value) -> Result<String> {
        let r = self.call_result(name, arguments)?;
        if r.is_error {
            bail!("tools/call {name} failed: {}", r.text);
        }
        Ok(r.text)
    }

    /// The older era's handshake declaring `capabilities` (e.g. `{"elicitation": {"form": {}}}`
    /// for a host that can ask its user).
    pub fn initialize_with(&mut self, capabilities: Value) -> Result<Value> {
        let result = self.request_ok(
            "initialize",
            json!({
                "protocolVersion": LEGACY_PROTOCOL,
                "capabilities": capabilities,
                "clientInfo": {"name": "autotool-tests", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(result)
    }

    /// A `tools/call` as a host of the older era that can ask its user: every
    /// `elicitation/create` the server sends before the answer is recorded and answered with
    /// `answer(params)` (an elicitation result). The call's outcome and the questions asked.
    pub fn call_answering(
        &mut self,
        name: &str,
        arguments: Value,
        mut answer: impl FnMut(&Value) -> Value,
    ) -> Result<(Result<CallResult, RpcError>, Vec<Value>)> {
        let started = Instant::now();
        let id = self.start_request("tools/call", json!({"name": name, "arguments": arguments}))?;
        let deadline = Instant::now() + TIMEOUT;
        let mut asked = Vec::new();
        loop {
            if let Some(i) = self.inbox.iter().position(|m| has_id(m, id)) {
                let whole = self.inbox.remove(i).unwrap_or(Value::Null);
                let elapsed = started.elapsed();
                return Ok((
                    split_answer(&whole).map(|r| CallResult::from_result(&r, elapsed)),
                    asked,
                ));
            }
            if let Some(i) = self.inbox.iter().position(|m| {
                m.get("method").and_then(Value::as_str) == Some("elicitation/create")
                    && m.get("id").is_some()
            }) {
                let request = self.inbox.remove(i).unwrap_or(Value::Null);
                let params = request.get("params").cloned().unwrap_or(Value::Null);
                let result = answer(&params);
                asked.push(params);
                self.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}))?;
                continue;
            }
            if !self.pump(deadline)? {
                let context = self.context();
                bail!("no answer to tools/call {name} within {TIMEOUT:?}{context}");
            }
        }
    }

    /// A `tools/call` of the 2026-07-28 era (no handshake: version and capabilities ride in
    /// `_meta`), with `extra` merged into the params (`inputResponses`, `requestState`). The
    /// whole `result`, or the JSON-RPC error.
    pub fn call_modern(
        &mut self,
        name: &str,
        arguments: Value,
        capabilities: Value,
        extra: Value,
    ) -> Result<Result<Value, RpcError>> {
        let mut params = json!({
            "name": name,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL,
                "io.modelcontextprotocol/clientCapabilities": capabilities,
                "io.modelcontextprotocol/clientInfo": {
                    "name": "autotool-tests", "version": env!("CARGO_PKG_VERSION")
                },
            },
        });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                p.insert(k.clone(), v.clone());
            }
        }
        self.request("tools/call", params)
    }

    /// `create_tool` with the code of fixture `file`.
    pub fn create_fixture(&mut self, name: &str, file: &str) -> Result<CallResult> {
        let code = fixture(file)?;
        self.call_result("create_tool", json!({"name": name, "code": code}))
    }

    /// Everything that arrives within `window` (used to check an input got no answer, or
    /// what it got). Consumes the inbox.
    pub fn collect(&mut self, window: Duration) -> Result<Vec<Value>> {
        let deadline = Instant::now() + window.min(TIMEOUT);
        while self.pump(deadline)? {}
        Ok(self.inbox.drain(..).collect())
    }

    /// Every line the server wrote to stdout so far.
    pub fn stdout_lines(&self) -> &[String] {
        &self.stdout_lines
    }

    /// Lines on stdout that are not a JSON-RPC 2.0 message (an object with `"jsonrpc": "2.0"`,
    /// or a batch of such objects).
    pub fn stdout_violations(&self) -> Vec<String> {
        self.stdout_lines
            .iter()
            .filter(|line| {
                let is_message =
                    |v: &Value| v.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
                // A batch of answers (to a batch sent) is JSON-RPC when every member is, and
                // it has one.
                serde_json::from_str::<Value>(line)
                    .ok()
                    .is_none_or(|v| match &v {
                        Value::Array(items) => items.is_empty() || !items.iter().all(is_message),
                        v => !is_message(v),
                    })
            })
            .map(|line| line.chars().take(300).collect())
            .collect()
    }

    /// The host goes away: close stdin and wait (at most `timeout`) for a clean exit, checking
    /// stdout carried only JSON-RPC. Returns the exit status and the stderr tail.
    pub fn finish(mut self, timeout: Duration) -> Result<(ExitStatus, String)> {
        let violations = self.stdout_violations();
        if !violations.is_empty() {
            bail!(
                "autotool serve wrote lines to stdout that are not JSON-RPC 2.0: {violations:#?}"
            );
        }
        self.writer = None;
        let deadline = Instant::now() + timeout.min(TIMEOUT);
        let child = self.child.as_mut().context("no child")?;
        loop {
            if let Some(status) = child.try_wait()? {
                // Anything written after the last read counts too.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.stdout_lines.push(line);
                }
                let violations = self.stdout_violations();
                if !violations.is_empty() {
                    bail!("autotool serve wrote non-JSON-RPC lines to stdout: {violations:#?}");
                }
                return Ok((status, self.stderr()));
            }
            if Instant::now() >= deadline {
                let context = self.context();
                bail!("autotool serve did not exit within {timeout:?} after stdin closed{context}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every process descended from the server, as (pid, command line).
    pub fn descendants(&self) -> Vec<(u32, String)> {
        match self.pid() {
            0 => Vec::new(),
            pid => descendants(pid),
        }
    }

    /// The server's tool processes: its descendants but the tool templates' own processes.
    /// A template is a child of the server started with `--template`; its own processes are
    /// that launcher, its waiter and the template's Python below it (the tools it forks are
    /// below that Python, and are counted). Told apart by depth: a forked tool inherits the
    /// template's command line.
    pub fn tool_processes(&self) -> Vec<(u32, String)> {
        let all = self.descendants();
        let server = self.pid();
        let mut own: Vec<u32> = all
            .iter()
            .filter(|(pid, line)| parent(*pid) == Some(server) && line.contains("--template"))
            .map(|(pid, _)| *pid)
            .collect();
        for _ in 0..2 {
            let below: Vec<u32> = all
                .iter()
                .filter(|(pid, _)| {
                    !own.contains(pid) && parent(*pid).is_some_and(|p| own.contains(&p))
                })
                .map(|(pid, _)| *pid)
                .collect();
            own.extend(below);
        }
        all.into_iter()
            .filter(|(pid, _)| !own.contains(pid))
            .collect()
    }
}

fn split_answer(answer: &Value) -> Result<Value, RpcError> {
    if let Some(error) = answer.get("error") {
        return Err(RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            raw: answer.clone(),
        });
    }
    Ok(answer.get("result").cloned().unwrap_or(Value::Null))
}

impl Drop for Server {
    fn drop(&mut self) {
        self.writer = None;
        if let Some(mut child) = self.child.take() {
            kill_group(&mut child);
        }
    }
}

/// `pid`'s parent, from `/proc/PID/stat`.
pub fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid …: comm may hold spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Every live process descended from `root`, as (pid, command line), from `/proc`.
pub fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid …: comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let mut fields = after.split_whitespace();
            let state = fields.next().unwrap_or("");
            let ppid = fields.next().and_then(|s| s.parse::<u32>().ok());
            if state == "Z" {
                continue;
            }
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found: Vec<u32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid) in &parent_of {
            if ppid == p && !found.contains(&pid) {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found.sort_unstable();
    found
        .into_iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .split('\0')
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            (pid, cmdline)
        })
        .collect()
}
