//! Consent per tool × key through `autotool serve`, end to end, in both protocol eras:
//! - an older host that can ask gets a form elicitation naming the tool, the key and where it
//!   may go; a yes grants it, a no leaves nothing running with it;
//! - re-asking follows the rules: with an allowlist a rewrite is not asked again, but declaring
//!   another key or widening the list is; without an allowlist every new version is asked;
//! - a 2026-07-28 host gets `input_required` with a sealed `requestState`, bound to the call and
//!   spent by its first use (a replay, a tampered state or other arguments are refused);
//! - a host that cannot ask gets the command for the user; `autotool tools approve` and
//!   `revoke` take effect on the next call of the running server; removing a tool revokes;
//! - two tools holding different keys reach only their own key's hosts.

use super::keys::{SECRET, TOOL, fake_api};
use super::{asking, finish, never, no, ok, refused, start, strict, yes};
use autotool_tests::serve::{CallResult, RpcError, Serve, ServeHome, Server};
use serde_json::{Value, json};
use std::time::Duration;

/// A strict server holding `FAKE_API_KEY` (and any `extra` keys), its tool pointed at a fake API
/// on loopback, started as an older host that can ask.
fn legacy(home: &ServeHome, extra: &[(&str, &str)]) -> Option<Server> {
    let serve = strict()?;
    let port = fake_api();
    let mut serve = serve
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{port}"));
    for (k, v) in extra {
        serve = serve.env(k, v);
    }
    let mut server = serve.start(home).unwrap();
    server.initialize_with(asking()).unwrap();
    Some(server)
}

fn message(question: &Value) -> String {
    question["message"].as_str().unwrap_or("").to_string()
}

fn create(
    server: &mut Server,
    code: &str,
    answer: fn(&Value) -> Value,
) -> (Result<CallResult, RpcError>, Vec<Value>) {
    server
        .call_answering("create_tool", json!({"name": "fake", "code": code}), answer)
        .unwrap()
}

/// The fake API answered with the key: the call reached it holding the key (arriving redacted).
#[track_caller]
fn assert_key_reached(text: &str) {
    assert!(text.contains("line=GET /echo?key="), "{text}");
    assert!(
        text.contains("[REDACTED:FAKE_API_KEY]"),
        "the key did not reach the API: {text}"
    );
    assert!(
        !text.contains("s3cr3t"),
        "the key reached the model: {text}"
    );
}

/// Wait until the running server has reread the key files (its poll interval is 0.5 s).
fn let_the_server_notice() {
    std::thread::sleep(Duration::from_millis(1500));
}

fn events(home: &ServeHome, tool: &str) -> String {
    let (_, out, err) = home.cli(&["tools", "show", tool, "--json"]).unwrap();
    format!("{out}{err}")
}

#[test]
fn an_older_host_is_asked_and_rewrites_under_an_allowlist_are_not() {
    let home = ServeHome::new().unwrap();
    let (status, out, err) = home
        .cli(&["keys", "allow", "FAKE_API_KEY", "api.example.com"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    let Some(mut server) = legacy(&home, &[("OTHER_API_KEY", "another-secret-value")]) else {
        return;
    };

    // First use: asked, with the tool, the key and where it may go; never a value.
    let (outcome, asked) = create(&mut server, TOOL, yes);
    let created = ok(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = message(&asked[0]);
    assert!(q.contains("`fake`") && q.contains("FAKE_API_KEY"), "{q}");
    assert!(q.contains("only to api.example.com"), "{q}");
    assert!(!q.contains("s3cr3t"), "{q}");
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["allow"]["type"], "boolean",
        "{}",
        asked[0]
    );
    assert_eq!(
        created.structured.as_ref().unwrap()["keys_granted"],
        json!(["FAKE_API_KEY"])
    );
    let (echo, asked) = server
        .call_answering("fake__echo", json!({}), never)
        .unwrap();
    assert!(asked.is_empty());
    assert_key_reached(&ok(&echo).text);

    // A rewrite under the allowlist: not asked again.
    let v2 = format!("{TOOL}\n# v2\n");
    let (outcome, asked) = create(&mut server, &v2, never);
    assert!(ok(&outcome).text.contains("Created fake v2"));
    assert!(asked.is_empty());

    // Declaring another key: asked again, for both; a no leaves v2 mounted and nothing ran.
    let v3 = TOOL.replace(
        r#"REQUIRED_ENV = ["FAKE_API_KEY"]"#,
        r#"REQUIRED_ENV = ["FAKE_API_KEY", "OTHER_API_KEY"]"#,
    );
    assert_ne!(v3, TOOL);
    let (outcome, asked) = create(&mut server, &v3, no);
    let r = refused(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = message(&asked[0]);
    assert!(q.contains("FAKE_API_KEY and OTHER_API_KEY"), "{q}");
    assert!(q.contains("the tool now also wants OTHER_API_KEY"), "{q}");
    assert!(r.text.contains("Nothing ran with the key"), "{}", r.text);
    assert!(
        r.text
            .contains("`autotool tools approve fake FAKE_API_KEY`"),
        "{}",
        r.text
    );
    assert!(!r.text.contains("another-secret"), "{}", r.text);
    let (echo, _) = server
        .call_answering("fake__echo", json!({}), never)
        .unwrap();
    assert_key_reached(&ok(&echo).text);

    // Widening the list: the next call asks again.
    let (status, out, err) = home
        .cli(&[
            "keys",
            "allow",
            "FAKE_API_KEY",
            "api.example.com",
            "more.example.com",
        ])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    let_the_server_notice();
    let (echo, asked) = server.call_answering("fake__echo", json!({}), yes).unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = message(&asked[0]);
    assert!(q.contains("allowlist was widened"), "{q}");
    assert!(q.contains("api.example.com, more.example.com"), "{q}");
    assert_key_reached(&ok(&echo).text);

    // Narrowing it again is not a question.
    let (status, _, _) = home
        .cli(&["keys", "allow", "FAKE_API_KEY", "api.example.com"])
        .unwrap();
    assert!(status.success());
    let_the_server_notice();
    let (echo, asked) = server
        .call_answering("fake__echo", json!({}), never)
        .unwrap();
    assert!(asked.is_empty());
    assert_key_reached(&ok(&echo).text);
    finish(server);

    let shown = events(&home, "fake");
    for kind in ["consent_asked", "consent_granted", "consent_declined"] {
        assert!(shown.contains(kind), "no {kind} event: {shown}");
    }
    assert!(!shown.contains("s3cr3t"), "{shown}");
}

#[test]
fn without_an_allowlist_every_new_version_is_asked() {
    let home = ServeHome::new().unwrap();
    let Some(mut server) = legacy(&home, &[]) else {
        return;
    };
    let (outcome, asked) = create(&mut server, TOOL, yes);
    ok(&outcome);
    assert_eq!(asked.len(), 1);
    let q = message(&asked[0]);
    assert!(q.contains("to any host: it has no allowlist"), "{q}");

    let v2 = format!("{TOOL}\n# v2\n");
    let (outcome, asked) = create(&mut server, &v2, yes);
    ok(&outcome);
    assert_eq!(
        asked.len(),
        1,
        "a new version without an allowlist was not asked"
    );
    let q = message(&asked[0]);
    assert!(q.contains("Asked again (FAKE_API_KEY: new code"), "{q}");

    // Code already approved once is not asked again.
    let (outcome, asked) = create(&mut server, TOOL, never);
    ok(&outcome);
    assert!(asked.is_empty());
    let (echo, _) = server
        .call_answering("fake__echo", json!({}), never)
        .unwrap();
    assert_key_reached(&ok(&echo).text);
    finish(server);
}

/// `create_tool`'s arguments for tool `name` with `code`.
fn create_args(name: &str, code: &str) -> Value {
    json!({"name": name, "code": code})
}

fn modern_create(server: &mut Server, args: &Value, capabilities: Value, extra: Value) -> Value {
    match server
        .call_modern("create_tool", args.clone(), capabilities, extra)
        .unwrap()
    {
        Ok(result) => result,
        Err(e) => panic!("create_tool got a JSON-RPC error: {e}"),
    }
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn a_2026_host_answers_input_required_once() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let port = fake_api();
    let serve: Serve = serve
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{port}"));
    let mut server = serve.start(&home).unwrap();
    let args = create_args("fake", TOOL);

    let asked = modern_create(&mut server, &args, asking(), json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let request = &asked["inputRequests"]["consent"];
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    let q = request["params"]["message"].as_str().unwrap_or("");
    assert!(q.contains("`fake`") && q.contains("FAKE_API_KEY"), "{q}");
    assert!(!asked.to_string().contains("s3cr3t"), "{asked}");
    let state = asked["requestState"].as_str().unwrap().to_string();
    let answer = json!({"consent": {"action": "accept", "content": {"allow": true}}});

    // The state is bound to these arguments, and cannot be altered.
    let other_args = create_args("fake", &format!("{TOOL}\n# other\n"));
    let r = modern_create(
        &mut server,
        &other_args,
        asking(),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text_of(&r).contains("not issued by this autotool for this call"),
        "{r}"
    );
    let mut tampered = state.clone();
    let flip = if tampered.ends_with('A') { "B" } else { "A" };
    tampered.replace_range(tampered.len() - 1.., flip);
    let r = modern_create(
        &mut server,
        &args,
        asking(),
        json!({"inputResponses": answer, "requestState": tampered}),
    );
    assert_eq!(r["isError"], true, "{r}");

    // The right answer with the state: created, holding the key.
    let r = modern_create(
        &mut server,
        &args,
        asking(),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_ne!(r["isError"], true, "{}", text_of(&r));
    assert_eq!(
        r["structuredContent"]["keys_granted"],
        json!(["FAKE_API_KEY"]),
        "{r}"
    );

    // A replay of the same answer is refused, even though it would now change nothing.
    let r = modern_create(
        &mut server,
        &args,
        asking(),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("already used"), "{r}");

    // The approved tool answers a 2026 call without a question.
    let echo = server
        .call_modern("fake__echo", json!({}), asking(), json!({}))
        .unwrap()
        .unwrap();
    assert_key_reached(&text_of(&echo));

    // A no: nothing is created, and the agent is told the command.
    let args2 = create_args("fake_two", TOOL);
    let asked = modern_create(&mut server, &args2, asking(), json!({}));
    let state = asked["requestState"].as_str().unwrap().to_string();
    let r = modern_create(
        &mut server,
        &args2,
        asking(),
        json!({"inputResponses": {"consent": {"action": "decline"}}, "requestState": state}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        text_of(&r).contains("`autotool tools approve fake_two FAKE_API_KEY`"),
        "{r}"
    );

    // A 2026 host without elicitation is not asked: it gets the command.
    let r = modern_create(
        &mut server,
        &create_args("fake_three", TOOL),
        json!({}),
        json!({}),
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(text_of(&r).contains("cannot ask the user"), "{r}");
    assert!(
        text_of(&r).contains("`autotool tools approve fake_three FAKE_API_KEY`"),
        "{r}"
    );

    // A question the host never answers can still be answered with `tools approve`.
    let args4 = create_args("fake_four", TOOL);
    let asked = modern_create(&mut server, &args4, asking(), json!({}));
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let (status, out, err) = home
        .cli(&["tools", "approve", "fake_four", "FAKE_API_KEY"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    let r = modern_create(&mut server, &args4, asking(), json!({}));
    assert_ne!(r["isError"], true, "{}", text_of(&r));
    assert_eq!(
        r["structuredContent"]["keys_granted"],
        json!(["FAKE_API_KEY"]),
        "{r}"
    );
    finish(server);
    let shown = events(&home, "fake");
    assert!(shown.contains("consent_refused"), "{shown}");
}

#[test]
fn tools_approve_and_revoke_act_on_the_running_server() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    let port = fake_api();
    let serve = serve
        .env("FAKE_API_KEY", SECRET)
        .env("FAKE_API_BASE", &format!("http://localhost:{port}"));
    // A host that declares no elicitation.
    let mut server = start(&serve, &home);
    let args = create_args("fake", TOOL);
    let r = server.call_result("create_tool", args.clone()).unwrap();
    assert!(r.is_error);
    assert!(
        r.text
            .contains("then call create_tool again with the same code"),
        "{}",
        r.text
    );

    // Approving a key the tool does not declare, or a tool nobody asked about, fails.
    let (status, _, err) = home
        .cli(&["tools", "approve", "fake", "OTHER_API_KEY"])
        .unwrap();
    assert!(!status.success());
    assert!(err.contains("does not declare OTHER_API_KEY"), "{err}");
    let (status, _, err) = home
        .cli(&["tools", "approve", "nobody", "FAKE_API_KEY"])
        .unwrap();
    assert!(!status.success(), "{err}");

    let (status, out, err) = home
        .cli(&["tools", "approve", "fake", "FAKE_API_KEY"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("approved"), "{out}");
    let r = server.call_result("create_tool", args).unwrap();
    assert!(!r.is_error, "{}", r.text);
    assert_key_reached(&server.call_text("fake__echo", json!({})).unwrap());

    // Revoked: the next call is refused before the tool runs (its warm process held the key).
    let (status, out, err) = home
        .cli(&["tools", "revoke", "fake", "FAKE_API_KEY"])
        .unwrap();
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("revoked"), "{out}");
    let r = server.call_result("fake__echo", json!({})).unwrap();
    assert!(r.is_error, "{}", r.text);
    assert!(r.text.contains("consent needed"), "{}", r.text);
    assert!(!r.text.contains("line=GET"), "{}", r.text);

    // Approved again, it runs again; removed, its approvals go with it.
    let (status, _, _) = home
        .cli(&["tools", "approve", "fake", "FAKE_API_KEY"])
        .unwrap();
    assert!(status.success());
    let again = server.call_result("fake__echo", json!({})).unwrap();
    assert!(!again.is_error, "{}{}", again.text, server.context());
    assert_key_reached(&again.text);
    let (status, _, _) = home.cli(&["tools", "remove", "fake"]).unwrap();
    assert!(status.success());
    finish(server);
    let shown = events(&home, "fake");
    let parsed: Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(parsed["approvals"], json!([]), "{shown}");
    assert!(shown.contains("the tool was removed"), "{shown}");
    assert!(shown.contains("consent_revoked"), "{shown}");
}

const FETCHER: &str = r#"import os, urllib.request
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["NAME_API_KEY"]
mcp = MCPServer("fetcher")

@mcp.tool()
def fetch(host: str) -> str:
    try:
        return urllib.request.urlopen("http://" + host + "/", timeout=10).read().decode()
    except Exception as e:
        return "refused: " + str(e)

if __name__ == "__main__":
    mcp.run()
"#;

#[test]
fn two_tools_with_different_keys_reach_only_their_own_hosts() {
    let Some(serve) = strict() else { return };
    let home = ServeHome::new().unwrap();
    // Addresses from the documentation ranges: nothing is ever dialled there (the proxy refuses
    // reserved addresses after the allowlist passes them), so the test reaches no network.
    for (key, host) in [("A_API_KEY", "192.0.2.1"), ("B_API_KEY", "198.51.100.1")] {
        let (status, out, err) = home.cli(&["keys", "allow", key, host]).unwrap();
        assert!(status.success(), "{out}{err}");
    }
    let serve = serve
        .arg("--dangerously-allow-all-tools")
        .env("A_API_KEY", "value-of-a-0123")
        .env("B_API_KEY", "value-of-b-0123");
    let mut server = start(&serve, &home);
    for (tool, key) in [("tool_a", "A_API_KEY"), ("tool_b", "B_API_KEY")] {
        let r = server
            .call_result(
                "create_tool",
                create_args(tool, &FETCHER.replace("NAME_API_KEY", key)),
            )
            .unwrap();
        assert!(!r.is_error, "{}", r.text);
    }
    for (tool, key, own, other) in [
        ("tool_a", "A_API_KEY", "192.0.2.1", "198.51.100.1"),
        ("tool_b", "B_API_KEY", "198.51.100.1", "192.0.2.1"),
    ] {
        let theirs = server
            .call_text(&format!("{tool}__fetch"), json!({"host": other}))
            .unwrap();
        assert!(
            theirs.contains("403") && theirs.contains(key) && theirs.contains(other),
            "{tool} reached {other}: {theirs}"
        );
        // Control: its own host passes the allowlist (and is then refused only as a reserved
        // address), so the 403 above is the other key's list at work.
        let own_answer = server
            .call_text(&format!("{tool}__fetch"), json!({"host": own}))
            .unwrap();
        assert!(
            !own_answer.contains("may only be sent to"),
            "{tool}'s own host was refused by its list: {own_answer}"
        );
        assert!(own_answer.contains("reserved"), "{own_answer}");
    }
    finish(server);
}

/// A keyless tool reaching a declared host on the loopback and reading files by path.
fn reaching(port: u16, hosts: &str) -> String {
    format!(
        r#"import urllib.request
from mcp.server.mcpserver import MCPServer

REQUIRED_HOSTS = [{hosts}]
READ_DIRS = ["~/notes"]
mcp = MCPServer("fake")


@mcp.tool()
def get() -> str:
    """Fetch the declared API."""
    try:
        with urllib.request.urlopen("http://localhost:{port}/echo?key=none", timeout=10) as r:
            return r.read().decode()
    except Exception as e:
        return "REFUSED: " + str(e)


@mcp.tool()
def read(path: str) -> str:
    """Read a file."""
    try:
        with open(path) as f:
            return f.read()
    except Exception as e:
        return "UNREADABLE: " + type(e).__name__


if __name__ == "__main__":
    mcp.run()
"#
    )
}

#[test]
fn declared_reach_is_asked_once_by_name_and_mode_and_a_rewrite_that_widens_it_is_asked_again() {
    let Some(serve) = strict() else { return };
    // Not under /tmp, which the sandbox mounts itself (and so is never granted).
    let user = autotool_tests::host::scratch_dir("autotool-reach-").unwrap();
    std::fs::create_dir(user.path().join("notes")).unwrap();
    std::fs::write(user.path().join("notes/note.txt"), "hello notes").unwrap();
    std::fs::create_dir(user.path().join("private")).unwrap();
    std::fs::write(user.path().join("private/secret.txt"), "top secret").unwrap();
    let port = fake_api();
    let home = ServeHome::new().unwrap();
    let mut server = serve
        .env("HOME", &user.path().display().to_string())
        .start(&home)
        .unwrap();
    server.initialize_with(asking()).unwrap();
    let host = format!("\"localhost:{port}\"");
    let create = |server: &mut Server, code: &str, answer: fn(&Value) -> Value| {
        server
            .call_answering(
                "create_tool",
                json!({"name": "fake", "code": code, "verify": "quick"}),
                answer,
            )
            .unwrap()
    };

    // One question naming the host and the directory with its mode; yes grants both.
    let (outcome, asked) = create(&mut server, &reaching(port, &host), yes);
    ok(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = message(&asked[0]);
    assert!(
        q.contains(&format!("reach localhost:{port} without a key")) && q.contains("read ~/notes"),
        "{q}"
    );
    let (got, _) = server
        .call_answering("fake__get", json!({}), never)
        .unwrap();
    assert!(
        ok(&got).text.contains("line=GET /echo"),
        "{}",
        ok(&got).text
    );
    let note = user.path().join("notes/note.txt").display().to_string();
    let (read, _) = server
        .call_answering("fake__read", json!({"path": note}), never)
        .unwrap();
    assert_eq!(ok(&read).text, "hello notes", "{}", events(&home, "fake"));
    // The attack: a directory it did not declare.
    let secret = user.path().join("private/secret.txt").display().to_string();
    let (read, _) = server
        .call_answering("fake__read", json!({"path": secret}), never)
        .unwrap();
    assert!(
        ok(&read).text.starts_with("UNREADABLE"),
        "{}",
        ok(&read).text
    );

    // A rewrite within its reach asks nothing; one that widens it is asked about the new host.
    let (outcome, asked) = create(
        &mut server,
        &format!("{}\n# v2\n", reaching(port, &host)),
        never,
    );
    ok(&outcome);
    assert!(asked.is_empty());
    let wider = format!("{host}, \"api.example.com\"");
    let (outcome, asked) = create(&mut server, &reaching(port, &wider), no);
    let r = refused(&outcome);
    assert_eq!(asked.len(), 1, "{asked:?}");
    let q = message(&asked[0]);
    assert!(
        q.contains("reach api.example.com without a key") && !q.contains("~/notes"),
        "{q}"
    );
    assert!(
        r.text.contains("`autotool tools approve fake --reach`"),
        "{}",
        r.text
    );
    finish(server);
}
