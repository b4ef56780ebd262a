//! `autotool serve` under bad input: the real binary on a fresh `$AUTOTOOL_HOME`, driven over
//! stdio as a host app would, fed malformed JSON-RPC, bad arguments, bad tool code and tools
//! that hang, crash, flood or write garbage. After every attack the server must still serve
//! (DESIGN §1 promise 5), and every line it wrote to stdout must be JSON-RPC.
//!
//! Modules:
//! - `protocol`: malformed JSON-RPC, huge lines;
//! - `arguments`: unknown tools and functions, wrong and missing arguments;
//! - `create`: `create_tool` with bad names, oversized or broken code, garbage on stdout, a
//!   tool that never answers `initialize`;
//! - `misbehaving`: mounted tools that crash, hang past the call timeout, break the protocol
//!   mid-call, flood stderr or return too much;
//! - `demo`: `autotool demo` shows every step it promises;
//! - `fork`: tools forked from their runtime's template, and started through the launcher
//!   when there is none (forking off, a template that cannot be made or died);
//! - `binary`: a key's bytes inside images, audio clips and blobs, in both eras, withheld;
//! - `metadata`: a key computed into a tool's titles, descriptions and schemas at import is in
//!   no file of the home and no `tools` output;
//! - `installs`: configuration, caches, a home and a ruff other local users plant are never
//!   used by what autotool installs with (uv, pip, ruff);
//! - `keys`: a key, its allowlist and redaction end to end; no key without consent;
//! - `consent`: consent per tool × key in both eras, re-asking, `tools approve/revoke`;
//! - `reach`: declared reach: `hosts allow/list/remove`, the `trusted` preset and what `tools
//!   show` says of it, a `WRITE_DIRS` tool's writes, `dirs widen/list/narrow`, a pulled tool's
//!   reach asked on the follower;
//! - `console`: `autotool console` unreachable from tools; a pending consent approved in a
//!   real browser;
//! - `team_follow`: a followed team library left running: pushes signed before tagged and
//!   reproducible, a refused digest tried again, one pull per home, cures taken at once,
//!   `library follow`'s checks;
//! - `library`: `search_tools` ranking by health, the list limit, pinning (a file changed on
//!   disk, a process reporting other schemas);
//! - `lifecycle`: a tool placed by hand, removal live, idle stop, strict refusal;
//! - `persistence`: tools survive a restart of the server;
//! - `pool`: a tool called concurrently runs in more than one process (`tool_processes`);
//! - `runtime_build`: a runtime build outlives the `serve` that started it;
//! - `service`: one HTTP service shared by hosts of both eras through `autotool connect`; the
//!   systemd unit;
//! - `states`: probation, promotion, automatic quarantine, `force`, rehab and retire;
//! - `unconfined`: a quick pass of the same with `--sandbox off`;
//! - `uses`: tools built from tools: a composite's calls, redacted, bounded to its `USES`; cycles
//!   refused; a quarantined dependency's reason;
//! - `verdicts`: constant answers, undeclared differences and broken examples refused;
//! - `relations`: declared relations kept, broken, and owed by a rewrite once trusted.
//!
//! Tests that create tools run with the default strict sandbox, and print `SKIP` (see
//! [`super::skip`]) on a machine that cannot confine. They need the `autotool` binary
//! (`cargo build -p autotool`, or `AUTOTOOL_BIN`) and the launcher beside it.

mod added;
mod added_npm;
mod arguments;
mod binary;
mod consent;
mod console;
mod create;
mod demo;
mod fork;
mod installs;
mod keys;
mod library;
mod lifecycle;
mod metadata;
mod misbehaving;
mod packages;
mod persistence;
mod pool;
mod protocol;
mod reach;
mod record;
mod relations;
mod render;
mod runtime_build;
mod service;
mod states;
mod team;
mod team_auth;
mod team_follow;
mod unconfined;
mod uses;
mod verdicts;

use autotool_tests::serve::{CallResult, RpcError, Sandbox, Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::time::Duration;

/// The well-behaved fixture, and the name it is created under. Its misbehaving functions
/// (`crash`, `garble`, `flood_then_fail`, …) are there to be called on purpose, and would fail
/// verification's robustness probes (rightly): it is created with `"verify": "quick"`.
pub const HEALTHY_FILE: &str = "healthy.py";
pub const HEALTHY: &str = "healthy";
/// Its functions, in the order the tool defines them.
pub const HEALTHY_FUNCTIONS: &[&str] = &[
    "add",
    "echo",
    "instance",
    "crash",
    "nap",
    "flood",
    "flood_then_fail",
    "garble",
    "exists",
    "big",
];

/// How long a server may take to exit after its host closed stdin.
pub const EXIT_BOUND: Duration = Duration::from_secs(10);

/// Settings for a strict (confined) server, or `None` (after printing `SKIP`) when this machine
/// cannot confine.
pub fn strict() -> Option<Serve> {
    if super::skip() {
        return None;
    }
    Some(Serve::new(Sandbox::Strict))
}

/// Settings for a server that creates no tools: strict when this machine can confine, else off
/// (the sandbox plays no part in speaking JSON-RPC, and strict `serve` refuses to start where
/// it cannot confine).
pub fn protocol_only() -> Serve {
    match autotool_tests::confinement_available() {
        Ok(()) => Serve::new(Sandbox::Strict),
        Err(_) => Serve::new(Sandbox::Off),
    }
}

/// Start `serve` on `home` and complete the handshake.
pub fn start(serve: &Serve, home: &ServeHome) -> Server {
    serve
        .start_initialized(home)
        .unwrap_or_else(|e| panic!("starting autotool serve: {e:#}"))
}

/// Create the healthy fixture (with a smoke test, without probes) and check what the result says.
pub fn create_healthy(server: &mut Server) -> CallResult {
    let code = autotool_tests::serve::fixture(HEALTHY_FILE).unwrap();
    let created = server
        .call_result(
            "create_tool",
            json!({
                "name": HEALTHY,
                "code": code,
                "description": "a well-behaved tool",
                "smoke_test": {"function": "add", "arguments": {"a": 1, "b": 2}},
                "verify": "quick",
            }),
        )
        .unwrap();
    assert!(
        !created.is_error,
        "creating the healthy tool failed: {}{}",
        created.text,
        server.context()
    );
    assert!(
        created.text.contains("Created healthy v"),
        "{}",
        created.text
    );
    for f in HEALTHY_FUNCTIONS {
        assert!(
            created.text.contains(&format!("healthy__{f}")),
            "the result does not list healthy__{f}: {}",
            created.text
        );
    }
    created
}

/// The server still serves: `tools/list` answers with the built-ins (and the healthy tool's
/// functions when `healthy`), and, when `healthy`, a call to it answers correctly.
#[track_caller]
pub fn assert_serves(server: &mut Server, healthy: bool, after: &str) {
    let names = server
        .tool_names()
        .unwrap_or_else(|e| panic!("tools/list failed after {after}: {e:#}"));
    for builtin in ["create_tool", "run_tool", "search_tools", "tool_info"] {
        assert!(
            names.iter().any(|n| n == builtin),
            "tools/list lost {builtin} after {after}: {names:?}"
        );
    }
    if healthy {
        assert!(
            names.iter().any(|n| n == "healthy__add"),
            "tools/list lost healthy__add after {after}: {names:?}"
        );
        let sum = server
            .call_text("healthy__add", json!({"a": 2, "b": 40}))
            .unwrap_or_else(|e| panic!("the healthy tool stopped answering after {after}: {e:#}"));
        assert_eq!(sum, "42", "after {after}");
    }
}

/// Capabilities of a host that can ask its user (form elicitation).
pub fn asking() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// The user's yes to a consent question.
pub fn yes(_: &Value) -> Value {
    json!({"action": "accept", "content": {"allow": true}})
}

/// The user's no.
pub fn no(_: &Value) -> Value {
    json!({"action": "decline"})
}

/// For calls that must ask nothing.
pub fn never(params: &Value) -> Value {
    panic!("asked when no question was due: {params}")
}

/// The result of a call that succeeded.
#[track_caller]
pub fn ok(outcome: &Result<CallResult, RpcError>) -> &CallResult {
    match outcome {
        Ok(r) if !r.is_error => r,
        Ok(r) => panic!("the call failed: {}", r.text),
        Err(e) => panic!("the call got a JSON-RPC error: {e}"),
    }
}

/// The result of a call that was refused with a result (not a JSON-RPC error).
#[track_caller]
pub fn refused(outcome: &Result<CallResult, RpcError>) -> &CallResult {
    match outcome {
        Ok(r) if r.is_error => r,
        Ok(r) => panic!("the call was expected to be refused: {}", r.text),
        Err(e) => panic!("the call got a JSON-RPC error: {e}"),
    }
}

/// The host goes away: the server must exit cleanly, having written only JSON-RPC to stdout.
pub fn finish(server: Server) -> String {
    let (status, stderr) = server
        .finish(EXIT_BOUND)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(
        status.success(),
        "autotool serve exited with {status}: {stderr}"
    );
    stderr
}

/// The healthy tool's current process id (changes when it is restarted).
pub fn instance(server: &mut Server) -> String {
    let id = server
        .call_text("healthy__instance", json!({}))
        .unwrap_or_else(|e| panic!("healthy__instance: {e:#}"));
    assert_eq!(id.len(), 32, "not an instance id: {id:?}");
    id
}

/// The entry for `name` in `autotool tools list --json` on `home`.
pub fn listed(home: &ServeHome, name: &str) -> Value {
    let (status, stdout, stderr) = home.cli(&["tools", "list", "--json"]).unwrap();
    assert!(
        status.success(),
        "autotool tools list --json: {status}: {stderr}"
    );
    let all: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("tools list --json is not JSON ({e}): {stdout}"));
    let entries = all.as_array().cloned().unwrap_or_default();
    entries
        .into_iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
        .unwrap_or_else(|| panic!("{name} is not in `autotool tools list --json`: {stdout}"))
}

/// The names in `autotool tools list --json` on `home`.
pub fn listed_names(home: &ServeHome) -> Vec<String> {
    let (status, stdout, stderr) = home.cli(&["tools", "list", "--json"]).unwrap();
    assert!(
        status.success(),
        "autotool tools list --json: {status}: {stderr}"
    );
    let all: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    all.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The processes of `pids` still alive after waiting at most `bound` for them to go.
pub fn still_alive(pids: &[u32], bound: Duration) -> Vec<u32> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .ok()
                    .and_then(|s| {
                        s.rfind(')')
                            .map(|i| s[i + 1..].trim_start().starts_with('Z'))
                    })
                    .is_some_and(|zombie| !zombie)
            })
            .collect();
        if alive.is_empty() || std::time::Instant::now() >= deadline {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
