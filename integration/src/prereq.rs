//! What each test needs, probed at run time, and the `SKIP` gate built on the probes.
//!
//! A test calls [`setup`] with what it needs. When something is missing, the test prints
//! `SKIP <test>: <why, and how to get it>` on stderr and returns; under `CI=true` (or `1`), or
//! with `AUTOTOOL_REQUIRE_INTEGRATION=1`, it fails instead. Probes run once per test binary.
//!
//! The sandbox: tests run `autotool serve --sandbox strict` (the default a user gets) when
//! `autotool doctor` says this machine can confine tools; `AUTOTOOL_TEST_SANDBOX=off` runs them
//! with `--sandbox off` instead (for machines that cannot confine, at the price of not testing
//! the confined path).

use crate::locate;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Something a test needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A built `autotool` with `serve`, its launcher, and a machine where its sandbox works.
    Serve,
    /// The Python runtime with the MCP SDK 2.x (tools run on it; the clients are written in it).
    PythonSdk,
    /// node and the pinned MCP Inspector, installed by `npm ci` in `integration/node`.
    Inspector,
    /// The pinned Claude Code CLI, installed by `npm ci` in `integration/hosts`.
    ClaudeCode,
    /// The pinned Codex CLI, installed by `npm ci` in `integration/hosts`.
    Codex,
    /// The pinned Gemini CLI, installed by `npm ci` in `integration/hosts` (run by `node`).
    GeminiCli,
    /// The pinned conformance suite and Node.js 22, installed by `npm ci` in
    /// `integration/conformance`.
    Conformance,
    /// The OpenAI Agents SDK (`openai-agents`, pinned) in its own venv, made by `.ci/test`.
    OpenAiAgents,
    /// OpenClaw and Node.js 24, pinned and installed by `npm ci` in `integration/openclaw`.
    OpenClaw,
}

/// Where everything is, once the probes have passed.
#[derive(Debug, Clone)]
pub struct Setup {
    pub autotool: PathBuf,
    pub launcher: PathBuf,
    /// The venv: the tools' runtime (`AUTOTOOL_RUNTIME`) and the clients' interpreter.
    pub runtime: PathBuf,
    pub python: PathBuf,
    /// `strict` or `off`.
    pub sandbox: String,
    /// The `mcp` version of the runtime.
    pub sdk_version: String,
    pub node: Option<PathBuf>,
    pub inspector: Option<PathBuf>,
    /// The Inspector version pinned in integration/node/package.json.
    pub inspector_version: Option<String>,
    /// Claude Code's native binary and its version (pinned in integration/hosts/package.json).
    pub claude_code: Option<(PathBuf, String)>,
    /// Codex's native binary and its version (pinned in integration/hosts/package.json).
    pub codex: Option<(PathBuf, String)>,
    /// Gemini CLI's script and its version (pinned in integration/hosts/package.json).
    pub gemini_cli: Option<(PathBuf, String)>,
    /// The conformance suite: its Node.js 22, its CLI, and the suite version pinned in
    /// integration/conformance/package.json.
    pub conformance: Option<Conformance>,
    /// The interpreter of the client-SDK venv, and the `openai-agents` version it holds.
    pub agents: Option<(PathBuf, String)>,
    /// OpenClaw: its Node.js 24, its entry point, and the version pinned in
    /// integration/openclaw/package.json.
    pub openclaw: Option<(PathBuf, PathBuf, String)>,
}

/// The official conformance suite, ready to run.
#[derive(Debug, Clone)]
pub struct Conformance {
    pub node: PathBuf,
    pub entry: PathBuf,
    pub version: String,
    pub node_version: String,
}

/// Whether a missing prerequisite fails the test rather than skipping it.
pub fn required() -> bool {
    let yes = |v: &str| v == "true" || v == "1";
    std::env::var("AUTOTOOL_REQUIRE_INTEGRATION").is_ok_and(|v| yes(&v))
        || std::env::var("CI").is_ok_and(|v| yes(&v))
}

fn output(cmd: &mut Command) -> Result<(bool, String, String), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("could not run {cmd:?}: {e}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

struct ServeProbe {
    autotool: PathBuf,
    launcher: PathBuf,
    sandbox: String,
}

fn probe_serve() -> Result<ServeProbe, String> {
    let candidates = locate::autotool_candidates();
    let autotool = candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        format!(
            "no autotool binary (looked at {candidates:?}): build it with `cargo build -p autotool \
             -p autotool-launcher`, or set AUTOTOOL_BIN"
        )
    })?;
    let launcher = locate::launcher(&autotool);
    if !launcher.is_file() {
        return Err(format!(
            "no launcher at {launcher:?}: build it with `cargo build -p autotool-launcher`, or set \
             AUTOTOOL_LAUNCHER"
        ));
    }
    // A binary older than the sources tests old code: say so (it is not a reason to skip).
    if let Ok(built) = std::fs::metadata(&autotool).and_then(|m| m.modified()) {
        let ws = locate::workspace_dir();
        for src in ["supervisor/src", "launcher/src", "policy/src"] {
            if locate::newest_mtime(&ws.join(src)).is_some_and(|m| m > built) {
                eprintln!(
                    "warning: {} is older than {src}: these tests run the old binary (cargo build \
                     -p autotool -p autotool-launcher)",
                    autotool.display()
                );
                break;
            }
        }
    }
    let (ok, _, err) = output(Command::new(&autotool).args(["serve", "--help"]))?;
    if !ok {
        return Err(format!(
            "{} has no working `serve` subcommand: {}",
            autotool.display(),
            err.trim()
        ));
    }
    let sandbox = match std::env::var("AUTOTOOL_TEST_SANDBOX").as_deref() {
        Ok("off") => "off".to_string(),
        _ => "strict".to_string(),
    };
    if sandbox == "strict" {
        let (ok, out, err) = output(
            Command::new(&autotool)
                .arg("doctor")
                .env("AUTOTOOL_LAUNCHER", &launcher)
                .env("AUTOTOOL_RUNTIME", locate::runtime()),
        )?;
        if !ok {
            let fails: Vec<&str> = out
                .lines()
                .filter(|l| l.to_ascii_lowercase().contains("fail"))
                .collect();
            return Err(format!(
                "`autotool doctor` says tools cannot be confined here, so `serve --sandbox \
                 strict` would refuse to start ({}{}); set AUTOTOOL_TEST_SANDBOX=off to run these \
                 tests unconfined",
                fails.join("; "),
                err.trim()
            ));
        }
    }
    Ok(ServeProbe {
        autotool,
        launcher,
        sandbox,
    })
}

fn probe_python() -> Result<(PathBuf, PathBuf, String), String> {
    let runtime = locate::runtime();
    let python = runtime.join("bin/python3");
    if !python.is_file() {
        return Err(format!(
            "no Python runtime at {runtime:?}: create it with `/usr/bin/python3 -m venv {} && \
             {}/bin/pip install mcp==2.3.0 httpx2 ruff` (as .ci/test does), or set \
             AUTOTOOL_TEST_RUNTIME",
            runtime.display(),
            runtime.display()
        ));
    }
    let (ok, out, err) = output(Command::new(&python).args([
        "-c",
        "import importlib.metadata as m, mcp, mcp_types; print(m.version('mcp'))",
    ]))?;
    let version = out.trim().to_string();
    if !ok || !version.starts_with("2.") {
        return Err(format!(
            "the runtime {runtime:?} has no MCP Python SDK 2.x (got {version:?}; {}): `{}/bin/pip \
             install mcp==2.3.0`",
            err.trim(),
            runtime.display()
        ));
    }
    Ok((runtime, python, version))
}

/// The version of `package` pinned in `dir/package.json`.
fn pinned(dir: &std::path::Path, package: &str) -> Result<String, String> {
    let path = dir.join("package.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path:?}: {e}"))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing {path:?}: {e}"))?;
    json.get("dependencies")
        .and_then(|d| d.get(package))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("{path:?} pins no {package}"))
}

fn pinned_inspector_version() -> Result<String, String> {
    pinned(&locate::node_dir(), "@modelcontextprotocol/inspector")
}

fn probe_conformance() -> Result<Conformance, String> {
    let dir = locate::conformance_dir();
    let install = format!("run `npm ci --ignore-scripts` in {}", dir.display());
    let version = pinned(&dir, "@modelcontextprotocol/conformance")?;
    let node = locate::conformance_node();
    if !node.is_file() {
        return Err(format!(
            "no Node.js 22 at {node:?} (the conformance suite needs Node 22 or newer): {install}, \
             or set AUTOTOOL_TEST_NODE22"
        ));
    }
    let (ok, out, err) = output(Command::new(&node).arg("--version"))?;
    let node_version = out.trim().to_string();
    let major: u32 = node_version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if !ok || major < 22 {
        return Err(format!(
            "{node:?} is Node.js {node_version:?} ({}); the conformance suite needs 22 or newer: \
             {install}",
            err.trim()
        ));
    }
    let entry = locate::conformance_entry();
    if !entry.is_file() {
        return Err(format!(
            "the conformance suite {version} is not installed: {install}"
        ));
    }
    let (ok, out, err) = output(Command::new(&node).arg(&entry).arg("--version"))?;
    let got = out.trim().to_string();
    if !ok || got != version {
        return Err(format!(
            "the conformance suite at {entry:?} reports {got:?}, not the pinned {version} ({}): \
             {install}",
            err.trim()
        ));
    }
    Ok(Conformance {
        node,
        entry,
        version,
        node_version,
    })
}

fn probe_agents() -> Result<(PathBuf, String), String> {
    let venv = locate::clients();
    let python = venv.join("bin/python3");
    let make = format!(
        "`python3 -m venv {v} && {v}/bin/pip install {}` (as .ci/test does), or set \
         AUTOTOOL_TEST_CLIENTS",
        locate::CLIENT_REQUIREMENTS.join(" "),
        v = venv.display()
    );
    if !python.is_file() {
        return Err(format!("no client-SDK environment at {venv:?}: {make}"));
    }
    let (ok, out, err) = output(Command::new(&python).args([
        "-c",
        "import importlib.metadata as m, agents.mcp; print(m.version('openai-agents'))",
    ]))?;
    let got = out.trim().to_string();
    let pinned = locate::CLIENT_REQUIREMENTS[0].trim_start_matches("openai-agents==");
    if !ok || got != pinned {
        return Err(format!(
            "{venv:?} has openai-agents {got:?}, not the pinned {pinned} ({}): {make}",
            err.trim()
        ));
    }
    Ok((python, got))
}

fn probe_openclaw() -> Result<(PathBuf, PathBuf, String), String> {
    let dir = locate::openclaw_dir();
    let install = format!("run `npm ci --ignore-scripts` in {}", dir.display());
    let version = pinned(&dir, "openclaw")?;
    let node = locate::openclaw_node();
    let entry = locate::openclaw_entry();
    if !node.is_file() || !entry.is_file() {
        return Err(format!(
            "OpenClaw {version} and its Node.js 24 are not installed: {install}"
        ));
    }
    // A scratch HOME: `--version` must not touch the developer's own settings.
    let scratch = tempfile::tempdir().map_err(|e| format!("a scratch HOME: {e}"))?;
    let (ok, out, err) = output(
        Command::new(&node)
            .arg(&entry)
            .arg("--version")
            .env("HOME", scratch.path()),
    )?;
    if !ok || !out.contains(&version) {
        return Err(format!(
            "OpenClaw at {entry:?} reports {:?}, not the pinned {version} ({}): {install}",
            out.trim(),
            err.trim()
        ));
    }
    Ok((node, entry, version))
}

fn probe_inspector() -> Result<(PathBuf, PathBuf, String), String> {
    let node = locate::node().ok_or_else(|| {
        "no `node` on PATH (MCP Inspector needs Node.js 20 or newer); or set AUTOTOOL_TEST_NODE"
            .to_string()
    })?;
    let pinned = pinned_inspector_version()?;
    let entry = locate::inspector_entry();
    if !entry.is_file() {
        return Err(format!(
            "MCP Inspector {pinned} is not installed: run `npm ci --ignore-scripts` in {}",
            locate::node_dir().display()
        ));
    }
    let (ok, out, err) = output(Command::new(&node).arg(&entry).arg("--version"))?;
    let got = out.trim().to_string();
    if !ok || got != pinned {
        return Err(format!(
            "MCP Inspector at {entry:?} reports {got:?}, not the pinned {pinned} ({}): run `npm \
             ci --ignore-scripts` in {}",
            err.trim(),
            locate::node_dir().display()
        ));
    }
    Ok((node, entry, pinned))
}

/// The version of `package` pinned in integration/hosts/package.json.
fn pinned_host_version(package: &str) -> Result<String, String> {
    let path = locate::hosts_dir().join("package.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path:?}: {e}"))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("parsing {path:?}: {e}"))?;
    json["dependencies"][package]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{path:?} pins no {package}"))
}

/// A host app's CLI: installed, and the pinned version. `binary` finds it; `version_of` picks
/// the version out of its `--version` output.
fn probe_host(
    package: &str,
    binary: fn() -> Option<PathBuf>,
    version_of: fn(&str) -> Option<&str>,
) -> Result<(PathBuf, String), String> {
    let pinned = pinned_host_version(package)?;
    let install = format!(
        "run `npm ci --ignore-scripts` in {} (as .ci/test does)",
        locate::hosts_dir().display()
    );
    let bin = binary().ok_or_else(|| {
        format!(
            "{package} {pinned} is not installed for this platform ({}-linux): {install}",
            std::env::consts::ARCH
        )
    })?;
    // A scratch HOME: `--version` must not touch the developer's own settings.
    let scratch = tempfile::tempdir().map_err(|e| format!("a scratch HOME: {e}"))?;
    let (ok, out, err) = output(
        Command::new(&bin)
            .arg("--version")
            .env("HOME", scratch.path())
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
    )?;
    let got = version_of(out.trim()).unwrap_or("").to_string();
    if !ok || got != pinned {
        return Err(format!(
            "{} reports {:?}, not the pinned {package} {pinned} ({}): {install}",
            bin.display(),
            out.trim(),
            err.trim()
        ));
    }
    Ok((bin, pinned))
}

fn probe_claude_code() -> Result<(PathBuf, String), String> {
    // "2.1.332 (Claude Code)"
    probe_host("@anthropic-ai/claude-code", locate::claude_code, |out| {
        out.split_whitespace().next()
    })
}

fn probe_codex() -> Result<(PathBuf, String), String> {
    // "codex-cli 0.171.0"
    probe_host("@openai/codex", locate::codex, |out| {
        out.strip_prefix("codex-cli ")
    })
}

fn probe_gemini_cli() -> Result<(PathBuf, String), String> {
    // "0.61.0"
    probe_host("@google/gemini-cli", locate::gemini_cli, |out| {
        out.split_whitespace().next()
    })
}

type Probed<T> = OnceLock<Result<T, String>>;

/// What `test` needs, or `None` after printing why it is skipped. Panics instead of skipping
/// when [`required`].
pub fn setup(test: &str, needs: &[Need]) -> Option<Setup> {
    static SERVE: Probed<ServeProbe> = OnceLock::new();
    static PYTHON: Probed<(PathBuf, PathBuf, String)> = OnceLock::new();
    static INSPECTOR: Probed<(PathBuf, PathBuf, String)> = OnceLock::new();
    static CLAUDE_CODE: Probed<(PathBuf, String)> = OnceLock::new();
    static CODEX: Probed<(PathBuf, String)> = OnceLock::new();
    static GEMINI_CLI: Probed<(PathBuf, String)> = OnceLock::new();
    static CONFORMANCE: Probed<Conformance> = OnceLock::new();
    static AGENTS: Probed<(PathBuf, String)> = OnceLock::new();
    static OPENCLAW: Probed<(PathBuf, PathBuf, String)> = OnceLock::new();

    let mut missing = Vec::new();
    let serve = SERVE.get_or_init(probe_serve);
    let python = PYTHON.get_or_init(probe_python);
    if let Err(why) = serve {
        missing.push(why.clone());
    }
    if let Err(why) = python {
        missing.push(why.clone());
    }
    let inspector = if needs.contains(&Need::Inspector) {
        let probed = INSPECTOR.get_or_init(probe_inspector);
        if let Err(why) = probed {
            missing.push(why.clone());
        }
        probed.as_ref().ok()
    } else {
        None
    };
    let conformance = if needs.contains(&Need::Conformance) {
        let probed = CONFORMANCE.get_or_init(probe_conformance);
        if let Err(why) = probed {
            missing.push(why.clone());
        }
        probed.as_ref().ok()
    } else {
        None
    };
    let mut host = |need: Need,
                    probed: &'static Probed<(PathBuf, String)>,
                    probe: fn() -> Result<(PathBuf, String), String>| {
        if !needs.contains(&need) {
            return None;
        }
        let probed = probed.get_or_init(probe);
        if let Err(why) = probed {
            missing.push(why.clone());
        }
        probed.as_ref().ok().cloned()
    };
    let claude_code = host(Need::ClaudeCode, &CLAUDE_CODE, probe_claude_code);
    let codex = host(Need::Codex, &CODEX, probe_codex);
    let gemini_cli = host(Need::GeminiCli, &GEMINI_CLI, probe_gemini_cli);
    let agents = host(Need::OpenAiAgents, &AGENTS, probe_agents);
    let openclaw = if needs.contains(&Need::OpenClaw) {
        let probed = OPENCLAW.get_or_init(probe_openclaw);
        if let Err(why) = probed {
            missing.push(why.clone());
        }
        probed.as_ref().ok().cloned()
    } else {
        None
    };
    if !missing.is_empty() {
        let why = missing.join("; ");
        if required() {
            panic!("{test}: a prerequisite is missing (and CI=true makes that a failure): {why}");
        }
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
        return None;
    }
    let (Ok(serve), Ok((runtime, python, sdk_version))) = (serve, python) else {
        return None;
    };
    Some(Setup {
        autotool: serve.autotool.clone(),
        launcher: serve.launcher.clone(),
        runtime: runtime.clone(),
        python: python.clone(),
        sandbox: serve.sandbox.clone(),
        sdk_version: sdk_version.clone(),
        node: inspector.map(|i| i.0.clone()),
        inspector: inspector.map(|i| i.1.clone()),
        inspector_version: inspector.map(|i| i.2.clone()),
        claude_code,
        codex,
        gemini_cli,
        conformance: conformance.cloned(),
        agents,
        openclaw,
    })
}
