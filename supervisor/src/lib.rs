//! The autotool supervisor: the `autotool` binary and library.
//!
//! Layout, from the host inwards:
//! - [`mcp`]: the protocol edge, the only place rmcp's server types appear: a `tools/call`
//!   parsed once into a typed request ([`mcp::request`]), one handler per kind of request
//!   ([`mcp::handler`]), consent asked in each era ([`mcp::consent`]), the tool list and
//!   instructions ([`mcp::listing`]), and the one render step everything bound for a host
//!   passes: redact every string, then cap ([`mcp::render`]); the stdio and HTTP transports;
//! - [`library`]: the state one serve shares, in no protocol's terms: the mounted snapshot,
//!   create (stage → verify → commit → adopt), call (recorded, with the lifecycle after it),
//!   the poll round (other processes, keys, pins, hand-placed files), search, and grants (the
//!   keys, the redactor, what a tool version is given and runs as);
//! - [`verify`]: the gate before a tool is mounted: lint, `REQUIRED_ENV`, launch, `initialize`,
//!   `tools/list`, smoke test, robustness probes;
//! - [`tool`]: a tool process spoken to as an MCP client ([`tool::process`]), the warm pool, the
//!   launcher that confines each one, and the Python runtime;
//! - [`packages`] (and [`index`], where they come from): what a tool declares in
//!   `REQUIRED_PACKAGES`, resolved and locked with uv, installed into shared read-only layers;
//! - [`egress`]: the egress proxy each tool process reaches the network through;
//! - [`redact`]: every key value, in every form, replaced by `[REDACTED:NAME]`;
//! - [`consent`]: the sealed consent question, which approvals cover a version, and
//!   `autotool tools approve|revoke`; [`credentials`]: the keys (environment, OS keychain,
//!   opt-in file) and their allowlists;
//! - [`registry`], [`ledger`], [`version`], [`pin`]: the tools directory and the SQLite ledger
//!   every supervisor on the machine shares, kept in step; one tool version in one shape; a
//!   version held to what was verified;
//! - [`config`]: every setting, resolved flag > environment > `config.toml` > default;
//!   [`serving`]: what each running serve grants without asking, for the views outside it;
//!   [`home`]: `$AUTOTOOL_HOME`; [`logging`]: log lines, redacted; [`dotenv`]: `.env` files;
//!   [`join`]: several futures awaited side by side;
//! - [`host_apps`]: the agent apps' config files `autotool setup` registers autotool in;
//! - [`own_model`] (feature `own-model`): autotool's own model: the agent loop and its
//!   providers, and the loop behind `synthesize_tool`; [`client`]: an MCP client of
//!   `autotool serve`, for agents written in Rust;
//! - [`terminal`]: text from outside printed as data, never terminal control;
//! - [`console`]: `autotool console`, the local web page to see and steer all of the above;
//! - [`cmd`]: the command line, one module per verb.
//!
//! Dependencies point inwards: `cmd` uses everything, `mcp` uses the library, the library uses
//! the rest, and no module depends back on one that depends on it. The supervisor never
//! confines anything itself: every tool process is started through the launcher.
#![deny(clippy::print_stdout)]

pub mod added;
pub mod client;
pub mod cmd;
pub mod config;
pub mod consent;
pub mod console;
pub mod credentials;
pub mod dotenv;
pub mod egress;
pub mod home;
pub mod host_apps;
pub mod index;
pub mod join;
pub mod ledger;
pub mod library;
pub mod listen;
pub mod logging;
pub mod mcp;
pub mod npm;
#[cfg(feature = "own-model")]
pub mod own_model;
pub mod packages;
pub mod pin;
pub mod provenance;
pub mod redact;
pub mod registry;
pub mod serving;
#[cfg(feature = "team")]
pub mod team;
pub mod terminal;
pub mod tool;
pub mod verify;
pub mod version;
