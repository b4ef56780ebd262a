//! OpenAI's Responses API (`POST {base}/responses`).
//!
//! The system prompt goes in `instructions`; the history in `input` as messages,
//! `function_call` items (the model's calls) and `function_call_output` items (their results,
//! paired by `call_id`); tools as `{"type": "function", name, description, parameters}`. The
//! answer's `output` holds `message` items (`output_text` parts) and `function_call` items whose
//! `arguments` are a JSON string. Requests are sent with `store: false`, and calls go back
//! without their item `id`, so no state is kept on OpenAI's side and a reasoning model's call
//! need not travel with its reasoning item.

use super::provider::{
    BoxFuture, Item, Provider, ProviderError, ToolCall, ToolDef, Turn, arguments_text,
    parameters_schema, parse_arguments, result_text,
};
use super::transport::Transport;
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

/// The Responses API.
#[derive(Debug)]
pub struct OpenAiResponses {
    transport: Transport,
}

impl OpenAiResponses {
    pub(crate) fn new(transport: Transport) -> OpenAiResponses {
        OpenAiResponses { transport }
    }
}

impl Provider for OpenAiResponses {
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
            let body = request_body(self.transport.model(), system, history, tools);
            parse_turn(&self.transport.post(&body).await?)
        })
    }
}

/// The request for one turn.
pub(crate) fn request_body(
    model: &str,
    system: &str,
    history: &[Item],
    tools: &[ToolDef],
) -> Value {
    let mut input = Vec::new();
    for item in history {
        match item {
            Item::User(text) => input.push(json!({
                "type": "message", "role": "user", "content": text,
            })),
            Item::Assistant { text, calls } => {
                if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                    input.push(json!({
                        "type": "message", "role": "assistant", "content": text,
                    }));
                }
                for call in calls {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": arguments_text(&call.arguments),
                    }));
                }
            }
            Item::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => input.push(json!({
                "type": "function_call_output",
                "call_id": call_id,
                "output": result_text(output, *is_error),
            })),
        }
    }
    let mut body = json!({
        "model": model,
        "input": input,
        "store": false,
    });
    if !system.is_empty() {
        body["instructions"] = json!(system);
    }
    if !tools.is_empty() {
        body["tools"] = json!(openai_tool_definitions(tools));
    }
    body
}

/// The model's turn in an answer.
pub(crate) fn parse_turn(answer: &Value) -> Result<Turn, ProviderError> {
    if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
        return Err(ProviderError::BadResponse(format!(
            "the response failed: {}",
            error.get("message").and_then(Value::as_str).unwrap_or("")
        )));
    }
    let output = answer
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::BadResponse("no `output` array in the answer".into()))?;
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for item in output {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let text = match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => part.get("text"),
                        Some("refusal") => part.get("refusal"),
                        _ => None,
                    };
                    if let Some(text) = text.and_then(Value::as_str) {
                        texts.push(text.to_owned());
                    }
                }
            }
            Some("function_call") => {
                let field = |name: &str| {
                    item.get(name).and_then(Value::as_str).ok_or_else(|| {
                        ProviderError::BadResponse(format!("a function_call without `{name}`"))
                    })
                };
                calls.push(ToolCall {
                    id: field("call_id")?.to_owned(),
                    name: field("name")?.to_owned(),
                    arguments: parse_arguments(
                        item.get("arguments").and_then(Value::as_str).unwrap_or(""),
                    ),
                });
            }
            // Reasoning and other items are the model's own business.
            _ => {}
        }
    }
    let text = texts.join("\n");
    Ok(Turn {
        text: (!text.is_empty()).then_some(text),
        calls,
    })
}
