//! What a tool process answers: its functions, a call's outcome, the server's own details,
//! and how a shutdown went.

use super::ContentBlock;
use rmcp::model::{JsonObject, Tool};
use serde::Serialize;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// A tool function as the tool describes it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: JsonObject,
    /// Present for functions with a return annotation (`-> str` gives
    /// `{"properties": {"result": …}}`).
    pub output_schema: Option<JsonObject>,
    /// The tool's own hints (`readOnlyHint`, …), untrusted.
    pub annotations: Option<serde_json::Value>,
}

impl From<Tool> for ToolInfo {
    fn from(t: Tool) -> Self {
        ToolInfo {
            name: t.name.into_owned(),
            title: t.title,
            description: t.description.map(|d| d.into_owned()),
            input_schema: Arc::unwrap_or_clone(t.input_schema),
            output_schema: t.output_schema.map(Arc::unwrap_or_clone),
            annotations: t.annotations.and_then(|a| serde_json::to_value(a).ok()),
        }
    }
}

impl From<crate::version::FunctionSpec> for ToolInfo {
    fn from(f: crate::version::FunctionSpec) -> Self {
        ToolInfo {
            name: f.name,
            title: f.title,
            description: f.description,
            input_schema: f.input_schema,
            output_schema: f.output_schema,
            annotations: f.annotations,
        }
    }
}

impl From<ToolInfo> for crate::version::FunctionSpec {
    fn from(t: ToolInfo) -> Self {
        crate::version::FunctionSpec {
            name: t.name,
            title: t.title,
            description: t.description,
            input_schema: t.input_schema,
            output_schema: t.output_schema,
            annotations: t.annotations,
        }
    }
}

/// The answer to one `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    pub content: Vec<ContentBlock>,
    /// `{"result": …}` for a function with a return annotation.
    pub structured_content: Option<serde_json::Value>,
    /// The tool reported an error: a `ToolError`'s message, or for an unexpected exception
    /// only "Error executing tool NAME" (the traceback is in [`CallOutcome::stderr`]).
    pub is_error: bool,
    /// What the process wrote to stderr while the call ran, up to its answer (after a crash,
    /// until stderr went quiet for a moment, so the traceback is whole). Best effort; calls
    /// running at the same time share one stderr, so this may hold their lines too.
    pub stderr: String,
    /// Request sent → answer received.
    pub duration: Duration,
}

impl CallOutcome {
    /// An error result that is not the tool's own answer but a crash inside it. The SDK words
    /// them apart: a `ToolError` (or arguments that fail validation, the caller's mistake)
    /// comes back as "Error executing tool NAME: message"; an unexpected exception as only
    /// "Error executing tool NAME" (nested: "…NAME: Error executing tool OTHER"), its traceback
    /// kept in the log.
    pub fn unexpected(&self) -> bool {
        fn crash(text: &str) -> bool {
            let Some(rest) = text.strip_prefix("Error executing tool ") else {
                return false;
            };
            match rest.split_once(": ") {
                None => !rest.trim().is_empty() && !rest.contains(char::is_whitespace),
                Some((_, inner)) => crash(inner),
            }
        }
        self.is_error
            && self.content.iter().any(|c| match c {
                ContentBlock::Text(t) => crash(t.text.trim_end()),
                _ => false,
            })
    }
}

/// Who answered `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerDetails {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: String,
    pub instructions: Option<String>,
    /// The tool says it may send `notifications/tools/list_changed`.
    pub tools_list_changed: bool,
    /// What it says it offers besides tools, none of which autotool relays to hosts
    /// ([`not_relayed`]): `resources`, `prompts`, `completions`, `log messages`, ….
    pub not_relayed: Vec<String>,
    /// It says it offers prompts, and resources: both are listed and relayed
    /// ([`super::Offers`]).
    pub prompts: bool,
    pub resources: bool,
}

/// What a server's capabilities offer besides tools, prompts and resources (which are
/// relayed), in words: none of it reaches hosts (docs/added.md).
pub fn not_relayed(caps: &rmcp::model::ServerCapabilities) -> Vec<String> {
    let mut out = Vec::new();
    if caps
        .resources
        .as_ref()
        .is_some_and(|r| r.subscribe == Some(true))
    {
        out.push("resource subscriptions".to_string());
    }
    if caps.completions.is_some() {
        out.push("completions".to_string());
    }
    if caps.logging.is_some() {
        out.push("log messages".to_string());
    }
    if caps.supports_tasks() {
        out.push("tasks".to_string());
    }
    let other = caps
        .extensions
        .iter()
        .flat_map(|e| e.keys())
        .filter(|k| k.as_str() != rmcp::model::TASKS_EXTENSION_ID)
        .chain(caps.experimental.iter().flat_map(|e| e.keys()))
        .count();
    if other > 0 {
        out.push(format!("{other} extension(s)"));
    }
    out
}

/// How [`ToolProcess::shutdown`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// `None` when the exit could not be observed within the bounds.
    pub status: Option<ExitStatus>,
    /// It did not exit within [`SHUTDOWN_GRACE`] of its stdin closing and was killed.
    pub killed: bool,
    pub took: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn outcome(text: &str) -> CallOutcome {
        CallOutcome {
            content: vec![ContentBlock::text(text.to_string())],
            structured_content: None,
            is_error: true,
            stderr: String::new(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn a_crash_is_told_from_a_tool_error_by_the_sdk_wording() {
        for crash in [
            "Error executing tool divide",
            "Error executing tool outer: Error executing tool inner",
        ] {
            assert!(outcome(crash).unexpected(), "{crash}");
        }
        for answer in [
            "Error executing tool divide: cannot divide by zero",
            "Error executing tool add: 1 validation error for addArguments",
            "Error executing tool outer: Error executing tool inner: not found",
            "upstream said 403",
        ] {
            assert!(!outcome(answer).unexpected(), "{answer}");
        }
        let mut ok = outcome("Error executing tool divide");
        ok.is_error = false;
        assert!(!ok.unexpected());
    }
}
