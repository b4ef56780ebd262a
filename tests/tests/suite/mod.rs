//! The escape suite: every attack an agent-written tool could try, run as a real Python MCP tool
//! ([`autotool_tests::ATTACK_TOOL`]) confined, where it must be blocked while the tool keeps
//! answering, and as a control without the launcher, where it must work.
//!
//! Modules, by what the attack goes after:
//! - `process`: new processes, exec, threads, the environment;
//! - `filesystem`: planted secrets, writes outside the private tmpfs, tmpfs size;
//! - `memory`: loading code from writable places, executable anonymous memory;
//! - `kernel`: keyrings, ptrace, namespaces, mount, io_uring, inherited descriptors;
//! - `host_view`: what a tool can learn of the host: `/proc`'s host-wide files, the mount table;
//! - `network`: host listeners over TCP, UDP and unix sockets, and the egress listener;
//! - `limits`: memory, thread, descriptor and CPU bombs;
//! - `lifecycle`: refusing to start without a feature, bad policies, parent death;
//! - `template`: tools forked from a template, against their template and each other;
//! - `user_dirs`: directories of the user's granted to a tool (`READ_DIRS`, `WRITE_DIRS`): read
//!   only what was granted, write only inside a write grant, no symlink out, no swapped path;
//! - `survival`: a tool written to outlive its kill (death signal cleared, signals ignored,
//!   sessions, double forks), killed the way the supervisor kills it.
//!
//! Privileged tests start with `if skip() { return; }`: on a machine where the launcher cannot
//! confine they print `SKIP <test>: <why>` instead of failing (in CI, or with
//! `AUTOTOOL_REQUIRE_CONFINEMENT=1`, that is a failure).

mod filesystem;
mod host_view;
mod kernel;
mod lifecycle;
mod limits;
mod memory;
mod network;
mod process;
mod serve;
mod survival;
mod template;
mod user_dirs;

use autotool_tests::{ATTACK_TOOL, Mode, ToolBuilder, ToolProcess};
use serde_json::{Value, json};

/// Whether to skip the current test (named after its thread) because nothing can be confined.
pub fn skip() -> bool {
    let name = std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string();
    autotool_tests::skip_unless_confined(&name)
}

/// A builder for the attack tool with the default policy.
pub fn builder() -> ToolBuilder {
    ToolBuilder::new(ATTACK_TOOL).expect("preparing the attack tool")
}

/// Start the attack tool with the default policy and complete the handshake.
pub fn start(mode: Mode) -> ToolProcess {
    builder()
        .start(mode)
        .unwrap_or_else(|e| panic!("starting the attack tool ({mode:?}): {e:#}"))
}

/// Call `function` on a running tool and check the tool still answers afterwards.
pub fn attack_on(tool: &mut ToolProcess, function: &str, args: Value) -> String {
    let mode = tool.mode();
    let verdict = tool
        .call_text(function, args)
        .unwrap_or_else(|e| panic!("{function} ({mode:?}): {e:#}"));
    // Shown with --nocapture or on failure: the evidence behind each verdict.
    eprintln!("{mode:?} {function}: {verdict}");
    let pong = tool.call_text("ping", json!({})).unwrap_or_else(|e| {
        panic!("the tool stopped answering after {function} ({mode:?}): {e:#}")
    });
    assert_eq!(pong, "WORKS: pong");
    verdict
}

/// Run one attack in a fresh attack tool.
pub fn attack(mode: Mode, function: &str, args: Value) -> String {
    let mut tool = start(mode);
    attack_on(&mut tool, function, args)
}

/// The attack was blocked.
#[track_caller]
pub fn assert_blocked(verdict: &str, what: &str) {
    assert!(
        verdict.starts_with("BLOCKED:"),
        "CONFINED {what}: expected BLOCKED, got: {verdict}"
    );
}

/// The attack worked (in a control run).
#[track_caller]
pub fn assert_escaped(verdict: &str, what: &str) {
    assert!(
        verdict.starts_with("ESCAPED:"),
        "CONTROL {what}: expected ESCAPED (the attack must work unconfined), got: {verdict}"
    );
}

/// The usual case: `function` is blocked confined and works in the control.
pub fn check_attack(function: &str, args: Value) {
    let confined = attack(Mode::Confined, function, args.clone());
    assert_blocked(&confined, function);
    let control = attack(Mode::Control, function, args);
    assert_escaped(&control, function);
}

/// A marker unlikely to appear anywhere by chance.
pub fn marker(what: &str) -> String {
    format!(
        "AUTOTOOL-{what}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    )
}
