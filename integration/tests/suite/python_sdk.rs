//! The official MCP Python SDK (`mcp` 2.x, the runtime's interpreter) as the host of
//! `autotool serve` over stdio, once per protocol era: `python/era_flow.py` runs the whole
//! session and prints one JSON summary, asserted on here.

use autotool_integration::python::{Era, run_summary};
use autotool_integration::{Checks, Need, TestHome, setup};
use serde_json::{Value, json};
use std::time::Duration;

/// The bound on one whole session (a dozen creates, each launching a confined tool).
const SESSION_TIMEOUT: Duration = Duration::from_secs(180);

fn step<'a>(s: &'a Value, name: &str) -> &'a Value {
    s.get(name).unwrap_or(&Value::Null)
}

fn is_result(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("result")
}

fn ok_result(v: &Value) -> bool {
    is_result(v) && v.get("is_error") == Some(&json!(false))
}

fn error_result(v: &Value) -> bool {
    is_result(v) && v.get("is_error") == Some(&json!(true))
}

fn text(v: &Value) -> String {
    v.get("text")
        .or_else(|| v.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn names(v: &Value) -> Vec<String> {
    v.get("names")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn sorted(v: &[String]) -> bool {
    v.windows(2).all(|w| w[0] <= w[1])
}

fn run(test: &str, era: Era) {
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let summary = run_summary(&home, "era_flow.py", era, SESSION_TIMEOUT).unwrap();
    let s = &summary.json;
    eprintln!(
        "{test}: sdk {} {} session in {:.1}s (connect {}s, first create {}s); summary:\n{}",
        setup.sdk_version,
        era.arg(),
        summary.elapsed.as_secs_f64(),
        s["connect_s"],
        step(s, "create")["elapsed_s"],
        serde_json::to_string_pretty(s).unwrap_or_default()
    );

    c.check(
        s.get("fatal").is_none(),
        "the session ran to the end",
        &s["fatal"],
    );

    // The handshake, in this era.
    let want_version = match era {
        Era::Legacy => "2025-11-25",
        Era::Modern => "2026-07-28",
    };
    c.check(
        s["protocol_version"] == want_version,
        &format!("negotiated protocol version {want_version}"),
        &s["protocol_version"],
    );
    c.check(
        s["server_info"]["name"] == "autotool",
        "serverInfo.name is autotool",
        &s["server_info"],
    );
    c.check(
        s["server_info"]["version"]
            .as_str()
            .is_some_and(|v| !v.is_empty()),
        "serverInfo carries a version",
        &s["server_info"],
    );
    c.check(
        s["tools_capability"]["listChanged"] == true,
        "the tools capability declares listChanged",
        &s["tools_capability"],
    );

    // A fresh home lists exactly the four built-in tools, sorted.
    let initial = names(step(s, "list_initial"));
    c.check(
        initial == ["create_tool", "run_tool", "search_tools", "tool_info"],
        "a fresh home lists create_tool, run_tool, search_tools and tool_info",
        format!("{:?} / {}", initial, step(s, "list_initial")),
    );

    // Create, and hear of it.
    let create = step(s, "create");
    c.check(ok_result(create), "create_tool adder succeeds", create);
    c.check(
        create["structured"]["tool"] == "adder" && create["structured"]["version"] == 1,
        "create_tool reports adder version 1",
        &create["structured"],
    );
    c.check(
        text(create).contains("adder__add") && text(create).contains("run_tool"),
        "create_tool names the mounted function and run_tool",
        text(create),
    );
    let change = &s["change"];
    c.check(
        change["received"] == true,
        match era {
            Era::Legacy => "notifications/tools/list_changed arrives after create_tool",
            Era::Modern => "the subscriptions/listen stream delivers tools list_changed",
        },
        change,
    );
    let list_changed = s["notifications"]["list_changed"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match era {
        Era::Legacy => {
            // One notification per successful create (adder v1, greeter, adder v2).
            c.check(
                list_changed.len() >= 3,
                "one list_changed per successful create (3)",
                format!("{} notifications: {list_changed:?}", list_changed.len()),
            );
            c.check(
                list_changed.iter().all(|n| n["subscription_id"].is_null()),
                "legacy notifications carry no subscription id",
                format!("{list_changed:?}"),
            );
        }
        Era::Modern => {
            c.check(
                change["honored"]["toolsListChanged"] == true,
                "the listen acknowledgment honours toolsListChanged",
                &change["honored"],
            );
            // 2026-07-28: change notifications flow only on streams the client opened.
            c.check(
                list_changed.iter().all(|n| {
                    n["subscription_id"]
                        .as_str()
                        .is_some_and(|id| !id.is_empty())
                }),
                "every tools/list_changed is tagged with the subscription id (none unsolicited)",
                format!("{list_changed:?}"),
            );
        }
    }
    let after = names(step(s, "list_after_create"));
    c.check(
        after
            == [
                "adder__add",
                "create_tool",
                "run_tool",
                "search_tools",
                "tool_info",
            ],
        "tools/list after the create: adder__add mounted, sorted",
        format!("{after:?}"),
    );

    // Call it directly and through run_tool.
    let direct = step(s, "call_direct");
    c.check(
        ok_result(direct) && direct["structured"] == json!({"result": 5}) && text(direct) == "5",
        "adder__add(2, 3) = 5 with structuredContent {result: 5}",
        direct,
    );
    let via = step(s, "call_run_tool");
    c.check(
        ok_result(via) && via["structured"] == json!({"result": 42}),
        "run_tool adder.add(20, 22) = 42",
        via,
    );

    // A tool that raises at import: the stage and the traceback; then repaired.
    let broken = step(s, "create_import_fails");
    let broken_text = text(broken);
    c.check(
        error_result(broken),
        "create_tool greeter (raises at import) is an isError result",
        broken,
    );
    c.check(
        broken_text.contains("Traceback")
            && broken_text.contains("GREETING_STYLE is not configured"),
        "the failure carries the traceback and the exception",
        &broken_text,
    );
    c.check(
        ["launch", "initialize", "start"]
            .iter()
            .any(|stage| broken_text.to_lowercase().contains(stage)),
        "the failure names the stage (launch/initialize)",
        &broken_text,
    );
    let after_broken = names(step(s, "list_after_import_fails"));
    c.check(
        !after_broken.iter().any(|n| n.starts_with("greeter__")),
        "a tool that failed verification is not mounted",
        format!("{after_broken:?}"),
    );
    let repaired = step(s, "create_repaired");
    c.check(
        ok_result(repaired),
        "create_tool greeter again (repaired) succeeds",
        repaired,
    );
    let greet = step(s, "call_repaired");
    c.check(
        ok_result(greet) && text(greet) == "hello, ada",
        "greeter__greet(ada) = hello, ada",
        greet,
    );

    // A new version whose smoke test raises: refused; version 1 keeps serving.
    let smoke = step(s, "create_smoke_fails");
    let smoke_text = text(smoke);
    c.check(
        error_result(smoke),
        "a new adder whose smoke test raises is refused",
        smoke,
    );
    c.check(
        smoke_text.to_lowercase().contains("smoke"),
        "the refusal names the smoke-test stage",
        &smoke_text,
    );
    c.check(
        smoke_text.contains("adder v2 is broken") && smoke_text.contains("Traceback"),
        "the refusal carries the tool's exception and traceback",
        &smoke_text,
    );
    let still = step(s, "call_after_smoke_fails");
    c.check(
        ok_result(still) && still["structured"] == json!({"result": 5}),
        "version 1 keeps serving after the refused update",
        still,
    );
    let v2 = step(s, "create_v2");
    c.check(
        ok_result(v2) && v2["structured"]["version"] == 2,
        "the repaired update becomes adder version 2",
        v2,
    );
    for name in ["call_v2", "call_v2_run_tool"] {
        let call = step(s, name);
        c.check(
            ok_result(call) && call["structured"] == json!({"result": 1005}),
            &format!("{name}: version 2 answers 2 + 3 + 1000"),
            call,
        );
    }

    // Bad input: a clear error, and the server keeps serving.
    let unknown = step(s, "call_unknown_tool");
    c.check(
        (unknown["kind"] == "error" || error_result(unknown))
            && text(unknown).contains("nosuch__thing"),
        "calling an unknown tool is an error naming it",
        unknown,
    );
    let unknown_run = step(s, "call_run_tool_unknown");
    c.check(
        error_result(unknown_run) && text(unknown_run).contains("nosuch"),
        "run_tool of an unknown tool is an isError result naming it",
        unknown_run,
    );
    let wrong = step(s, "call_wrong_types");
    c.check(
        error_result(wrong),
        "wrong argument types for a mounted function give an isError result",
        wrong,
    );
    let after_bad = step(s, "call_after_bad_input");
    c.check(
        ok_result(after_bad) && after_bad["structured"] == json!({"result": 1011}),
        "the server keeps serving after bad input (5 + 6 + 1000)",
        after_bad,
    );
    let last = names(step(s, "list_final"));
    c.check(
        last == [
            "adder__add",
            "create_tool",
            "greeter__greet",
            "run_tool",
            "search_tools",
            "tool_info",
        ] && sorted(&last),
        "the final tools/list, sorted",
        format!("{last:?}"),
    );
    c.check(
        s["notifications"]["exceptions"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "no transport errors reached the client",
        &s["notifications"]["exceptions"],
    );

    // The host closed the connection: its serve (and the serve's tools) are gone.
    let left = home.wait_idle(Duration::from_secs(10));
    c.check(
        left.is_empty(),
        "no serve still runs on the home after the host closed the connection",
        format!("{left:?}"),
    );

    c.finish(test, || {
        format!(
            "client stderr (the serve's stderr included):\n{}\n{}",
            summary.stderr,
            home.log_tail(20_000)
        )
    });
}

#[test]
fn python_sdk_legacy_era_creates_calls_repairs() {
    run("python_sdk_legacy_era_creates_calls_repairs", Era::Legacy);
}

#[test]
fn python_sdk_modern_era_creates_calls_repairs() {
    run("python_sdk_modern_era_creates_calls_repairs", Era::Modern);
}
