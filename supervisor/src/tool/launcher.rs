//! Finding and driving `autotool-launcher`: its probe report and confined spawns.
//!
//! Which launcher is used, first match wins: `$AUTOTOOL_LAUNCHER`; the copy installed with file
//! capabilities by `autotool setup --launcher` ([`INSTALLED`]); the one beside the `autotool`
//! binary.

use autotool_policy::LaunchPolicy;
use command_fds::{CommandFdExt, FdMapping};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Where `autotool setup --launcher` installs the capability-holding copy.
pub const INSTALLED: &str = "/usr/local/lib/autotool/autotool-launcher";
/// Descriptor on which the launcher reads its policy.
pub const POLICY_FD: i32 = 3;

/// Launcher errors.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    #[error(
        "autotool-launcher not found (looked at {0}); build it with `cargo build --release -p autotool-launcher` or set AUTOTOOL_LAUNCHER"
    )]
    NotFound(String),
    #[error("running {path:?}: {source}")]
    Spawn {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path:?} --probe answered something unexpected: {why}")]
    Probe { path: PathBuf, why: String },
}

/// Locate the launcher binary.
pub fn locate() -> Result<PathBuf, LauncherError> {
    // Empty and `auto` count as unset, as in `config`.
    if let Some(p) = std::env::var_os("AUTOTOOL_LAUNCHER").filter(|p| !p.is_empty() && p != "auto")
    {
        return Ok(PathBuf::from(p));
    }
    let installed = PathBuf::from(INSTALLED);
    if installed.is_file() {
        return Ok(installed);
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("autotool-launcher")));
    match sibling {
        Some(p) if p.is_file() => Ok(p),
        other => Err(LauncherError::NotFound(format!(
            "$AUTOTOOL_LAUNCHER, {INSTALLED}{}",
            other
                .map(|p| format!(", {}", p.display()))
                .unwrap_or_default()
        ))),
    }
}

/// Outcome of one probe.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    #[serde(default)]
    pub error: Option<String>,
}

/// What `autotool-launcher --probe` reports (serialisable, so it can be cached).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Probe {
    pub launcher_version: String,
    pub landlock_abi: Option<i32>,
    pub landlock_error: Option<String>,
    pub required_landlock_abi: u8,
    pub seccomp_filter: bool,
    pub mdwe: bool,
    pub file_capabilities: bool,
    pub user_namespace: Outcome,
    pub namespaces: BTreeMap<String, Outcome>,
    /// Whether the launcher carries the native library a template loads and can seal it into a
    /// memory file; absent from a launcher older than this field.
    #[serde(default)]
    pub native: Option<Outcome>,
}

impl Probe {
    /// What this machine lacks for confining a tool (empty: it can confine).
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if self.landlock_abi.unwrap_or(0) < i32::from(self.required_landlock_abi) {
            missing.push(format!("Landlock ABI {}", self.required_landlock_abi));
        }
        if !self.seccomp_filter {
            missing.push("seccomp filters".into());
        }
        if !self.mdwe {
            missing.push("PR_SET_MDWE".into());
        }
        if !self.user_namespace.ok && !self.file_capabilities {
            missing.push("user namespaces".into());
        }
        for (name, outcome) in &self.namespaces {
            if !outcome.ok {
                missing.push(format!("{name} namespace"));
            }
        }
        missing
    }
}

/// Ask the launcher what this machine offers.
pub fn probe(launcher: &Path) -> Result<Probe, LauncherError> {
    let out = Command::new(launcher)
        .arg("--probe")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| LauncherError::Spawn {
            path: launcher.to_path_buf(),
            source,
        })?;
    serde_json::from_slice(&out.stdout).map_err(|e| LauncherError::Probe {
        path: launcher.to_path_buf(),
        why: format!(
            "{e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}

/// Start a confined tool: the launcher with `policy` on [`POLICY_FD`], stdin and stdout piped
/// (the tool's MCP channel), stderr piped. `extra` maps further descriptors (the egress report
/// socket) into the launcher.
pub fn spawn(
    launcher: &Path,
    policy: &LaunchPolicy,
    extra: Vec<FdMapping>,
) -> Result<Child, LauncherError> {
    let fail = |source| LauncherError::Spawn {
        path: launcher.to_path_buf(),
        source,
    };
    let (reader, mut writer) = std::io::pipe().map_err(fail)?;
    let mut mappings = vec![FdMapping {
        parent_fd: reader.into(),
        child_fd: POLICY_FD,
    }];
    mappings.extend(extra);
    let mut cmd = Command::new(launcher);
    cmd.arg("--policy-fd")
        .arg(POLICY_FD.to_string())
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.fd_mappings(mappings)
        .map_err(|e| fail(std::io::Error::other(e.to_string())))?;
    let child = cmd.spawn().map_err(fail)?;
    // The child holds the read end now; ours goes with `cmd`.
    drop(cmd);
    writer.write_all(&policy.to_json()).map_err(fail)?;
    drop(writer);
    Ok(child)
}
