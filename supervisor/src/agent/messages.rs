//! Anthropic's Messages API (`POST {base}/v1/messages`, headers `x-api-key` and
//! `anthropic-version: 2023-06-01`).
//!
//! The system prompt goes in `system`; the history in `messages`, alternating `user` and
//! `assistant`: the model's calls are `tool_use` blocks (`id`, `name`, `input` object) of an
//! assistant message, their results `tool_result` blocks (`tool_use_id`, `content`,
//! `is_error`) of the next user message, ahead of any text. Tools are `{name, description,
//! input_schema}`. The answer's `content` holds `text` and `tool_use` blocks.

use super::provider::{ToolDef, parameters_schema};
use serde_json::{Value, json};

/// MCP tools as Messages API `tools`.
pub fn anthropic_tool_definitions(tools: &[ToolDef]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut def = json!({
                "name": t.name,
                "input_schema": parameters_schema(&t.input_schema),
            });
            if !t.description.is_empty() {
                def["description"] = json!(t.description);
            }
            def
        })
        .collect()
}
