//! A real browser for the console's tests: Debian's `chromium`, headless, driven over
//! WebDriver by its `chromedriver` on loopback, and `autotool console` itself as a process.
//!
//! The WebDriver client is a few JSON requests over one short HTTP/1.1 connection each
//! (new session, navigate, find, click, page source, screenshot): the W3C protocol needs
//! nothing more here, and the harness stays free of an HTTP client crate.
//!
//! [`probe`] says why there is no browser (`chromium` or `chromedriver` missing); a test skips
//! on it with a printed `SKIP`, unless the machine must have one (`AUTOTOOL_REQUIRE_BROWSER`,
//! else `CI`), where it fails.

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The chromium flags: headless, no sandbox of its own (CI runs as root), nothing fetched
/// from the network on its own account.
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
];

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// `(chromium, chromedriver)`, or why they are not there.
pub fn probe() -> Result<(PathBuf, PathBuf), String> {
    let chromium = on_path("chromium").ok_or(
        "no `chromium` on PATH (Debian: apt-get install -y chromium chromium-driver)".to_string(),
    )?;
    let driver = on_path("chromedriver").ok_or(
        "no `chromedriver` on PATH (Debian: apt-get install -y chromium-driver)".to_string(),
    )?;
    Ok((chromium, driver))
}

/// Whether a missing browser fails the test rather than skipping it.
pub fn required() -> bool {
    let yes = |v: &str| !v.is_empty() && v != "0" && v != "false";
    match std::env::var("AUTOTOOL_REQUIRE_BROWSER") {
        Ok(v) => yes(&v),
        Err(_) => std::env::var("CI").is_ok_and(|v| v == "true" || v == "1"),
    }
}

/// A free loopback port (bound, read, released).
fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One HTTP/1.1 request with a JSON body to `127.0.0.1:port`; the answer's JSON.
fn http_json(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<Value> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(crate::TIMEOUT))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    // chromedriver keeps the connection open whatever the request says: read the head, then
    // as many bytes as it announces.
    let mut answer = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            bail!("{method} {path}: the connection closed before an answer");
        }
        answer.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&answer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow!("{method} {path}: no Content-Length in {head}"))?;
    while answer.len() < head_end + length {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
    }
    let json = String::from_utf8_lossy(&answer[head_end..]).into_owned();
    serde_json::from_str(&json).with_context(|| format!("{method} {path}: {head}\n{json}"))
}

/// chromedriver and one headless chromium session, both ended on drop.
#[derive(Debug)]
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    profile: tempfile::TempDir,
}

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    /// Start chromedriver on a free loopback port and a session with a fresh profile.
    pub fn start(chromium: &Path, driver: &Path) -> Result<Browser> {
        let port = free_port()?;
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", driver.display()))?;
        let profile = tempfile::Builder::new()
            .prefix("autotool-chromium-")
            .tempdir()?;
        let mut browser = Browser {
            driver: child,
            port,
            session: String::new(),
            profile,
        };
        let deadline = Instant::now() + crate::TIMEOUT;
        loop {
            match http_json(port, "GET", "/status", None) {
                Ok(v) if v["value"]["ready"] == json!(true) => break,
                _ if Instant::now() > deadline => bail!("chromedriver never became ready"),
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!(
            "--user-data-dir={}",
            browser.profile.path().display()
        ));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let answer = http_json(port, "POST", "/session", Some(&caps))?;
        browser.session = answer["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow!("no session: {answer}"))?
            .to_string();
        Ok(browser)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let path = format!("/session/{}{path}", self.session);
        let answer = http_json(self.port, method, &path, body.as_ref())?;
        if let Some(error) = answer["value"]["error"].as_str() {
            bail!("{method} {path}: {error}: {}", answer["value"]["message"]);
        }
        Ok(answer["value"].clone())
    }

    pub fn go(&self, url: &str) -> Result<()> {
        self.call("POST", "/url", Some(json!({ "url": url })))
            .map(drop)
    }

    pub fn url(&self) -> Result<String> {
        Ok(self
            .call("GET", "/url", None)?
            .as_str()
            .unwrap_or("")
            .to_string())
    }

    pub fn source(&self) -> Result<String> {
        Ok(self
            .call("GET", "/source", None)?
            .as_str()
            .unwrap_or("")
            .to_string())
    }

    /// The page's source once it holds `needle` (a click that follows a link or posts a form
    /// returns before the next page has loaded), waiting up to 15 s; the last source read
    /// either way, for the caller's assertion to show.
    pub fn source_with(&self, needle: &str) -> Result<String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let source = self.source()?;
            if source.contains(needle) || std::time::Instant::now() >= deadline {
                return Ok(source);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Click the first element `css` selects.
    pub fn click(&self, css: &str) -> Result<()> {
        let found = self.call(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )?;
        let id = found[ELEMENT]
            .as_str()
            .ok_or_else(|| anyhow!("no element {css}: {found}"))?;
        self.call("POST", &format!("/element/{id}/click"), Some(json!({})))
            .map(drop)
    }

    /// A PNG of the viewport, written to `to`.
    pub fn screenshot(&self, to: &Path) -> Result<()> {
        use base64::Engine as _;
        let b64 = self.call("GET", "/screenshot", None)?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or(""))
            .context("decoding the screenshot")?;
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(to, png).with_context(|| format!("writing {}", to.display()))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", "", None);
        }
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_child(&self.driver),
            rustix::process::Signal::KILL,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `autotool console --no-open` on a home, killed on drop.
#[derive(Debug)]
pub struct Console {
    child: Child,
    /// The URL it printed, its secret included.
    pub url: String,
    pub port: u16,
}

impl Console {
    /// Start it on `home` with `env` added, and read the URL from its first line.
    pub fn start(home: &Path, env: &[(&str, &str)]) -> Result<Console> {
        let mut child = Command::new(crate::serve::autotool_bin()?)
            .args(["console", "--no-open"])
            .env("AUTOTOOL_HOME", home)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(crate::TIMEOUT)
            .context("autotool console printed no URL")?;
        let url = line.trim().to_string();
        let port = url
            .strip_prefix("http://127.0.0.1:")
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| anyhow!("not a console URL: {line:?}"))?;
        Ok(Console { child, url, port })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
