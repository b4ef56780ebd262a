//! OpenAI-compatible Chat Completions (`POST {base}/chat/completions`): OpenAI itself, Ollama,
//! LM Studio, vLLM, OpenRouter and the like.
//!
//! The system prompt is the first message (role `system`); the model's calls are an assistant
//! message's `tool_calls` (`id`, `type: "function"`, `function: {name, arguments}` with the
//! arguments as a JSON string); each result is a message of role `tool` with its
//! `tool_call_id`. Tools are `{"type": "function", "function": {name, description,
//! parameters}}`. The answer is `choices[0].message`.

use super::provider::{
    BoxFuture, Item, Provider, ProviderError, ToolCall, ToolDef, Turn, arguments_text,
    parameters_schema, parse_arguments, result_text,
};
use super::transport::{Transport, error_detail};
use reqwest::StatusCode;
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

/// A Chat Completions server.
#[derive(Debug)]
pub struct ChatCompletions {
    transport: Transport,
}

impl ChatCompletions {
    pub(crate) fn new(transport: Transport) -> ChatCompletions {
        ChatCompletions { transport }
    }
}

impl Provider for ChatCompletions {
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
    let mut messages = Vec::new();
    if !system.is_empty() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for item in history {
        messages.push(match item {
            Item::User(text) => json!({"role": "user", "content": text}),
            Item::Assistant { text, calls } => {
                let mut message = json!({
                    "role": "assistant",
                    // Null only beside calls: some servers refuse a message with neither.
                    "content": match text {
                        Some(text) => json!(text),
                        None if calls.is_empty() => json!(""),
                        None => Value::Null,
                    },
                });
                if !calls.is_empty() {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": arguments_text(&call.arguments),
                                },
                            })
                        })
                        .collect();
                }
                message
            }
            Item::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => json!({
                "role": "tool",
                "tool_call_id": call_id,
                "content": result_text(output, *is_error),
            }),
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if !tools.is_empty() {
        body["tools"] = json!(openai_chat_tool_definitions(tools));
    }
    body
}

/// The model's turn in an answer.
pub(crate) fn parse_turn(answer: &Value) -> Result<Turn, ProviderError> {
    // Some gateways (OpenRouter) report a failed upstream with 200 and an `error` object.
    if answer.get("choices").is_none() && answer.get("error").is_some() {
        return Err(ProviderError::BadResponse(format!(
            "an error instead of an answer: {}",
            error_detail(StatusCode::OK, &answer.to_string())
        )));
    }
    let message = answer.pointer("/choices/0/message").ok_or_else(|| {
        ProviderError::BadResponse("no `choices[0].message` in the answer".into())
    })?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned);
    let mut calls = Vec::new();
    for (index, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let function = call
            .get("function")
            .ok_or_else(|| ProviderError::BadResponse("a tool call without `function`".into()))?;
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| ProviderError::BadResponse("a tool call without a name".into()))?;
        // Arguments are a JSON string by the API; some local servers send the object itself.
        let arguments = match function.get("arguments") {
            Some(Value::String(raw)) => parse_arguments(raw),
            Some(Value::Null) | None => json!({}),
            Some(other) => other.clone(),
        };
        // Some local servers leave the id out; the result must still be paired with the call.
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("call_{index}"), str::to_owned);
        calls.push(ToolCall {
            id,
            name: name.to_owned(),
            arguments,
        });
    }
    Ok(Turn { text, calls })
}
