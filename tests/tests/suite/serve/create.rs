//! `create_tool` with bad input: invalid names, oversized code, code that does not parse or
//! names what is undefined, missing fields, a tool that writes garbage to stdout, one that
//! never answers `initialize` and one that crashes on edge input. Each is an `isError` result
//! naming what is wrong (and the verification stage), nothing is mounted or stored, and the
//! server keeps serving.

use super::{
    HEALTHY, HEALTHY_FILE, assert_serves, create_healthy, finish, listed_names, start, strict,
};
use autotool_tests::serve::{ServeHome, Server, fixture};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A small valid tool body, with `body` (one line, indented for a function) at line 7.
fn tool_with_line_7(body: &str) -> String {
    format!(
        "from mcp.server.mcpserver import MCPServer\n\
         \n\
         mcp = MCPServer(\"broken\")\n\
         \n\
         @mcp.tool()\n\
         def f(x: int) -> int:\n\
         {body}\n\
         \n\
         if __name__ == \"__main__\":\n\
         \x20   mcp.run()\n"
    )
}

/// A tool whose one function crashes on an empty string (line 7), or, `sturdy`, refuses it with
/// a ToolError.
fn initial_tool(sturdy: bool) -> String {
    let guard = if sturdy {
        "    if not text:\n        raise ToolError(\"text is empty\")\n"
    } else {
        ""
    };
    format!(
        "from mcp.server.mcpserver import MCPServer\n\
         from mcp.server.mcpserver.exceptions import ToolError\n\
         mcp = MCPServer(\"initial\")\n\
         \n\
         @mcp.tool()\n\
         def initial(text: str) -> str:\n\
         {guard}    return text[0]\n\
         \n\
         if __name__ == \"__main__\":\n\
         \x20   mcp.run()\n"
    )
}

#[track_caller]
fn create_fails(server: &mut Server, args: Value, what: &str, needles: &[&str]) -> String {
    let r = server
        .call("create_tool", args)
        .unwrap()
        .unwrap_or_else(|e| panic!("create_tool with {what}: a protocol error, not a result: {e}"));
    assert!(r.is_error, "create_tool with {what} succeeded: {}", r.text);
    for needle in needles {
        assert!(
            r.text.contains(needle),
            "create_tool with {what}: the error does not say {needle:?}:\n{}",
            r.text
        );
    }
    assert_serves(server, true, what);
    r.text
}

#[test]
fn create_tool_rejects_bad_input_and_keeps_serving() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    let before = server.tool_names().unwrap();
    let healthy = fixture(HEALTHY_FILE).unwrap();

    // Invalid names: each refused with the name and the rule, before any code runs.
    let long = "a".repeat(41);
    for name in [
        "Upper",
        "1leading_digit",
        long.as_str(),
        "two__parts",
        "trailing_",
        "",
        "../escape",
        "with-dash",
        "with space",
        "ünicode",
        "a\nb",
    ] {
        create_fails(
            &mut server,
            json!({"name": name, "code": healthy}),
            &format!("the name {name:?}"),
            &[
                &format!("invalid tool name {}", json!(name)),
                autotool_policy::names::TOOL_NAME_PATTERN,
                "single underscores",
            ],
        );
    }
    create_fails(
        &mut server,
        json!({"code": healthy}),
        "no name",
        &["invalid tool name \"\""],
    );
    create_fails(
        &mut server,
        json!({"name": 7, "code": healthy}),
        "a number as name",
        &["invalid tool name"],
    );

    // Missing or mistyped code.
    for (what, args) in [
        ("no code", json!({"name": "nocode"})),
        ("a number as code", json!({"name": "nocode", "code": 5})),
        (
            "a list as code",
            json!({"name": "nocode", "code": ["x = 1"]}),
        ),
        ("no arguments at all", json!({})),
    ] {
        create_fails(&mut server, args, what, &["create_tool needs `code`"]);
    }
    create_fails(
        &mut server,
        json!({"name": "blank", "code": "  \n\n\t\n"}),
        "blank code",
        &["verification failed at lint", "empty"],
    );

    // Oversized code: just over the 256 KiB cap, and 5 MB.
    let cap = 256 << 10;
    for size in [cap + 1, 5 << 20] {
        let mut code = healthy.clone();
        code.push_str(&format!("# {}\n", "p".repeat(size - code.len() - 3)));
        assert_eq!(code.len(), size);
        let text = create_fails(
            &mut server,
            json!({"name": "oversized", "code": code}),
            &format!("{size} bytes of code"),
            &[&format!("{size} bytes"), &format!("{cap} bytes")],
        );
        assert!(
            text.len() < 4096,
            "the error echoes the code: {} bytes",
            text.len()
        );
    }

    // A syntax error: stage lint, and the line.
    create_fails(
        &mut server,
        json!({"name": "syntax", "code": tool_with_line_7("    return x +")}),
        "a syntax error at line 7",
        &["verification failed at lint", "line 7", "invalid-syntax"],
    );
    create_fails(
        &mut server,
        json!({"name": "syntax", "code": "def f(:\n    pass\n"}),
        "a broken def at line 1",
        &["verification failed at lint", "line 1"],
    );
    // An undefined name: stage lint, the name, the rule and the line.
    create_fails(
        &mut server,
        json!({"name": "undefined", "code": tool_with_line_7("    return undefined_helper(x)")}),
        "an undefined name at line 7",
        &[
            "verification failed at lint",
            "F821",
            "undefined_helper",
            "line 7",
        ],
    );

    // smoke_test of the wrong shape, and one that fails when run.
    create_fails(
        &mut server,
        json!({"name": "smoky", "code": healthy, "smoke_test": "add"}),
        "a string as smoke_test",
        &["smoke_test must be an object"],
    );
    create_fails(
        &mut server,
        json!({"name": "smoky", "code": healthy, "smoke_test": {"arguments": {}}}),
        "a smoke_test without function",
        &["smoke_test needs `function`"],
    );
    create_fails(
        &mut server,
        json!({"name": "smoky", "code": healthy,
               "smoke_test": {"function": "add", "arguments": {"a": "x", "b": 1}}}),
        "a smoke test that fails",
        &["verification failed at smoke_test", "valid integer"],
    );

    // Garbage on stdout before serving: stage initialize, quoting what it wrote.
    let garbage = fixture("garbage_stdout.py").unwrap();
    create_fails(
        &mut server,
        json!({"name": "garbage", "code": garbage}),
        "a tool that writes garbage to stdout",
        &[
            "verification failed at initialize",
            "garbage that is not JSON-RPC",
            "stdout",
        ],
    );

    // Nothing of the failures was mounted or stored.
    let after = server.tool_names().unwrap();
    assert_eq!(before, after, "a failed create_tool changed the tool list");
    assert_eq!(listed_names(&home), vec![HEALTHY.to_string()]);
    // A failed create may leave an empty `tools/<name>/`, but no version and no code.
    for entry in std::fs::read_dir(home.path().join("tools"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == HEALTHY || name.starts_with('.') {
            continue;
        }
        let inside: Vec<String> = std::fs::read_dir(entry.path())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            inside.is_empty(),
            "a failed create_tool left tools/{name}/ holding {inside:?}"
        );
    }
    assert!(
        !home.path().join("escape").exists(),
        "the name ../escape wrote outside the tools directory"
    );
    finish(server);
}

#[test]
fn a_tool_that_never_answers_initialize_fails_within_the_start_timeout() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    let before = server.tool_processes();

    let code = fixture("hang_at_import.py").unwrap();
    let started = Instant::now();
    let id = server
        .start_request(
            "tools/call",
            json!({"name": "create_tool", "arguments": {"name": "hang", "code": code}}),
        )
        .unwrap();

    // While the hanging tool is being verified, the server answers other requests at once.
    std::thread::sleep(Duration::from_millis(1500));
    let during = server.tool_processes();
    assert!(
        during.len() > before.len(),
        "the hanging tool's process never started: before {before:?}, during {during:?}"
    );
    let quick = Instant::now();
    assert_serves(&mut server, true, "starting a tool that hangs");
    assert!(
        quick.elapsed() < Duration::from_secs(2),
        "the server was slow to answer while verifying a hanging tool: {:?}",
        quick.elapsed()
    );

    let answer = server.wait_answer(id, Duration::from_secs(29)).unwrap();
    let took = started.elapsed();
    let text = answer.to_string();
    assert_eq!(
        answer.pointer("/result/isError"),
        Some(&json!(true)),
        "{text}"
    );
    assert!(text.contains("verification failed at initialize"), "{text}");
    assert!(
        text.contains("initialize") && text.contains("20 s"),
        "{text}"
    );
    assert!(
        took < Duration::from_secs(25),
        "create_tool took {took:?}, past the 20 s start timeout"
    );
    eprintln!("a tool that never answers initialize failed after {took:?}");

    // The hanging process is gone; the server serves; nothing was mounted.
    let leaked: Vec<u32> = during
        .iter()
        .filter(|p| !before.contains(p))
        .map(|(pid, _)| *pid)
        .collect();
    let alive = super::still_alive(&leaked, Duration::from_secs(5));
    assert!(
        alive.is_empty(),
        "the hanging tool's processes are still running: {alive:?} of {during:?}"
    );
    assert_serves(&mut server, true, "a tool that never answered initialize");
    assert!(
        !server
            .tool_names()
            .unwrap()
            .iter()
            .any(|n| n.starts_with("hang__"))
    );
    assert_eq!(listed_names(&home), vec![HEALTHY.to_string()]);
    finish(server);
}

#[test]
fn a_function_that_crashes_on_edge_input_fails_at_robustness_unless_quick() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);

    // Probed by default (it declares no keys): the crash on "" is the answer, with the input
    // and the traceback.
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "initial", "code": initial_tool(false)}),
        )
        .unwrap();
    assert!(r.is_error, "{}", r.text);
    for needle in [
        "verification failed at robustness",
        "initial({\"text\":\"\"}) (text: empty string)",
        "IndexError: string index out of range (tool.py, line 7, in initial)",
        "Traceback (most recent call last)",
        "return text[0]",
        "raise ToolError",
    ] {
        assert!(r.text.contains(needle), "no {needle:?} in:\n{}", r.text);
    }
    assert!(
        listed_names(&home).is_empty(),
        "the fragile tool was stored"
    );

    let r = server
        .call_result(
            "create_tool",
            json!({"name": "initial", "code": initial_tool(false), "verify": "always"}),
        )
        .unwrap();
    assert!(
        r.is_error && r.text.contains("verify must be \"quick\""),
        "{}",
        r.text
    );

    // The same code with "quick": not probed, mounted, and the result says so.
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "initial", "code": initial_tool(false), "verify": "quick"}),
        )
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    let said = r.structured.as_ref().map(|s| s["robustness"].clone());
    assert_eq!(
        said,
        Some(json!("not probed: verify \"quick\" was asked for")),
        "{}",
        r.text
    );

    // Repaired, with the default: probed, and every probe answered.
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "initial", "code": initial_tool(true)}),
        )
        .unwrap();
    assert!(!r.is_error, "{}", r.text);
    let said = r
        .structured
        .as_ref()
        .and_then(|s| s["robustness"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        said.ends_with("edge-case probes answered without a crash"),
        "{said}: {}",
        r.text
    );
    eprintln!("created in {:?}: {said}", r.elapsed);
    // The probed process serves the first call.
    let e = server
        .call_result("initial__initial", json!({"text": ""}))
        .unwrap();
    assert!(e.is_error && e.text.contains("text is empty"), "{}", e.text);
    assert_eq!(
        server
            .call_text("initial__initial", json!({"text": "xyz"}))
            .unwrap(),
        "x"
    );
    finish(server);
}

#[test]
fn the_same_code_again_is_unchanged_not_a_new_version() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let first = create_healthy(&mut server);
    let version = first.structured.as_ref().map(|s| s["version"].clone());
    let code = fixture(HEALTHY_FILE).unwrap();
    let again = |server: &mut Server, description: &str| {
        server
            .call_result(
                "create_tool",
                json!({
                    "name": HEALTHY,
                    "code": code,
                    "description": description,
                    "smoke_test": {"function": "add", "arguments": {"a": 1, "b": 2}},
                    "verify": "quick",
                }),
            )
            .unwrap()
    };
    let t0 = Instant::now();
    let same = again(&mut server, "a well-behaved tool");
    assert!(!same.is_error, "{}", same.text);
    assert!(
        same.text.starts_with("Unchanged: healthy v1"),
        "{}",
        same.text
    );
    let said = same.structured.clone().unwrap_or_default();
    assert_eq!(Some(said["version"].clone()), version, "{}", same.text);
    assert_eq!(said["unchanged"], json!(true), "{}", same.text);
    assert!(said["functions"].as_array().is_some_and(|f| !f.is_empty()));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let versions = std::fs::read_dir(home.path().join("tools").join(HEALTHY))
        .unwrap()
        .count();
    assert_eq!(versions, 1, "only v1 on disk");
    // Control: another description is another version.
    let other = again(&mut server, "a well-behaved tool, described anew");
    assert!(!other.is_error, "{}", other.text);
    assert!(
        other.text.starts_with("Created healthy v2"),
        "{}",
        other.text
    );
    assert_serves(&mut server, true, "two creates of healthy");
    finish(server);
}
