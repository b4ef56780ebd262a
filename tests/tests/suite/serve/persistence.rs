//! Tools survive a restart of the server: the host closes the connection, the server stops its
//! tool processes and exits; a new server on the same home lists and calls the tool, and
//! `autotool tools list` counts the calls of both.

use super::{HEALTHY, HEALTHY_FUNCTIONS, create_healthy, finish, listed, start, strict};
use autotool_tests::serve::ServeHome;
use serde_json::json;
use std::time::Duration;

#[test]
fn tools_survive_a_restart() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();

    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    assert_eq!(
        server
            .call_text("healthy__add", json!({"a": 1, "b": 1}))
            .unwrap(),
        "2"
    );
    assert_eq!(
        server
            .call_text(
                "run_tool",
                json!({"tool": HEALTHY, "function": "echo", "arguments": {"text": "kept"}})
            )
            .unwrap(),
        "kept"
    );
    let tool_processes: Vec<u32> = server
        .tool_processes()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert!(!tool_processes.is_empty(), "no tool process is running");
    finish(server);
    // The host went away: its tool processes went with the server.
    let alive = super::still_alive(&tool_processes, Duration::from_secs(5));
    assert!(
        alive.is_empty(),
        "tool processes outlived the server: {alive:?}"
    );

    let mut server = start(&serve, &home);
    let names = server.tool_names().unwrap();
    for f in HEALTHY_FUNCTIONS {
        assert!(
            names.contains(&format!("{HEALTHY}__{f}")),
            "{HEALTHY}__{f} is not mounted after the restart: {names:?}"
        );
    }
    assert_eq!(
        server
            .call_text("healthy__add", json!({"a": 20, "b": 22}))
            .unwrap(),
        "42"
    );
    assert_eq!(
        server
            .call_text(
                "run_tool",
                json!({"tool": HEALTHY, "function": "add", "arguments": {"a": 1, "b": 2}})
            )
            .unwrap(),
        "3"
    );

    let entry = listed(&home, HEALTHY);
    assert_eq!(entry["version"], json!(1), "{entry}");
    // Four successful calls: still on probation (promotion takes five in a row).
    assert_eq!(entry["state"], json!("probation"), "{entry}");
    assert_eq!(
        entry["calls"],
        json!(4),
        "two calls before the restart, two after: {entry}"
    );
    assert_eq!(entry["failures"], json!(0), "{entry}");
    let functions = entry["functions"].as_array().cloned().unwrap_or_default();
    for f in HEALTHY_FUNCTIONS {
        assert!(functions.contains(&json!(f)), "{f} missing from {entry}");
    }
    finish(server);
}
