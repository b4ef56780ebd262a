//! A minimal MCP client over a tool's stdio: newline-delimited JSON-RPC 2.0.
//!
//! Just enough for the tests: `initialize`, `notifications/initialized` and `tools/call`. Every
//! request waits at most the tool's timeout; notifications and requests from the server are
//! skipped while waiting for the answer.

use crate::tool::ToolProcess;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::time::Instant;

/// The protocol version the tests speak.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The result of one `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    /// The text content blocks, joined by newlines.
    pub text: String,
    /// `structuredContent`, when the tool returned one.
    pub structured: Option<Value>,
    /// `isError`: the tool raised, or the call was refused.
    pub is_error: bool,
}

/// Whether a response `id` answers request `id` (the SDK may echo it as a string).
fn same_id(got: &Value, id: u64) -> bool {
    got.as_u64() == Some(id) || got.as_str() == Some(id.to_string().as_str())
}

impl ToolProcess {
    /// Send a request and wait for its result; a JSON-RPC error is an `Err`.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&message.to_string())?;
        let deadline = Instant::now() + self.timeout();
        loop {
            let line = self
                .recv_line(deadline)
                .with_context(|| format!("waiting for the answer to {method}"))?;
            let Ok(reply) = serde_json::from_str::<Value>(&line) else {
                bail!("the tool wrote a line that is not JSON-RPC: {line:?}");
            };
            if reply.get("method").is_some() {
                continue; // A notification or a request from the server.
            }
            if !reply.get("id").is_some_and(|got| same_id(got, id)) {
                continue;
            }
            if let Some(error) = reply.get("error") {
                bail!("{method} failed: {error}");
            }
            return reply
                .get("result")
                .cloned()
                .with_context(|| format!("{method} answer without a result: {line}"));
        }
    }

    /// Send a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<()> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(&message.to_string())
    }

    /// The MCP handshake: `initialize`, then `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<Value> {
        let result = self.request(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "autotool-tests", "version": env!("CARGO_PKG_VERSION")},
            }),
        )?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(result)
    }

    /// Call a tool function.
    pub fn call(&mut self, name: &str, arguments: Value) -> Result<CallResult> {
        let result = self.request("tools/call", json!({"name": name, "arguments": arguments}))?;
        let text = result
            .get("content")
            .and_then(Value::as_array)
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        Ok(CallResult {
            text,
            structured: result.get("structuredContent").cloned(),
            is_error: result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// Call a tool function and return its text; a tool error is an `Err`.
    pub fn call_text(&mut self, name: &str, arguments: Value) -> Result<String> {
        let result = self.call(name, arguments)?;
        if result.is_error {
            let context = self.context();
            bail!("tool {name} failed: {}{context}", result.text);
        }
        Ok(result.text)
    }
}
