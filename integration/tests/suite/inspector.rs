//! MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`, pinned in `integration/node`)
//! lists and calls a tool created earlier through the Python SDK, in both protocol eras. Each
//! Inspector run starts its own `autotool serve` on the same home, so the tool also has to
//! survive its creator's exit. (The Inspector has no elicitation and cannot listen: neither is
//! needed here.)

use autotool_integration::inspector;
use autotool_integration::python::{Driver, Era};
use autotool_integration::{Checks, Need, TestHome, setup};
use serde_json::{Value, json};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn inspector_cli_lists_and_calls_a_created_tool() {
    let test = "inspector_cli_lists_and_calls_a_created_tool";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk, Need::Inspector]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();

    // Create the tool through the Python SDK, then close that session.
    let mut creator =
        Driver::start(&home, "creator", Era::Legacy, Duration::from_secs(60)).unwrap();
    let (_, created) = creator
        .cmd(
            json!({"op": "create", "name": "adder", "source": "ADD_V1"}),
            Duration::from_secs(90),
        )
        .unwrap();
    assert_eq!(
        created["result"]["is_error"],
        false,
        "creating adder through the Python SDK failed: {created}\n{}",
        creator.stderr()
    );
    creator.close(Duration::from_secs(15)).unwrap();

    let mut transcript = String::new();
    for (era, version) in [("legacy", "2025-11-25"), ("modern", "2026-07-28")] {
        // `--method initialize` reports what the session negotiated.
        let init = inspector::run(&home, era, &["--method", "initialize"], RUN_TIMEOUT).unwrap();
        transcript.push_str(&format!(
            "--- {era} initialize: exit {:?} in {:.1}s\n{}\n",
            init.status,
            init.elapsed.as_secs_f64(),
            init.stdout
        ));
        c.check(
            init.json["result"]["protocolVersion"] == version
                && init.json["result"]["serverInfo"]["name"] == "autotool",
            &format!("{era}: the Inspector negotiates {version} with serverInfo autotool"),
            &init.json["result"]["protocolVersion"],
        );

        let list = inspector::run(&home, era, &["--method", "tools/list"], RUN_TIMEOUT).unwrap();
        transcript.push_str(&format!(
            "--- {era} tools/list: exit {:?} in {:.1}s\n{}\n{}\n",
            list.status,
            list.elapsed.as_secs_f64(),
            list.stdout,
            list.stderr
        ));
        let tools = list.json["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        c.check(
            list.status == Some(0)
                && names
                    == [
                        "adder__add",
                        "create_tool",
                        "run_tool",
                        "search_tools",
                        "tool_info",
                    ],
            &format!("{era}: tools/list shows adder__add, create_tool, run_tool (sorted)"),
            format!("exit {:?}, {names:?}", list.status),
        );
        let adder = tools.iter().find(|t| t["name"] == "adder__add");
        let schema = adder.map(|t| &t["inputSchema"]).unwrap_or(&Value::Null);
        c.check(
            schema["properties"]["a"]["type"] == "integer"
                && schema["properties"]["b"]["type"] == "integer",
            &format!("{era}: adder__add's input schema has integers a and b"),
            schema,
        );
        c.check(
            adder.is_some_and(|t| t["outputSchema"]["properties"]["result"]["type"] == "integer"),
            &format!("{era}: adder__add's output schema is relayed"),
            adder
                .map(|t| t["outputSchema"].clone())
                .unwrap_or(Value::Null),
        );

        let call = inspector::run(
            &home,
            era,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "adder__add",
                "--tool-arg",
                "a=2",
                "b=3",
            ],
            RUN_TIMEOUT,
        )
        .unwrap();
        transcript.push_str(&format!(
            "--- {era} tools/call adder__add: exit {:?} in {:.1}s\n{}\n{}\n",
            call.status,
            call.elapsed.as_secs_f64(),
            call.stdout,
            call.stderr
        ));
        let r = &call.json["result"];
        c.check(
            call.status == Some(0)
                && r["isError"] != true
                && r["structuredContent"] == json!({"result": 5})
                && r["content"][0]["text"] == "5",
            &format!("{era}: tools/call adder__add a=2 b=3 gives 5"),
            &call.json,
        );

        let via = inspector::run(
            &home,
            era,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "run_tool",
                "--tool-args-json",
                r#"{"tool": "adder", "function": "add", "arguments": {"a": 40, "b": 2}}"#,
            ],
            RUN_TIMEOUT,
        )
        .unwrap();
        transcript.push_str(&format!(
            "--- {era} tools/call run_tool: exit {:?} in {:.1}s\n{}\n{}\n",
            via.status,
            via.elapsed.as_secs_f64(),
            via.stdout,
            via.stderr
        ));
        c.check(
            via.status == Some(0)
                && via.json["result"]["structuredContent"] == json!({"result": 42}),
            &format!("{era}: tools/call run_tool adder.add(40, 2) gives 42"),
            &via.json,
        );
    }
    eprintln!(
        "{test}: Inspector {:?}\n{transcript}",
        setup.inspector_version
    );
    let left = home.wait_idle(Duration::from_secs(10));
    c.check(
        left.is_empty(),
        "no serve still runs on the home after the Inspector exited",
        format!("{left:?}"),
    );
    c.finish(test, || format!("{transcript}\n{}", home.log_tail(20_000)));
}
