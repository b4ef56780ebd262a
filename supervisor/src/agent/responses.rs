//! OpenAI's Responses API (`POST {base}/responses`).
//!
//! The system prompt goes in `instructions`; the history in `input` as messages,
//! `function_call` items (the model's calls) and `function_call_output` items (their results,
//! paired by `call_id`); tools as `{"type": "function", name, description, parameters}`. The
//! answer's `output` holds `message` items (`output_text` parts) and `function_call` items whose
//! `arguments` are a JSON string. Requests are sent with `store: false`, and calls go back
//! without their item `id`, so no state is kept on OpenAI's side and a reasoning model's call
//! need not travel with its reasoning item.

use super::provider::{ToolDef, parameters_schema};
use serde_json::{Value, json};

/// MCP tools as Responses API `tools`.
pub fn openai_tool_definitions(tools: &[ToolDef]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut def = json!({
                "type": "function",
                "name": t.name,
                "parameters": parameters_schema(&t.input_schema),
                // Strict mode needs every property required and no additional ones, which MCP
                // schemas do not promise.
                "strict": false,
            });
            if !t.description.is_empty() {
                def["description"] = json!(t.description);
            }
            def
        })
        .collect()
}
