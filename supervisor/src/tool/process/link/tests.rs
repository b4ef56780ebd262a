//! Tests of the tool link: bounds, verdicts, budgets, the stdout guard and the stdin pump.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::inspect::{EXCERPT, Verdict, excerpt};
use super::*;
use crate::tool::process::stdio::LINK_PIPE;
use serde_json::{Value, json};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

fn inspector(max_output: usize) -> (Inspector, Outstanding) {
    let outstanding = Outstanding::default();
    let i = Inspector::new(
        Bounds::for_output(max_output),
        outstanding.clone(),
        "t/1".into(),
    );
    (i, outstanding)
}

fn line(v: Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

fn misuse(v: Verdict) -> Misuse {
    match v {
        Verdict::Stop(Stop::Misuse(m)) => m,
        other => panic!("not stopped for a misuse: {other:?}"),
    }
}

#[test]
fn bounds_follow_max_output_bytes() {
    let b = Bounds::for_output(256 << 10);
    assert_eq!(b.max_line, (512 << 10) + FRAMING);
    assert_eq!(b.max_values, b.max_line / 16);
    assert_eq!(
        Bounds::for_output(1024).max_values,
        ((2 << 10) + FRAMING) / 16
    );
    assert_eq!(Bounds::for_output(0).max_values, 4096);
}

#[test]
fn only_answers_to_requests_in_flight_reach_rmcp() {
    let (mut i, outstanding) = inspector(1024);
    let now = Instant::now();
    let answer = |id: Value| line(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    outstanding.insert(3);
    outstanding.insert(4);
    assert_eq!(i.inspect(&answer(json!(3)), now), Verdict::Forward);
    // Answered once: a second answer is one nobody asked for.
    assert_eq!(i.inspect(&answer(json!(3)), now), Verdict::Drop);
    // rmcp matches an id echoed as a numeric string too.
    assert_eq!(i.inspect(&answer(json!("4")), now), Verdict::Forward);
    assert_eq!(i.inspect(&answer(json!(99)), now), Verdict::Drop);
    let error = line(json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "x"}}));
    assert_eq!(i.inspect(&error, now), Verdict::Drop);
    assert_eq!(i.noise_total.0, 3);
}

#[test]
fn requests_are_refused_without_their_payload_and_counted() {
    let (mut i, _) = inspector(1024);
    let now = Instant::now();
    let methods = [
        "ping",
        "roots/list",
        "sampling/createMessage",
        "elicitation/create",
    ];
    for (n, method) in methods.iter().enumerate() {
        let request = line(json!({
            "jsonrpc": "2.0", "id": format!("req-{n}"), "method": method,
            "params": {"secret": "PAYLOAD-TO-ECHO"},
        }));
        let Verdict::Refuse(reply) = i.inspect(&request, now) else {
            panic!("{method} was not refused");
        };
        let text = String::from_utf8(reply).unwrap();
        assert!(text.ends_with('\n'));
        let reply: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(reply["id"], json!(format!("req-{n}")));
        assert_eq!(reply["error"]["code"], json!(-32601));
        assert!(
            !text.contains("PAYLOAD") && !text.contains(method),
            "{text}"
        );
    }
    let fifth = line(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call"}));
    let m = misuse(i.inspect(&fifth, now));
    assert_eq!(
        m,
        Misuse::Requests {
            count: 5,
            methods: vec![
                "elicitation/create".into(),
                "ping".into(),
                "roots/list".into(),
                "sampling/createMessage".into(),
            ],
        }
    );
    assert!(m.to_string().contains("stopped as abusive"), "{m}");
}

#[test]
fn ids_and_methods_are_bounded() {
    let (mut i, _) = inspector(1024);
    let now = Instant::now();
    let ok_id = "i".repeat(MAX_ID);
    let request = |id: Value| line(json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
    assert!(matches!(
        i.inspect(&request(json!(ok_id)), now),
        Verdict::Refuse(_)
    ));
    let long = "i".repeat(MAX_ID + 1);
    assert_eq!(
        misuse(i.inspect(&request(json!(long)), now)),
        Misuse::BadId { long: true }
    );
    for bad in [
        json!(1.5),
        json!(true),
        json!([1]),
        json!({"a": 1}),
        json!(null),
    ] {
        assert_eq!(
            misuse(i.inspect(&request(bad.clone()), now)),
            Misuse::BadId { long: false },
            "{bad}"
        );
    }
    // An answer's id too: a huge one is refused before anything is looked up.
    let answer = line(json!({"jsonrpc": "2.0", "id": "9".repeat(1000), "result": {}}));
    assert_eq!(
        misuse(i.inspect(&answer, now)),
        Misuse::BadId { long: true }
    );
    let method = line(json!({"jsonrpc": "2.0", "method": "m".repeat(MAX_METHOD + 1)}));
    assert_eq!(misuse(i.inspect(&method, now)), Misuse::LongMethod);
}

#[test]
fn a_notification_flood_is_stopped_and_a_trickle_is_not() {
    let (mut i, _) = inspector(1024);
    let t0 = Instant::now();
    let note = line(json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "hello"}}));
    // A trickle within the rate: never stopped.
    for n in 0..3000u32 {
        let at = t0 + Duration::from_millis(u64::from(n) * 10);
        assert_eq!(i.inspect(&note, at), Verdict::Drop, "message {n}");
    }
    // A burst: stopped once the burst allowance is spent.
    let at = t0 + Duration::from_secs(30);
    let mut stopped = None;
    for n in 0..2000 {
        if let Verdict::Stop(s) = i.inspect(&note, at) {
            stopped = Some((n, s));
            break;
        }
    }
    let (n, stop) = stopped.expect("a burst of 2000 was not stopped");
    assert!((900..=1001).contains(&n), "stopped after {n}");
    assert!(matches!(stop, Stop::Misuse(Misuse::Flood { .. })));
    // By bytes: a few large notifications at once.
    let (mut i, _) = inspector(1 << 20);
    let big = line(json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"x": "p".repeat(200 << 10)}}));
    let verdicts: Vec<Verdict> = (0..6).map(|_| i.inspect(&big, t0)).collect();
    assert_eq!(
        verdicts[..4],
        [Verdict::Drop, Verdict::Drop, Verdict::Drop, Verdict::Drop]
    );
    assert!(verdicts[4..].iter().any(|v| matches!(v, Verdict::Stop(_))));
}

#[test]
fn an_answer_with_too_many_values_is_refused_before_rmcp_parses_it() {
    let (mut i, outstanding) = inspector(1024);
    outstanding.insert(1);
    let limit = i.bounds.max_values;
    let zeros = vec![0; limit + 1];
    let answer = line(json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [], "structuredContent": zeros}}));
    assert!(matches!(
        misuse(i.inspect(&answer, Instant::now())),
        Misuse::TooComplex { .. }
    ));
    let fewer = vec![0; limit - 10];
    let answer = line(json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [], "structuredContent": fewer}}));
    assert_eq!(i.inspect(&answer, Instant::now()), Verdict::Forward);
}

#[test]
fn what_is_not_json_rpc_is_garbage() {
    let (mut i, _) = inspector(1024);
    let now = Instant::now();
    for bad in [
        &b"hello from print()"[..],
        br#"{"answer": 42}"#,
        br#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
        br#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        br#"{"jsonrpc":"2.0","id":1"#,
        br#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":1}"#,
        b"42",
    ] {
        assert!(
            matches!(i.inspect(bad, now), Verdict::Stop(Stop::Garbage(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn an_excerpt_is_cut_and_quoted() {
    let e = excerpt("x".repeat(1000).as_bytes());
    assert!(e.starts_with("\"xxx") && e.ends_with("…\""), "{e}");
    assert!(e.chars().count() <= EXCERPT + 3);
}

async fn guard(
    input: Vec<u8>,
    bounds: Bounds,
    ours: &[u64],
) -> (String, Vec<Vec<u8>>, Option<Stop>) {
    let outstanding = Outstanding::default();
    for id in ours {
        outstanding.insert(*id);
    }
    let inspector = Inspector::new(bounds, outstanding, "t/1".into());
    let (mut read, write) = tokio::io::duplex(64 << 10);
    let (tx, mut rx) = mpsc::channel(REPLIES);
    let mut seen = None;
    let reader = tokio::spawn(async move {
        let mut out = String::new();
        read.read_to_string(&mut out).await.unwrap();
        out
    });
    guard_stdout(&input[..], write, inspector, tx, |s| seen = Some(s)).await;
    let mut replies = Vec::new();
    while let Ok(r) = rx.try_recv() {
        replies.push(r);
    }
    (reader.await.unwrap(), replies, seen)
}

#[tokio::test]
async fn the_guard_forwards_answers_refuses_requests_and_drops_the_rest() {
    let input = [
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}"#,
        "",
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
    ]
    .join("\r\n")
        + "\n";
    let (out, replies, stop) = guard(input.into_bytes(), Bounds::for_output(1024), &[0, 1]).await;
    assert_eq!(
        out,
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-11-25\"}}\n\
             {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
    );
    assert_eq!(replies.len(), 1);
    assert!(String::from_utf8_lossy(&replies[0]).contains("\"id\":\"p\""));
    assert_eq!(stop, None);
}

#[tokio::test]
async fn a_line_over_the_bound_stops_the_guard_with_an_answer_too_large() {
    let bounds = Bounds::for_output(1024);
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"text\":\"{}\"}}}}\n",
        "a".repeat(bounds.max_line)
    );
    let (out, _, stop) = guard(big.into_bytes(), bounds, &[1]).await;
    assert_eq!(out, "");
    let Some(Stop::Misuse(m)) = stop else {
        panic!("{stop:?}")
    };
    assert_eq!(
        m,
        Misuse::TooLarge {
            limit: bounds.max_line,
            max_output_bytes: 1024,
            answer: true
        }
    );
    let text = m.to_string();
    assert!(text.contains("answer was too large"), "{text}");
    assert!(text.contains("max_output_bytes"), "{text}");
    assert!(!text.contains("stderr"), "{text}");
    // Not an answer, and no newline at all: a message too large, worded as such.
    let flood = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":\"{}",
        "n".repeat(3 * bounds.max_line)
    );
    let (_, _, stop) = guard(flood.into_bytes(), bounds, &[]).await;
    assert!(
        matches!(
            stop,
            Some(Stop::Misuse(Misuse::TooLarge { answer: false, .. }))
        ),
        "{stop:?}"
    );
    // An id or a method name that has not ended when the line is already too long.
    let id = format!(
        "{{\"jsonrpc\": \"2.0\", \"id\": \"0-{}\", \"method\": \"ping\"}}\n",
        "i".repeat(2 * bounds.max_line)
    );
    let (_, _, stop) = guard(id.into_bytes(), bounds, &[]).await;
    assert_eq!(stop, Some(Stop::Misuse(Misuse::BadId { long: true })));
    let method = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"x{}\"}}\n",
        "\\\"".repeat(bounds.max_line)
    );
    let (_, _, stop) = guard(method.into_bytes(), bounds, &[]).await;
    assert_eq!(stop, Some(Stop::Misuse(Misuse::LongMethod)));
    // Just within the bound: forwarded.
    let body = "b".repeat(bounds.max_line - 60);
    let fits = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"t\":\"{body}\"}}}}\n");
    assert!(fits.len() - 1 <= bounds.max_line);
    let (out, _, stop) = guard(fits.clone().into_bytes(), bounds, &[1]).await;
    assert_eq!((out, stop), (fits, None));
}

#[tokio::test]
async fn the_pump_writes_whole_messages_and_notes_request_ids() {
    let mut child = tokio::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let outstanding = Outstanding::default();
    let (replies_tx, replies) = mpsc::channel(REPLIES);
    let (mut rmcp, from_rmcp) = tokio::io::duplex(LINK_PIPE);
    let (link, task) = stdin_link(StdinPump {
        from_rmcp,
        replies,
        stdin,
        outstanding: outstanding.clone(),
    });
    let pump = tokio::spawn(task.run(|_| panic!("stalled")));
    rmcp.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    replies_tx
        .send(b"{\"refusal\":1}\n".to_vec())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    link.close();
    pump.await.unwrap();
    let mut out = String::new();
    stdout.read_to_string(&mut out).await.unwrap();
    assert_eq!(
        out,
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{}}\n\
             {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\
             {\"refusal\":1}\n"
    );
    assert!(outstanding.remove(5));
    assert!(!outstanding.remove(6));
    // Closed: rmcp's next write fails rather than waits.
    assert!(rmcp.write_all(&[b'x'; 2 * LINK_PIPE]).await.is_err());
}

#[tokio::test]
async fn a_tool_that_stops_reading_its_stdin_is_reported() {
    let t0 = Instant::now();
    // `sleep` never reads its stdin: once the pipe is full, a write makes no progress.
    let mut child = tokio::process::Command::new("sleep")
        .arg("60")
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let (_replies_tx, replies) = mpsc::channel(REPLIES);
    let (mut rmcp, from_rmcp) = tokio::io::duplex(LINK_PIPE);
    let (_link, task) = stdin_link(StdinPump {
        from_rmcp,
        replies,
        stdin,
        outstanding: Outstanding::default(),
    });
    let stalled = Arc::new(Mutex::new(None));
    let seen = stalled.clone();
    let pump = tokio::spawn(task.run(move |after| *seen.lock().unwrap() = Some(after)));
    let mut message = vec![b'a'; 4 << 20];
    message.push(b'\n');
    let writer = tokio::spawn(async move {
        let _ = rmcp.write_all(&message).await;
    });
    pump.await.unwrap();
    assert_eq!(*stalled.lock().unwrap(), Some(STDIN_STALL));
    assert!(t0.elapsed() >= STDIN_STALL && t0.elapsed() < 2 * STDIN_STALL);
    writer.abort();
}
