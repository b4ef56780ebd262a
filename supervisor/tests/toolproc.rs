//! `autotool::tool::process` against real Python tools on the `mcp` SDK, in both sandbox modes.
//!
//! The runtime is the virtual environment at `$AUTOTOOL_TEST_RUNTIME` (default
//! `/opt/autotool-test-runtime`, with `mcp==2.3.0`). Confined runs use the launcher at
//! `$AUTOTOOL_LAUNCHER` or `target/debug/autotool-launcher`; where it cannot confine, they print
//! `SKIP …` with the reason and pass. Every test is bounded by [`BOUND`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use anyhow::{Context, Result, bail, ensure};
use autotool::tool::process::{
    CallOutcome, InitFailure, SandboxMode, ToolProcError, ToolProcess, ToolSpec,
};
use autotool::tool::runtime::Python;
use common::{launcher_for, runtime};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Upper bound on any one test.
const BOUND: Duration = Duration::from_secs(90);
const CALL: Duration = Duration::from_secs(20);

/// A tool with one function per behaviour under test.
const TOOL: &str = r#"
import asyncio, os, sys
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

mcp = MCPServer("toolproc_test")

@mcp.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"hello {name}"

@mcp.tool()
def refuse(reason: str) -> str:
    """Always fails with a ToolError."""
    raise ToolError(f"refused: {reason}")

@mcp.tool()
def crash() -> str:
    """Raises an exception the tool did not expect."""
    raise ValueError("unexpected kaboom 7f3a")

@mcp.tool()
async def nap(seconds: float, tag: str = "") -> str:
    """Sleeps, without blocking other calls."""
    await asyncio.sleep(seconds)
    return f"rested {tag}"

@mcp.tool()
def die(code: int) -> str:
    """Ends the process in the middle of a call."""
    print("dying on purpose", file=sys.stderr, flush=True)
    os._exit(code)

@mcp.tool()
def chatty() -> str:
    """Prints; the SDK points fd 1 at stderr while it serves, so this lands on stderr."""
    print("debug output that belongs on stderr", flush=True)
    return "said it"

@mcp.tool()
def corrupt() -> str:
    """Writes a line that is not MCP onto the wire itself (the SDK's private copy of fd 1)."""
    import fcntl, stat
    err = os.fstat(2)
    for fd in range(3, 256):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        if stat.S_ISFIFO(st.st_mode) and writable and st.st_ino != err.st_ino:
            os.write(fd, b"not json at all\n")
    return "corrupted"

if __name__ == "__main__":
    mcp.run()
"#;

/// One scenario's surroundings: the mode, and tools written into temporary directories.
struct Env {
    mode: SandboxMode,
    python: Python,
    launcher: Option<PathBuf>,
    dirs: Vec<TempDir>,
}

impl Env {
    /// A spec for a tool whose source is `code`.
    fn spec(&mut self, code: &str) -> ToolSpec {
        let dir = tempfile::Builder::new()
            .prefix("autotool-toolproc-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("tool.py"), code).unwrap();
        // The confined tool runs as another user of its namespace.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut spec = ToolSpec::new(dir.path(), "tool.py", self.python.clone(), self.mode);
        spec.launcher = self.launcher.clone();
        spec.env =
            autotool_policy::launch::tool_environment(&BTreeMap::new(), &BTreeMap::new(), None);
        self.dirs.push(dir);
        spec
    }

    async fn start(&mut self, code: &str) -> Result<ToolProcess> {
        Ok(ToolProcess::start(self.spec(code)).await?)
    }
}

/// Run `scenario` in `mode` within [`BOUND`].
async fn run<F, Fut>(name: &str, mode: SandboxMode, scenario: F)
where
    F: FnOnce(Env) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let Some(launcher) = launcher_for(name, mode) else {
        return;
    };
    let env = Env {
        mode,
        python: runtime(),
        launcher,
        dirs: Vec::new(),
    };
    match tokio::time::timeout(BOUND, scenario(env)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{name} ({mode:?}): {e:#}"),
        Err(_) => panic!("{name} ({mode:?}): still running after {BOUND:?}"),
    }
}

/// Each scenario as `<name>::strict` and `<name>::off`.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn strict() {
                run(stringify!($name), SandboxMode::Strict, super::$name).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn off() {
                run(stringify!($name), SandboxMode::Off, super::$name).await
            }
        }
    )*};
}

in_both_modes!(
    lists_and_calls_a_str_function,
    tool_error_becomes_an_error_result,
    unexpected_exception_becomes_an_error_result_with_its_traceback,
    call_past_its_timeout_kills_the_process,
    exit_in_the_middle_of_a_call_is_reported,
    stdout_garbage_at_import_fails_initialize,
    stdout_garbage_during_a_call_fails_it,
    exception_at_import_fails_initialize_with_the_traceback,
    silence_fails_initialize_within_the_bound,
    eight_concurrent_calls_are_all_answered,
    shutdown_kills_a_tool_that_lingers,
    shutdown_fails_calls_in_flight,
);

fn args(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn text(outcome: &CallOutcome) -> String {
    outcome
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn lists_and_calls_a_str_function(mut env: Env) -> Result<()> {
    let t0 = Instant::now();
    let tool = env.start(TOOL).await?;
    let started = t0.elapsed();
    ensure!(tool.is_alive());
    let server = tool.server();
    ensure!(server.protocol_version == "2025-11-25", "{server:?}");
    ensure!(
        server.name.as_deref() == Some("toolproc_test"),
        "{server:?}"
    );

    let tools = tool.list_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    ensure!(
        names
            == [
                "greet", "refuse", "crash", "nap", "die", "chatty", "corrupt"
            ],
        "{names:?}"
    );
    let greet = &tools[0];
    ensure!(greet.description.as_deref() == Some("Greet someone by name."));
    ensure!(
        greet.input_schema.get("required") == Some(&json!(["name"])),
        "{:?}",
        greet.input_schema
    );
    let output = greet.output_schema.as_ref().context("no outputSchema")?;
    ensure!(
        output.get("properties").and_then(|p| p.get("result"))
            == Some(&json!({"title": "Result", "type": "string"})),
        "{output:?}"
    );

    let first = tool
        .call("greet", args(json!({"name": "bob"})), CALL)
        .await?;
    ensure!(!first.is_error, "{first:?}");
    ensure!(text(&first) == "hello bob", "{first:?}");
    ensure!(
        first.structured_content == Some(json!({"result": "hello bob"})),
        "{first:?}"
    );

    let mut warm = Vec::new();
    for i in 0..20 {
        let t = Instant::now();
        let out = tool
            .call("greet", args(json!({"name": format!("n{i}")})), CALL)
            .await?;
        warm.push(t.elapsed());
        ensure!(text(&out) == format!("hello n{i}"));
    }
    warm.sort();
    let report = tool.shutdown().await;
    eprintln!(
        "TIMING {:?}: spawn→initialize answered {:?} (measured outside {:?}); first call {:?}; warm call p50 {:?}, max {:?}; shutdown {:?} (killed: {})",
        env.mode,
        tool.started_in(),
        started,
        first.duration,
        warm[warm.len() / 2],
        warm[warm.len() - 1],
        report.took,
        report.killed
    );
    ensure!(!report.killed, "{report:?}");
    ensure!(
        report.status.map(|s| s.success()) == Some(true),
        "{report:?}"
    );
    ensure!(!tool.is_alive());
    Ok(())
}

async fn tool_error_becomes_an_error_result(mut env: Env) -> Result<()> {
    let tool = env.start(TOOL).await?;
    let out = tool
        .call("refuse", args(json!({"reason": "no key"})), CALL)
        .await?;
    ensure!(out.is_error, "{out:?}");
    ensure!(text(&out).contains("refused: no key"), "{out:?}");
    ensure!(out.structured_content.is_none(), "{out:?}");
    ensure!(tool.is_alive(), "a ToolError must not end the process");
    // Unknown functions and bad arguments are error results too, not protocol errors.
    let unknown = tool.call("nope", Map::new(), CALL).await?;
    ensure!(
        unknown.is_error && text(&unknown).contains("Unknown tool"),
        "{unknown:?}"
    );
    let bad = tool.call("greet", Map::new(), CALL).await?;
    ensure!(
        bad.is_error && text(&bad).contains("Field required"),
        "{bad:?}"
    );
    ensure!(tool.is_alive());
    tool.shutdown().await;
    Ok(())
}

async fn unexpected_exception_becomes_an_error_result_with_its_traceback(
    mut env: Env,
) -> Result<()> {
    let tool = env.start(TOOL).await?;
    let out = tool.call("crash", Map::new(), CALL).await?;
    ensure!(out.is_error, "{out:?}");
    // The SDK hides the exception from the result: only the name of the tool…
    ensure!(text(&out) == "Error executing tool crash", "{}", text(&out));
    // …and logs the traceback to stderr, which the outcome carries.
    ensure!(
        out.stderr.contains("ValueError: unexpected kaboom 7f3a"),
        "stderr: {}",
        out.stderr
    );
    ensure!(out.stderr.contains("Traceback"), "stderr: {}", out.stderr);
    ensure!(tool.is_alive());
    let again = tool
        .call("greet", args(json!({"name": "after"})), CALL)
        .await?;
    ensure!(text(&again) == "hello after");
    tool.shutdown().await;
    Ok(())
}

async fn call_past_its_timeout_kills_the_process(mut env: Env) -> Result<()> {
    let tool = env.start(TOOL).await?;
    let t0 = Instant::now();
    let err = tool
        .call(
            "nap",
            args(json!({"seconds": 30})),
            Duration::from_millis(1500),
        )
        .await
        .err()
        .context("a 30 s nap answered within 1.5 s")?;
    let took = t0.elapsed();
    let ToolProcError::Timeout {
        operation, after, ..
    } = &err
    else {
        bail!("expected Timeout, got {err:?}");
    };
    ensure!(operation == "tools/call nap" && *after == Duration::from_millis(1500));
    ensure!(took < Duration::from_secs(5), "took {took:?}");
    ensure!(
        err.to_string().contains("got no answer within 1.5 s"),
        "{err}"
    );
    ensure!(!tool.is_alive());
    let later = tool
        .call("greet", args(json!({"name": "x"})), CALL)
        .await
        .err()
        .context("a dead process answered")?;
    ensure!(matches!(later, ToolProcError::Stopped { .. }), "{later:?}");
    ensure!(
        later.to_string().contains("`tools/call nap` got no answer"),
        "{later}"
    );
    tool.shutdown().await;
    Ok(())
}

async fn exit_in_the_middle_of_a_call_is_reported(mut env: Env) -> Result<()> {
    let tool = env.start(TOOL).await?;
    let err = tool
        .call("die", args(json!({"code": 3})), CALL)
        .await
        .err()
        .context("os._exit(3) answered")?;
    let ToolProcError::Exited {
        operation,
        status,
        stderr_tail,
        ..
    } = &err
    else {
        bail!("expected Exited, got {err:?}");
    };
    ensure!(operation == "tools/call die");
    ensure!(status.and_then(|s| s.code()) == Some(3), "{status:?}");
    ensure!(stderr_tail.contains("dying on purpose"), "{stderr_tail}");
    ensure!(err.to_string().contains("exit status 3"), "{err}");
    ensure!(!tool.is_alive());
    ensure!(tool.exit_status().and_then(|s| s.code()) == Some(3));
    Ok(())
}

async fn stdout_garbage_at_import_fails_initialize(mut env: Env) -> Result<()> {
    // Flushed before `mcp.run()` takes fd 1 over, so they reach the wire first: text, and JSON
    // that is not JSON-RPC.
    for (print, expected) in [
        (
            "print('hello from import', flush=True)",
            r#""hello from import""#,
        ),
        (
            "import json; print(json.dumps({'answer': 42}), flush=True)",
            r#""{\"answer\": 42}""#,
        ),
    ] {
        let err = env
            .start(&format!("{print}\n{TOOL}"))
            .await
            .err()
            .context("a tool printing to stdout started")?
            .downcast::<ToolProcError>()?;
        let ToolProcError::Initialize {
            reason: InitFailure::Garbage { what },
            ..
        } = &err
        else {
            bail!("expected Initialize/Garbage, got {err:?}");
        };
        ensure!(what.contains(expected), "{what}");
        ensure!(err.to_string().contains("log to stderr"), "{err}");
    }
    Ok(())
}

async fn stdout_garbage_during_a_call_fails_it(mut env: Env) -> Result<()> {
    let tool = env.start(TOOL).await?;
    // A print() in a function is harmless: the SDK serves the wire from a private descriptor
    // and points fd 1 at stderr, so the line shows up in the call's stderr.
    let chatty = tool.call("chatty", Map::new(), CALL).await?;
    ensure!(!chatty.is_error && text(&chatty) == "said it", "{chatty:?}");
    ensure!(
        chatty
            .stderr
            .contains("debug output that belongs on stderr"),
        "{chatty:?}"
    );
    // Writing onto the wire itself breaks the protocol.
    let err = tool
        .call("corrupt", Map::new(), CALL)
        .await
        .err()
        .context("a call corrupting stdout succeeded")?;
    let ToolProcError::Protocol {
        operation, what, ..
    } = &err
    else {
        bail!("expected Protocol, got {err:?}");
    };
    ensure!(operation == "tools/call corrupt");
    ensure!(what.contains("\"not json at all\""), "{what}");
    ensure!(!tool.is_alive());
    ensure!(tool.exit_status().is_some(), "the process was not stopped");
    Ok(())
}

async fn exception_at_import_fails_initialize_with_the_traceback(mut env: Env) -> Result<()> {
    let code = "import json\nraise RuntimeError('broken at import 51c2')\n";
    let err = env
        .start(code)
        .await
        .err()
        .context("a broken tool started")?
        .downcast::<ToolProcError>()?;
    let ToolProcError::Initialize {
        reason: InitFailure::Exited { status, .. },
        stderr_tail,
    } = &err
    else {
        bail!("expected Initialize/Exited, got {err:?}");
    };
    ensure!(status.and_then(|s| s.code()) == Some(1), "{status:?}");
    ensure!(
        stderr_tail.contains("RuntimeError: broken at import 51c2"),
        "{stderr_tail}"
    );
    Ok(())
}

async fn silence_fails_initialize_within_the_bound(mut env: Env) -> Result<()> {
    let mut spec = env.spec("import time\ntime.sleep(60)\n");
    spec.start_timeout = Duration::from_secs(2);
    let t0 = Instant::now();
    let err = ToolProcess::start(spec)
        .await
        .err()
        .context("a silent tool started")?;
    let took = t0.elapsed();
    ensure!(
        matches!(
            &err,
            ToolProcError::Initialize {
                reason: InitFailure::NoAnswer { after },
                ..
            } if *after == Duration::from_secs(2)
        ),
        "{err:?}"
    );
    ensure!(took < Duration::from_secs(5), "took {took:?}");
    ensure!(
        err.to_string()
            .contains("no answer to `initialize` within 2 s"),
        "{err}"
    );
    Ok(())
}

async fn eight_concurrent_calls_are_all_answered(mut env: Env) -> Result<()> {
    // Shared the way `autotool serve` will share it: behind an `Arc`, called from spawned tasks.
    let tool = Arc::new(env.start(TOOL).await?);
    let t0 = Instant::now();
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let tool = tool.clone();
            tokio::spawn(async move {
                let arguments = args(json!({"seconds": 0.5, "tag": i.to_string()}));
                tool.call("nap", arguments, CALL).await
            })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let out = call.await??;
        ensure!(
            out.structured_content == Some(json!({"result": format!("rested {i}")})),
            "{out:?}"
        );
    }
    let took = t0.elapsed();
    eprintln!(
        "TIMING {:?}: 8 concurrent 0.5 s calls took {took:?}",
        env.mode
    );
    ensure!(took < Duration::from_secs(3), "not concurrent: {took:?}");
    ensure!(tool.is_alive());
    tool.shutdown().await;
    Ok(())
}

async fn shutdown_kills_a_tool_that_lingers(mut env: Env) -> Result<()> {
    let code = format!("import atexit, time\natexit.register(time.sleep, 30)\n{TOOL}");
    let tool = env.start(&code).await?;
    let report = tool.shutdown().await;
    ensure!(report.killed, "{report:?}");
    ensure!(
        report.took >= Duration::from_secs(2) && report.took < Duration::from_secs(5),
        "{report:?}"
    );
    ensure!(report.status.is_some(), "{report:?}");
    ensure!(!tool.is_alive());
    Ok(())
}

async fn shutdown_fails_calls_in_flight(mut env: Env) -> Result<()> {
    let tool = env.start(TOOL).await?;
    let call = tool.call("nap", args(json!({"seconds": 30})), CALL);
    let stop = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tool.shutdown().await
    };
    let (answer, report) = tokio::join!(call, stop);
    let err = answer.err().context("the call survived shutdown")?;
    ensure!(
        matches!(&err, ToolProcError::Stopped { why, .. } if why == "it was shut down"),
        "{err:?}"
    );
    ensure!(report.status.is_some(), "{report:?}");
    Ok(())
}
