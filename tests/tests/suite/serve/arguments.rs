//! Calls that name what does not exist or pass the wrong arguments: a protocol error for an
//! unknown tool, an `isError` result naming what is wrong otherwise, and the server (and the
//! tool) keep serving.

use super::{HEALTHY, assert_serves, create_healthy, finish, instance, start, strict};
use autotool_tests::serve::ServeHome;
use serde_json::{Value, json};

#[test]
fn unknown_tools_functions_and_bad_arguments_get_clear_errors() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    let first = instance(&mut server);

    // Confined: the tool cannot see the host's files (its home, for one); `/` it sees.
    let home_path = home.path().display().to_string();
    assert_eq!(
        server
            .call_text("healthy__exists", json!({"path": home_path}))
            .unwrap(),
        "false",
        "a confined tool sees the host's {home_path}"
    );
    assert_eq!(
        server
            .call_text("healthy__exists", json!({"path": "/"}))
            .unwrap(),
        "true"
    );

    // Unknown tool names: protocol errors (-32602) naming the name.
    for name in [
        "no_such_tool",
        "healthy__no_such_function",
        "healthy__",
        "__add",
        "",
    ] {
        let err = server
            .call(name, json!({}))
            .unwrap()
            .err()
            .unwrap_or_else(|| panic!("calling {name:?} got a result, not a protocol error"));
        assert_eq!(err.code, -32602, "{name:?}: {err}");
        assert!(
            err.message.contains(&format!("{name:?}")),
            "{name:?}: the error does not name it: {err}"
        );
        assert_serves(&mut server, true, &format!("calling {name:?}"));
    }

    // Unknown tool through run_tool: names it and lists the tools that exist.
    let r = server
        .call_result(
            "run_tool",
            json!({"tool": "no_such_tool", "function": "add", "arguments": {}}),
        )
        .unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("\"no_such_tool\""), "{}", r.text);
    assert!(
        r.text.contains(HEALTHY),
        "does not list the tools: {}",
        r.text
    );

    // Unknown function through run_tool: names it and lists the tool's functions.
    let r = server
        .call_result(
            "run_tool",
            json!({"tool": HEALTHY, "function": "subtract", "arguments": {"a": 1, "b": 2}}),
        )
        .unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("\"subtract\""), "{}", r.text);
    assert!(
        r.text.contains("add") && r.text.contains("echo"),
        "{}",
        r.text
    );
    assert_serves(&mut server, true, "unknown functions through run_tool");

    // run_tool itself called wrongly.
    for (what, args) in [
        ("no tool", json!({"function": "add", "arguments": {}})),
        ("no function", json!({"tool": HEALTHY, "arguments": {}})),
        ("a number as tool", json!({"tool": 5, "function": "add"})),
        (
            "arguments as a list",
            json!({"tool": HEALTHY, "function": "add", "arguments": [1, 2]}),
        ),
        (
            "arguments as a string",
            json!({"tool": HEALTHY, "function": "add", "arguments": "a=1"}),
        ),
    ] {
        let r = server.call_result("run_tool", args).unwrap();
        assert!(r.is_error, "run_tool with {what}: {}", r.text);
        assert!(
            r.text.contains("run_tool needs") && r.text.contains("\"arguments\": object"),
            "run_tool with {what}: {}",
            r.text
        );
    }
    assert_serves(&mut server, true, "run_tool called wrongly");

    // Wrong types and missing arguments, to the mounted name and through run_tool: an isError
    // result naming the argument and what was wrong; the tool process survives.
    let cases: &[(&str, Value, &str, &str)] = &[
        (
            "a string for an int",
            json!({"a": "x", "b": 2}),
            "a",
            "valid integer",
        ),
        (
            "a list for an int",
            json!({"a": [1], "b": 2}),
            "a",
            "valid integer",
        ),
        (
            "a float for an int",
            json!({"a": 1.5, "b": 2}),
            "a",
            "integer",
        ),
        (
            "an object for an int",
            json!({"a": 1, "b": {"n": 2}}),
            "b",
            "valid integer",
        ),
        (
            "null for an int",
            json!({"a": null, "b": 2}),
            "a",
            "valid integer",
        ),
        ("a missing argument", json!({"a": 1}), "b", "Field required"),
        ("no arguments", json!({}), "a", "Field required"),
    ];
    for (what, args, argument, complaint) in cases {
        for through_run_tool in [false, true] {
            let r = if through_run_tool {
                server
                    .call_result(
                        "run_tool",
                        json!({"tool": HEALTHY, "function": "add", "arguments": args}),
                    )
                    .unwrap()
            } else {
                server.call_result("healthy__add", args.clone()).unwrap()
            };
            let how = if through_run_tool {
                "run_tool"
            } else {
                "healthy__add"
            };
            assert!(r.is_error, "{what} via {how} succeeded: {}", r.text);
            assert!(
                r.text.contains(complaint),
                "{what} via {how}: does not say {complaint:?}: {}",
                r.text
            );
            assert!(
                r.text.contains(&format!("\n{argument}\n"))
                    || r.text.contains(&format!("'{argument}'")),
                "{what} via {how}: does not name the argument {argument:?}: {}",
                r.text
            );
        }
    }
    let r = server
        .call_result("healthy__echo", json!({"text": 12345}))
        .unwrap();
    assert!(r.is_error, "an int for a str was accepted: {}", r.text);
    assert!(r.text.contains("valid string"), "{}", r.text);
    assert_serves(&mut server, true, "wrong argument types");
    assert_eq!(
        instance(&mut server),
        first,
        "bad arguments restarted the tool process"
    );

    // Unexpected extra arguments are ignored; a correct call still works.
    assert_eq!(
        server
            .call_text("healthy__add", json!({"a": 1, "b": 2, "c": 3}))
            .unwrap(),
        "3"
    );
    let stderr = finish(server);
    assert!(
        !stderr.contains("panicked"),
        "the server panicked somewhere: {stderr}"
    );
}
