//! Shared harness for the end-to-end tests, the escape suite among them.
//!
//! An escape test runs an attack as a real Python MCP tool twice: once *confined*, through
//! `autotool-launcher`, where the attack must be blocked, and once as a *control*, the same
//! interpreter and the same scrubbed environment without the launcher, where the attack must
//! work. The control is what shows that a "blocked" result comes from the guard and not from a
//! broken attack.
//!
//! Layout:
//! - [`locate`]: where the launcher, the tool fixtures and the Python runtime are.
//! - [`tool`]: [`ToolBuilder`] and [`ToolProcess`], one owned tool process (killed with its
//!   process group on drop, stderr captured), confined or control.
//! - [`template`]: tools forked from a template process (`AUTOTOOL_TEST_FORK=1` runs the
//!   whole suite that way).
//! - [`mcp`]: the minimal MCP client (newline-delimited JSON-RPC over the tool's stdio).
//! - [`probe`]: whether this machine can confine at all, and the `SKIP` gate built on it.
//! - [`host`]: observers on the host side: listeners that tell whether anything arrived,
//!   the process tree, scratch directories.
//! - [`browser`]: headless chromium over WebDriver, and `autotool console` as a process.
//! - [`index`]: a Python package index on loopback over wheels and sdists the test builds.
//!
//! Every wait is bounded (see [`TIMEOUT`]), so a hung tool fails its test instead of hanging CI.

pub mod browser;
pub mod host;
pub mod index;
pub mod locate;
pub mod mcp;
pub mod oci;
pub mod probe;
pub mod serve;
pub mod template;
pub mod tool;

pub use mcp::CallResult;
pub use probe::{capabilities_mode, confinement_available, print_skip, skip_unless_confined};
pub use tool::{EgressListeners, Mode, ToolBuilder, ToolProcess};

use std::time::Duration;

/// The longest any single wait on a tool may take (a start, a call, an exit).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The longest a whole `autotool` command a test runs may take: `autotool demo` starts a dozen
/// tools one after another (about 10 s on an idle 2-core machine, 26 s seen under load), so it
/// gets more room than a single wait.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(90);

/// The fixture holding every attack, one MCP tool function per attack.
pub const ATTACK_TOOL: &str = "attack_tool.py";
