//! The protocol edge: the only place rmcp's server types appear. The handler hosts talk to
//! ([`handler`]) and its transports: stdio behind a guard ([`stdio`]) and streamable HTTP
//! ([`http`]).

pub mod handler;
pub mod http;
pub mod stdio;
