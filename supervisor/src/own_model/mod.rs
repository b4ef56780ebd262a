//! autotool's own model, named by a `.env` file: the agent loop and its providers
//! ([`agent`]), `synthesize_tool` ([`synthesize`]), `autotool demo` ([`demo`]) and
//! `autotool run` ([`run`]).

pub mod agent;
pub mod demo;
pub mod run;
pub mod synthesize;
