//! Tools forked from their runtime's template through `serve`: with `fork_tools` on (the
//! default) serve starts one template per runtime and every confined tool it starts after
//! that, verification's included, is a descendant of the template, not a launcher of its own;
//! with it off (the control) each tool has its launcher, a child of serve. The launcher carries
//! the native library its template loads, so a launcher copied alone forks tools too. A template
//! that cannot be made (its native library missing) or that dies leaves tools starting through
//! the launcher, with the reason logged once; a dead template is started again.

use super::{assert_serves, create_healthy, start, strict};
use autotool_tests::serve::{ServeHome, Server, descendants, parent};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long serve may take to have its template ready (it imports the SDK under confinement).
const TEMPLATE_READY: Duration = Duration::from_secs(90);

/// `pid`'s children, with their command lines.
fn children(pid: u32) -> Vec<(u32, String)> {
    descendants(pid)
        .into_iter()
        .filter(|(p, _)| parent(*p) == Some(pid))
        .collect()
}

/// Serve's launcher children: `(templates, tool launchers)`.
pub(super) fn launchers(server: &Server) -> (Vec<u32>, Vec<u32>) {
    let (mut templates, mut tools) = (Vec::new(), Vec::new());
    for (child, line) in children(server.pid()) {
        if line.contains("--template") {
            templates.push(child);
        } else if line.contains("autotool-launcher") && line.contains("--policy-fd") {
            tools.push(child);
        }
    }
    (templates, tools)
}

/// Wait until serve has its template; its launcher's pid.
pub(super) fn template_of(server: &mut Server) -> u32 {
    let deadline = Instant::now() + TEMPLATE_READY;
    loop {
        if let [one] = launchers(server).0[..] {
            // Ready once it has forked its Python (the launcher's waiter, init and Python).
            if descendants(one).len() >= 2 && server.stderr().contains("tool template ready") {
                return one;
            }
        }
        assert!(
            Instant::now() < deadline,
            "serve started no tool template within {TEMPLATE_READY:?}{}",
            server.context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(super) fn skip_without_template() -> bool {
    if let Some(why) = autotool_tests::template::available_or_why() {
        eprintln!("SKIP: {why}");
        return true;
    }
    false
}

fn call_instance(server: &mut Server) -> String {
    server
        .call_text("healthy__instance", json!({}))
        .unwrap_or_else(|e| panic!("healthy__instance: {e:#}{}", server.context()))
}

#[test]
fn tools_are_forked_from_the_template_and_started_by_the_launcher_when_forking_is_off() {
    let Some(serve) = strict() else { return };
    if skip_without_template() {
        return;
    }
    // Forking on (the default): one template; the tool, verified and called, lives below it.
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let template = template_of(&mut server);
    let idle = descendants(template).len();
    create_healthy(&mut server);
    assert_serves(&mut server, true, "a forked start");
    let (templates, tools) = launchers(&server);
    assert_eq!(templates, vec![template], "{}", server.context());
    assert!(
        tools.is_empty(),
        "a tool was started through a launcher of its own with a template ready: {tools:?}"
    );
    assert!(
        descendants(template).len() > idle,
        "no tool process below the template ({idle} before the tool, {} after)",
        descendants(template).len()
    );
    super::finish(server);

    // Control: forking off, no template; the tool has its own launcher, a child of serve.
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve.clone().env("AUTOTOOL_FORK_TOOLS", "off"), &home);
    create_healthy(&mut server);
    assert_serves(&mut server, true, "a launched start");
    let (templates, tools) = launchers(&server);
    assert!(templates.is_empty(), "a template with forking off");
    assert_eq!(tools.len(), 1, "{}", server.context());
    super::finish(server);
}

#[test]
fn a_launcher_copied_alone_forks_tools_from_its_template() {
    let Some(serve) = strict() else { return };
    if skip_without_template() {
        return;
    }
    // The launcher binary alone in an empty directory: nothing beside it to load.
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("autotool-launcher");
    std::fs::copy(autotool_tests::locate::launcher().unwrap(), &lone).unwrap();
    make_readable(dir.path());
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["autotool-launcher"]);
    let home = ServeHome::new().unwrap();
    let mut server = start(
        &serve
            .clone()
            .env("AUTOTOOL_LAUNCHER", &lone.to_string_lossy()),
        &home,
    );
    let template = template_of(&mut server);
    let idle = descendants(template).len();
    create_healthy(&mut server);
    assert_serves(&mut server, true, "a forked start from a lone launcher");
    let (templates, tools) = launchers(&server);
    assert_eq!(templates, vec![template], "{}", server.context());
    assert!(
        tools.is_empty(),
        "the lone launcher started the tool itself: {tools:?}{}",
        server.context()
    );
    assert!(
        descendants(template).len() > idle,
        "no tool process below the lone launcher's template"
    );
    let log = server.stderr();
    assert!(!log.contains("no tool template"), "{log}");
    super::finish(server);
}

#[test]
fn a_template_that_cannot_be_made_or_dies_leaves_tools_starting_through_the_launcher() {
    let Some(serve) = strict() else { return };
    if skip_without_template() {
        return;
    }
    // A launcher told to load its template's native library from a file that is not there
    // (`--native`, only for a template start): no template can be made.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libautotool_launcher_native.so");
    let wrapper = dir.path().join("autotool-launcher");
    let real = autotool_tests::locate::launcher().unwrap();
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" --template \"*) exec '{}' \"$@\" --native '{}' ;; esac\nexec '{}' \"$@\"\n",
            real.display(),
            missing.display(),
            real.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    make_readable(dir.path());
    let home = ServeHome::new().unwrap();
    let lone_serve = serve
        .clone()
        .env("AUTOTOOL_LAUNCHER", &wrapper.to_string_lossy());
    let mut server = start(&lone_serve, &home);
    create_healthy(&mut server);
    assert_serves(&mut server, true, "no template");
    let (templates, tools) = launchers(&server);
    assert!(templates.is_empty(), "{}", server.context());
    assert_eq!(tools.len(), 1, "{}", server.context());
    let log = server.stderr();
    assert_eq!(
        log.matches("no tool template").count(),
        1,
        "the reason is not logged exactly once:\n{log}"
    );
    assert!(log.contains("libautotool_launcher_native.so"), "{log}");
    super::finish(server);

    // A template killed: its tools die with it, the next start goes through the launcher or a
    // new template, and the tool answers again.
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let template = template_of(&mut server);
    create_healthy(&mut server);
    let before = call_instance(&mut server);
    kill(template);
    let deadline = Instant::now() + Duration::from_secs(20);
    while launchers(&server).0.contains(&template) {
        assert!(Instant::now() < deadline, "the template did not die");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its tools died with it (a call that reached one before serve saw it die fails, as with
    // any tool killed from outside); the next start answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        match server.call_text("healthy__instance", json!({})) {
            Ok(id) => break id,
            Err(e) => {
                let e = format!("{e:#}");
                assert!(e.contains("SIGKILL"), "{e}");
                assert!(
                    Instant::now() < deadline,
                    "the tool never answered again: {e}"
                );
            }
        }
    };
    assert_ne!(before, after, "the tool outlived its template");
    assert!(
        server.stderr().contains("the tool template exited"),
        "{}",
        server.context()
    );
    // Started again after its back-off: a new template appears, with no tool start asking.
    let again = template_of_other_than(&mut server, template);
    assert_ne!(again, template);
    assert_serves(&mut server, true, "a template restarted");
    super::finish(server);
}

/// A tool that reports what its interpreter looked like when its module ran: whether asyncio
/// has a current loop to give, the root logger once the SDK configured it at DEBUG, and the
/// interpreter's own view of its command line and script.
const FRESH_TOOL: &str = r#"import asyncio
import json
import logging
import sys

START = {"orig_argv": sys.orig_argv, "argv": sys.argv, "path0": sys.path[0], "file": __file__}

try:
    asyncio.get_event_loop()
    LOOP = "a loop"
except RuntimeError as e:
    LOOP = "no loop: %s" % e

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("fresh", log_level="DEBUG")
ROOT = {
    "level": logging.getLogger().level,
    "handlers": len(logging.getLogger().handlers),
    "disabled": logging.root.manager.disable,
}


@mcp.tool()
def state() -> str:
    """What the interpreter looked like when the tool started."""
    return json.dumps({"loop": LOOP, "root": ROOT, "start": START})


if __name__ == "__main__":
    mcp.run()
"#;

fn fresh_state(server: &mut Server) -> serde_json::Value {
    let created = server
        .call_result(
            "create_tool",
            json!({
                "name": "fresh",
                "code": FRESH_TOOL,
                "description": "reports its interpreter's start state",
                "smoke_test": {"function": "state", "arguments": {}},
                "verify": "quick",
            }),
        )
        .unwrap();
    assert!(!created.is_error, "{}{}", created.text, server.context());
    let text = server
        .call_text("fresh__state", json!({}))
        .unwrap_or_else(|e| panic!("fresh__state: {e:#}{}", server.context()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_forked_tool_starts_with_the_interpreter_state_of_a_launched_one() {
    let Some(serve) = strict() else { return };
    if skip_without_template() {
        return;
    }
    // The template warmed the SDK by serving a session of its own; what that left behind
    // (asyncio's loop policy, the SDK's logging set-up) must not reach a tool.
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    template_of(&mut server);
    let forked = fresh_state(&mut server);
    assert!(
        launchers(&server).1.is_empty(),
        "the tool was not forked{}",
        server.context()
    );
    super::finish(server);

    // Control: the same tool started through the launcher, a fresh interpreter.
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve.clone().env("AUTOTOOL_FORK_TOOLS", "off"), &home);
    let launched = fresh_state(&mut server);
    assert_eq!(launchers(&server).1.len(), 1, "{}", server.context());
    super::finish(server);

    assert_eq!(
        (&launched["loop"], &launched["root"]),
        (
            &json!("a loop"),
            &json!({"level": 10, "handlers": 1, "disabled": 0})
        ),
        "a fresh interpreter's state is not what this test expects"
    );
    assert!(
        launched["start"]["orig_argv"][0]
            .as_str()
            .is_some_and(|p| p.contains("python")),
        "{launched}"
    );
    assert_eq!(
        forked, launched,
        "a forked tool starts unlike a launched one"
    );
}

fn template_of_other_than(server: &mut Server, old: u32) -> u32 {
    let deadline = Instant::now() + TEMPLATE_READY;
    loop {
        if let Some(t) = launchers(server).0.into_iter().find(|t| *t != old)
            && descendants(t).len() >= 2
        {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "no new template{}",
            server.context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
}

fn make_readable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}
