//! autotool's own agent side: the model it talks to.
//!
//! - [`provider`]: the shapes every model API shares (tool definitions, the conversation, a
//!   turn), the [`Provider`] trait and the errors;
//! - [`responses`], [`messages`], [`chat_completions`]: OpenAI's Responses API, Anthropic's
//!   Messages API and OpenAI-compatible Chat Completions servers, each with the conversion of
//!   MCP tools into its tool definitions.

pub mod chat_completions;
pub mod messages;
pub mod provider;
pub mod responses;

pub use provider::{
    BoxFuture, Item, Provider, ProviderError, ToolCall, ToolDef, Turn, anthropic_tool_definitions,
    openai_chat_tool_definitions, openai_tool_definitions,
};
