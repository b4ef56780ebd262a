//! The host apps' own CLIs (pinned in `integration/hosts`) against what `autotool setup`
//! registered, in a scratch user home:
//! - [`UserHome`]: a `HOME` for the apps inside the test's directory, whose `bin/` holds the
//!   CLIs, so `autotool setup` finds an app by its CLI on `PATH` as on a user's machine;
//! - [`claude_mcp_list`]: `claude mcp list`, which starts every registered server, connects,
//!   and prints one status line each (it exits 0 whatever the outcome: read the text);
//! - [`gemini_mcp_list`]: `gemini mcp list`, which connects to each server too;
//! - [`CodexAppServer`]: `codex app-server` spoken to in JSON lines on stdio (`initialize`,
//!   `initialized`, then `mcpServerStatus/list`, which connects and lists each server's tools).
//!
//! Neither app needs an account or the network for this. Claude Code's non-essential traffic
//! (update checks, telemetry, error reports) is switched off with
//! `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, Codex's analytics with
//! `-c analytics.enabled=false`.
//!
//! What each app passes to the serve differs, and so does how a test points the serve at its
//! own `AUTOTOOL_HOME`: Claude Code hands its whole environment to stdio servers, so the
//! variables go on `claude`'s own environment; Codex passes only a short list (plus the
//! `env_vars` setup wrote), so they go in a `-c mcp_servers.autotool.env={…}` override on the
//! command line. The config file stays exactly as setup wrote it.

use crate::child::OwnedChild;
use crate::home::TestHome;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A user's home for the host apps, `user/` inside the test's directory.
#[derive(Debug)]
pub struct UserHome {
    dir: PathBuf,
}

impl UserHome {
    /// A fresh home whose `bin/` holds each `(name, binary)` as a symbolic link.
    pub fn new(home: &TestHome, clis: &[(&str, &Path)]) -> Result<UserHome> {
        let dir = home.path().join("user");
        std::fs::create_dir_all(dir.join("bin")).context("creating the user home")?;
        for (name, binary) in clis {
            std::os::unix::fs::symlink(binary, dir.join("bin").join(name))
                .with_context(|| format!("linking {name} into the user home's bin/"))?;
        }
        Ok(UserHome { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// A file under the home.
    pub fn file(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// A clean environment for a program run as this user: `HOME` here, `bin/` first on
    /// `PATH` (then the system's, for whatever the apps run), a UTF-8 locale, no colours.
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", &self.dir)
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin",
                    self.dir.join("bin").display()
                ),
            )
            .env("USER", "autotool-test")
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("NO_COLOR", "1")
            .current_dir(&self.dir);
        cmd
    }

    /// `autotool setup ARGS` as this user, with only `bin/` on `PATH`: what setup finds is
    /// what this home holds, never the machine's own apps. (exit code, stdout, stderr)
    pub fn setup(
        &self,
        home: &TestHome,
        args: &[&str],
        timeout: Duration,
    ) -> Result<(Option<i32>, String, String)> {
        let mut cmd = self.command(&home.setup.autotool);
        // The apps' registration is what these tests are about; the tools' runtime is the
        // test runtime, which serve is pointed at, so setup does not build one.
        cmd.arg("setup")
            .arg("--no-runtime")
            .args(args)
            .env("PATH", self.dir.join("bin"));
        run_to_end("autotool setup", cmd, timeout)
    }
}

/// Run `cmd` to its end, bounded by `timeout`: (exit code, stdout, stderr).
fn run_to_end(
    name: &str,
    cmd: Command,
    timeout: Duration,
) -> Result<(Option<i32>, String, String)> {
    let mut child = OwnedChild::spawn(name, cmd)?;
    child.close_stdin();
    let deadline = Instant::now() + timeout;
    let (lines, ended) = child.read_to_end(deadline);
    let status = child.wait_exit(deadline.saturating_duration_since(Instant::now()))?;
    let stdout: Vec<String> = lines.into_iter().map(|l| l.text).collect();
    let stderr = child.final_stderr();
    if !ended || status.is_none() {
        child.kill_group();
        bail!(
            "{name} did not finish within {timeout:?}; stdout:\n{}\nstderr:\n{stderr}",
            stdout.join("\n")
        );
    }
    Ok((status.and_then(|s| s.code()), stdout.join("\n"), stderr))
}

/// What one `claude mcp list` printed.
#[derive(Debug)]
pub struct McpList {
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl McpList {
    /// The status line of server `name` (`name: command args - ✔ Connected`; Gemini CLI puts
    /// its mark first, `✓ name: command args (stdio) - Connected`, and prints the list on
    /// stderr).
    pub fn line(&self, name: &str) -> Option<&str> {
        let prefix = format!("{name}: ");
        self.stdout.lines().chain(self.stderr.lines()).find(|l| {
            l.trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
                .starts_with(&prefix)
        })
    }
}

/// The serve environment a test gives the apps: its `AUTOTOOL_HOME`, runtime, launcher and
/// log level, and the sandbox mode (`serve`'s default is strict; `AUTOTOOL_SANDBOX` says which).
fn serve_env(home: &TestHome) -> Vec<(String, String)> {
    let mut env = home.env();
    env.push(("AUTOTOOL_SANDBOX".into(), home.setup.sandbox.clone()));
    env
}

/// `claude mcp list` in `user`'s home, the serve pointed at `home`.
pub fn claude_mcp_list(home: &TestHome, user: &UserHome, timeout: Duration) -> Result<McpList> {
    let Some((claude, _)) = &home.setup.claude_code else {
        bail!("Claude Code is not set up");
    };
    let mut cmd = user.command(claude);
    cmd.args(["mcp", "list"])
        .envs(serve_env(home))
        // How long Claude Code waits for a server to start (ms): a strict serve checks the
        // sandbox first.
        .env("MCP_TIMEOUT", "60000")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    let started = Instant::now();
    let (status, stdout, stderr) = run_to_end("claude mcp list", cmd, timeout)?;
    Ok(McpList {
        status,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    })
}

/// `gemini mcp list` in `user`'s home, the serve pointed at `home`. Gemini CLI connects to
/// each server it lists, but only in a folder the user trusts: the home is trusted in
/// `~/.gemini/trustedFolders.json` first (a file setup never touches). It passes its own
/// environment on to stdio servers.
pub fn gemini_mcp_list(home: &TestHome, user: &UserHome, timeout: Duration) -> Result<McpList> {
    let Some((gemini, _)) = &home.setup.gemini_cli else {
        bail!("Gemini CLI is not set up");
    };
    let trusted = user.file(".gemini/trustedFolders.json");
    std::fs::create_dir_all(user.file(".gemini")).context("creating ~/.gemini")?;
    std::fs::write(
        &trusted,
        json!({ user.path().to_string_lossy(): "TRUST_FOLDER" }).to_string(),
    )
    .context("writing ~/.gemini/trustedFolders.json")?;
    let mut cmd = user.command(gemini);
    cmd.args(["mcp", "list"]).envs(serve_env(home));
    let started = Instant::now();
    let (status, stdout, stderr) = run_to_end("gemini mcp list", cmd, timeout)?;
    Ok(McpList {
        status,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    })
}

/// `codex app-server`, driven line by line.
#[derive(Debug)]
pub struct CodexAppServer {
    child: OwnedChild,
    next_id: i64,
    /// Every line sent (`>>`) and received (`<<`), for failure messages.
    pub transcript: Vec<String>,
}

impl CodexAppServer {
    /// Start it in `user`'s home with `extra_env` set, the serve pointed at `home`.
    pub fn start(
        home: &TestHome,
        user: &UserHome,
        extra_env: &[(&str, &str)],
    ) -> Result<CodexAppServer> {
        let Some((codex, _)) = &home.setup.codex else {
            bail!("Codex is not set up");
        };
        let env_table = serve_env(home)
            .iter()
            .map(|(k, v)| format!("{k} = {}", Value::String(v.clone())))
            .collect::<Vec<_>>()
            .join(", ");
        let mut cmd = user.command(codex);
        cmd.arg("app-server")
            .args(["-c", "analytics.enabled=false"])
            .arg("-c")
            .arg(format!("mcp_servers.autotool.env={{ {env_table} }}"));
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        Ok(CodexAppServer {
            child: OwnedChild::spawn("codex app-server", cmd)?,
            next_id: 1,
            transcript: Vec::new(),
        })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let line = message.to_string();
        self.transcript.push(format!(">> {line}"));
        self.child.send_line(&line)
    }

    /// Send a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        self.send(&json!({"method": method, "params": params}))
    }

    /// Send a request and wait at most `timeout` for its response (the whole message, `result`
    /// or `error`); other messages are kept in the transcript.
    pub fn request(&mut self, method: &str, params: Value, timeout: Duration) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(line) = self.child.next_line(left)? else {
                bail!("no answer to {method} within {timeout:?}");
            };
            self.transcript.push(format!("<< {}", line.text));
            let Ok(v) = serde_json::from_str::<Value>(&line.text) else {
                continue;
            };
            if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
                return Ok(v);
            }
        }
    }

    pub fn stderr(&self) -> String {
        self.child.stderr()
    }
}
