//! (p) one tool under many concurrent HTTP sessions: `autotool serve --transport http` with
//! `tool_processes = 1` (one process per tool, whose calls run side by side: how every tool ran
//! before pools) beside one with the default bound, both up at once and measured in alternating
//! rounds of the same length, so load on the machine falls on both alike.
//!
//! Each serve gets its own home with the bench tool created through HTTP; S sessions
//! (`initialize`, `Mcp-Session-Id`), each on its own keep-alive connection and thread, call
//! `bench_add__add` back to back for the round. Calls per second is calls over the summed
//! round time; latencies are per call, end to end over HTTP.

use super::{FUNCTION, Setup, TOOL_CODE, WARM_TOOL, content_text, percentile};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The target of the plan: calls per second with the pool ≥ 1.7 × one process per tool.
pub const TARGET_RATIO: f64 = 1.7;
/// What serve prints once bound.
const LISTENING: &str = "autotool serve listening on http://";
const PROTOCOL: &str = "2025-11-25";

/// How the part is run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub sessions: usize,
    pub rounds: usize,
    pub round: Duration,
    pub warmup: Duration,
}

/// One side's figures.
#[derive(Debug, Clone)]
pub struct Side {
    pub label: String,
    pub calls: usize,
    pub failed: usize,
    pub seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Tool processes under this serve after the last round.
    pub processes: usize,
}

impl Side {
    pub fn per_second(&self) -> f64 {
        self.calls as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// Both sides: one process per tool, then the default bound.
#[derive(Debug)]
pub struct PoolResult {
    pub one: Side,
    pub pooled: Side,
}

impl PoolResult {
    pub fn ratio(&self) -> f64 {
        self.pooled.per_second() / self.one.per_second().max(f64::EPSILON)
    }
}

pub fn part_p(setup: &Setup, plan: Plan) -> Result<PoolResult> {
    println!();
    println!(
        "(p) one tool, {} concurrent HTTP sessions calling {WARM_TOOL}__{FUNCTION} back to back: \
         tool_processes = 1 beside the default, {} alternating rounds of {:.1} s each (+{:.1} s \
         warm-up)",
        plan.sessions,
        plan.rounds,
        plan.round.as_secs_f64(),
        plan.warmup.as_secs_f64()
    );
    let mut one = HttpServe::start(setup, "one", Some(1))?;
    let mut pooled = HttpServe::start(setup, "pooled", None)?;
    let mut sides = Vec::new();
    for serve in [&mut one, &mut pooled] {
        serve.create(setup.timeout)?;
        let sessions = (0..plan.sessions)
            .map(|_| Session::open(serve, setup.timeout))
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("opening {} sessions to {}", plan.sessions, serve.label))?;
        sides.push((
            serve,
            sessions,
            Vec::<Duration>::new(),
            0usize,
            0usize,
            0f64,
        ));
    }
    for (serve, sessions, ..) in &mut sides {
        round(sessions, plan.warmup).with_context(|| format!("warming up {}", serve.label))?;
    }
    for _ in 0..plan.rounds {
        for (serve, sessions, latencies, calls, failed, seconds) in &mut sides {
            let t0 = Instant::now();
            let r = round(sessions, plan.round)
                .with_context(|| format!("a round on {}", serve.label))?;
            *seconds += t0.elapsed().as_secs_f64();
            *calls += r.0.len();
            *failed += r.1;
            latencies.extend(r.0);
        }
    }
    let mut out = Vec::new();
    for (serve, _, latencies, calls, failed, seconds) in sides {
        out.push(Side {
            label: serve.label.clone(),
            calls,
            failed,
            seconds,
            p50_ms: percentile(&latencies, 0.50).unwrap_or(f64::NAN),
            p99_ms: percentile(&latencies, 0.99).unwrap_or(f64::NAN),
            processes: serve.tool_processes(),
        });
    }
    let pooled = out.pop().ok_or_else(|| anyhow!("no pooled side"))?;
    let one = out.pop().ok_or_else(|| anyhow!("no single side"))?;
    Ok(PoolResult { one, pooled })
}

pub fn print_p(r: &PoolResult) {
    println!(
        "  {:<34} {:>9} {:>7} {:>9} {:>9} {:>9}",
        "serve", "calls/s", "failed", "p50 ms", "p99 ms", "tool procs"
    );
    for s in [&r.one, &r.pooled] {
        println!(
            "  {:<34} {:>9.1} {:>7} {:>9.2} {:>9.2} {:>9}",
            s.label,
            s.per_second(),
            s.failed,
            s.p50_ms,
            s.p99_ms,
            s.processes
        );
    }
    println!(
        "  calls per second, pool / one process: {:.2}× (≥ {TARGET_RATIO}×: {})",
        r.ratio(),
        super::met(r.ratio() >= TARGET_RATIO)
    );
}

/// Every session calls back to back until `length` is over: the latencies of the calls that
/// answered, and how many failed.
fn round(sessions: &mut [Session], length: Duration) -> Result<(Vec<Duration>, usize)> {
    let deadline = Instant::now() + length;
    let results = Mutex::new((Vec::new(), 0usize, None::<anyhow::Error>));
    std::thread::scope(|scope| {
        for session in sessions.iter_mut() {
            let results = &results;
            scope.spawn(move || {
                let mut mine = Vec::new();
                let mut failed = 0;
                let mut broken = None;
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    match session.add() {
                        Ok(true) => mine.push(t0.elapsed()),
                        Ok(false) => failed += 1,
                        Err(e) => {
                            broken = Some(e);
                            break;
                        }
                    }
                }
                let mut r = results.lock().unwrap_or_else(|p| p.into_inner());
                r.0.extend(mine);
                r.1 += failed;
                if r.2.is_none() {
                    r.2 = broken;
                }
            });
        }
    });
    let (latencies, failed, broken) = results.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = broken {
        return Err(e);
    }
    Ok((latencies, failed))
}

/// `autotool serve --transport http` on a home of its own.
struct HttpServe {
    label: String,
    child: Child,
    addr: SocketAddr,
    token: String,
}

impl HttpServe {
    /// Start it with `tool_processes` (`None`: the default) and wait until it listens.
    fn start(setup: &Setup, name: &str, processes: Option<usize>) -> Result<HttpServe> {
        let home = setup.work.join(format!("home-pool-{name}"));
        std::fs::create_dir_all(&home)?;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700))?;
        let mut cmd = Command::new(&setup.autotool);
        cmd.args(["serve", "--sandbox", "strict", "--transport", "http"])
            .args(["--listen", "127.0.0.1:0"])
            .env("AUTOTOOL_HOME", &home)
            .env("AUTOTOOL_RUNTIME", &setup.runtime)
            .env("AUTOTOOL_LAUNCHER", &setup.launcher)
            .env_remove("AUTOTOOL_SANDBOX")
            .env_remove("AUTOTOOL_TOOL_PROCESSES")
            .env("AUTOTOOL_LOG", "warn,autotool::cmd::serve=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let label = match processes {
            Some(n) => {
                cmd.env("AUTOTOOL_TOOL_PROCESSES", n.to_string());
                format!("tool_processes = {n}")
            }
            None => "tool_processes default".to_string(),
        };
        let mut child = cmd.spawn().with_context(|| {
            format!("start {} serve --transport http", setup.autotool.display())
        })?;
        let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some((_, rest)) = line.split_once(LISTENING) {
                    let at = rest
                        .split(['/', ' '])
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    let _ = tx.send(at);
                }
            }
        });
        let at = rx
            .recv_timeout(setup.timeout)
            .map_err(|_| anyhow!("serve ({label}) did not say where it listens"))?;
        let addr: SocketAddr = at
            .parse()
            .with_context(|| format!("not an address: {at}"))?;
        let token = read_token(&home)?;
        let label = format!("{label} (bound {})", bound_of(processes));
        Ok(HttpServe {
            label,
            child,
            addr,
            token,
        })
    }

    /// Create the bench tool through a session of its own.
    fn create(&mut self, timeout: Duration) -> Result<()> {
        let mut s = Session::open(self, timeout)?;
        let result = s.call(
            "create_tool",
            json!({
                "name": WARM_TOOL,
                "code": TOOL_CODE,
                "description": "Adds two numbers (serve-bench).",
                "smoke_test": {"function": FUNCTION, "arguments": {"a": 1, "b": 2}},
            }),
        )?;
        if result["isError"] == json!(true) {
            bail!(
                "create_tool failed on {}: {}",
                self.label,
                content_text(&result)
            );
        }
        Ok(())
    }

    /// Tool processes now: the launchers serve started (one per confined tool process), the
    /// children of any of its threads.
    /// Tool processes under this serve, launched or forked from its template.
    fn tool_processes(&self) -> usize {
        super::fork::tool_count(self.child.id())
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the pool's bound comes to on this machine.
fn bound_of(processes: Option<usize>) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    processes
        .unwrap_or(autotool::library::settings::DEFAULT_TOOL_PROCESSES)
        .min(cores)
        .max(1)
}

fn read_token(home: &Path) -> Result<String> {
    let path = home.join("service-token");
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

/// An HTTP response: its status, headers (names lower-cased) and body.
type Reply = (u16, Vec<(String, String)>, String);

/// One MCP session over one keep-alive HTTP/1.1 connection.
struct Session {
    conn: BufReader<TcpStream>,
    host: String,
    token: String,
    id: String,
    next: u64,
}

impl Session {
    fn open(serve: &HttpServe, timeout: Duration) -> Result<Session> {
        let stream = TcpStream::connect_timeout(&serve.addr, timeout)
            .with_context(|| format!("connecting to {}", serve.addr))?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut s = Session {
            conn: BufReader::new(stream),
            host: serve.addr.to_string(),
            token: serve.token.clone(),
            id: String::new(),
            next: 1,
        };
        let (status, headers, body) = s.post(&json!({"jsonrpc": "2.0", "id": 0,
            "method": "initialize", "params": {"protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "serve-bench", "version": "0"}}}))?;
        if status != 200 {
            bail!("initialize: HTTP {status}: {body}");
        }
        s.id = headers
            .iter()
            .find(|(n, _)| n == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| anyhow!("initialize: no Mcp-Session-Id"))?;
        let (status, _, body) =
            s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        if status != 202 {
            bail!("notifications/initialized: HTTP {status}: {body}");
        }
        Ok(s)
    }

    /// One `add` call: whether it answered the right sum.
    fn add(&mut self) -> Result<bool> {
        let a = self.next;
        let result = self.call(&format!("{WARM_TOOL}__{FUNCTION}"), json!({"a": a, "b": 1}))?;
        Ok(result["isError"] != json!(true) && content_text(&result) == (a + 1).to_string())
    }

    /// `tools/call`: its result.
    fn call(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let id = self.next;
        self.next += 1;
        let (status, _, body) = self.post(&json!({"jsonrpc": "2.0", "id": id,
            "method": "tools/call", "params": {"name": name, "arguments": arguments}}))?;
        if status != 200 {
            bail!("tools/call {name}: HTTP {status}: {body}");
        }
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .chain(serde_json::from_str::<Value>(&body).ok())
            .find(|m| m["id"] == json!(id))
            .map(|m| m["result"].clone())
            .ok_or_else(|| anyhow!("tools/call {name}: no answer to {id} in {body}"))
    }

    /// POST `body` to `/mcp`: the status, headers (names lower-cased) and body.
    fn post(&mut self, body: &Value) -> Result<Reply> {
        let body = body.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n",
            self.host,
            self.token,
            body.len()
        );
        if !self.id.is_empty() {
            head.push_str(&format!(
                "Mcp-Session-Id: {}\r\nMCP-Protocol-Version: {PROTOCOL}\r\n",
                self.id
            ));
        }
        head.push_str("\r\n");
        head.push_str(&body);
        self.conn.get_mut().write_all(head.as_bytes())?;
        read_response(&mut self.conn)
    }
}

/// Read one HTTP/1.1 response (a `Content-Length` body or a chunked one) off a kept-alive
/// connection.
fn read_response(r: &mut BufReader<TcpStream>) -> Result<Reply> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP status line: {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            bail!("the connection closed inside a response head");
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                .with_context(|| format!("not a chunk size: {line:?}"))?;
            if size == 0 {
                // Trailers, then the blank line.
                loop {
                    line.clear();
                    if r.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf)?;
        }
    } else {
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        body.resize(length, 0);
        r.read_exact(&mut body)?;
    }
    Ok((status, headers, String::from_utf8_lossy(&body).into_owned()))
}

/// For the summary line: the part's figures in a few words.
pub fn verdict(r: &PoolResult) -> String {
    format!(
        "(p) pool {:.0} calls/s vs one process {:.0} ({:.2}×, ≥ {TARGET_RATIO}×: {}; p99 {:.1} vs \
         {:.1} ms)",
        r.pooled.per_second(),
        r.one.per_second(),
        r.ratio(),
        super::met(r.ratio() >= TARGET_RATIO),
        r.pooled.p99_ms,
        r.one.p99_ms
    )
}
