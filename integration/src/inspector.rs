//! One run of the MCP Inspector CLI (`mcp-inspector --cli`), pinned in `integration/node`,
//! against its own `autotool serve` on a test's home.
//!
//! The Inspector gets its own `HOME` (it keeps a catalog and client settings there) and passes
//! the serve its environment through `-e KEY=VALUE`.

use crate::child::OwnedChild;
use crate::home::TestHome;
use anyhow::{Result, bail};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

/// What one Inspector run printed.
#[derive(Debug)]
pub struct InspectorRun {
    pub status: Option<i32>,
    /// stdout parsed as JSON (`--format json`: one object, `result` or `error`).
    pub json: Value,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// `mcp-inspector --cli --format json --protocol-era ERA <autotool serve> ARGS…`.
pub fn run(home: &TestHome, era: &str, args: &[&str], timeout: Duration) -> Result<InspectorRun> {
    let s = &home.setup;
    let (Some(node), Some(entry)) = (&s.node, &s.inspector) else {
        bail!("the Inspector is not set up");
    };
    let inspector_home = home.path().join("inspector-home");
    std::fs::create_dir_all(&inspector_home)?;
    let mut cmd = Command::new(node);
    cmd.arg(entry)
        .args(["--cli", "--format", "json", "--protocol-era", era])
        .args(["--connect-timeout", "60000"]);
    for (k, v) in home.env() {
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    cmd.arg(&s.autotool)
        .args(["serve", "--sandbox", &s.sandbox])
        .args(args)
        .env("HOME", &inspector_home)
        .env("NO_COLOR", "1")
        .env("npm_config_update_notifier", "false");
    let started = Instant::now();
    let mut child = OwnedChild::spawn("mcp-inspector", cmd)?;
    child.close_stdin();
    let (lines, ended) = child.read_to_end(started + timeout);
    let status = child.wait_exit(Duration::from_secs(5))?;
    if !ended {
        child.kill_group();
    }
    let stderr = child.final_stderr();
    let stdout: String = lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if !ended {
        bail!(
            "the Inspector did not finish within {timeout:?}; stdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    // A result is one JSON object on stdout; an error envelope goes to stderr instead.
    let json = serde_json::from_str(stdout.trim())
        .ok()
        .or_else(|| {
            stderr
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        })
        .unwrap_or(Value::Null);
    Ok(InspectorRun {
        status: status.and_then(|s| s.code()),
        json,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    })
}
