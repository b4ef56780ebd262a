//! - `conformance`: the official MCP conformance suite over HTTP, both revisions, against the
//!   committed expected failures.
//! - `http`: `serve --transport http`: the Python SDK as two hosts of both eras with the token,
//!   401/403 for a missing token and a foreign Host or Origin, SIGTERM, refused listens, a unix
//!   socket.
//! - `python_sdk`: the official Python MCP SDK as a host, in each protocol era.
//! - `consent`: the Python SDK as a host answering the consent question for a key, in each era:
//!   yes, no, and no way to ask (answered with `autotool tools approve`).
//! - `inspector`: MCP Inspector's CLI lists and calls a created tool.
//! - `hosts`: `autotool setup` registers serve with the real Claude Code and Codex CLIs, which
//!   then connect to it and list its tools.
//! - `shared_home`: several serve processes on one home: changes propagate, concurrent creates of
//!   one name both land, one serve killed with `kill -9` mid-create.
//! - `wire`: the raw bytes hosts depend on, and malformed input no SDK client sends.

mod conformance;
mod consent;
mod hosts;
mod http;
mod inspector;
mod python_sdk;
mod shared_home;
mod wire;
