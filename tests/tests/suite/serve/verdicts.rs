//! Verdicts no tool author writes, end to end through `create_tool`: a function answering one
//! constant to every input is refused (`non_degenerate`); one answering the same arguments
//! differently is refused (`deterministic`) unless it declares so in `NONDETERMINISTIC`, where
//! the difference is recorded; each entry of `EXAMPLES` is called and must give its `expect`.
//! And the baseline: once a version is trusted (promoted to active), what it met is owed by every
//! later version, omitted or not, until the user drops it. Each refusal has its control: the
//! same tool, made right, is created, and `autotool tools show` lists the verdicts behind it.

use super::{finish, start, strict};
use autotool_tests::serve::{ServeHome, Server};
use serde_json::{Value, json};

/// A tool named `name` whose one function is `def {signature}:` with `body` (indented), after
/// `header` (declarations) at the top level.
fn tool(name: &str, header: &str, signature: &str, body: &str) -> String {
    format!(
        "import itertools\n\
         from mcp.server.mcpserver import MCPServer\n\
         {header}\n\
         mcp = MCPServer({name:?})\n\
         _count = itertools.count()\n\
         \n\
         @mcp.tool()\n\
         def {signature}:\n\
         \x20   {body}\n\
         \n\
         if __name__ == \"__main__\":\n\
         \x20   mcp.run()\n"
    )
}

fn create(server: &mut Server, name: &str, code: &str) -> (bool, String, Option<Value>) {
    let r = server
        .call_result("create_tool", json!({"name": name, "code": code}))
        .unwrap();
    (r.is_error, r.text, r.structured)
}

/// The verdicts `create_tool` reported, as `function: label outcome`.
fn verdicts(structured: &Option<Value>) -> Vec<String> {
    structured
        .as_ref()
        .and_then(|s| s["verdicts"].as_array())
        .map(|vs| {
            vs.iter()
                .map(|v| {
                    let label = match v["example"].as_u64() {
                        Some(n) => format!("{} {n}", v["check"].as_str().unwrap_or("")),
                        None => v["check"].as_str().unwrap_or("").to_string(),
                    };
                    format!(
                        "{}: {label} {}",
                        v["function"].as_str().unwrap_or(""),
                        v["outcome"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn show(home: &ServeHome, name: &str) -> String {
    let (status, out, err) = home.cli(&["tools", "show", name]).unwrap();
    assert!(status.success(), "tools show {name}: {err}");
    out
}

#[test]
fn a_constant_answer_to_every_input_is_refused() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);

    let constant = tool(
        "weather",
        "",
        "forecast(city: str) -> str",
        "return 'sunny'",
    );
    let (failed, text, _) = create(&mut server, "weather", &constant);
    assert!(failed, "a constant answer was mounted: {text}");
    for needle in [
        "verification failed at robustness",
        "verdict non_degenerate failed for forecast",
        "\"sunny\"",
        "distinct inputs",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }

    // Control: the same function answering according to its argument is created.
    let honest = tool(
        "weather",
        "",
        "forecast(city: str) -> str",
        "return 'sunny in ' + city",
    );
    let (failed, text, structured) = create(&mut server, "weather", &honest);
    assert!(!failed, "{text}");
    let got = verdicts(&structured);
    assert!(
        got.contains(&"forecast: non_degenerate passed".to_string())
            && got.contains(&"forecast: deterministic passed".to_string()),
        "{got:?}"
    );
    let shown = show(&home, "weather");
    assert!(shown.contains("verdicts:"), "{shown}");
    assert!(shown.contains("forecast: non_degenerate passed"), "{shown}");
    finish(server);
}

#[test]
fn an_acknowledgement_with_a_declared_side_effect_is_created() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);

    // notify(msg) -> "sent", undeclared: refused as constant, told how to declare it.
    let undeclared = tool("notifier", "", "notify(msg: str) -> str", "return 'sent'");
    let (failed, text, _) = create(&mut server, "notifier", &undeclared);
    assert!(failed, "an undeclared constant answer was mounted: {text}");
    assert!(
        text.contains("verdict non_degenerate failed for notify") && text.contains("readOnlyHint"),
        "{text}"
    );

    // The same function declaring its side effect is an acknowledgement.
    let declared = undeclared
        .replace(
            "from mcp.server.mcpserver import MCPServer\n",
            "from mcp.server.mcpserver import MCPServer\nfrom mcp.types import ToolAnnotations\n",
        )
        .replace(
            "@mcp.tool()",
            "@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False))",
        );
    assert_ne!(declared, undeclared);
    let (failed, text, structured) = create(&mut server, "notifier", &declared);
    assert!(!failed, "{text}");
    assert!(
        verdicts(&structured).contains(&"notify: non_degenerate passed".to_string()),
        "{:?}",
        verdicts(&structured)
    );
    assert!(text.contains("an acknowledgement"), "{text}");
    finish(server);
}

#[test]
fn a_different_answer_to_the_same_call_is_refused_unless_declared() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);

    let body = "return str(next(_count)) + ':' + text";
    let undeclared = tool("ticker", "", "tick(text: str) -> str", body);
    let (failed, text, _) = create(&mut server, "ticker", &undeclared);
    assert!(failed, "an undeclared difference was mounted: {text}");
    for needle in [
        "verdict deterministic failed for tick",
        "answered",
        "and then",
        "NONDETERMINISTIC = [\"tick\"]",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }

    // Control: declared, the difference is recorded and the tool is created.
    let declared = tool(
        "ticker",
        "NONDETERMINISTIC = [\"tick\"]",
        "tick(text: str) -> str",
        body,
    );
    let (failed, text, structured) = create(&mut server, "ticker", &declared);
    assert!(!failed, "{text}");
    let got = verdicts(&structured);
    assert!(
        got.contains(&"tick: deterministic recorded".to_string()),
        "{got:?}"
    );
    let shown = show(&home, "ticker");
    assert!(
        shown.contains("tick: deterministic recorded") && shown.contains("NONDETERMINISTIC"),
        "{shown}"
    );
    finish(server);
}

#[test]
fn every_declared_example_is_checked() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let examples = "EXAMPLES = [\n    {\"function\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}, \"expect\": 5},\n    {\"function\": \"add\", \"arguments\": {\"a\": -1, \"b\": 1}, \"expect\": 0},\n]";

    let wrong = tool(
        "adder",
        examples,
        "add(a: int, b: int) -> int",
        "return a - b",
    );
    let (failed, text, _) = create(&mut server, "adder", &wrong);
    assert!(failed, "a broken example was mounted: {text}");
    for needle in [
        "verification failed at examples",
        "verdict example 1 failed for add",
        "expected 5, got -1",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }

    // A malformed declaration is a declarations failure with the expected form.
    let malformed = tool(
        "adder",
        "EXAMPLES = [{\"function\": itertools}]",
        "add(a: int, b: int) -> int",
        "return a + b",
    );
    let (failed, text, _) = create(&mut server, "adder", &malformed);
    assert!(failed, "{text}");
    assert!(
        text.contains("verification failed at declarations")
            && text.contains("`itertools` is a name")
            && text.contains("EXAMPLES = [{"),
        "{text}"
    );

    // An example naming a function the tool lacks.
    let stray = tool(
        "adder",
        "EXAMPLES = [{\"function\": \"sub\", \"arguments\": {}, \"expect\": 0}]",
        "add(a: int, b: int) -> int",
        "return a + b",
    );
    let (failed, text, _) = create(&mut server, "adder", &stray);
    assert!(
        failed && text.contains("names the function \"sub\""),
        "{text}"
    );

    // Control: right, both examples pass and are on record.
    let right = tool(
        "adder",
        examples,
        "add(a: int, b: int) -> int",
        "return a + b",
    );
    let (failed, text, structured) = create(&mut server, "adder", &right);
    assert!(!failed, "{text}");
    let got = verdicts(&structured);
    for want in ["add: example 1 passed", "add: example 2 passed"] {
        assert!(got.contains(&want.to_string()), "{want}: {got:?}");
    }
    let shown = show(&home, "adder");
    assert!(
        shown.contains("add: example 2 passed (answered 0)"),
        "{shown}"
    );
    finish(server);
}

/// Call `name__function` until the tool's current version is promoted to active.
fn promote(server: &mut Server, home: &ServeHome, mounted: &str, arguments: Value, tool: &str) {
    for _ in 0..5 {
        let r = server.call_result(mounted, arguments.clone()).unwrap();
        assert!(!r.is_error, "{}", r.text);
    }
    let shown = show(home, tool);
    assert!(
        shown.contains("(active)"),
        "{tool} was not promoted:\n{shown}"
    );
}

#[test]
fn a_rewrite_owes_what_a_trusted_version_did() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    let v1 = tool(
        "greeter",
        "",
        "greet(name: str) -> str",
        "return 'Hello, ' + name + '!'",
    );
    let smoke = json!({"function": "greet", "arguments": {"name": "Ada"}});
    let r = server
        .call_result(
            "create_tool",
            json!({"name": "greeter", "code": v1, "smoke_test": smoke}),
        )
        .unwrap();
    assert!(!r.is_error, "{}", r.text);

    // On probation, nothing is owed yet: a rewrite that answers otherwise is created.
    let (out, _) = baseline(&home, &[]);
    assert!(out.contains("owes nothing yet"), "{out}");
    promote(
        &mut server,
        &home,
        "greeter__greet",
        json!({"name": "Bo"}),
        "greeter",
    );
    let (out, _) = baseline(&home, &[]);
    for needle in [
        "smoke_test greet({\"name\":\"Ada\"}) from v1 → \"Hello, Ada!\"",
        "deterministic greet",
        "non_degenerate greet",
    ] {
        assert!(out.contains(needle), "no {needle:?} in:\n{out}");
    }

    // A rewrite answering the smoke test otherwise is refused, even without a smoke test of
    // its own (the baseline only grows), showing the old answer and the new one.
    let v2 = tool(
        "greeter",
        "",
        "greet(name: str) -> str",
        "return 'Hi ' + name",
    );
    let (failed, text, _) = create(&mut server, "greeter", &v2);
    assert!(failed, "a regression was mounted: {text}");
    for needle in [
        "verification failed at baseline",
        "smoke_test greet({\"name\":\"Ada\"}) from v1",
        "v1 answered \"Hello, Ada!\"",
        "this version answers \"Hi Ada\"",
        "autotool tools baseline greeter --drop",
    ] {
        assert!(text.contains(needle), "no {needle:?} in:\n{text}");
    }

    // Nor can it escape determinism by declaring the function NONDETERMINISTIC.
    let v2b = tool(
        "greeter",
        "NONDETERMINISTIC = [\"greet\"]",
        "greet(name: str) -> str",
        "return 'Hello, ' + name + '!'",
    );
    let (failed, text, _) = create(&mut server, "greeter", &v2b);
    assert!(failed, "{text}");
    assert!(
        text.contains("deterministic greet") && text.contains("does not drop that"),
        "{text}"
    );

    // Control: a rewrite meeting the baseline is created, and its verdicts say so.
    let v3 = tool(
        "greeter",
        "",
        "greet(name: str) -> str",
        "return 'Hello, ' + name.strip() + '!'",
    );
    let (failed, text, structured) = create(&mut server, "greeter", &v3);
    assert!(!failed, "{text}");
    assert!(
        verdicts(&structured)
            .iter()
            .filter(|v| v.starts_with("greet: baseline passed"))
            .count()
            >= 3,
        "{:?}",
        verdicts(&structured)
    );

    // The user drops the smoke test's obligation (an audit event): the change is then allowed.
    let rows: Value = serde_json::from_str(&baseline(&home, &["--json"]).0).unwrap();
    let id = rows
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["check"] == "smoke_test"))
        .and_then(|r| r["id"].as_i64())
        .expect("the smoke test's obligation");
    let (out, _) = baseline(
        &home,
        &["--drop", &id.to_string(), "--why", "a shorter greeting"],
    );
    assert!(out.contains(&format!("Dropped obligation #{id}")), "{out}");
    let (failed, text, _) = create(&mut server, "greeter", &v2);
    assert!(!failed, "{text}");
    let shown = show(&home, "greeter");
    assert!(
        shown.contains("obligation_dropped") && shown.contains("a shorter greeting"),
        "{shown}"
    );
    finish(server);
}

/// `autotool tools baseline greeter ARGS…`: stdout and stderr, after success.
fn baseline(home: &ServeHome, args: &[&str]) -> (String, String) {
    let mut all = vec!["tools", "baseline", "greeter"];
    all.extend_from_slice(args);
    let (status, out, err) = home.cli(&all).unwrap();
    assert!(status.success(), "tools baseline {args:?}: {err}");
    (out, err)
}
