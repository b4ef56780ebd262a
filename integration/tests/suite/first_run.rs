//! A newcomer's first run, on a fresh machine as far as autotool can tell: a new `HOME` under
//! `/tmp` (as in containers and CI runners), so no runtime, no uv, no pip or uv cache, and
//! `AUTOTOOL_HOME` left to its default inside it.
//!
//! - After `autotool setup`: the runtime is ready, `doctor` agrees (its trial launch verified a
//!   tool on that runtime), the OpenAI Agents SDK on its default timeouts creates a first tool
//!   on its first `create_tool` and calls it, and `autotool demo` shows every step.
//! - Without setup: serve prepares the runtime in the background from its start; the SDK's
//!   first `create_tool` is answered within its 5 s timeout, saying when to call again, and a
//!   later one creates the tool.
//!
//! Both need PyPI (the runtime is built for real) and the OpenAI Agents SDK environment
//! `.ci/test` makes (`openai-agents` 0.24.0, the real package).

use autotool_integration::{Checks, Need, OwnedChild, Setup, locate, setup};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The OpenAI Agents SDK's default request timeout (`client_session_timeout_seconds`).
const SDK_TIMEOUT: f64 = 5.0;

/// A fresh `HOME` under `/tmp`.
fn fresh_home() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("autotool-first-run.")
        .tempdir_in("/tmp")
        .unwrap()
}

/// The environment of everything the newcomer runs: their new `HOME`, `PATH`, and the launcher
/// under test; nothing else of autotool's or the test's.
fn newcomer(cmd: &mut Command, home: &Path, s: &Setup) {
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LANG", "C.UTF-8")
        .env("AUTOTOOL_LAUNCHER", &s.launcher)
        .env("AUTOTOOL_LOG", "info");
    // Certificates of a TLS-inspecting proxy, where the machine has one (pip and uv read them
    // from there as on any machine behind such a proxy).
    for var in [
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "PIP_CERT",
        "PIP_INDEX_URL",
        "UV_DEFAULT_INDEX",
    ] {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
}

/// `autotool ARGS` as the newcomer, bounded by `timeout`: (exit code, stdout, stderr).
fn autotool(
    s: &Setup,
    home: &Path,
    args: &[&str],
    timeout: Duration,
) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(&s.autotool);
    cmd.args(args);
    newcomer(&mut cmd, home, s);
    let mut child = OwnedChild::spawn(&format!("autotool {}", args.join(" ")), cmd).unwrap();
    child.close_stdin();
    let deadline = Instant::now() + timeout;
    let (lines, ended) = child.read_to_end(deadline);
    let status = child
        .wait_exit(deadline.saturating_duration_since(Instant::now()))
        .unwrap();
    let stdout: Vec<String> = lines.into_iter().map(|l| l.text).collect();
    let stderr = child.final_stderr();
    assert!(
        ended,
        "`autotool {}` did not finish within {timeout:?}: {stderr}",
        args.join(" ")
    );
    (status.and_then(|s| s.code()), stdout.join("\n"), stderr)
}

/// `openai_agents_flow.py` as the newcomer's host: its JSON summary and stderr.
fn agents_flow(s: &Setup, home: &Path) -> (Value, String) {
    let (python, _) = s.agents.clone().unwrap();
    let mut cmd = Command::new(python);
    cmd.arg("-u")
        .arg(locate::python_dir().join("openai_agents_flow.py"))
        .arg("--autotool")
        .arg(&s.autotool)
        .arg("--sandbox")
        .arg(&s.sandbox);
    newcomer(&mut cmd, home, s);
    cmd.env("PYTHONDONTWRITEBYTECODE", "1");
    let mut child = OwnedChild::spawn("openai_agents_flow.py", cmd).unwrap();
    child.close_stdin();
    let deadline = Instant::now() + Duration::from_secs(180);
    let (lines, ended) = child.read_to_end(deadline);
    let _ = child.wait_exit(Duration::from_secs(10));
    if !ended {
        child.kill_group();
    }
    let stderr = child.final_stderr();
    let last = lines
        .iter()
        .rev()
        .find(|l| !l.text.trim().is_empty())
        .map(|l| l.text.clone())
        .unwrap_or_default();
    let summary = serde_json::from_str(&last).unwrap_or_else(|e| {
        panic!("openai_agents_flow.py printed no JSON summary ({e}): {last:?}\n{stderr}")
    });
    (summary, stderr)
}

fn calls(summary: &Value) -> Vec<Value> {
    summary["calls"].as_array().cloned().unwrap_or_default()
}

/// Every call answered within the SDK's own timeout (it would have raised otherwise).
fn all_within_timeout(summary: &Value) -> bool {
    let calls = calls(summary);
    !calls.is_empty()
        && calls
            .iter()
            .all(|c| c["seconds"].as_f64().is_some_and(|s| s < SDK_TIMEOUT))
}

#[test]
fn first_run_after_setup_on_a_home_under_tmp() {
    let test = "first_run_after_setup_on_a_home_under_tmp";
    let Some(s) = setup(test, &[Need::Serve, Need::OpenAiAgents]) else {
        return;
    };
    let mut c = Checks::new();
    let home = fresh_home();
    let h = home.path();

    let t0 = Instant::now();
    let (code, out, err) = autotool(&s, h, &["setup"], Duration::from_secs(300));
    let built_in = t0.elapsed();
    c.check(
        code == Some(0),
        "`autotool setup` exits 0",
        format!("{code:?}\n{out}\n{err}"),
    );
    c.check(
        out.contains("The tool runtime is ready at")
            && out.contains(&h.join(".autotool/runtime").display().to_string()),
        "setup says the runtime is ready, in the new home under /tmp",
        &out,
    );
    c.check(
        err.contains("built with uv"),
        "the runtime was built with uv (from nothing: uv fetched first)",
        &err,
    );
    eprintln!("TIMING runtime from nothing (autotool setup): {built_in:.1?}");

    let (code, out, _) = autotool(
        &s,
        h,
        &["runtime", "status", "--json"],
        Duration::from_secs(60),
    );
    let status: Value = serde_json::from_str(&out).unwrap_or_default();
    c.check(
        code == Some(0) && status["state"] == "ready",
        "`autotool runtime status` says ready and exits 0",
        &out,
    );

    let (code, out, _) = autotool(&s, h, &["doctor", "--json"], Duration::from_secs(120));
    let report: Value = serde_json::from_str(&out).unwrap_or_default();
    let trial = report["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "trial launch"))
        .cloned()
        .unwrap_or_default();
    c.check(
        code == Some(0) && trial["status"] == "ok",
        "doctor exits 0 and its trial verified a tool on that runtime",
        &out,
    );
    c.check(
        trial["detail"]
            .as_str()
            .is_some_and(|d| d.contains("verified and called")),
        "the trial ran on the built runtime, not a bare environment",
        &trial,
    );

    let (summary, stderr) = agents_flow(&s, h);
    c.check(
        summary["client_session_timeout_seconds"] == 5,
        "the SDK runs on its default 5 s timeout",
        &summary,
    );
    c.check(
        summary["created"] == true
            && calls(&summary)
                .first()
                .is_some_and(|c| c["is_error"] == false),
        "the SDK creates the first tool on its first create_tool",
        &summary,
    );
    c.check(
        all_within_timeout(&summary),
        "every call answered within 5 s",
        &summary,
    );
    c.check(
        summary["answer"] == "Hello, Ada!",
        "the created tool answers through the SDK",
        &summary,
    );
    eprintln!(
        "TIMING OpenAI Agents SDK after setup: connected in {} s, calls {}",
        summary["connected_s"],
        calls(&summary)
            .iter()
            .map(|c| format!("{} {} s", c["tool"], c["seconds"]))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let (code, out, err) = autotool(&s, h, &["demo"], Duration::from_secs(180));
    c.check(
        code == Some(0) && out.contains("every step of the demo happened"),
        "`autotool demo` with the home under /tmp shows every step",
        format!("{code:?}\n{out}\n{err}"),
    );
    c.check(
        out.contains("sandbox: strict") || s.sandbox == "off",
        "the demo ran under the strict sandbox",
        &out,
    );
    c.finish(test, || stderr.clone());
}

#[test]
fn first_run_while_serve_prepares_the_runtime() {
    let test = "first_run_while_serve_prepares_the_runtime";
    let Some(s) = setup(test, &[Need::Serve, Need::OpenAiAgents]) else {
        return;
    };
    let mut c = Checks::new();
    let home = fresh_home();
    let h = home.path();

    let (summary, stderr) = agents_flow(&s, h);
    let calls = calls(&summary);
    c.check(
        summary.get("fatal").is_none(),
        "the SDK session ran to its end",
        &summary,
    );
    c.check(
        summary["connected_s"]
            .as_f64()
            .is_some_and(|t| t < SDK_TIMEOUT),
        "initialize is answered at once although the runtime is still missing",
        &summary,
    );
    c.check(
        calls.first().is_some_and(|c| {
            c["is_error"] == true
                && c["text"].as_str().is_some_and(|t| {
                    t.contains("preparing the tool runtime") && t.contains("call create_tool again")
                })
        }),
        "the first create_tool is told what is happening and when to call again",
        &summary,
    );
    c.check(
        all_within_timeout(&summary),
        "every call answered within 5 s",
        &summary,
    );
    c.check(
        summary["created"] == true && summary["answer"] == "Hello, Ada!",
        "a later create_tool creates the tool and it answers",
        &summary,
    );
    let runtime = h.join(".autotool/runtime");
    c.check(
        runtime.join("autotool-runtime.txt").is_file(),
        "the runtime serve prepared is in place",
        runtime.display(),
    );
    let leftovers: Vec<String> = std::fs::read_dir(h.join(".autotool"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("-build-") || n.contains("-stale-"))
                .collect()
        })
        .unwrap_or_default();
    c.check(
        leftovers.is_empty(),
        "nothing half-built is left",
        format!("{leftovers:?}"),
    );
    eprintln!(
        "TIMING OpenAI Agents SDK with serve's background preparation: {}",
        calls
            .iter()
            .map(|c| format!("{} {} s", c["tool"], c["seconds"]))
            .collect::<Vec<_>>()
            .join(", ")
    );
    c.finish(test, || stderr.clone());
}
