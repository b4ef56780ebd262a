//! Where the pieces under test are: the launcher binary, the tool fixtures, the Python runtime
//! and uv.
//!
//! Each can be overridden by an environment variable, so the same test binary can be copied
//! elsewhere and run as another user:
//! - `AUTOTOOL_LAUNCHER`: the `autotool-launcher` binary;
//! - `AUTOTOOL_TEST_TOOLS`: the directory of Python tool fixtures;
//! - `AUTOTOOL_TEST_RUNTIME`: a virtual environment with `mcp` installed;
//! - `AUTOTOOL_TEST_UV`: the `uv` binary the package tests resolve and install with.

use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};

/// The runtime used when `AUTOTOOL_TEST_RUNTIME` is unset.
pub const DEFAULT_RUNTIME: &str = "/opt/autotool-test-runtime";

/// The workspace root (the parent of this crate).
pub fn workspace_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The launcher binary: `AUTOTOOL_LAUNCHER`, else the one next to the running test binary's
/// profile directory (`target/<profile>/autotool-launcher`), else `target/debug` of the workspace.
pub fn launcher() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("AUTOTOOL_LAUNCHER") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("AUTOTOOL_LAUNCHER points at {path:?}, which is not a file");
        }
        return Ok(path);
    }
    let mut candidates = Vec::new();
    // Test binaries live in target/<profile>/deps/.
    if let Ok(exe) = std::env::current_exe()
        && let Some(profile) = exe.parent().and_then(Path::parent)
    {
        candidates.push(profile.join("autotool-launcher"));
    }
    candidates.push(workspace_dir().join("target/debug/autotool-launcher"));
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "autotool-launcher not found (looked at {candidates:?}): build it with \
                 `cargo build -p autotool-launcher`, or set AUTOTOOL_LAUNCHER"
            )
        })
}

/// The directory of Python tool fixtures: `AUTOTOOL_TEST_TOOLS`, else this crate's `tools/`.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("AUTOTOOL_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tools"))
}

/// The Python runtime tools run on: a virtual environment holding the MCP SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// The virtual environment's directory (mounted read-only with exec in the sandbox).
    pub venv: PathBuf,
    /// `<venv>/bin/python3`.
    pub python: PathBuf,
}

/// The runtime from `AUTOTOOL_TEST_RUNTIME`, else [`DEFAULT_RUNTIME`]. A missing runtime is an
/// error, never a reason to skip: without it nothing is tested at all.
pub fn runtime() -> Result<Runtime> {
    let venv = std::env::var_os("AUTOTOOL_TEST_RUNTIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME));
    let python = venv.join("bin/python3");
    if !python.exists() {
        bail!(
            "no Python runtime at {venv:?} ({python:?} is missing): create it with \
             `/usr/bin/python3 -m venv {venv:?} && {venv:?}/bin/pip install mcp==2.3.0 httpx2`, \
             or point AUTOTOOL_TEST_RUNTIME at one"
        );
    }
    Ok(Runtime { venv, python })
}

/// The uv used when `AUTOTOOL_TEST_UV` is unset.
pub const DEFAULT_UV: &str = "/opt/autotool-test-uv/bin/uv";

/// The uv the package tests resolve and install with: `AUTOTOOL_TEST_UV`, else [`DEFAULT_UV`].
/// It is the version autotool itself pins (`UV_VERSION` in the supervisor's runtime builder). A
/// missing uv is an error, never a reason to skip.
pub fn uv() -> Result<PathBuf> {
    let uv = std::env::var_os("AUTOTOOL_TEST_UV")
        .map_or_else(|| PathBuf::from(DEFAULT_UV), PathBuf::from);
    if !uv.is_file() {
        bail!(
            "no uv at {uv:?}: install it with `/usr/bin/python3 -m pip install --target \
             /opt/autotool-test-uv uv==0.13.9 && chmod -R a+rX /opt/autotool-test-uv` (the uv \
             autotool pins), or point AUTOTOOL_TEST_UV at a uv 0.13.9 binary"
        );
    }
    Ok(uv)
}

/// The wheelhouse used when `AUTOTOOL_TEST_WHEELS` is unset.
pub const DEFAULT_WHEELS: &str = "/opt/autotool-test-wheels";

/// The wheels of the real MCP servers `autotool add` is tested with (mcp-server-time,
/// mcp-server-fetch) and of everything they need, downloaded by `.ci/test`: every `*.whl` in
/// `AUTOTOOL_TEST_WHEELS`, else [`DEFAULT_WHEELS`]. Missing is an error, never a reason to skip.
pub fn server_wheels() -> Result<Vec<PathBuf>> {
    let dir = std::env::var_os("AUTOTOOL_TEST_WHEELS")
        .map_or_else(|| PathBuf::from(DEFAULT_WHEELS), PathBuf::from);
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "whl"))
                .collect()
        })
        .unwrap_or_default();
    let has = |name: &str| {
        wheels.iter().any(|w| {
            w.file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(name))
        })
    };
    if !has("mcp_server_time-") || !has("mcp_server_fetch-") {
        bail!(
            "no mcp-server-time and mcp-server-fetch wheels in {dir:?}: run `.ci/test` (its \
             runtime phase downloads them), or point AUTOTOOL_TEST_WHEELS at a directory holding \
             them and every wheel they need"
        );
    }
    Ok(wheels)
}

/// Where `.ci/test` puts the npm servers `autotool add` is tested with.
pub const DEFAULT_NPM: &str = "/opt/autotool-test-npm";

/// The npm servers fetched by `.ci/test` (`tests/tools/npm_registry.py fetch`): their lockfiles
/// in `locks/` and every tarball they name in `tarballs/`, served to the tests by a registry
/// on loopback. `AUTOTOOL_TEST_NPM`, else [`DEFAULT_NPM`].
pub fn npm_servers() -> Result<PathBuf> {
    let dir = std::env::var_os("AUTOTOOL_TEST_NPM")
        .map_or_else(|| PathBuf::from(DEFAULT_NPM), PathBuf::from);
    if !dir.join("locks").is_dir() || !dir.join("tarballs").is_dir() {
        bail!(
            "no npm servers in {dir:?}: run `.ci/test` (its runtime phase fetches them), or \
             `python3 tests/tools/npm_registry.py fetch DIR @modelcontextprotocol/server-filesystem@2026.8.31 \
             @modelcontextprotocol/server-memory@2026.8.31` and point AUTOTOOL_TEST_NPM at DIR"
        );
    }
    Ok(dir)
}
