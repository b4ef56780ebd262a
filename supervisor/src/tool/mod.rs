//! A tool process and what it takes to start one: the process itself, spoken to over MCP
//! ([`process`]), the warm processes a `serve` keeps ([`pool`]), the launcher that confines
//! each one ([`launcher`]), the templates tools are forked from ([`template`]) and the Python
//! runtime it runs on ([`runtime`]), and the directories of the user's a tool is granted
//! ([`dirs`]).

pub mod dirs;
pub mod launcher;
pub mod pool;
pub mod process;
pub mod runtime;
pub mod template;
