//! A tool's lifecycle through `autotool serve`, end to end: a new tool is on probation and is
//! promoted by successful calls; the caller's mistakes (`ToolError`s) do not count against it;
//! crashes quarantine it live (off every host's list, callable only with `force`); `tools
//! rehab` and `tools retire` act on the running server; a tool the user pinned refuses the
//! agent's rewrite until it is unpinned.

use super::{HEALTHY, HEALTHY_FILE, assert_serves, create_healthy, finish, listed, start, strict};
use autotool_tests::serve::{ServeHome, Server};
use serde_json::json;
use std::time::{Duration, Instant};

fn state(home: &ServeHome) -> String {
    listed(home, HEALTHY)["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Wait until the server's list has (or lacks) `healthy__add`.
fn wait_listed(server: &mut Server, want: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let names = server.tool_names().unwrap();
        if names.iter().any(|n| n == "healthy__add") == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "healthy__add {} the list: {names:?}",
            if want {
                "never came back to"
            } else {
                "never left"
            }
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn probation_promotion_quarantine_rehab_and_retire() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    assert_eq!(state(&home), "probation");

    // Five successful calls in a row: active.
    for i in 0..4 {
        assert_eq!(
            server
                .call_text("healthy__add", json!({"a": i, "b": 1}))
                .unwrap(),
            (i + 1).to_string()
        );
    }
    assert_eq!(state(&home), "probation");
    server
        .call_text("healthy__add", json!({"a": 1, "b": 1}))
        .unwrap();
    assert_eq!(state(&home), "active");

    // The caller's mistakes are the tool answering: many of them do not quarantine it.
    for _ in 0..5 {
        let r = server
            .call_result("healthy__add", json!({"a": "x", "b": 1}))
            .unwrap();
        assert!(r.is_error && r.text.contains("valid integer"), "{}", r.text);
    }
    assert_eq!(state(&home), "active");
    let entry = listed(&home, HEALTHY);
    assert_eq!(entry["health"]["tool_errors"], json!(5), "{entry}");
    assert_eq!(entry["health"]["failures"], json!(0), "{entry}");

    // Three crashes in a row: quarantined, off the list, and every host is told.
    server.collect(Duration::from_millis(200)).unwrap();
    for _ in 0..3 {
        let r = server
            .call_result("healthy__crash", json!({"status": 3}))
            .unwrap();
        assert!(r.is_error, "{}", r.text);
    }
    assert_eq!(state(&home), "quarantined");
    let heard = server.collect(Duration::from_secs(2)).unwrap();
    assert!(
        heard
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{heard:?}"
    );
    wait_listed(&mut server, false);
    let entry = listed(&home, HEALTHY);
    assert!(
        entry["state_reason"]
            .as_str()
            .unwrap_or("")
            .contains("3 failures in a row"),
        "{entry}"
    );

    // Called by name it says why and what to do; through run_tool it needs `force`.
    let r = server
        .call_result("healthy__add", json!({"a": 1, "b": 2}))
        .unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text.contains("quarantined") && r.text.contains("autotool tools rehab healthy"),
        "{}",
        r.text
    );
    let args = |force: bool| json!({"tool": HEALTHY, "function": "add", "arguments": {"a": 1, "b": 2}, "force": force});
    let r = server.call_result("run_tool", args(false)).unwrap();
    assert!(
        r.is_error && r.text.contains("\"force\": true"),
        "{}",
        r.text
    );
    let r = server.call_result("run_tool", args(true)).unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert!(
        r.text
            .contains("[called with force: healthy is quarantined")
            && r.text.ends_with("3"),
        "{}",
        r.text
    );

    // Rehab: back on probation, listed again in the running server.
    let (status, out, err) = home.cli(&["tools", "rehab", HEALTHY]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("probation"), "{out}");
    wait_listed(&mut server, true);
    assert_eq!(state(&home), "probation");
    let (status, _, err) = home.cli(&["tools", "rehab", HEALTHY]).unwrap();
    assert!(!status.success());
    assert!(err.contains("only a quarantined or retired tool"), "{err}");

    // Retire: off the list.
    let (status, out, err) = home.cli(&["tools", "retire", HEALTHY]).unwrap();
    assert!(status.success(), "{out}{err}");
    wait_listed(&mut server, false);
    assert_eq!(state(&home), "retired");
    finish(server);

    let (_, shown, _) = home.cli(&["tools", "show", HEALTHY]).unwrap();
    for reason in [
        "5 successful calls in a row",
        "3 failures in a row",
        "put back on probation by the user",
        "retired by the user",
    ] {
        assert!(
            shown.contains(reason),
            "no event saying {reason:?}: {shown}"
        );
    }
}

#[test]
fn a_pinned_tool_refuses_the_agent_s_rewrite_until_unpinned() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    let (status, out, err) = home.cli(&["tools", "pin", HEALTHY]).unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("healthy v1 is pinned"), "{out}");

    // The agent's rewrite: refused before anything runs, saying who pinned it and how to
    // unpin it; v1 stays current and keeps answering.
    let code = autotool_tests::serve::fixture(HEALTHY_FILE).unwrap() + "\n# rewritten\n";
    let rewrite = json!({
        "name": HEALTHY,
        "code": code,
        "description": "a well-behaved tool",
        "verify": "quick",
    });
    let r = server.call_result("create_tool", rewrite.clone()).unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(
        r.text
            .contains("healthy is pinned by the user (pinned by cli at ")
            && r.text.contains("`autotool tools unpin healthy`"),
        "{}",
        r.text
    );
    assert_eq!(listed(&home, HEALTHY)["version"], json!(1));
    assert_eq!(listed(&home, HEALTHY)["pinned"]["by"], json!("cli"));
    assert_serves(&mut server, true, "a rewrite refused by the pin");
    // tool_info tells the agent before it tries.
    let info = server
        .call_result("tool_info", json!({"name": HEALTHY}))
        .unwrap();
    assert!(info.text.contains("\"pinned\":{\"at\":"), "{}", info.text);
    // The log: who tried, refused by whose pin.
    let (_, events, _) = home.cli(&["events", "--json", "--tool", HEALTHY]).unwrap();
    let held: Vec<serde_json::Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["kind"] == "pin_held")
        .collect();
    assert_eq!(held.len(), 1, "{events}");
    assert_eq!(held[0]["actor"], "host:autotool-tests", "{events}");
    assert!(
        held[0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("refused: version 1 is pinned by cli"),
        "{events}"
    );

    // The control: unpinned, the same rewrite is accepted as v2.
    let (status, out, err) = home.cli(&["tools", "unpin", HEALTHY]).unwrap();
    assert!(status.success(), "{out}{err}");
    let r = server.call_result("create_tool", rewrite).unwrap();
    assert!(!r.is_error, "{}{}", r.text, server.context());
    assert!(r.text.contains("Created healthy v2"), "{}", r.text);
    assert_eq!(listed(&home, HEALTHY)["version"], json!(2));
    assert!(listed(&home, HEALTHY)["pinned"].is_null());
    finish(server);
}
