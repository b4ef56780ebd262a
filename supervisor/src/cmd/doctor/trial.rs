//! The trial launch: a small tool verified through [`crate::verify::verify`] on the runtime
//! `serve` would use (or a bare environment beside it, where the runtime is not built yet), with
//! the launcher, limits and launch policy `serve` would give it.

use super::*;

/// The trial tool on the real runtime: the SDK, one function, answered by the smoke test.
pub(super) const TRIAL_TOOL: &str = r#"from mcp.server.mcpserver import MCPServer

mcp = MCPServer("doctor_trial")


@mcp.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


if __name__ == "__main__":
    mcp.run()
"#;

/// The trial tool on a bare environment (no SDK yet): the least of an MCP server over stdio.
pub(super) const BARE_TRIAL_TOOL: &str = r#"import json
import sys

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "doctor_trial", "version": "1"},
        }
    elif msg["method"] == "tools/list":
        result = {"tools": []}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

/// How `serve` would start a tool: its settings (launcher, limits), strict.
pub(super) fn trial_spec(
    dir: &Path,
    python: runtime::Python,
    settings: &crate::library::Settings,
) -> crate::tool::process::ToolSpec {
    use crate::tool::process::{SandboxMode, ToolSpec};
    let mut spec = ToolSpec::new(dir, crate::version::TOOL_FILE, python, SandboxMode::Strict);
    spec.env =
        autotool_policy::launch::tool_environment(&Default::default(), &Default::default(), None);
    spec.egress = Some(crate::egress::EgressConfig::new(
        autotool_policy::hosts::KeyLists::new("doctor_trial"),
    ));
    spec.limits = settings.limits;
    spec.launcher = settings.launcher.clone();
    spec
}

/// A directory for the trial tool that a confined tool (another user, under root) can read.
pub(super) fn trial_dir() -> Result<tempfile::TempDir, String> {
    let dir = tempfile::Builder::new()
        .prefix("autotool-doctor-")
        .tempdir()
        .map_err(|e| format!("cannot make a directory for the trial tool: {e}"))?;
    std::fs::set_permissions(
        dir.path(),
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .map_err(|e| e.to_string())?;
    Ok(dir)
}

/// What the trial runs on.
pub(super) enum TrialOn {
    /// The runtime tools run on.
    Runtime(runtime::Python),
    /// A bare environment made (and removed) in this directory: the home, beside the runtime's
    /// place, when the runtime is not built yet; a temporary directory when the home does not
    /// exist yet either (doctor does not make it).
    Bare(PathBuf),
}

/// Verify a small tool exactly as `create_tool` would, on the runtime `serve` uses: lint,
/// launch confined, `initialize`, `tools/list`, a smoke call.
pub(super) fn trial_launch(on: TrialOn, settings: &crate::library::Settings) -> Check {
    let started = Instant::now();
    let run = || -> Result<String, String> {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        let dir = trial_dir()?;
        match on {
            TrialOn::Runtime(python) => {
                let spec = trial_spec(dir.path(), python, settings);
                let name = autotool_policy::names::ToolName::parse("doctor_trial")
                    .map_err(|e| e.to_string())?;
                let mut req = crate::verify::VerifyRequest::new(name, TRIAL_TOOL, spec);
                req.thoroughness = crate::verify::Thoroughness::Quick;
                req.smoke_test = Some(crate::verify::SmokeTest {
                    function: "ping".into(),
                    arguments: Default::default(),
                });
                let verified = tokio
                    .block_on(crate::verify::verify(req))
                    .map_err(|f| f.to_string())?;
                let answered = verified
                    .smoke
                    .as_ref()
                    .map(|s| format!("{s:?}").contains("pong"))
                    .unwrap_or(false);
                let _ = tokio.block_on(verified.process.shutdown());
                if answered {
                    Ok("a tool was verified and called confined, as serve would".into())
                } else {
                    Err("the trial tool ran but its call did not answer \"pong\"".into())
                }
            }
            TrialOn::Bare(beside) => {
                let venv = tempfile::Builder::new()
                    .prefix(".doctor-trial-")
                    .tempdir_in(&beside)
                    .map_err(|e| {
                        format!(
                            "cannot make a trial environment in {}: {e}",
                            beside.display()
                        )
                    })?;
                let base = runtime::resolve(None).map_err(|e| e.to_string())?;
                let out = std::process::Command::new(&base.interpreter)
                    .args(["-I", "-m", "venv", "--without-pip"])
                    .arg(venv.path())
                    .output()
                    .map_err(|e| e.to_string())?;
                if !out.status.success() {
                    return Err(format!(
                        "`python -m venv` failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                std::fs::set_permissions(
                    venv.path(),
                    <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
                )
                .map_err(|e| e.to_string())?;
                let python = runtime::resolve(Some(&venv.path().join("bin/python3")))
                    .map_err(|e| e.to_string())?;
                std::fs::write(dir.path().join(crate::version::TOOL_FILE), BARE_TRIAL_TOOL)
                    .map_err(|e| e.to_string())?;
                let spec = trial_spec(dir.path(), python, settings);
                let process = tokio
                    .block_on(crate::tool::process::ToolProcess::start(spec))
                    .map_err(|e| e.to_string())?;
                let listed = tokio.block_on(process.list_tools());
                let _ = tokio.block_on(process.shutdown());
                listed.map_err(|e| e.to_string())?;
                Ok(format!(
                    "a tool started confined and answered, on a bare environment in {} (the \
                     runtime is not built yet)",
                    beside.display()
                ))
            }
        }
    };
    match run() {
        Ok(what) => Check::new(
            "trial launch",
            Status::Ok,
            format!("{what} ({} ms)", started.elapsed().as_millis()),
        ),
        Err(e) => Check::new("trial launch", Status::Fail, format!("failed: {e}")).fix(
            "fix the FAIL lines above; the message names the stage and what the launcher or \
             the tool said",
        ),
    }
}
