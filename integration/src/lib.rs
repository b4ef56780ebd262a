//! Tests against real outside parties: the official MCP Python SDK as a host of either protocol
//! era, MCP Inspector's CLI, the Claude Code and Codex CLIs, and several `autotool serve`
//! processes sharing one home.
//!
//! Layout:
//! - [`locate`]: where the pieces are (the `autotool` binary, the launcher, the Python runtime,
//!   node and the pinned Inspector, the Python client scripts).
//! - [`prereq`]: the runtime probes behind every test, and the `SKIP` gate built on them (a skip
//!   is a failure under `CI=true`).
//! - [`child`]: [`OwnedChild`], one child process in its own process group: stdout read line by
//!   line with arrival times, stderr captured, the group killed on drop.
//! - [`home`]: [`TestHome`], a fresh `AUTOTOOL_HOME` per test, the environment that points a
//!   serve at it, and a reaper for any serve still running on it at the end.
//! - [`procfs`]: process facts from `/proc` (descendants, command lines, liveness).
//! - [`python`]: the Python SDK clients: one-shot scripts that print a JSON summary, and
//!   [`Driver`], a long-lived host the test drives line by line.
//! - [`inspector`]: one run of the MCP Inspector CLI.
//! - [`hosts`]: the host apps' CLIs (Claude Code, Codex) in a scratch user home, against what
//!   `autotool setup` registered there.
//! - [`http`]: `autotool serve --transport http` under test, and a plain HTTP/1.1 client for
//!   the requests no SDK client sends (no token, a foreign `Host`, a unix socket).
//! - [`conformance`]: the official MCP conformance suite against the HTTP transport, its
//!   per-scenario results, and the verdict against the committed expected failures.
//! - [`wire`]: [`wire::RawServe`], a serve spoken to in raw JSON-RPC lines (to create a tool
//!   without a client library).
//!
//! Every wait is bounded, so a hung server fails its test instead of hanging CI.

pub mod child;
pub mod conformance;
pub mod home;
pub mod hosts;
pub mod http;
pub mod inspector;
pub mod locate;
pub mod prereq;
pub mod procfs;
pub mod python;
pub mod wire;

pub use child::OwnedChild;
pub use home::TestHome;
pub use prereq::{Conformance, Need, Setup, setup};
pub use python::{Driver, Era};

use serde_json::Value;

/// The text of a JSON value at `pointer`, or "" (for messages and loose assertions).
pub fn text_at(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Named checks collected over a whole scenario, so one failure shows every other: the test
/// fails at [`Checks::finish`] with all of them.
#[derive(Debug)]
pub struct Checks {
    failed: Vec<String>,
    passed: usize,
    started: std::time::Instant,
}

impl Default for Checks {
    fn default() -> Checks {
        Checks::new()
    }
}

impl Checks {
    /// Start collecting; the time from here is reported at [`Checks::finish`].
    pub fn new() -> Checks {
        Checks {
            failed: Vec::new(),
            passed: 0,
            started: std::time::Instant::now(),
        }
    }

    /// Record `what`; `detail` is shown when it failed.
    pub fn check(&mut self, ok: bool, what: &str, detail: impl std::fmt::Display) {
        if ok {
            self.passed += 1;
        } else {
            self.failed.push(format!("{what}\n      got: {detail}"));
        }
    }

    pub fn failures(&self) -> usize {
        self.failed.len()
    }

    /// Panic with every failed check and `context` (logs, stderr), if any failed.
    pub fn finish(self, test: &str, context: impl FnOnce() -> String) {
        if self.failed.is_empty() {
            eprintln!(
                "{test}: all {} checks passed ({:.1}s)",
                self.passed,
                self.started.elapsed().as_secs_f64()
            );
            return;
        }
        panic!(
            "{test}: {} of {} checks failed ({:.1}s):\n  - {}\n\n{}",
            self.failed.len(),
            self.failed.len() + self.passed,
            self.started.elapsed().as_secs_f64(),
            self.failed.join("\n  - "),
            context()
        );
    }
}
