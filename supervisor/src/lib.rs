//! The autotool supervisor: the `autotool` binary and library.
//!
//! Layout (consent and the egress proxy come next):
//! - [`agent`]: autotool's own model: the OpenAI, Anthropic and Chat Completions APIs behind
//!   one [`agent::Provider`] trait, and MCP tools converted to each API's tool definitions;
//! - [`serve`], [`server`], [`app`], [`pool`]: `autotool serve`, the MCP server hosts talk to,
//!   the state its connections share, and the warm tool processes; [`stdio`]: the guarded
//!   stdio transport;
//! - [`launcher`]: finding `autotool-launcher`, its probe, confined spawns;
//! - [`runtime`]: the Python interpreter tools run on;
//! - [`doctor`]: what the machine offers and how to fix what it lacks;
//! - [`setup`]: installing the launcher with file capabilities;
//! - [`hosts`]: `autotool setup`: registering `autotool serve` with the agent apps found here;
//! - [`run_cmd`]: `autotool run "<task>"`: the demo agent on the user's own model (`./.env`),
//!   printing its steps;
//! - [`synthesize`]: `synthesize_tool`: autotool's own model (named by `$AUTOTOOL_HOME/.env`,
//!   read with [`dotenv`]) writes, verifies, repairs and mounts a tool;
//! - [`home`]: `$AUTOTOOL_HOME` and the fixed places inside it;
//! - [`config`]: every setting, resolved flag > environment > `config.toml` > default, and
//!   `autotool config`;
//! - [`ledger`]: the SQLite database every supervisor on the machine shares;
//! - [`registry`]: the tools directory and the ledger kept in step (stage, commit, remove), and
//!   `autotool tools`; [`pin`]: a version is what was verified (its file, its schemas);
//! - [`toolproc`]: one running tool process (confined through the launcher, or unconfined with
//!   `--sandbox off`), spoken to as an MCP client;
//! - [`verify`]: the gate before a tool is mounted: lint, `REQUIRED_ENV`, launch, `initialize`,
//!   `tools/list`, smoke test, robustness probes;
//! - [`credentials`]: the keys tools may be given (environment, OS keychain, opt-in file), their
//!   allowlists, and `autotool keys`;
//! - [`egress`]: the egress proxy each tool process reaches the network through: allowlists,
//!   address checks, SNI, refusals as audit events;
//! - [`redact`]: every secret value, in every form, replaced by `[REDACTED:NAME]` in whatever
//!   reaches the model.
//!
//! The supervisor never confines anything itself: every tool process is started through the
//! launcher.
#![deny(clippy::print_stdout)]

pub mod app;
pub mod client;
pub mod cmd;
pub mod config;
pub mod consent;
pub mod credentials;
pub mod dotenv;
pub mod egress;
pub mod home;
pub mod host_apps;
pub mod ledger;
pub mod logging;
pub mod mcp;
pub mod own_model;
pub mod pin;
pub mod redact;
pub mod registry;
pub mod tool;
pub mod verify;
