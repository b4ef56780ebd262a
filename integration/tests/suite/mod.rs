//! - `conformance`: the official MCP conformance suite over HTTP, both revisions, against the
//!   committed expected failures.
//! - `python_sdk`: the official Python MCP SDK as a host, in each protocol era.
//! - `inspector`: MCP Inspector's CLI lists and calls a created tool.
//! - `shared_home`: several serve processes on one home: changes propagate, concurrent creates of
//!   one name both land, one serve killed with `kill -9` mid-create.
//! - `wire`: the raw bytes hosts depend on, and malformed input no SDK client sends.

mod conformance;
mod inspector;
mod python_sdk;
mod shared_home;
mod wire;
