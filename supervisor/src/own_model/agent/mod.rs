//! autotool's own agent side: the model it talks to.
//!
//! - [`provider`]: the shapes every model API shares (tool definitions, the conversation, a
//!   turn), the [`Provider`] trait, the errors, and picking a provider from variables;
//! - [`config`]: that choice as data ([`ProviderConfig`]), with timeouts and retries;
//! - [`responses`], [`messages`], [`chat_completions`]: OpenAI's Responses API, Anthropic's
//!   Messages API and OpenAI-compatible Chat Completions servers, each with the conversion of
//!   MCP tools into its tool definitions;
//! - `transport`: one JSON request over HTTP, retried with backoff, its refusals classified;
//! - [`run`]: [`run_agent`], a small agent loop over a spawned `autotool serve`.

pub mod chat_completions;
pub mod config;
pub mod messages;
pub mod provider;
pub mod responses;
pub mod run;
mod transport;

pub use config::{Api, ProviderConfig, RetryPolicy};
pub use provider::{
    BoxFuture, Item, Provider, ProviderError, ToolCall, ToolDef, Turn, anthropic_tool_definitions,
    default_provider, openai_chat_tool_definitions, openai_tool_definitions, provider_from_vars,
};
pub use run::{AgentError, AgentOptions, Step, run_agent, run_agent_with};
