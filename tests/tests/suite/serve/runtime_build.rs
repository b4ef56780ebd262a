//! The runtime a `serve` starts building outlives that `serve`: a host that starts a `serve`
//! per call and kills its process group after (LangChain's stateless mode) does not restart the
//! build each time. A uv that takes 6 s to install (`tools/runtime/slow-uv`, offline) counts the
//! installs.

use super::{HEALTHY_FILE, strict};
use autotool_tests::locate;
use autotool_tests::serve::{Serve, ServeHome, Server};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// `create_tool` of the healthy fixture, asked again while the answer is "the runtime is not
/// ready, call again" (at most 60 s); its answer.
fn create_until_ready(server: &mut Server) -> String {
    let code = autotool_tests::serve::fixture(HEALTHY_FILE).unwrap();
    let t0 = Instant::now();
    loop {
        let created = server
            .call_result(
                "create_tool",
                json!({"name": "healthy", "code": code, "verify": "quick"}),
            )
            .unwrap();
        if !created.text.contains("create_tool again") || t0.elapsed() > Duration::from_secs(60) {
            assert!(!created.is_error, "{}{}", created.text, server.context());
            return created.text;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The lines of the slow uv's log starting with `what`.
fn count(log: &Path, what: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(what))
        .count()
}

struct Outcome {
    /// The installs the slow uv counted, and its log.
    installs: usize,
    slow_uv: String,
    /// `$AUTOTOOL_HOME/logs/runtime-build.log`, the detached build's output, if there was one.
    build_log: Option<String>,
}

/// A `serve` on a fresh `home` with the slow uv asks for a tool, and is killed (its process
/// group, as a client kills its child) a second after the install began; a new `serve` on the
/// same home creates the tool.
fn killed_then_again(serve: Serve) -> Outcome {
    let home = ServeHome::new().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("slow-uv.log");
    let runtime = locate::runtime().unwrap();
    let text = |p: &Path| p.to_string_lossy().into_owned();
    // autotool runs uv with an environment of its own choosing: the slow uv's settings are
    // written into a wrapper.
    let uv = logs.path().join("uv");
    std::fs::write(
        &uv,
        format!(
            "#!/bin/sh\nSLOW_UV_LOG='{}' AUTOTOOL_TEST_UV='{}' AUTOTOOL_TEST_RUNTIME='{}' exec '{}' \"$@\"\n",
            text(&log),
            text(&locate::uv().unwrap()),
            text(&runtime.venv),
            text(&locate::tools_dir().join("runtime/slow-uv")),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&uv, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let serve = serve
        .env("AUTOTOOL_RUNTIME", "")
        .env("AUTOTOOL_UV", &text(&uv))
        .env(
            "AUTOTOOL_PYTHON",
            &text(&runtime.venv.join("bin/python3").canonicalize().unwrap()),
        );
    let mut first = serve.start(&home).unwrap();
    first.initialize().unwrap();
    let code = autotool_tests::serve::fixture(HEALTHY_FILE).unwrap();
    first
        .start_request(
            "tools/call",
            json!({"name": "create_tool", "arguments": {"name": "healthy", "code": code, "verify": "quick"}}),
        )
        .unwrap();
    let t0 = Instant::now();
    while count(&log, "install ") == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no install began{}",
            first.context()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    drop(first);
    let mut second = serve.start(&home).unwrap();
    second.initialize().unwrap();
    let created = create_until_ready(&mut second);
    assert!(created.contains("Created healthy v"), "{created}");
    drop(second);
    let build_log = std::fs::read_to_string(home.path().join("logs/runtime-build.log"));
    Outcome {
        installs: count(&log, "install "),
        slow_uv: std::fs::read_to_string(&log).unwrap_or_default(),
        build_log: build_log.ok(),
    }
}

#[test]
fn a_runtime_build_outlives_the_serve_that_started_it() {
    let Some(serve) = strict() else { return };
    let o = killed_then_again(serve);
    assert_eq!(o.installs, 1, "{}", o.slow_uv);
    // Built by the detached `autotool runtime install`, once, its progress in its log.
    let log = o.build_log.expect("no logs/runtime-build.log");
    assert_eq!(log.matches("[4/5] installing").count(), 1, "{log}");
    assert!(log.contains("the tool runtime is ready at"), "{log}");
}

/// The control: built inside `serve` (the test-only switch), the kill stops the build and the
/// next `serve` starts it over.
#[test]
fn a_runtime_build_inside_serve_is_started_over_after_a_kill() {
    let Some(serve) = strict() else { return };
    let serve = serve.env("AUTOTOOL_TEST_RUNTIME_IN_PROCESS", "in-process");
    let o = killed_then_again(serve);
    assert_eq!(o.installs, 2, "{}", o.slow_uv);
    assert_eq!(o.build_log, None);
}
