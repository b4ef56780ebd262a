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
//! - `wire`: the raw bytes hosts depend on, and every malformed shape answered with an id the
//!   client can match.
//! - `first_run`: a newcomer on a fresh home under `/tmp`: `autotool setup`, doctor, the OpenAI
//!   Agents SDK on its default timeouts, the demo; and the SDK while serve prepares the runtime.
//! - `openclaw`: OpenClaw's probe finds safety annotations on every autotool tool (a plain
//!   server beside it is warned about).
//! - `cli`: exit codes, JSON errors, completions, man pages, and the messages of `tools
//!   revoke`, `keys add` and `keys allow`.

mod cli;
mod conformance;
mod consent;
mod first_run;
mod hosts;
mod http;
mod inspector;
mod openclaw;
mod python_sdk;
mod shared_home;
mod wire;
