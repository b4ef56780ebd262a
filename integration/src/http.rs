//! `autotool serve --transport http` under test ([`HttpServe`]), and a plain HTTP/1.1 client
//! ([`request`]) for what no SDK client sends: no token, a wrong one, a foreign `Host` or
//! `Origin`, a unix socket.
//!
//! The serve says where it listens on stderr once its socket is bound (`autotool serve
//! listening on http://127.0.0.1:PORT/mcp`, or `unix:PATH`); `--listen 127.0.0.1:0` lets the
//! kernel pick the port and [`HttpServe::start`] reads it from that line.

use crate::child::OwnedChild;
use crate::home::TestHome;
use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// What the serve prints once it is bound.
const LISTENING: &str = "autotool serve listening on ";

/// Where a serve listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Target {
    /// `http://127.0.0.1:PORT/mcp` or `unix:PATH`, as the serve prints it.
    pub fn parse(s: &str) -> Result<Target> {
        if let Some(path) = s.strip_prefix("unix:") {
            return Ok(Target::Unix(PathBuf::from(path)));
        }
        let rest = s
            .strip_prefix("http://")
            .with_context(|| format!("not an http:// or unix: address: {s:?}"))?;
        let authority = rest.split('/').next().unwrap_or(rest);
        let addr = authority
            .parse()
            .with_context(|| format!("not an address: {authority:?} in {s:?}"))?;
        Ok(Target::Tcp(addr))
    }

    /// The `Host` field a client on this machine sends.
    pub fn host(&self) -> String {
        match self {
            Target::Tcp(a) => a.to_string(),
            Target::Unix(_) => "localhost".into(),
        }
    }
}

/// One `autotool serve --transport http` on a test's home.
#[derive(Debug)]
pub struct HttpServe {
    pub child: OwnedChild,
    pub target: Target,
}

impl HttpServe {
    /// Start `serve --transport http --listen LISTEN` with `args` and wait (at most `timeout`)
    /// until it says where it listens.
    pub fn start(
        home: &TestHome,
        listen: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<HttpServe> {
        let mut child = spawn(home, listen, args)?;
        let deadline = Instant::now() + timeout;
        loop {
            let stderr = child.stderr();
            if let Some(at) = stderr
                .lines()
                .find_map(|l| l.split_once(LISTENING).map(|(_, rest)| rest))
                .and_then(|rest| rest.split_whitespace().next())
            {
                let target = Target::parse(at)?;
                return Ok(HttpServe { child, target });
            }
            if let Some(status) = child.wait_exit(Duration::ZERO)? {
                bail!(
                    "serve --transport http --listen {listen} exited ({status}) before listening; \
                     stderr:\n{}",
                    child.final_stderr()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "serve --transport http --listen {listen} did not say it listens within \
                     {timeout:?}; stderr:\n{stderr}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `http://ADDR/mcp` (TCP only).
    pub fn url(&self) -> String {
        match &self.target {
            Target::Tcp(a) => format!("http://{a}/mcp"),
            Target::Unix(p) => format!("unix:{}", p.display()),
        }
    }

    /// SIGTERM to the serve.
    pub fn terminate(&self) -> Result<()> {
        let pid = rustix::process::Pid::from_raw(self.child.pid() as i32).context("pid 0")?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .with_context(|| format!("kill -TERM {pid:?}"))
    }

    /// A POST of `body` to `/mcp` with `headers` (a `Host` among them replaces the default).
    pub fn post(&self, headers: &[(&str, &str)], body: &Value) -> Result<Response> {
        let mut all = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        all.extend_from_slice(headers);
        request(
            &self.target,
            "POST",
            "/mcp",
            &all,
            Some(&body.to_string()),
            Duration::from_secs(30),
        )
    }

    /// A DELETE of `/mcp` with `headers` (the end of a session: `Mcp-Session-Id`).
    pub fn delete(&self, headers: &[(&str, &str)]) -> Result<Response> {
        request(
            &self.target,
            "DELETE",
            "/mcp",
            headers,
            None,
            Duration::from_secs(30),
        )
    }
}

/// `autotool serve --transport http --listen LISTEN ARGS…` on `home`, not waited for: for
/// invocations that must be refused.
pub fn spawn(home: &TestHome, listen: &str, args: &[&str]) -> Result<OwnedChild> {
    let s = &home.setup;
    let mut cmd = Command::new(&s.autotool);
    cmd.args(["serve", "--transport", "http", "--listen", listen])
        .args(["--sandbox", &s.sandbox])
        .args(args)
        .envs(home.env());
    OwnedChild::spawn(&format!("autotool serve --listen {listen}"), cmd)
}

/// Run `serve --transport http --listen LISTEN ARGS…` to its end (at most `timeout`): its exit
/// status and stderr.
pub fn refused(
    home: &TestHome,
    listen: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<(Option<ExitStatus>, String)> {
    let mut child = spawn(home, listen, args)?;
    child.close_stdin();
    let status = child.wait_exit(timeout)?;
    Ok((status, child.final_stderr()))
}

/// The service token of `home` (made by the first serve that requires it).
pub fn token(home: &Path) -> Result<String> {
    let path = home.join("service-token");
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .trim()
        .to_string())
}

/// An HTTP response, its body whole.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages in the body: the body itself (`application/json`), or every
    /// `data:` line of an event stream that holds JSON.
    pub fn messages(&self) -> Vec<Value> {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            self.body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect()
        } else {
            serde_json::from_str(&self.body).into_iter().collect()
        }
    }

    /// The message answering request `id`, or `Value::Null`.
    pub fn reply(&self, id: i64) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m.get("id").and_then(Value::as_i64) == Some(id))
            .unwrap_or(Value::Null)
    }
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {} {:?}", self.status, self.body)
    }
}

/// One HTTP/1.1 request (`Connection: close`), read to the end of its response.
pub fn request(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    timeout: Duration,
) -> Result<Response> {
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {}\r\n", target.host()));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let raw = match target {
        Target::Tcp(addr) => {
            let s = TcpStream::connect_timeout(addr, timeout)
                .with_context(|| format!("connecting to {addr}"))?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            exchange(s, head.as_bytes())?
        }
        Target::Unix(p) => {
            let s = UnixStream::connect(p).with_context(|| format!("connecting to {p:?}"))?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            exchange(s, head.as_bytes())?
        }
    };
    parse_response(&raw)
}

fn exchange(mut s: impl Read + Write, request: &[u8]) -> Result<Vec<u8>> {
    s.write_all(request)?;
    s.flush()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).context("reading the response")?;
    Ok(raw)
}

fn parse_response(raw: &[u8]) -> Result<Response> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .with_context(|| format!("no end of headers in {:?}", String::from_utf8_lossy(raw)))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not a status line: {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// The payload of a `Transfer-Encoding: chunked` body.
fn dechunk(mut b: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("a chunk size line without its end")?;
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16)
            .with_context(|| format!("a bad chunk size {size_hex:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size {
            bail!("a chunk of {size} bytes cut short at {}", b.len());
        }
        out.extend_from_slice(&b[..size]);
        b = b.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn http_responses_parse_plain_chunked_and_as_event_streams() {
        let plain = parse_response(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nWWW-Authenticate: Bearer\r\n\r\nno",
        )
        .unwrap();
        assert_eq!(plain.status, 401);
        assert_eq!(plain.header("www-authenticate"), Some("Bearer"));
        assert_eq!(plain.body, "no");

        let sse = parse_response(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
              7\r\ndata: \n\r\n\
              1f\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3}\n\r\n\
              0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(sse.status, 200);
        assert_eq!(sse.reply(3)["jsonrpc"], "2.0");
        assert_eq!(sse.messages().len(), 1);
        assert!(sse.reply(4).is_null());

        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }

    #[test]
    fn http_listen_lines_parse() {
        assert_eq!(
            Target::parse("http://127.0.0.1:4000/mcp").unwrap(),
            Target::Tcp("127.0.0.1:4000".parse().unwrap())
        );
        assert_eq!(
            Target::parse("unix:/tmp/a.sock").unwrap(),
            Target::Unix("/tmp/a.sock".into())
        );
        assert!(Target::parse("ftp://x").is_err());
    }
}

/// A loopback TCP port that carries every connection to a unix socket and back, byte for byte:
/// for a client that speaks HTTP over TCP only and sends no token (the conformance suite), to a
/// serve that listens without one on its 0600 unix socket (`--no-auth` is refused on TCP).
/// Accepts at most `max` connections; stops accepting when dropped.
#[derive(Debug)]
pub struct UnixBridge {
    pub addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl UnixBridge {
    pub fn start(socket: &Path, max: usize) -> Result<UnixBridge> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding the bridge")?;
        let addr = listener.local_addr()?;
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            for client in listener.incoming().take(max) {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let (Ok(client), Ok(server)) = (client, UnixStream::connect(&socket)) else {
                    continue;
                };
                let (Ok(mut client_in), Ok(mut server_in)) =
                    (client.try_clone(), server.try_clone())
                else {
                    continue;
                };
                let (mut client_out, mut server_out) = (client, server);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut client_in, &mut server_out);
                    let _ = server_out.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut server_in, &mut client_out);
                    let _ = client_out.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Ok(UnixBridge { addr, stop })
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for UnixBridge {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Wake the accepting thread so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}
