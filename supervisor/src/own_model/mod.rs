//! autotool's own model, named by a `.env` file: the agent loop and its providers
//! ([`agent`]) and the loop behind `synthesize_tool` ([`synthesize`]). The commands on it
//! (`autotool demo`, `autotool run`) are in [`crate::cmd`]; the built-in is in
//! [`crate::mcp::synthesize`].

pub mod agent;
pub mod synthesize;
