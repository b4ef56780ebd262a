//! autotool's own model, named by a `.env` file: the agent loop and its providers
//! ([`agent`]), the loop behind `synthesize_tool` ([`synthesize`]) and the trigger checks of a
//! created tool ([`trigger`]), the writer of the adversarial stage's hostile inputs
//! ([`adversary`]), and the model as a user sees it ([`settings`]). The commands on it
//! (`autotool demo`, `autotool run`) are in [`crate::cmd`]; the built-in is in
//! [`crate::mcp::synthesize`].

pub mod adversary;
pub mod agent;
pub mod settings;
pub mod synthesize;
pub mod trigger;
