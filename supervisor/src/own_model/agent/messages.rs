//! Anthropic's Messages API (`POST {base}/v1/messages`, headers `x-api-key` and
//! `anthropic-version: 2023-06-01`).
//!
//! The system prompt goes in `system`; the history in `messages`, alternating `user` and
//! `assistant`: the model's calls are `tool_use` blocks (`id`, `name`, `input` object) of an
//! assistant message, their results `tool_result` blocks (`tool_use_id`, `content`,
//! `is_error`) of the next user message, ahead of any text. Tools are `{name, description,
//! input_schema}`. The answer's `content` holds `text` and `tool_use` blocks.

use super::provider::{
    BoxFuture, Item, Provider, ProviderError, ToolCall, ToolDef, Turn, parameters_schema,
};
use super::transport::Transport;
use serde_json::{Map, Value, json};

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

/// The Messages API.
#[derive(Debug)]
pub struct AnthropicMessages {
    transport: Transport,
    max_tokens: u32,
}

impl AnthropicMessages {
    pub(crate) fn new(transport: Transport, max_tokens: u32) -> AnthropicMessages {
        AnthropicMessages {
            transport,
            max_tokens,
        }
    }
}

impl Provider for AnthropicMessages {
    fn describe(&self) -> String {
        self.transport.describe()
    }

    fn complete<'a>(
        &'a self,
        system: &'a str,
        history: &'a [Item],
        tools: &'a [ToolDef],
    ) -> BoxFuture<'a, Result<Turn, ProviderError>> {
        Box::pin(async move {
            let body = request_body(
                self.transport.model(),
                self.max_tokens,
                system,
                history,
                tools,
            );
            parse_turn(&self.transport.post(&body).await?)
        })
    }
}

/// The request for one turn.
pub(crate) fn request_body(
    model: &str,
    max_tokens: u32,
    system: &str,
    history: &[Item],
    tools: &[ToolDef],
) -> Value {
    // Consecutive items of one role make one message: the API wants the roles to alternate,
    // and all results of one assistant turn in the user message after it.
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, block: Value| match messages.last_mut() {
        Some((last, blocks)) if *last == role => blocks.push(block),
        _ => messages.push((role, vec![block])),
    };
    for item in history {
        match item {
            Item::User(text) => {
                if !text.is_empty() {
                    push("user", json!({"type": "text", "text": text}));
                }
            }
            Item::Assistant { text, calls } => {
                if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                    push("assistant", json!({"type": "text", "text": text}));
                }
                for call in calls {
                    let input = match &call.arguments {
                        Value::Object(o) => Value::Object(o.clone()),
                        _ => Value::Object(Map::new()),
                    };
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}),
                    );
                }
            }
            Item::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => push(
                "user",
                json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": output,
                    "is_error": is_error,
                }),
            ),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, mut blocks)| {
            // Results first: text after them is allowed, before them it is refused.
            blocks.sort_by_key(|b| b["type"] != "tool_result");
            json!({"role": role, "content": blocks})
        })
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = json!(system);
    }
    if !tools.is_empty() {
        body["tools"] = json!(anthropic_tool_definitions(tools));
    }
    body
}

/// The model's turn in an answer.
pub(crate) fn parse_turn(answer: &Value) -> Result<Turn, ProviderError> {
    let content = answer
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::BadResponse("no `content` array in the answer".into()))?;
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    texts.push(text.to_owned());
                }
            }
            Some("tool_use") => {
                let field = |name: &str| {
                    block.get(name).and_then(Value::as_str).ok_or_else(|| {
                        ProviderError::BadResponse(format!("a tool_use block without `{name}`"))
                    })
                };
                calls.push(ToolCall {
                    id: field("id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    arguments: block
                        .get("input")
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                });
            }
            // Thinking blocks and the like are the model's own business.
            _ => {}
        }
    }
    let text = texts.join("\n");
    Ok(Turn {
        text: (!text.is_empty()).then_some(text),
        calls,
    })
}
