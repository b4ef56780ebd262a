//! A server's prompts and resources, relayed: listed once when a version is verified and kept
//! beside its code (`offers.json`), shown to hosts from that list, and fetched from the
//! running server when a host gets a prompt or reads a resource. The server runs as for a
//! call (the same process, grants, confinement and pin check); its answer is redacted on the
//! way out like every answer. Getting a prompt or reading a resource is not a call of a
//! function: it is not counted in the tool's health.

use super::Library;
use super::call::CallError;
use crate::tool::pool::{Lease, StartError};
use crate::tool::process::{Offers, ToolProcess};
use autotool_policy::names::ToolName;
use rmcp::model::{GetPromptResult, JsonObject, ReadResourceResult};
use std::path::Path;

/// Beside `tool.py`: what the version offers besides tools.
pub const OFFERS_FILE: &str = "offers.json";

/// The largest offers file read back.
const MAX_OFFERS_BYTES: u64 = 4 << 20;

/// List what `process` offers and keep it beside `tool_file` (nothing is written when it
/// offers nothing; a listing that fails is logged, and the version offers nothing).
pub(super) async fn keep(name: &ToolName, process: &ToolProcess, tool_file: &Path) {
    let offers = match process.list_offers().await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(tool = %name, "listing its prompts and resources failed: {e}");
            return;
        }
    };
    if offers.is_empty() {
        return;
    }
    let written = serde_json::to_vec(&offers)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(tool_file.with_file_name(OFFERS_FILE), bytes));
    if let Err(e) = written {
        tracing::warn!(tool = %name, "keeping its prompts and resources: {e}");
    }
}

/// The offers kept in `dir`; none when there is no file (or it cannot be read).
fn read(dir: &Path) -> Offers {
    use std::io::Read as _;
    let Ok(file) = std::fs::File::open(dir.join(OFFERS_FILE)) else {
        return Offers::default();
    };
    let mut bytes = Vec::new();
    if file.take(MAX_OFFERS_BYTES).read_to_end(&mut bytes).is_err() {
        return Offers::default();
    }
    serde_json::from_slice(&bytes).unwrap_or_default()
}

impl Library {
    /// What each tool that may be called offers besides its functions, by tool name (tools
    /// that offer nothing left out).
    pub fn offers(&self) -> Vec<(ToolName, Offers)> {
        let snapshot = self.snapshot();
        snapshot
            .tools
            .iter()
            .filter(|(_, t)| t.state.may_call(false))
            .map(|(name, t)| (name.clone(), read(&self.registry.dir_of(t))))
            .filter(|(_, o)| !o.is_empty())
            .collect()
    }

    /// Prompt `name` of `tool`, from the running server.
    pub async fn relay_prompt(
        &self,
        tool: &str,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<GetPromptResult, CallError> {
        let operation = format!("prompt {name}");
        let process = self.lease(tool, &operation).await?;
        process
            .get_prompt(name, arguments, self.settings.call_timeout)
            .await
            .map_err(|e| self.relay_failed(tool, &operation, e.to_string()))
    }

    /// Resource `uri` of `tool`, from the running server.
    pub async fn relay_read(&self, tool: &str, uri: &str) -> Result<ReadResourceResult, CallError> {
        let operation = format!("resource {uri}");
        let process = self.lease(tool, &operation).await?;
        process
            .read_resource(uri, self.settings.call_timeout)
            .await
            .map_err(|e| self.relay_failed(tool, &operation, e.to_string()))
    }

    fn relay_failed(&self, tool: &str, operation: &str, why: String) -> CallError {
        CallError::Failed {
            tool: tool.to_string(),
            function: operation.to_string(),
            why: self.secrets().redact(&why),
        }
    }

    /// A running process of `tool`'s mounted version, started as for a call.
    async fn lease(&self, tool: &str, operation: &str) -> Result<Lease, CallError> {
        let snapshot = self.snapshot();
        let Some(t) = snapshot.tools.get(tool).cloned() else {
            return Err(CallError::NoTool {
                tool: tool.to_string(),
                known: snapshot.tools.keys().map(ToString::to_string).collect(),
            });
        };
        if !t.state.may_call(false) {
            return Err(CallError::OffList(self.off_list(tool).unwrap_or_default()));
        }
        let what = self.launchable(tool, &t, None).await?;
        match self.pool.get(tool, &what).await {
            Ok(p) => Ok(p),
            Err(StartError::Unpinned(b)) => {
                self.break_pin(&t, &b).await;
                Err(CallError::Unpinned {
                    tool: tool.to_string(),
                    version: t.version,
                    reason: b.reason(),
                })
            }
            Err(e) => Err(self.relay_failed(
                tool,
                operation,
                format!("the tool could not be started: {e}"),
            )),
        }
    }
}
