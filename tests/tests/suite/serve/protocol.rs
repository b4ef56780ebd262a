//! Malformed JSON-RPC from the host: each line gets a JSON-RPC error, or no answer where the
//! spec says so (notifications, responses, lines that are not JSON at all), and the server
//! keeps serving. Every line it writes is JSON-RPC 2.0.

use super::{assert_serves, finish, protocol_only, start};
use autotool_tests::serve::{ServeHome, Server};
use serde_json::{Value, json};
use std::time::Duration;

/// How long to keep listening for a late answer to a bad line.
const LATE: Duration = Duration::from_millis(300);

/// What a bad line must get.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// No answer at all (a notification, a response, an empty line).
    Nothing,
    /// No answer, or one error with this code (a line that is not JSON: JSON-RPC 2.0 asks for
    /// -32700 Parse error; MCP stdio servers commonly skip such lines).
    NothingOr(i64),
    /// Exactly one error answer with one of these codes, and no result.
    Error(&'static [i64]),
    /// A batch answered request by request: one `-32600` error for each of these ids.
    Batch(&'static [u64]),
}

/// Send `raw` (a newline is added), then a `ping`; return every other message that arrived up
/// to the ping's answer and a short while after it.
fn answers_to(server: &mut Server, raw: &[u8]) -> Vec<Value> {
    let mut line = raw.to_vec();
    line.push(b'\n');
    server.send_raw(&line).unwrap();
    let ping = server.start_request("ping", json!({})).unwrap();
    let pong = server
        .wait_answer(ping, autotool_tests::TIMEOUT)
        .unwrap_or_else(|e| panic!("ping after a bad line: {e:#}"));
    assert_eq!(pong.get("result"), Some(&json!({})), "ping: {pong}");
    server.collect(LATE).unwrap()
}

fn excerpt(raw: &[u8]) -> String {
    String::from_utf8_lossy(&raw[..raw.len().min(120)]).into_owned()
}

#[track_caller]
fn check(label: &str, raw: &[u8], got: &[Value], expect: Expect) {
    let what = format!("{label} ({:?})", excerpt(raw));
    for message in got {
        assert_eq!(
            message.get("jsonrpc").and_then(Value::as_str),
            Some("2.0"),
            "{what}: not JSON-RPC 2.0: {message}"
        );
    }
    let code_of = |m: &Value| m.pointer("/error/code").and_then(Value::as_i64);
    match expect {
        Expect::Nothing => assert!(got.is_empty(), "{what}: expected no answer, got {got:?}"),
        Expect::NothingOr(code) => assert!(
            got.is_empty() || (got.len() == 1 && code_of(&got[0]) == Some(code)),
            "{what}: expected no answer or error {code}, got {got:?}"
        ),
        Expect::Batch(ids) => {
            let mut answered: Vec<u64> = got
                .iter()
                .filter(|m| code_of(m) == Some(-32600) && m.get("result").is_none())
                .filter_map(|m| m.get("id").and_then(Value::as_u64))
                .collect();
            answered.sort_unstable();
            assert!(
                got.len() == ids.len() && answered == ids,
                "{what}: expected one -32600 error for each of {ids:?}, got {got:?}"
            );
        }
        Expect::Error(codes) => {
            assert_eq!(
                got.len(),
                1,
                "{what}: expected one error answer, got {got:?}"
            );
            let m = &got[0];
            assert!(
                m.get("result").is_none(),
                "{what}: answered with a result: {m}"
            );
            let code = code_of(m);
            assert!(
                code.is_some_and(|c| codes.contains(&c)),
                "{what}: expected an error with a code in {codes:?}, got {m}"
            );
            let message = m.pointer("/error/message").and_then(Value::as_str);
            assert!(
                message.is_some_and(|s| !s.is_empty()),
                "{what}: an error without a message: {m}"
            );
        }
    }
}

#[test]
fn malformed_json_rpc_gets_errors_and_the_server_keeps_serving() {
    let home = ServeHome::new().unwrap();
    let mut server = protocol_only().start(&home).unwrap();

    // Before the handshake: a request without the 2026-07-28 `_meta` is refused, naming it.
    let early = server.exchange("tools/list", json!({})).unwrap();
    assert_eq!(
        early.pointer("/error/code").and_then(Value::as_i64),
        Some(-32602),
        "{early}"
    );
    assert!(early.to_string().contains("_meta"), "{early}");
    server.initialize().unwrap();

    const INVALID: &[i64] = &[-32600];
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("not JSON", b"not json at all".to_vec(), Expect::NothingOr(-32700)),
        (
            "truncated JSON",
            br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/list""#.to_vec(),
            Expect::NothingOr(-32700),
        ),
        (
            "invalid UTF-8",
            b"\xff\xfe\x00{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}".to_vec(),
            Expect::NothingOr(-32700),
        ),
        (
            "a batch (JSON array)",
            br#"[{"jsonrpc":"2.0","id":50,"method":"tools/list"},{"jsonrpc":"2.0","id":51,"method":"ping"}]"#.to_vec(),
            // MCP removed batching (2025-06-18): each request is refused with its own id.
            Expect::Batch(&[50, 51]),
        ),
        ("an empty batch", b"[]".to_vec(), Expect::Error(INVALID)),
        (
            "a request without method",
            br#"{"jsonrpc":"2.0","id":52}"#.to_vec(),
            Expect::Error(INVALID),
        ),
        (
            "a method that is not a string",
            br#"{"jsonrpc":"2.0","id":53,"method":5}"#.to_vec(),
            Expect::Error(INVALID),
        ),
        (
            "JSON-RPC 1.0",
            br#"{"jsonrpc":"1.0","id":54,"method":"tools/list"}"#.to_vec(),
            Expect::Error(INVALID),
        ),
        (
            "no jsonrpc member",
            br#"{"id":55,"method":"tools/list"}"#.to_vec(),
            Expect::Error(INVALID),
        ),
        (
            "an object as id",
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#.to_vec(),
            Expect::Error(INVALID),
        ),
        ("a JSON string", br#""tools/list""#.to_vec(), Expect::Error(INVALID)),
        ("a JSON number", b"42".to_vec(), Expect::Error(INVALID)),
        ("JSON null", b"null".to_vec(), Expect::Error(INVALID)),
        ("an empty object", b"{}".to_vec(), Expect::Error(INVALID)),
        (
            "params as an array",
            br#"{"jsonrpc":"2.0","id":56,"method":"tools/list","params":[1,2]}"#.to_vec(),
            Expect::Error(&[-32600, -32602]),
        ),
        (
            "params as a string",
            br#"{"jsonrpc":"2.0","id":57,"method":"tools/call","params":"x"}"#.to_vec(),
            Expect::Error(&[-32600, -32602]),
        ),
        (
            "tools/call without a name",
            br#"{"jsonrpc":"2.0","id":58,"method":"tools/call","params":{}}"#.to_vec(),
            // -32602 is right; the server answers -32601 (see the ignored test below).
            Expect::Error(&[-32600, -32601, -32602]),
        ),
        (
            "tools/call with arguments that are not an object",
            br#"{"jsonrpc":"2.0","id":59,"method":"tools/call","params":{"name":"run_tool","arguments":"x"}}"#.to_vec(),
            Expect::Error(&[-32600, -32601, -32602]),
        ),
        (
            "an unknown notification",
            br#"{"jsonrpc":"2.0","method":"notifications/bogus","params":{}}"#.to_vec(),
            Expect::Nothing,
        ),
        (
            "a response to a request never sent",
            br#"{"jsonrpc":"2.0","id":987654,"result":{}}"#.to_vec(),
            Expect::Nothing,
        ),
        (
            "an error response to a request never sent",
            br#"{"jsonrpc":"2.0","id":987655,"error":{"code":-1,"message":"x"}}"#.to_vec(),
            Expect::Nothing,
        ),
        ("an empty line", Vec::new(), Expect::Nothing),
        ("a line of blanks", b"   \t ".to_vec(), Expect::Nothing),
        (
            "JSON nested 100 000 deep",
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            Expect::NothingOr(-32700),
        ),
        (
            "params nested 100 000 deep",
            format!(
                r#"{{"jsonrpc":"2.0","id":60,"method":"tools/list","params":{{"x":{}1{}}}}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            )
            .into_bytes(),
            // serde_json gives up at depth 128: this is a parse error, not a stack overflow.
            Expect::NothingOr(-32700),
        ),
    ];
    for (label, raw, expect) in &cases {
        let got = answers_to(&mut server, raw);
        check(label, raw, &got, *expect);
        assert_serves(&mut server, false, label);
    }

    // An unknown method is "method not found", answered with the request's id.
    let unknown = server.exchange("no/such/method", json!({})).unwrap();
    assert_eq!(
        unknown.pointer("/error/code").and_then(Value::as_i64),
        Some(-32601),
        "{unknown}"
    );

    // One request written in three pieces, with pauses: framing is by newline only.
    let id = server.fresh_id();
    let whole = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{}}}}"#);
    let (a, rest) = whole.split_at(10);
    let (b, c) = rest.split_at(20);
    for piece in [a, b] {
        server.send_raw(piece.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    server.send_raw(format!("{c}\n").as_bytes()).unwrap();
    let answer = server.wait_answer(id, autotool_tests::TIMEOUT).unwrap();
    assert!(
        answer.pointer("/result/tools").is_some(),
        "a request written in pieces: {answer}"
    );

    // Two requests on one write, then a bad line between two good ones.
    let (x, y) = (server.fresh_id(), server.fresh_id());
    server
        .send_raw(
            format!(
                "{}\nnot json\n{}\n",
                json!({"jsonrpc": "2.0", "id": x, "method": "ping"}),
                json!({"jsonrpc": "2.0", "id": y, "method": "tools/list"})
            )
            .as_bytes(),
        )
        .unwrap();
    let first = server.wait_answer(x, autotool_tests::TIMEOUT).unwrap();
    let second = server.wait_answer(y, autotool_tests::TIMEOUT).unwrap();
    assert_eq!(first.get("result"), Some(&json!({})), "{first}");
    assert!(second.pointer("/result/tools").is_some(), "{second}");

    assert_serves(&mut server, false, "all the malformed lines");
    let violations = server.stdout_violations();
    assert!(
        violations.is_empty(),
        "stdout carried non-JSON-RPC: {violations:?}"
    );
    finish(server);
}

#[test]
fn huge_lines_are_answered_or_dropped_and_the_server_keeps_serving() {
    const FIVE_MB: usize = 5 << 20;
    let home = ServeHome::new().unwrap();
    let mut server = start(&protocol_only(), &home);

    // A valid 5 MB request: answered (extra params are ignored).
    let padded = server
        .exchange("tools/list", json!({"padding": "p".repeat(FIVE_MB)}))
        .unwrap();
    assert!(
        padded.pointer("/result/tools").is_some() || padded.get("error").is_some(),
        "a 5 MB tools/list got neither a result nor an error: {}",
        excerpt(padded.to_string().as_bytes())
    );
    assert_serves(&mut server, false, "a 5 MB request");

    // A 5 MB line that is not JSON: dropped, or a parse error.
    let junk = vec![b'x'; FIVE_MB];
    let got = answers_to(&mut server, &junk);
    check("5 MB of junk", &junk, &got, Expect::NothingOr(-32700));
    assert_serves(&mut server, false, "a 5 MB line of junk");

    // A 5 MB tool argument through run_tool, to a tool that does not exist: a clear error.
    let call = server
        .call(
            "run_tool",
            json!({"tool": "nonexistent", "function": "f", "arguments": {"blob": "b".repeat(FIVE_MB)}}),
        )
        .unwrap()
        .unwrap_or_else(|e| panic!("run_tool with a 5 MB argument: {e}"));
    assert!(call.is_error, "{}", call.text);
    assert!(call.text.contains("\"nonexistent\""), "{}", call.text);
    assert!(
        call.text.len() < 4096,
        "the error echoes the 5 MB argument back: {} bytes",
        call.text.len()
    );
    assert_serves(&mut server, false, "a 5 MB run_tool argument");
    finish(server);
}

/// A request whose `id` can be read gets an error carrying that `id` (JSON-RPC 2.0 §5: `id` is
/// null only when it could not be detected), and a known method called with malformed params
/// gets -32602 Invalid params, not -32601 Method not found: otherwise a host waiting on that id
/// never hears back, or is told `tools/call` does not exist.
#[test]
fn malformed_requests_are_answered_with_their_id_and_invalid_params() {
    let home = ServeHome::new().unwrap();
    let mut server = start(&protocol_only(), &home);
    let cases: &[(&str, &str, &[i64])] = &[
        (
            "tools/call without a name",
            r#"{"jsonrpc":"2.0","id":61,"method":"tools/call","params":{}}"#,
            &[-32602],
        ),
        (
            "tools/call with a number as name",
            r#"{"jsonrpc":"2.0","id":62,"method":"tools/call","params":{"name":5}}"#,
            &[-32602],
        ),
        (
            "tools/call with arguments that are not an object",
            r#"{"jsonrpc":"2.0","id":63,"method":"tools/call","params":{"name":"run_tool","arguments":"x"}}"#,
            &[-32602],
        ),
        // Messages rmcp cannot read as a request at all: the stdio guard in front of it answers.
        (
            "params as a string",
            r#"{"jsonrpc":"2.0","id":64,"method":"tools/call","params":"x"}"#,
            &[-32600, -32602],
        ),
        (
            "a request without method",
            r#"{"jsonrpc":"2.0","id":65}"#,
            &[-32600],
        ),
    ];
    let mut wrong = Vec::new();
    for (label, raw, codes) in cases {
        let want: Value = serde_json::from_str::<Value>(raw).unwrap()["id"].clone();
        let got = answers_to(&mut server, raw.as_bytes());
        let ok = got.len() == 1
            && got[0].get("id") == Some(&want)
            && got[0]
                .pointer("/error/code")
                .and_then(Value::as_i64)
                .is_some_and(|c| codes.contains(&c));
        if !ok {
            wrong.push(format!("{label}: sent {raw}\n  got {got:?}"));
        }
    }
    assert_serves(&mut server, false, "malformed requests");
    finish(server);
    assert!(
        wrong.is_empty(),
        "expected an error with the request's id and code -32602 (or -32600):\n{}",
        wrong.join("\n")
    );
}
