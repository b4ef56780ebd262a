//! A tool's lifecycle through `autotool serve`, end to end: a new tool is on probation and is
//! promoted by successful calls; the caller's mistakes (`ToolError`s) do not count against it;
//! crashes quarantine it live (off every host's list, callable only with `force`); `tools
//! rehab` and `tools retire` act on the running server.

use super::{HEALTHY, create_healthy, finish, listed, start, strict};
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
