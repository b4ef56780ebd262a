//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`): OpenAI itself, Ollama,
//! LM Studio, vLLM, OpenRouter and the like.
//!
//! The system prompt is the first message (role `system`); the model's calls are an assistant
//! message's `tool_calls` (`id`, `type: "function"`, `function: {name, arguments}` with the
//! arguments as a JSON string); each result is a message of role `tool` with its
//! `tool_call_id`. Tools are `{"type": "function", "function": {name, description,
//! parameters}}`. The answer is `choices[0].message`.

use super::provider::{ToolDef, parameters_schema};
use serde_json::{Value, json};

/// MCP tools as Chat Completions `tools`.
pub fn openai_chat_tool_definitions(tools: &[ToolDef]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut function = json!({
                "name": t.name,
                "parameters": parameters_schema(&t.input_schema),
            });
            if !t.description.is_empty() {
                function["description"] = json!(t.description);
            }
            json!({"type": "function", "function": function})
        })
        .collect()
}
