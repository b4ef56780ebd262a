//! The life of a tool outside `create_tool`: a file placed by hand goes through the same gate
//! (robustness probes included), `autotool tools remove` unmounts a tool live, an idle tool
//! process stops and the next call starts it again, and a strict `serve` on a machine that
//! cannot confine refuses to start.

use super::{HEALTHY, create_healthy, finish, start, strict};
use autotool_tests::serve::{ServeHome, Server};
use serde_json::json;
use std::time::{Duration, Instant};

/// Poll `tools/list` until `pred` holds on the names, within `bound`.
fn wait_for_list(server: &mut Server, bound: Duration, pred: impl Fn(&[String]) -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        let names = server.tool_names().unwrap();
        if pred(&names) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_tool_placed_by_hand_is_verified_then_mounted() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let dir = home.path().join("tools");
    // A broken file first: it must not be mounted.
    std::fs::create_dir_all(dir.join("byhand")).unwrap();
    std::fs::write(
        dir.join("byhand/tool.py"),
        "from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('x')\n\
         @mcp.tool()\ndef f(x: int) -> int:\n    return x + undefined_name\n",
    )
    .unwrap();
    assert!(
        !wait_for_list(&mut server, Duration::from_secs(4), |n| n
            .iter()
            .any(|t| t.starts_with("byhand__"))),
        "a hand-placed file that fails lint was mounted"
    );
    // One that crashes on edge input: the same probes as for create_tool refuse it.
    std::fs::write(
        dir.join("byhand/tool.py"),
        "from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('x')\n\
         @mcp.tool()\ndef share(total: int, people: int) -> int:\n    return total // people\n\
         if __name__ == '__main__':\n    mcp.run()\n",
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let refused = "hand-placed tool failed verification: verification failed at robustness";
    while !server.stderr().contains(refused) {
        assert!(
            Instant::now() < deadline,
            "the fragile hand-placed tool was not refused at robustness{}",
            server.context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = server.stderr();
    assert!(
        stderr.contains("ZeroDivisionError: integer division or modulo by zero"),
        "{stderr}"
    );
    assert!(
        !server
            .tool_names()
            .unwrap()
            .iter()
            .any(|t| t.starts_with("byhand__")),
        "a hand-placed file that fails the probes was mounted"
    );
    // Fixed in place: verified and mounted, with a list change for the host.
    std::fs::write(
        dir.join("byhand/tool.py"),
        "from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('x')\n\
         @mcp.tool()\ndef twice(x: int) -> int:\n    return 2 * x\n\
         if __name__ == '__main__':\n    mcp.run()\n",
    )
    .unwrap();
    assert!(
        wait_for_list(&mut server, Duration::from_secs(15), |n| n
            .iter()
            .any(|t| t == "byhand__twice")),
        "the fixed hand-placed tool was not mounted{}",
        server.context()
    );
    assert_eq!(
        server.call_text("byhand__twice", json!({"x": 21})).unwrap(),
        "42"
    );
    let (status, out, _) = home.cli(&["tools", "list", "--json"]).unwrap();
    assert!(status.success() && out.contains("byhand"), "{out}");
    finish(server);
}

#[test]
fn removing_a_tool_unmounts_it_live_and_stops_its_process() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    assert_eq!(
        server
            .call_text("healthy__add", json!({"a": 1, "b": 2}))
            .unwrap(),
        "3"
    );
    let processes: Vec<u32> = server
        .tool_processes()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(!processes.is_empty());
    let (status, out, err) = home.cli(&["tools", "remove", HEALTHY]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(
        wait_for_list(&mut server, Duration::from_secs(3), |n| !n
            .iter()
            .any(|t| t.starts_with("healthy__"))),
        "the removed tool is still listed{}",
        server.context()
    );
    let changed = server.collect(Duration::from_millis(300)).unwrap();
    let heard = server
        .stdout_lines()
        .iter()
        .any(|l| l.contains("notifications/tools/list_changed"));
    assert!(heard, "no list_changed after the removal: {changed:?}");
    let alive = super::still_alive(&processes, Duration::from_secs(5));
    assert!(
        alive.is_empty(),
        "the removed tool's process lives on: {alive:?}"
    );
    let call = server
        .call("healthy__add", json!({"a": 1, "b": 2}))
        .unwrap();
    assert!(call.is_err(), "a removed tool still answered: {call:?}");
    // History is kept.
    let (_, shown, _) = home.cli(&["tools", "show", HEALTHY]).unwrap();
    assert!(shown.contains("removed"), "{shown}");
    finish(server);
}

#[test]
fn an_idle_tool_process_stops_and_the_next_call_starts_it_again() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve.idle_timeout(1), &home);
    create_healthy(&mut server);
    let first: Vec<u32> = server
        .tool_processes()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(!first.is_empty());
    // The reaper looks every 5 s; idle after 1 s.
    let alive = super::still_alive(&first, Duration::from_secs(15));
    assert!(
        alive.is_empty(),
        "the idle tool process was not stopped: {alive:?}"
    );
    assert_eq!(
        server
            .call_text("healthy__add", json!({"a": 2, "b": 2}))
            .unwrap(),
        "4"
    );
    assert!(
        !server.tool_processes().is_empty(),
        "no tool process after the call"
    );
    finish(server);
}

#[test]
fn strict_serve_refuses_to_start_where_tools_cannot_be_confined() {
    let home = ServeHome::new().unwrap();
    // A launcher that offers nothing stands in for a machine without the kernel features.
    let fake = home.path().join("autotool-launcher");
    std::fs::write(&fake, "#!/bin/sh\necho '{}'\nexit 125\n").unwrap();
    std::fs::set_permissions(
        &fake,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let out = std::process::Command::new(autotool_tests::serve::autotool_bin().unwrap())
        .arg("serve")
        .env("AUTOTOOL_HOME", home.path())
        .env("AUTOTOOL_LAUNCHER", &fake)
        .env_remove("AUTOTOOL_SANDBOX")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "strict serve started anyway: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout must stay JSON-RPC only: {:?}",
        out.stdout
    );
    assert!(
        stderr.contains("cannot be confined") && stderr.contains("FAIL"),
        "the refusal does not carry doctor's explanation: {stderr}"
    );
    assert!(stderr.contains("--sandbox off"), "{stderr}");
}
