//! Tools built from tools (`USES`): a composite calls another tool's functions through its
//! channel and gets the answer redacted with the called tool's keys (the control: the same
//! tool called directly shows its key), up to redaction's documented limit (a called tool
//! that base64-encodes its own key hands it over); it reaches only what it declares (the
//! control: what it declares answers); a cycle is refused when it would be made (the control:
//! the same tools one way round are created); a quarantined dependency fails the composite's
//! call with the dependency's reason (the control: the same call before the quarantine
//! answers); once a composite is trusted, a rewrite that calls a function none of its trusted
//! versions called is refused at baseline before it runs (the control: the same rewrite
//! without the widening is created); a composite is forked from the template with its channel
//! like any tool (the control: forking off, it has a launcher of its own).

use super::{HEALTHY, create_healthy, listed, ok, refused, start, strict};
use autotool_tests::serve::{Sandbox, Serve, ServeHome, Server, fixture};
use autotool_tests::tool::{Mode, ToolBuilder};
use serde_json::json;

/// A value with a space, a slash and an `@`, as keys have.
const SECRET: &str = "uses-s3cr3t/v@lue 42";

/// Create `name` from `file` with `verify: quick`; the result's text.
fn create(server: &mut Server, name: &str, file: &str) -> Result<String, String> {
    create_code(server, name, &fixture(file).unwrap())
}

/// Create `name` from `code` with `verify: quick`; the result's text.
fn create_code(server: &mut Server, name: &str, code: &str) -> Result<String, String> {
    let created = server
        .call_result(
            "create_tool",
            json!({"name": name, "code": code, "verify": "quick"}),
        )
        .unwrap();
    if created.is_error {
        Err(created.text)
    } else {
        Ok(created.text)
    }
}

/// Create `name` from `file` with `from` replaced by `to`, which must be refused: why.
#[track_caller]
fn refused_variant(
    server: &mut Server,
    (name, file): (&str, &str),
    from: &str,
    to: &str,
) -> String {
    let code = fixture(file).unwrap();
    assert!(code.contains(from), "{file} holds no {from:?}");
    match create_code(server, name, &code.replace(from, to)) {
        Ok(text) => panic!("{name} was created: {text}"),
        Err(why) => why,
    }
}

#[track_caller]
fn created(server: &mut Server, name: &str, file: &str) {
    if let Err(text) = create(server, name, file) {
        panic!("creating {name} failed: {text}{}", server.context());
    }
}

/// A server holding [`SECRET`] as `USES_KEY`, granting declared keys without asking, with
/// `keyed` and `composite` (which uses it) created.
fn keyed_and_composite(serve: Serve) -> (ServeHome, Server) {
    let home = ServeHome::new().unwrap();
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("USES_KEY", SECRET);
    let mut server = start(&serve, &home);
    created(&mut server, "keyed", "uses_keyed.py");
    created(&mut server, "composite", "uses_composite.py");
    (home, server)
}

#[test]
fn a_composite_gets_the_answer_of_the_tool_it_calls_without_its_key() {
    let Some(serve) = strict() else { return };
    let (home, mut server) = keyed_and_composite(serve);

    // The composite reverses what it got: had it seen the key, the host would see the key
    // reversed, a form no redactor looks for.
    let reversed = server.call_text("composite__relay", json!({})).unwrap();
    let got: String = reversed.chars().rev().collect();
    assert_eq!(got, "key=[REDACTED:USES_KEY]", "{reversed}");
    let backwards: String = SECRET.chars().rev().collect();
    assert!(!reversed.contains(&backwards) && !reversed.contains(SECRET));
    // What redaction does not cover (docs/keys.md, docs/lifecycle.md): keyed encodes its own
    // key in base64, a form no redactor reads, and its caller decodes it: the composite holds
    // the key (shown reversed, so the host's own redaction leaves it be).
    let decoded = server
        .call_text("composite__relay_decoded", json!({}))
        .unwrap();
    let got: String = decoded.chars().rev().collect();
    assert_eq!(got, format!("key={SECRET}"), "{decoded}");
    // Structured answers come back as values; the called tool's calls are its own ledger rows.
    assert_eq!(
        server
            .call_text("composite__fourth", json!({"x": 3}))
            .unwrap(),
        "81"
    );
    let keyed = listed(&home, "keyed");
    assert!(
        keyed["calls"].as_u64().unwrap_or(0) >= 3,
        "keyed's own calls are not in the ledger: {keyed}"
    );

    // The control: keyed itself, called directly with the key, says it.
    let mut direct = ToolBuilder::new("attack_tool.py")
        .unwrap()
        .with_file(
            "uses_keyed.py",
            fixture("uses_keyed.py").unwrap().as_bytes(),
        )
        .unwrap();
    direct.policy_mut().tool_file = "uses_keyed.py".into();
    direct
        .policy_mut()
        .env
        .insert("USES_KEY".into(), SECRET.into());
    let mut direct = direct.start(Mode::Control).unwrap();
    direct.initialize().unwrap();
    let said = direct.call_text("reveal", json!({})).unwrap();
    assert_eq!(said, format!("key={SECRET}"));
    super::finish(server);
}

#[test]
fn a_composite_is_forked_from_the_template_and_its_channel_goes_with_it() {
    let Some(serve) = strict() else { return };
    if super::fork::skip_without_template() {
        return;
    }
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("USES_KEY", SECRET);
    for forking in [true, false] {
        let home = ServeHome::new().unwrap();
        let serve = if forking {
            serve.clone()
        } else {
            serve.clone().env("AUTOTOOL_FORK_TOOLS", "off")
        };
        let mut server = start(&serve, &home);
        let template = forking.then(|| super::fork::template_of(&mut server));
        created(&mut server, "keyed", "uses_keyed.py");
        created(&mut server, "composite", "uses_composite.py");
        // The channel works: the called tool's answer, redacted, reversed by the composite.
        let reversed = server.call_text("composite__relay", json!({})).unwrap();
        let got: String = reversed.chars().rev().collect();
        assert_eq!(got, "key=[REDACTED:USES_KEY]", "{reversed}");
        let (templates, tools) = super::fork::launchers(&server);
        if let Some(template) = template {
            assert_eq!(templates, vec![template], "{}", server.context());
            assert!(
                tools.is_empty(),
                "a tool started through a launcher of its own with a template ready: \
                 {tools:?}{}",
                server.context()
            );
        } else {
            // The control: no template, both tools (the composite among them) launched.
            assert!(templates.is_empty(), "{}", server.context());
            assert!(tools.len() >= 2, "{tools:?}{}", server.context());
        }
        super::finish(server);
    }
}

#[test]
fn a_composite_reaches_only_the_functions_it_declares() {
    let Some(serve) = strict() else { return };
    let (home, mut server) = keyed_and_composite(serve);
    create_healthy(&mut server);

    // The control: a declared function answers through the same call.
    let declared = server.call_text("composite__reach", json!({"name": "keyed__square"}));
    // (`reach` passes a=1, b=2, which square refuses: the refusal is keyed's own answer.)
    let declared = declared.unwrap_err().to_string();
    assert!(
        declared.contains("keyed__square answered with an error"),
        "{declared}"
    );
    // A mounted function it does not declare, one of the built-ins, and a name that is no
    // function at all: refused by autotool, naming what it may call.
    let calls_before = listed(&home, HEALTHY)["calls"].clone();
    for name in ["healthy__add", "run_tool", "create_tool", "keyed__nothing"] {
        let r = server
            .call_result("composite__reach", json!({"name": name}))
            .unwrap();
        assert!(r.is_error, "{name}: {}", r.text);
        assert!(
            r.text
                .contains("may call only the functions it declares in USES")
                && r.text.contains("keyed__reveal, keyed__square"),
            "{name}: {}",
            r.text
        );
    }
    let healthy = listed(&home, HEALTHY);
    assert_eq!(
        healthy["calls"], calls_before,
        "healthy was called: {healthy}"
    );

    // USES naming a function that is not mounted is refused when the tool is created.
    let refused = refused_variant(
        &mut server,
        ("composite2", "uses_composite.py"),
        "\"keyed__square\"]",
        "\"keyed__cube\"]",
    );
    assert!(refused.contains("keyed has no function cube"), "{refused}");
    super::finish(server);
}

/// A strict server with the healthy fixture and `adder`, which uses `healthy__add`.
fn healthy_and_adder() -> Option<(ServeHome, Server)> {
    let serve = strict()?;
    let home = ServeHome::new().unwrap();
    let mut server = start(&serve, &home);
    create_healthy(&mut server);
    created(&mut server, "adder", "uses_on_healthy.py");
    Some((home, server))
}

#[test]
fn a_cycle_between_tools_is_refused_when_it_would_be_made() {
    // The control: adder uses healthy, one way round.
    let Some((_home, mut server)) = healthy_and_adder() else {
        return;
    };
    assert_eq!(
        server
            .call_text("adder__plus", json!({"a": 2, "b": 3}))
            .unwrap(),
        "5"
    );
    // healthy rewritten to call adder back: a cycle.
    let refused = refused_variant(
        &mut server,
        (HEALTHY, "healthy.py"),
        "\nmcp = MCPServer",
        "\nUSES = [\"adder__plus\"]\nmcp = MCPServer",
    );
    assert!(
        refused.contains("declarations") && refused.contains("cycle: healthy → adder → healthy"),
        "{refused}"
    );
    // Nothing changed: adder still answers through the healthy that was.
    assert_eq!(
        server
            .call_text("adder__plus", json!({"a": 4, "b": 5}))
            .unwrap(),
        "9"
    );
    // A tool calling itself is a cycle too.
    let refused = refused_variant(
        &mut server,
        ("loop", "uses_on_healthy.py"),
        "healthy__add",
        "loop__plus",
    );
    assert!(refused.contains("cycle: loop → loop"), "{refused}");
    super::finish(server);
}

#[test]
fn a_quarantined_dependency_fails_the_composites_calls_with_its_reason() {
    let Some((home, mut server)) = healthy_and_adder() else {
        return;
    };
    // The control: before the quarantine the call answers.
    let before = server.call_result("adder__plus", json!({"a": 1, "b": 2}));
    assert_eq!(ok(&Ok(before.unwrap())).text, "3");

    for _ in 0..3 {
        let r = server
            .call_result("healthy__crash", json!({"status": 3}))
            .unwrap();
        assert!(r.is_error, "{}", r.text);
    }
    assert_eq!(listed(&home, HEALTHY)["state"], json!("quarantined"));
    let after = server.call("adder__plus", json!({"a": 1, "b": 2})).unwrap();
    let text = &refused(&after).text;
    assert!(
        text.contains("healthy__add cannot be called: healthy is quarantined")
            && text.contains("3 failures in a row"),
        "{text}"
    );
    super::finish(server);
}

/// `adder` (`uses_on_healthy.py`) rewritten: its docstring changed and, with `widen`, a call of
/// `healthy__echo` added to `plus` and to its USES.
fn adder_rewrite(widen: bool) -> String {
    let code = fixture("uses_on_healthy.py").unwrap();
    let (doc, uses, body) = (
        "\"\"\"a + b, by healthy.",
        "USES = [\"healthy__add\"]",
        "    return str(call(\"healthy__add\", a=a, b=b))",
    );
    for part in [doc, uses, body] {
        assert!(code.contains(part), "uses_on_healthy.py holds no {part:?}");
    }
    let code = code.replace(doc, "\"\"\"The sum of a and b, by healthy.");
    if !widen {
        return code;
    }
    code.replace(uses, "USES = [\"healthy__add\", \"healthy__echo\"]")
        .replace(
            body,
            &format!("    call(\"healthy__echo\", text=\"widened\")\n{body}"),
        )
}

/// Create `adder` from `code` with a smoke test of `plus`; the result.
fn rewrite(server: &mut Server, code: &str) -> Result<String, String> {
    let created = server
        .call_result(
            "create_tool",
            json!({"name": "adder", "code": code, "verify": "quick",
                   "smoke_test": {"function": "plus", "arguments": {"a": 20, "b": 22}}}),
        )
        .unwrap();
    if created.is_error {
        Err(created.text)
    } else {
        Ok(created.text)
    }
}

#[test]
fn a_rewrite_that_widens_a_trusted_composites_uses_is_refused_at_baseline() {
    let Some((home, mut server)) = healthy_and_adder() else {
        return;
    };
    let cli = |args: &[&str]| {
        let (status, stdout, stderr) = home.cli(args).unwrap();
        assert!(status.success(), "autotool {args:?}: {stderr}");
        stdout
    };
    // On probation nothing binds it yet.
    assert!(
        cli(&["tools", "show", "adder"]).contains("uses baseline: not yet (no version trusted)")
    );
    // Five successful calls: adder v1 is trusted, and what it calls is its uses baseline.
    for _ in 0..5 {
        assert_eq!(
            server
                .call_text("adder__plus", json!({"a": 1, "b": 2}))
                .unwrap(),
            "3"
        );
    }
    let shown = cli(&["tools", "show", "adder"]);
    assert!(
        shown.contains("current version: 1 (active)")
            && shown.contains("uses baseline: healthy__add (what its trusted versions call"),
        "{shown}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&cli(&["tools", "show", "adder", "--json"])).unwrap();
    assert_eq!(json["uses_baseline"], json!(["healthy__add"]));
    let owed = cli(&["tools", "baseline", "adder"]);
    assert!(owed.contains("uses baseline: healthy__add"), "{owed}");
    // An agent reads it too, before it writes a rewrite.
    let info = server
        .call_result("tool_info", json!({"name": "adder"}))
        .unwrap();
    assert_eq!(
        info.structured.as_ref().map(|s| s["uses_baseline"].clone()),
        Some(json!(["healthy__add"])),
        "{}",
        info.text
    );

    // The rewrite that also calls healthy__echo: refused at baseline, before it ran (its smoke
    // test would have called healthy twice).
    let calls_before = listed(&home, HEALTHY)["calls"].clone();
    let refused = rewrite(&mut server, &adder_rewrite(true)).unwrap_err();
    assert!(
        refused.contains("verification failed at baseline")
            && refused.contains("it adds healthy__echo (they called only healthy__add)")
            && refused.contains("remove healthy__echo from USES"),
        "{refused}"
    );
    assert_eq!(listed(&home, HEALTHY)["calls"], calls_before);
    assert!(cli(&["tools", "show", "adder"]).contains("current version: 1 (active)"));

    // The control: the same rewrite without the widening is verified (its smoke test calls
    // healthy through the channel) and becomes v2.
    if let Err(text) = rewrite(&mut server, &adder_rewrite(false)) {
        panic!(
            "the rewrite within the baseline was refused: {text}{}",
            server.context()
        );
    }
    assert!(cli(&["tools", "show", "adder"]).contains("current version: 2 (probation)"));
    assert_ne!(listed(&home, HEALTHY)["calls"], calls_before);
    assert_eq!(
        server
            .call_text("adder__plus", json!({"a": 4, "b": 5}))
            .unwrap(),
        "9"
    );
    super::finish(server);
}

#[test]
fn the_channel_works_unconfined_too() {
    let (_home, mut server) = keyed_and_composite(Serve::new(Sandbox::Off));
    let reversed = server.call_text("composite__relay", json!({})).unwrap();
    assert_eq!(
        reversed.chars().rev().collect::<String>(),
        "key=[REDACTED:USES_KEY]"
    );
    assert_eq!(
        server
            .call_text("composite__fourth", json!({"x": 2}))
            .unwrap(),
        "16"
    );
    let r = server
        .call_result("composite__reach", json!({"name": "keyed__nothing"}))
        .unwrap();
    assert!(
        r.is_error && r.text.contains("declares in USES"),
        "{}",
        r.text
    );
    super::finish(server);
}
