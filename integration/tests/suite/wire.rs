//! The bytes on the wire, where a client library would hide them: what hosts depend on
//! (FIELD-NOTES: rmcp before 3.5.1 left `ttlMs`/`cacheScope` out of list results and Claude
//! Code then dropped the whole tool list), and malformed input no SDK client can send.
//!
//! Newline-delimited JSON-RPC straight into `autotool serve`'s stdin.

use autotool_integration::{Checks, Need, OwnedChild, TestHome, setup};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

const MODERN: &str = "2026-07-28";

struct Wire {
    serve: OwnedChild,
    /// Every line the server wrote, for failure messages.
    transcript: Vec<String>,
}

impl Wire {
    fn start(home: &TestHome) -> Wire {
        let s = &home.setup;
        let mut cmd = Command::new(&s.autotool);
        cmd.args(["serve", "--sandbox", &s.sandbox])
            .envs(home.env());
        Wire {
            serve: OwnedChild::spawn("autotool serve", cmd).unwrap(),
            transcript: Vec::new(),
        }
    }

    fn send(&mut self, line: &str) {
        self.transcript.push(format!(">> {line}"));
        self.serve.send_line(line).unwrap();
    }

    /// The response with `id` within `timeout` (other lines are kept in the transcript).
    fn response_within(&mut self, id: &Value, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.serve.next_line(left).unwrap()?;
            self.transcript.push(format!("<< {}", line.text));
            let v: Value = serde_json::from_str(&line.text).unwrap_or_else(|e| {
                panic!("stdout carried a non-JSON line ({e}): {:?}", line.text)
            });
            if v.get("id") == Some(id) {
                return Some(v);
            }
        }
    }

    /// The next line the server writes, as JSON, within `timeout`.
    fn next_json(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.serve.next_line(timeout).unwrap()?;
        self.transcript.push(format!("<< {}", line.text));
        Some(
            serde_json::from_str(&line.text).unwrap_or_else(|e| {
                panic!("stdout carried a non-JSON line ({e}): {:?}", line.text)
            }),
        )
    }

    fn response(&mut self, id: Value) -> Value {
        self.response_within(&id, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("no response to {id} within 30 s: {:#?}", self.transcript))
    }

    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        self.response(json!(id))
    }
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "autotool-wire-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

#[test]
fn wire_modern_lists_carry_cache_hints_and_bad_json_is_survived() {
    let test = "wire_modern_lists_carry_cache_hints_and_bad_json_is_survived";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut w = Wire::start(&home);

    let discover = w.request(1, "server/discover", json!({"_meta": modern_meta()}));
    let r = &discover["result"];
    let versions: Vec<&str> = r["supportedVersions"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    c.check(
        versions.contains(&MODERN) && versions.contains(&"2025-11-25"),
        "server/discover offers 2026-07-28 and 2025-11-25",
        &discover,
    );
    c.check(
        r["capabilities"]["tools"]["listChanged"] == true,
        "server/discover declares tools.listChanged",
        &discover,
    );

    let list = w.request(2, "tools/list", json!({"_meta": modern_meta()}));
    let r = &list["result"];
    c.check(
        r["ttlMs"].is_u64() && r["cacheScope"].is_string(),
        "a 2026-07-28 tools/list result carries ttlMs and cacheScope",
        &list,
    );
    c.check(
        r["resultType"] == "complete",
        "it carries resultType complete",
        &list,
    );
    let names: Vec<&str> = r["tools"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    c.check(
        names == ["create_tool", "run_tool", "search_tools", "tool_info"],
        "a fresh home lists create_tool, run_tool and search_tools",
        format!("{names:?}"),
    );

    // Bad JSON: a parse error, carrying the id it could still read, and the server keeps
    // serving.
    w.send("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/list\",");
    let parse_error = w.response_within(&json!(3), Duration::from_secs(3));
    c.check(
        parse_error
            .as_ref()
            .is_some_and(|e| e["error"]["code"] == -32700),
        "a line that is not JSON gets a -32700 parse error (JSON-RPC 2.0 §5.1) with the id it \
         names",
        format!("{parse_error:?} within 3 s"),
    );
    let again = w.request(4, "tools/list", json!({"_meta": modern_meta()}));
    c.check(
        again["result"]["tools"]
            .as_array()
            // The four built-ins: create_tool, run_tool, search_tools, tool_info.
            .is_some_and(|t| t.len() == 4),
        "the server keeps serving after a malformed line",
        &again,
    );
    let unknown = w.request(5, "no/such/method", json!({"_meta": modern_meta()}));
    c.check(
        unknown["error"]["code"] == -32601,
        "an unknown method gets -32601",
        &unknown,
    );

    w.serve.close_stdin();
    let exited = w.serve.wait_exit(Duration::from_secs(10)).unwrap();
    c.check(
        exited.is_some_and(|s| s.success()),
        "serve exits cleanly when its host closes stdin",
        format!("{exited:?}"),
    );
    let mut transcript = w.transcript.join("\n");
    let mut stderr = w.serve.final_stderr();

    // A host that only probes (server/discover, then disconnects) ends a normal session.
    let mut probe = Wire::start(&home);
    let discovered = probe.request(1, "server/discover", json!({"_meta": modern_meta()}));
    c.check(
        discovered["result"]["supportedVersions"].is_array(),
        "a second serve answers server/discover",
        &discovered,
    );
    probe.serve.close_stdin();
    let exited = probe.serve.wait_exit(Duration::from_secs(10)).unwrap();
    let probe_stderr = probe.serve.final_stderr();
    c.check(
        exited.is_some_and(|s| s.success()),
        "serve exits 0 when a host disconnects after server/discover alone",
        format!(
            "{exited:?}; stderr tail: {:?}",
            probe_stderr.lines().rev().take(2).collect::<Vec<_>>()
        ),
    );
    transcript.push_str(&format!("\n--- probe\n{}", probe.transcript.join("\n")));
    stderr.push_str(&format!("\n--- probe serve stderr\n{probe_stderr}"));
    c.finish(test, || {
        format!("transcript:\n{transcript}\nserve stderr:\n{stderr}")
    });
}

/// What a tools-only server answers for the rest of the protocol, in each era: `initialize` is
/// "method not found" for a 2026-07-28 host (that era removed it), `logging/setLevel` is
/// accepted in the 2025 eras and "method not found" in 2026-07-28, and reading a resource or
/// getting a prompt (there are none) is "not found" naming what was asked for, not "method not
/// found" for capabilities the server declares.
#[test]
fn wire_removed_methods_logging_and_unknown_resources_and_prompts_in_each_era() {
    let test = "wire_removed_methods_logging_and_unknown_resources_and_prompts_in_each_era";
    let Some(setup) = setup(test, &[Need::Serve, Need::PythonSdk]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();

    // 2026-07-28: no initialize; every request carries _meta.
    let mut m = Wire::start(&home);
    let init = m.request(1, "initialize", json!({"_meta": modern_meta()}));
    c.check(
        init["error"]["code"] == -32601
            && init["error"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("server/discover")),
        "2026-07-28: initialize is -32601 (removed), pointing at server/discover",
        &init,
    );
    let level = m.request(
        2,
        "logging/setLevel",
        json!({"_meta": modern_meta(), "level": "info"}),
    );
    c.check(
        level["error"]["code"] == -32601,
        "2026-07-28: logging/setLevel is -32601 (removed)",
        &level,
    );
    let read = m.request(
        3,
        "resources/read",
        json!({"_meta": modern_meta(), "uri": "test://nothing-here"}),
    );
    c.check(
        read["error"]["code"] == -32602 && read["error"]["data"]["uri"] == "test://nothing-here",
        "2026-07-28: resources/read of an unknown URI is -32602 with data.uri (SEP-2164)",
        &read,
    );
    let prompt = m.request(
        4,
        "prompts/get",
        json!({"_meta": modern_meta(), "name": "nothing_here"}),
    );
    c.check(
        prompt["error"]["code"] == -32602
            && prompt["error"]["message"]
                .as_str()
                .is_some_and(|s| s.contains("nothing_here")),
        "2026-07-28: prompts/get of an unknown prompt is -32602 naming it",
        &prompt,
    );
    for (id, method) in [(5, "prompts/list"), (6, "resources/list")] {
        let list = m.request(id, method, json!({"_meta": modern_meta()}));
        let r = &list["result"];
        let key = method.split('/').next().unwrap_or("");
        c.check(
            r[key].as_array().is_some_and(Vec::is_empty)
                && r["ttlMs"].is_u64()
                && r["cacheScope"].is_string(),
            &format!("2026-07-28: {method} is empty, with ttlMs and cacheScope"),
            &list,
        );
    }
    m.serve.close_stdin();
    let _ = m.serve.wait_exit(Duration::from_secs(10));
    let mut transcript = m.transcript.join("\n");

    // 2025-11-25: initialize, then the session's requests without _meta.
    let mut l = Wire::start(&home);
    let init = l.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "autotool-wire-test", "version": "0"}}),
    );
    c.check(
        init["result"]["protocolVersion"] == "2025-11-25"
            && init["result"]["capabilities"]["logging"].is_object(),
        "2025-11-25: initialize succeeds and declares logging",
        &init,
    );
    l.send(r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#);
    let level = l.request(2, "logging/setLevel", json!({"level": "warning"}));
    c.check(
        level["result"] == json!({}),
        "2025-11-25: logging/setLevel is accepted with {}",
        &level,
    );
    let read = l.request(3, "resources/read", json!({"uri": "test://nothing-here"}));
    c.check(
        read["error"]["code"] == -32002 && read["error"]["data"]["uri"] == "test://nothing-here",
        "2025-11-25: resources/read of an unknown URI is -32002 (resource not found) with data.uri",
        &read,
    );
    let prompt = l.request(4, "prompts/get", json!({"name": "nothing_here"}));
    c.check(
        prompt["error"]["code"] == -32602,
        "2025-11-25: prompts/get of an unknown prompt is -32602",
        &prompt,
    );
    let bad_init = l.request(5, "initialize", json!({"protocolVersion": 7}));
    c.check(
        bad_init["error"]["code"] == -32602,
        "2025-11-25: a malformed initialize is still -32602 naming the expected shape",
        &bad_init,
    );
    l.serve.close_stdin();
    let _ = l.serve.wait_exit(Duration::from_secs(10));
    transcript.push_str(&format!("\n--- legacy\n{}", l.transcript.join("\n")));
    let stderr = format!(
        "{}\n--- legacy serve\n{}",
        m.serve.final_stderr(),
        l.serve.final_stderr()
    );
    c.finish(test, || {
        format!("transcript:\n{transcript}\nserve stderr:\n{stderr}")
    });
}

/// Every malformed shape a client can send gets an answer it can match: the request's own id
/// wherever it can be read, `null` otherwise, a code and a message that says what was wrong;
/// a line over the 16 MiB limit gets an answer naming its size and the limit; and after all of
/// them the same serve still answers a well-formed request. Each shape is sent alone and its
/// answer awaited (3 s), so a shape that gets nothing fails by name.
#[test]
fn wire_every_malformed_message_gets_an_answer_the_client_can_match() {
    let test = "wire_every_malformed_message_gets_an_answer_the_client_can_match";
    let Some(setup) = setup(test, &[Need::Serve]) else {
        return;
    };
    let mut c = Checks::new();
    let home = TestHome::new(&setup).unwrap();
    let mut w = Wire::start(&home);
    let init = w.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "wire", "version": "0"}}),
    );
    c.check(
        init.get("result").is_some(),
        "initialize is answered",
        &init,
    );
    w.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // (what is sent, the id the answer must carry, its code, what its message must say)
    let shapes: Vec<(&str, String, Value, i64, &str)> = vec![
        (
            "{}",
            "{}".into(),
            Value::Null,
            -32600,
            "no JSON-RPC message",
        ),
        (
            "42",
            "42".into(),
            Value::Null,
            -32600,
            "must be a JSON object",
        ),
        ("[]", "[]".into(), Value::Null, -32600, "empty batch"),
        (
            "no \"jsonrpc\"",
            r#"{"id": 7, "method": "ping"}"#.into(),
            json!(7),
            -32600,
            "\"jsonrpc\": \"2.0\" is missing",
        ),
        (
            "\"jsonrpc\": \"1.0\"",
            r#"{"jsonrpc": "1.0", "id": "v1", "method": "ping"}"#.into(),
            json!("v1"),
            -32600,
            "not \"1.0\"",
        ),
        (
            "an object as id",
            r#"{"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"}"#.into(),
            Value::Null,
            -32600,
            "must be a string or a number",
        ),
        (
            "no method",
            r#"{"jsonrpc": "2.0", "id": 8}"#.into(),
            json!(8),
            -32600,
            "needs a \"method\"",
        ),
        (
            "params not an object",
            r#"{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": 5}"#.into(),
            json!(9),
            -32602,
            "must be an object",
        ),
        (
            "not JSON, id readable",
            r#"{"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {"#.into(),
            json!(10),
            -32700,
            "not valid JSON",
        ),
        (
            "not JSON at all",
            "hello".into(),
            Value::Null,
            -32700,
            "not valid JSON",
        ),
    ];
    for (what, line, id, code, says) in &shapes {
        w.send(line);
        let got = w.next_json(Duration::from_secs(3));
        let ok = got.as_ref().is_some_and(|v| {
            v.get("id") == Some(id)
                && v["error"]["code"] == *code
                && v["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(says))
        });
        c.check(
            ok,
            &format!("{what}: answered with id {id}, code {code}, saying {says:?}"),
            format!("{got:?}"),
        );
    }

    // A batch: each request in it answered with its own id, as a batch.
    w.send(
        r#"[{"jsonrpc":"2.0","id":21,"method":"ping"},{"jsonrpc":"2.0","id":"b22","method":"tools/list"}]"#,
    );
    let batch = w.next_json(Duration::from_secs(3));
    let ids: Vec<Value> = batch
        .as_ref()
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|r| r["id"].clone()).collect())
        .unwrap_or_default();
    c.check(
        ids == [json!(21), json!("b22")],
        "a batch: each request answered with its own id, as a batch",
        format!("{batch:?}"),
    );

    // Over the limit: 16 MiB and more on one line, its id at the start.
    let limit = 16usize << 20;
    let mut huge = String::from(
        r#"{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"create_tool","arguments":{"name":"big","code":""#,
    );
    huge.push_str(&"x".repeat(limit + 1000));
    huge.push_str(r#""}}}"#);
    let size = huge.len() + 1;
    w.serve.send_line(&huge).unwrap();
    w.transcript.push(format!(">> ({size} bytes, id 31)"));
    let over = w.response_within(&json!(31), Duration::from_secs(20));
    let message = over
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str())
        .unwrap_or("")
        .to_string();
    c.check(
        message.contains(&format!("{size} bytes")) && message.contains(&format!("{limit} bytes")),
        "a line over the limit is answered with its id, its size and the limit",
        format!("{over:?}"),
    );

    let again = w.request(40, "tools/list", json!({}));
    c.check(
        again["result"]["tools"].is_array(),
        "the same serve still answers a well-formed request after all of them",
        &again,
    );
    w.serve.close_stdin();
    let _ = w.serve.wait_exit(Duration::from_secs(10));
    let transcript = w.transcript.join("\n");
    let stderr = w.serve.final_stderr();
    c.finish(test, || {
        format!("transcript:\n{transcript}\nserve stderr:\n{stderr}")
    });
}
