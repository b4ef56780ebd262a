//! What the tool-link tests share: the attacking fixture `tests/tools/serve/link_attacks.py`,
//! its environment, and the control's client: the tool run directly, spoken to by a plain rmcp
//! client with rmcp's default handler, as autotool spoke to tools before the link.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use anyhow::{Context, Result};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::RunningService;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tempfile::TempDir;

/// A directory holding the fixture as `tool.py`, readable by a confined tool.
pub fn tool_dir() -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix("autotool-toollink-")
        .tempdir()
        .unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/serve/link_attacks.py");
    std::fs::copy(fixture, dir.path().join("tool.py")).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The tool's environment, holding `key` as `LINK_API_KEY`.
pub fn environment(key: &str) -> BTreeMap<String, String> {
    let keys = BTreeMap::from([("LINK_API_KEY".to_string(), key.to_string())]);
    autotool_policy::launch::tool_environment(&keys, &BTreeMap::new(), None)
}

/// The control: the fixture run directly (no sandbox: the client is what is under test),
/// spoken to by a plain rmcp client.
pub struct Plain {
    pub client: RunningService<RoleClient, ClientConfig>,
    pub child: tokio::process::Child,
    _dir: TempDir,
}

impl Plain {
    pub async fn start(key: &str) -> Result<Plain> {
        let dir = tool_dir();
        let mut child = tokio::process::Command::new(&super::common::runtime().interpreter)
            .args(["-I", "-B", "tool.py"])
            .current_dir(dir.path())
            .env_clear()
            .envs(environment(key))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("stdout")?;
        let stdin = child.stdin.take().context("stdin")?;
        // The client as it was: rmcp's default handler, rmcp's own line bound.
        let client = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("autotool", "control"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .serve_with_lifecycle((stdout, stdin), ClientLifecycleMode::Initialize)
        .await?;
        Ok(Plain {
            client,
            child,
            _dir: dir,
        })
    }
}
