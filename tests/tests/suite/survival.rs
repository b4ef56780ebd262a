//! A tool written to outlive its kill: it clears its parent-death signal, ignores every
//! catchable signal, tries to leave its session and to double-fork, then the process that
//! started it is killed the way the supervisor kills a tool (`SIGKILL` to the launcher, on a
//! call timeout or a shutdown). Confined, nothing of it may be left a second later: the
//! launcher's own init is PID 1 of the tool's PID namespace and dies with the launcher, which
//! takes the whole namespace with it. The control is the same tool with a parent-death signal
//! set by its parent (as the launcher used to give it), which it clears and then survives.
//!
//! Judged on the host side only: every thread of the tool names itself with a marker, and the
//! test scans the host's `/proc` for it, wherever the tool was reparented.

use super::{builder, skip};
use autotool_tests::serve::{Sandbox, Serve, ServeHome};
use autotool_tests::{Mode, ToolProcess, host};
use rustix::process::{Pid, Signal};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// How soon after the kill nothing of a confined tool may be left.
const GONE_WITHIN: Duration = Duration::from_secs(1);

/// A process name (at most 15 bytes, the kernel's limit) no other process has.
fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("at{:05x}{:08x}", std::process::id() & 0xfffff, nanos)
}

/// A measured figure, on the real stderr (past the harness's capture) so every CI phase shows
/// it.
fn figure(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "FIGURE {line}");
}

fn kill(pid: u32) {
    let pid = Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    rustix::process::kill_process(pid, Signal::KILL).unwrap();
}

/// Wait until no process is named `name` and none of `also` is alive, at most `bound`; how
/// long it took, or `None`.
fn time_until_gone(name: &str, also: &[u32], bound: Duration) -> Option<Duration> {
    let started = Instant::now();
    loop {
        if host::processes_named(name).is_empty() && also.iter().all(|&p| !host::is_alive(p)) {
            return Some(started.elapsed());
        }
        if started.elapsed() > bound {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What the tool did to survive, as it reported it.
fn steps(verdict: &str) -> Value {
    serde_json::from_str(verdict.trim_start_matches("WORKS: "))
        .unwrap_or_else(|e| panic!("not the tool's report ({e}): {verdict}"))
}

/// Call `outlive_kill` and return the tool's report of its tricks.
fn try_to_survive(tool: &mut ToolProcess, name: &str) -> Value {
    let verdict = tool
        .call_text("outlive_kill", json!({"marker": name}))
        .unwrap_or_else(|e| panic!("outlive_kill ({:?}): {e:#}", tool.mode()));
    eprintln!("{:?} outlive_kill: {verdict}", tool.mode());
    steps(&verdict)
}

#[test]
fn a_tool_that_clears_its_death_signal_dies_with_the_launcher() {
    if skip() {
        return;
    }
    // Confined: the supervisor's kill is SIGKILL to the launcher and nothing else.
    let name = marker();
    let _cleanup = host::KillNamedOnDrop(name.clone());
    let mut tool = builder().start(Mode::Confined).unwrap();
    let launcher = tool.pid();
    let seen = try_to_survive(&mut tool, &name);
    // The tool holds no parent-death signal to clear (its life is its init's), may not set
    // one, and cannot make a process of its own.
    assert_eq!(seen["pdeathsig_before"], 0, "{seen}");
    assert!(
        seen["clear_pdeathsig"]
            .as_str()
            .is_some_and(|s| s.contains("EPERM")),
        "{seen}"
    );
    assert!(
        seen["double_fork"]
            .as_str()
            .is_some_and(|s| s.starts_with("failed")),
        "{seen}"
    );
    assert_eq!(seen["ignored"].as_array().map(Vec::len), Some(7), "{seen}");
    let family = host::descendants(launcher);
    let named = host::processes_named(&name);
    assert_eq!(
        named.len(),
        1,
        "the tool is not found by its name: {named:?}"
    );
    assert!(
        family.contains(&named[0]),
        "{named:?} not under {launcher}: {family:?}"
    );
    assert_eq!(
        family.len(),
        2,
        "launcher → init → tool, nothing else: {family:?}"
    );
    kill(launcher);
    // The tool, and its init with it.
    let gone = time_until_gone(&name, &family, Duration::from_secs(10));
    figure(&format!(
        "tool and init gone {gone:?} after SIGKILL to the launcher"
    ));
    let gone = gone.unwrap_or_else(|| {
        panic!(
            "the tool or its init outlived the launcher by 10 s: named {:?}, family alive {:?}",
            host::processes_named(&name),
            family
                .iter()
                .filter(|&&p| host::is_alive(p))
                .collect::<Vec<_>>()
        )
    });
    assert!(gone <= GONE_WITHIN, "the tool took {gone:?} to die");

    // Control: the same tool under a parent that set it a parent-death signal (`setpriv
    // --pdeathsig`, as the launcher used to), killed the same way.
    let name = marker();
    let _cleanup = host::KillNamedOnDrop(name.clone());
    let mut tool = builder()
        .with_wrapper(&[
            "sh",
            "-c",
            "\"$@\"; :",
            "sh",
            "setpriv",
            "--pdeathsig",
            "KILL",
        ])
        .start(Mode::Control)
        .unwrap();
    let parent = tool.pid();
    let seen = try_to_survive(&mut tool, &name);
    assert_eq!(seen["pdeathsig_before"], 9, "SIGKILL: {seen}");
    assert_eq!(seen["clear_pdeathsig"], "ok", "{seen}");
    assert_eq!(seen["pdeathsig_after"], 0, "{seen}");
    let before = host::processes_named(&name);
    kill(parent);
    std::thread::sleep(GONE_WITHIN * 2);
    let after = host::processes_named(&name);
    assert!(
        !after.is_empty() && before.iter().all(|p| after.contains(p)),
        "CONTROL: the tool died with its parent (before {before:?}, after {after:?}): the test \
         proves nothing"
    );
}

/// A tool with the same tricks as `outlive_kill`, for `autotool serve`: `hold` answers only
/// after `seconds`, long past the call timeout.
const HOLDING_TOOL: &str = r#"
import asyncio
import ctypes
import os
import signal
import time

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("holder")
LIBC = ctypes.CDLL(None, use_errno=True)


def tricks(marker: str) -> None:
    LIBC.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        signal.signal(s, signal.SIG_IGN)
    LIBC.prctl(15, ctypes.c_char_p(marker.encode()[:15]), 0, 0, 0)  # PR_SET_NAME
    try:
        child = os.fork()
    except OSError:
        return
    if child == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
        finally:
            os._exit(0)
    os.waitpid(child, 0)


@mcp.tool()
async def hold(marker: str, seconds: float) -> str:
    """Try to outlive a kill, then answer after `seconds`."""
    tricks(marker)
    await asyncio.sleep(seconds)
    return "held"


if __name__ == "__main__":
    mcp.run()
"#;

/// `--call-timeout`, in seconds.
const CALL_TIMEOUT: u64 = 2;

/// Create the holding tool in `serve`, call `hold` past the call timeout, and return how long
/// after the timeout's answer the last process named `name` was gone (`None`: still there 5 s
/// later).
fn hold_past_the_timeout(serve: Serve, name: &str) -> Option<Duration> {
    let home = ServeHome::new().unwrap();
    let mut server = serve
        .call_timeout(CALL_TIMEOUT)
        .start_initialized(&home)
        .unwrap();
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "holder", "code": HOLDING_TOOL, "verify": "quick"}),
        )
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, server.context());
    let r = server
        .call_result("holder__hold", json!({"marker": name, "seconds": 30}))
        .unwrap();
    assert!(
        r.is_error
            && r.text
                .contains(&format!("no answer within {CALL_TIMEOUT} s")),
        "{}",
        r.text
    );
    time_until_gone(name, &[], Duration::from_secs(5))
}

#[test]
fn a_tool_that_outlives_its_call_timeout_is_gone_when_serve_kills_it() {
    let Some(strict) = super::serve::strict() else {
        return;
    };
    let name = marker();
    let _cleanup = host::KillNamedOnDrop(name.clone());
    let gone = hold_past_the_timeout(strict, &name);
    figure(&format!(
        "serve: tool gone {gone:?} after the call timeout's answer"
    ));
    let gone = gone.unwrap_or_else(|| {
        panic!(
            "a confined tool outlived its call timeout: {:?}",
            host::processes_named(&name)
        )
    });
    assert!(gone <= GONE_WITHIN, "took {gone:?}");

    // Control: unconfined, serve kills the tool's process group; the descendant that moved to
    // a session of its own outlives it.
    let name = marker();
    let _cleanup = host::KillNamedOnDrop(name.clone());
    let gone = hold_past_the_timeout(Serve::new(Sandbox::Off), &name);
    assert_eq!(
        gone, None,
        "CONTROL: nothing of the unconfined tool survived: the test proves nothing"
    );
}
