//! What every model API looks like to autotool's agent: tool definitions, the conversation, one
//! turn of the model, the errors a user can act on, and the [`Provider`] trait the three APIs
//! implement. [`default_provider`] and [`provider_from_vars`] pick one from variables (see
//! [`ProviderConfig::from_vars`] for the rules).

use super::config::ProviderConfig;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use super::chat_completions::openai_chat_tool_definitions;
pub use super::messages::anthropic_tool_definitions;
pub use super::responses::openai_tool_definitions;

/// A boxed future that may move between threads (the same type as `futures::future::BoxFuture`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// A JSON Schema for the arguments (an object schema, as MCP's `inputSchema`).
    pub input_schema: Value,
}

/// A call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The API's id for the call; the result goes back under the same id.
    pub id: String,
    pub name: String,
    /// The arguments, normally a JSON object. Arguments the model wrote that are not valid JSON
    /// are kept as a JSON string holding the raw text, so the tool's error can go back to the
    /// model and the call is sent back as the model wrote it.
    pub arguments: Value,
}

/// One entry of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    User(String),
    Assistant {
        text: Option<String>,
        calls: Vec<ToolCall>,
    },
    ToolResult {
        call_id: String,
        name: String,
        output: String,
        is_error: bool,
    },
}

/// What the model answered in one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub text: Option<String>,
    pub calls: Vec<ToolCall>,
}

impl Turn {
    /// The history entry that records this turn.
    pub fn to_item(&self) -> Item {
        Item::Assistant {
            text: self.text.clone(),
            calls: self.calls.clone(),
        }
    }
}

/// Why a model request failed. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// 401 or 403: the key is missing, wrong, revoked or lacks permission.
    #[error(
        "{provider} refused the API key ({detail}); check {var}: it must hold a valid, active key",
        var = key_var(provider)
    )]
    BadKey { provider: String, detail: String },
    /// The API does not know the model, or the key may not use it.
    #[error(
        "the model {model:?} is not available ({detail}); choose one the account or server \
         offers: OPENAI_LLM for OpenAI and Chat Completions servers, ANTHROPIC_MODEL for Anthropic \
         (for Ollama, `ollama pull` it first)"
    )]
    UnknownModel { model: String, detail: String },
    /// The model (or the server running it) cannot call tools, which autotool's agent needs.
    #[error(
        "the model {model:?} cannot call tools ({detail}); autotool's agent needs tool calling: \
         choose a model that supports it with OPENAI_LLM or ANTHROPIC_MODEL (Ollama lists such \
         models under \"tools\"; vLLM needs --enable-auto-tool-choice and --tool-call-parser)"
    )]
    NoToolCalling { model: String, detail: String },
    /// 429 after every retry, a wait longer than autotool will sleep, or an exhausted quota.
    #[error(
        "{provider} is rate-limiting these requests ({detail}){}; wait and try again, or check \
         the account's rate limits and billing",
        retry_after.map(|d| format!(", and asks to wait {} s", d.as_secs())).unwrap_or_default()
    )]
    RateLimited {
        provider: String,
        detail: String,
        retry_after: Option<Duration>,
    },
    /// 5xx (or 408/409) after every retry.
    #[error(
        "the model API failed with HTTP {status} ({detail}) on every retry; it may be down or \
         overloaded: try again later"
    )]
    Server { status: u16, detail: String },
    /// No answer within the per-request timeout.
    #[error(
        "the model API did not answer within the request timeout; try again, or raise \
         AUTOTOOL_LLM_TIMEOUT (seconds, default 120) for a slow local model"
    )]
    Timeout,
    /// The API could not be reached at all.
    #[error(
        "cannot reach the model API: {0}; check the base URL (OPENAI_BASE_URL or \
         ANTHROPIC_BASE_URL), that the server is running, and the network"
    )]
    Http(String),
    /// Any other refusal of the request (4xx).
    #[error("the model API rejected the request with HTTP {status}: {detail}")]
    Rejected { status: u16, detail: String },
    /// The answer is not in the shape the API promises.
    #[error(
        "the model API answered in a shape autotool cannot read ({0}); check that the base URL \
         points at the API autotool expects there (AUTOTOOL_PROVIDER)"
    )]
    BadResponse(String),
    /// The variables do not name a usable model.
    #[error("{0}")]
    NotConfigured(String),
}

/// The variable that holds the key for a provider named in [`ProviderError::BadKey`].
fn key_var(provider: &str) -> &'static str {
    if provider.to_ascii_lowercase().contains("anthropic") {
        "ANTHROPIC_API_KEY"
    } else {
        "OPENAI_API_KEY"
    }
}

/// A model API autotool's agent can talk to.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The API and model, e.g. "openai-responses gpt-6-sol".
    fn describe(&self) -> String;

    /// One turn: the model reads the system prompt, the history and the tools it may call,
    /// and answers with text, calls, or both. Retries 429 and 5xx answers by itself.
    fn complete<'a>(
        &'a self,
        system: &'a str,
        history: &'a [Item],
        tools: &'a [ToolDef],
    ) -> BoxFuture<'a, Result<Turn, ProviderError>>;
}

/// The provider the process environment names (rules: [`ProviderConfig::from_vars`]).
///
/// autotool's own commands do not use this: they read `$AUTOTOOL_HOME/.env` and call
/// [`provider_from_vars`], so keys in a host's environment are never billed by surprise.
pub fn default_provider() -> Result<Box<dyn Provider>, ProviderError> {
    let vars: BTreeMap<String, String> = std::env::vars().collect();
    provider_from_vars(&vars)
}

/// The provider the given variables name (rules: [`ProviderConfig::from_vars`]).
pub fn provider_from_vars(
    vars: &BTreeMap<String, String>,
) -> Result<Box<dyn Provider>, ProviderError> {
    ProviderConfig::from_vars(vars)?.build()
}

impl From<&rmcp::model::Tool> for ToolDef {
    fn from(tool: &rmcp::model::Tool) -> ToolDef {
        ToolDef {
            name: tool.name.to_string(),
            description: tool
                .description
                .as_deref()
                .or(tool.title.as_deref())
                .unwrap_or_default()
                .to_owned(),
            input_schema: Value::Object((*tool.input_schema).clone()),
        }
    }
}

/// The arguments schema as the APIs accept it: an object schema with `properties` (an MCP
/// tool without parameters may list just `{"type": "object"}`, which some APIs refuse).
pub(crate) fn parameters_schema(schema: &Value) -> Value {
    let mut object = match schema {
        Value::Object(o) => o.clone(),
        _ => Map::new(),
    };
    object
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    if object.get("type").and_then(Value::as_str) == Some("object") {
        object
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    Value::Object(object)
}

/// The arguments of a call as the APIs that carry them as a string want them: the JSON text,
/// or the model's own text when it was not JSON (see [`ToolCall::arguments`]).
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Arguments an API carried as a string, read back (see [`ToolCall::arguments`]).
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// A tool result's text as the APIs without an error flag carry it: the model must still
/// learn the call failed.
pub(crate) fn result_text(output: &str, is_error: bool) -> String {
    if is_error {
        format!("Error: {output}")
    } else {
        output.to_owned()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_schema_is_an_object_schema_with_properties() {
        assert_eq!(
            parameters_schema(&json!({"type": "object"})),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            parameters_schema(&json!(null)),
            json!({"type": "object", "properties": {}})
        );
        let full = json!({"type": "object", "properties": {"q": {"type": "string"}},
                          "required": ["q"]});
        assert_eq!(parameters_schema(&full), full);
    }

    #[test]
    fn arguments_round_trip_even_when_not_json() {
        assert_eq!(parse_arguments(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{oops"), json!("{oops"));
        assert_eq!(arguments_text(&json!("{oops")), "{oops");
        assert_eq!(arguments_text(&json!({"a": 1})), r#"{"a":1}"#);
    }

    #[test]
    fn bad_key_names_the_variable() {
        let e = ProviderError::BadKey {
            provider: "anthropic-messages".into(),
            detail: "invalid x-api-key".into(),
        };
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        let e = ProviderError::BadKey {
            provider: "openai-responses".into(),
            detail: "Incorrect API key provided".into(),
        };
        assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
    }
}
