//! [`run_agent`]: a small agent loop on autotool. It connects to a spawned `autotool serve`
//! ([`crate::client::connect`]), offers the model every tool listed (`create_tool`, `run_tool`
//! and what has been created), runs the calls the model asks for, and returns its final answer.
//! The tool list is read again every turn, so a tool the model just created is offered next.

use super::provider::{Item, Provider, ProviderError, ToolCall, ToolDef};
use crate::client::{ConnectOptions, ConsentFn, connect};
use rmcp::model::ContentBlock;
use serde_json::Value;

/// What the loop tells the model it is.
pub const SYSTEM_PROMPT: &str = "You are an agent that can grow its own tools with autotool. \
When you need something you have no tool for (a web API, live data, a local service), write a \
small Python MCP server with create_tool (its description shows the template); read any \
verification failure and fix the code; then call the new tool (as <tool>__<function>, or with \
run_tool). Answer the user when you have what they asked for.";

/// One thing the loop did, for a caller that shows progress.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The model's text alongside its calls.
    Thought(String),
    /// A call about to run.
    Call { name: String, arguments: Value },
    /// Its result (redacted by autotool before it got here).
    Result {
        name: String,
        text: String,
        is_error: bool,
    },
    /// The final answer.
    Answer(String),
}

/// Bounds and words of the loop.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Model turns before giving up.
    pub max_turns: usize,
    pub system: String,
    /// How `autotool serve` is started (its `on_consent` answers consent questions).
    pub connect: ConnectOptions,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            max_turns: 24,
            system: SYSTEM_PROMPT.to_string(),
            connect: ConnectOptions::default(),
        }
    }
}

/// Why the agent loop ended without an answer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session with `autotool serve` failed.
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    /// The model's API failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(
        "no answer after {turns} model turns; the task may need more (AgentOptions::max_turns)"
    )]
    OutOfTurns { turns: usize },
}

/// Run `task` with `provider`; `on_consent` answers autotool's consent questions. The answer.
pub async fn run_agent(
    task: &str,
    provider: &dyn Provider,
    on_consent: ConsentFn,
) -> Result<String, AgentError> {
    let mut options = AgentOptions::default();
    options.connect.on_consent = Some(on_consent);
    run_agent_with(task, provider, options, |_| {}).await
}

fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`run_agent`] with every option, reporting each [`Step`] to `observe`.
pub async fn run_agent_with(
    task: &str,
    provider: &dyn Provider,
    options: AgentOptions,
    mut observe: impl FnMut(&Step),
) -> Result<String, AgentError> {
    let client = connect(options.connect.clone()).await?;
    let outcome = async {
        let mut history = vec![Item::User(task.to_string())];
        for _ in 0..options.max_turns {
            let tools: Vec<ToolDef> = client
                .list_tools()
                .await?
                .iter()
                .map(ToolDef::from)
                .collect();
            let turn = provider.complete(&options.system, &history, &tools).await?;
            if turn.calls.is_empty() {
                let answer = turn.text.unwrap_or_default();
                observe(&Step::Answer(answer.clone()));
                return Ok(answer);
            }
            if let Some(text) = turn.text.as_ref().filter(|t| !t.trim().is_empty()) {
                observe(&Step::Thought(text.clone()));
            }
            history.push(Item::Assistant {
                text: turn.text.clone(),
                calls: turn.calls.clone(),
            });
            for ToolCall {
                id,
                name,
                arguments,
            } in turn.calls
            {
                observe(&Step::Call {
                    name: name.clone(),
                    arguments: arguments.clone(),
                });
                let args = match &arguments {
                    Value::Object(o) => o.clone(),
                    Value::Null => serde_json::Map::new(),
                    other => {
                        let mut m = serde_json::Map::new();
                        m.insert("value".into(), other.clone());
                        m
                    }
                };
                let (text, is_error) = match client.call_tool(&name, args).await {
                    Ok(r) => (text_of(&r.content), r.is_error == Some(true)),
                    Err(e) => (format!("the call failed: {e}"), true),
                };
                observe(&Step::Result {
                    name: name.clone(),
                    text: text.clone(),
                    is_error,
                });
                history.push(Item::ToolResult {
                    call_id: id,
                    name,
                    output: text,
                    is_error,
                });
            }
        }
        Err(AgentError::OutOfTurns {
            turns: options.max_turns,
        })
    }
    .await;
    let _ = client.close().await;
    outcome
}
