//! The stdio transport of `autotool serve`, with a guard in front of rmcp.
//!
//! rmcp drops a line that is not JSON without a word, drops a line over its 16 MiB limit
//! without a word, and answers a message it cannot read as a request with `-32600` and no
//! `id`. A host then waits for its own timeout. The guard reads every line first ([`judge`]),
//! and answers what rmcp would mishandle with a JSON-RPC error that carries the request's own
//! `id` wherever it can be read (even from a line that is cut short or too long), `null`
//! otherwise, and says what was wrong:
//! - not JSON: `-32700`;
//! - not an object (`42`, `"x"`), an empty batch `[]`: `-32600`;
//! - a batch: `-32600` for each request in it, as a batch (MCP removed batching in 2025-06-18);
//! - no `"jsonrpc": "2.0"` (missing, `"1.0"`): `-32600`;
//! - an `id` that is not a string or a number (an object, `null`): `-32600`;
//! - no `method` (and no `result` or `error`), a `method` that is not a string: `-32600`;
//! - `params` that are neither an object nor an array: `-32602`;
//! - anything else rmcp's message types refuse: `-32600` with serde's reason;
//! - a line over [`MAX_LINE`]: `-32600` naming its size and the limit; it is skipped without
//!   being held in memory.
//!
//! Notifications and responses are never answered (JSON-RPC forbids it; answering a response
//! could start an error loop): a malformed one is dropped and logged. Everything else goes to
//! rmcp unchanged. Every line written to stdout is whole: rmcp's output and the guard's answers
//! are framed into lines and written by one task, so they never interleave.

use serde_json::{Value, json};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Largest line accepted from the host, its newline included: rmcp's own limit, so nothing the
/// guard passes on is dropped by rmcp.
pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How much of an over-long line is kept to find its `id` in.
const ID_PREFIX: usize = 64 << 10;

/// rmcp's side of the transport: what it reads, and what it writes.
#[derive(Debug)]
pub struct Guarded {
    pub reader: DuplexStream,
    pub writer: LineSink,
    /// Finishes when every line has been written to stdout.
    pub writer_done: tokio::task::JoinHandle<()>,
}

/// Collects rmcp's output into whole lines for the stdout writer.
#[derive(Debug)]
pub struct LineSink {
    buf: Vec<u8>,
    tx: mpsc::UnboundedSender<Vec<u8>>,
}

impl AsyncWrite for LineSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.buf.extend_from_slice(data);
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            if self.tx.send(line).is_err() {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            }
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if !self.buf.is_empty() {
            let mut line = std::mem::take(&mut self.buf);
            line.push(b'\n');
            let _ = self.tx.send(line);
        }
        Poll::Ready(Ok(()))
    }
}

/// What the guard does with one line from the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// rmcp reads it.
    Pass,
    /// The guard answers it with this line (an error response, or a batch of them).
    Answer(Vec<u8>),
    /// A malformed notification or response: nobody waits for an answer; it is logged.
    Drop(String),
}

fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn line_of(v: &Value) -> Vec<u8> {
    let mut line = v.to_string().into_bytes();
    line.push(b'\n');
    line
}

fn answer(id: Value, code: i64, message: String) -> Verdict {
    Verdict::Answer(line_of(&error(id, code, message)))
}

/// A JSON-RPC id: a string or a number.
fn valid_id(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One JSON value at the start of `b`, and where it ends.
fn parse_one<T: serde::de::DeserializeOwned>(b: &[u8]) -> Option<(T, usize)> {
    let mut it = serde_json::Deserializer::from_slice(b).into_iter::<T>();
    let v = it.next()?.ok()?;
    Some((v, it.byte_offset()))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The top-level `"id"` of a JSON object whose text may be cut short, or broken, after it:
/// the members before it are skipped one by one. `None` when it cannot be read for sure.
pub fn id_from_prefix(b: &[u8]) -> Option<Value> {
    let b = b.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(b);
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(b, i);
        let (key, n) = parse_one::<String>(b.get(i..)?)?;
        i = skip_ws(b, i + n);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        if key == "id" {
            let rest = b.get(i..)?;
            let (id, n) = parse_one::<Value>(rest)?;
            // A number that runs to the end of what was read may have been cut.
            if n >= rest.len() && id.is_number() {
                return None;
            }
            return valid_id(&id).then_some(id);
        }
        let (_, n) = parse_one::<serde::de::IgnoredAny>(b.get(i..)?)?;
        i = skip_ws(b, i + n);
        if b.get(i) != Some(&b',') {
            return None;
        }
        i += 1;
    }
}

/// What the guard does with one line from the host (its newline may be there or not).
pub fn judge(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Pass;
    }
    let text = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line);
    let value: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            return answer(
                id_from_prefix(text).unwrap_or(Value::Null),
                -32700,
                format!("Parse error: the message is not valid JSON ({e})"),
            );
        }
    };
    match value {
        Value::Object(_) => judge_message(value),
        Value::Array(items) if items.is_empty() => answer(
            Value::Null,
            -32600,
            "Invalid Request: an empty batch; send one JSON-RPC message per line".into(),
        ),
        Value::Array(items) => judge_batch(items),
        other => answer(
            Value::Null,
            -32600,
            format!(
                "Invalid Request: a message must be a JSON object, not {}",
                kind(&other)
            ),
        ),
    }
}

/// A batch: MCP has no batches since 2025-06-18, so each request in it gets an error with its
/// own id, all of them as one batch (a JSON-RPC client matches a batch's answers by id).
fn judge_batch(items: Vec<Value>) -> Verdict {
    let why = "Invalid Request: batches are not supported (MCP removed JSON-RPC batching in \
               2025-06-18); send each message on a line of its own";
    let mut answers = Vec::new();
    for item in items {
        match &item {
            Value::Object(obj) => {
                let is_response = obj.contains_key("result") || obj.contains_key("error");
                match obj.get("id") {
                    Some(id) if valid_id(id) && !is_response => {
                        answers.push(error(id.clone(), -32600, why.into()));
                    }
                    // A request whose id cannot be read gets the batch's one null answer.
                    Some(_) if !is_response => answers.push(error(Value::Null, -32600, why.into())),
                    _ => {}
                }
            }
            _ => answers.push(error(Value::Null, -32600, why.into())),
        }
    }
    if answers.is_empty() {
        // Only notifications and responses: still say why nothing of it was read.
        return answer(Value::Null, -32600, why.into());
    }
    Verdict::Answer(line_of(&Value::Array(answers)))
}

/// One message (a JSON object).
fn judge_message(value: Value) -> Verdict {
    let Value::Object(obj) = &value else {
        return Verdict::Pass;
    };
    let id = obj.get("id");
    let is_response =
        !obj.contains_key("method") && (obj.contains_key("result") || obj.contains_key("error"));
    let is_request = id.is_some() && !is_response;
    // What an error answer carries: the request's id where it is one, else null.
    let reply_id = id.filter(|i| valid_id(i)).cloned().unwrap_or(Value::Null);
    // Not a notification (a method without an id) nor a response: someone waits for this.
    let answerable = is_request || (id.is_none() && !obj.contains_key("method") && !is_response);
    let refuse = move |code: i64, message: String| -> Verdict {
        if answerable {
            answer(reply_id.clone(), code, message)
        } else {
            Verdict::Drop(message)
        }
    };
    if !["jsonrpc", "id", "method", "result", "error"]
        .iter()
        .any(|k| obj.contains_key(*k))
    {
        return refuse(
            -32600,
            "Invalid Request: this object is no JSON-RPC message: a request needs \"jsonrpc\": \
             \"2.0\", an \"id\" and a \"method\""
                .into(),
        );
    }
    match obj.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(other) => {
            return refuse(
                -32600,
                format!("Invalid Request: \"jsonrpc\" must be \"2.0\", not {other}"),
            );
        }
        None => {
            return refuse(
                -32600,
                "Invalid Request: \"jsonrpc\": \"2.0\" is missing".into(),
            );
        }
    }
    if let Some(id) = id
        && !valid_id(id)
    {
        let why = format!(
            "Invalid Request: \"id\" must be a string or a number, not {}",
            kind(id)
        );
        return if is_response {
            Verdict::Drop(why)
        } else {
            answer(Value::Null, -32600, why)
        };
    }
    match obj.get("method") {
        None if is_response => {}
        None => {
            return refuse(
                -32600,
                "Invalid Request: a request needs a \"method\" (and a response a \"result\" or \
                 an \"error\")"
                    .into(),
            );
        }
        Some(Value::String(_)) => {}
        Some(other) => {
            return refuse(
                -32600,
                format!(
                    "Invalid Request: \"method\" must be a string, not {}",
                    kind(other)
                ),
            );
        }
    }
    if let (Some(Value::String(method)), Some(params)) = (obj.get("method"), obj.get("params"))
        && !matches!(params, Value::Object(_) | Value::Array(_) | Value::Null)
    {
        return refuse(
            -32602,
            format!(
                "Invalid params for {method}: \"params\" must be an object, not {}",
                kind(params)
            ),
        );
    }
    // The rest is rmcp's own reading of the message; where it would refuse, say why here.
    let method = obj
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match serde_json::from_value::<rmcp::model::ClientJsonRpcMessage>(value) {
        Ok(_) => Verdict::Pass,
        // rmcp ignores notifications it does not know (LSP-style messages): so does the guard.
        Err(_) if !is_request && !is_response && !method.is_empty() => Verdict::Pass,
        Err(e) => refuse(-32600, format!("Invalid Request: {e}")),
    }
}

/// Read lines from `input` into `to_rmcp`, answering on `answers` what [`judge`] answers.
/// A line over [`MAX_LINE`] is skipped as it arrives, never held whole.
async fn guard_lines<R: tokio::io::AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: DuplexStream,
    answers: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut line: Vec<u8> = Vec::new();
    // An over-long line being skipped: its size so far, and the start kept for its id.
    let mut skipping: Option<(usize, Vec<u8>)> = None;
    loop {
        let available = match input.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(a) => a,
        };
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        let chunk = &available[..take];
        match &mut skipping {
            Some((size, prefix)) => {
                *size += chunk.len();
                let room = ID_PREFIX.saturating_sub(prefix.len());
                prefix.extend_from_slice(&chunk[..room.min(chunk.len())]);
            }
            None if line.len() + chunk.len() > MAX_LINE => {
                let so_far = line.len() + chunk.len();
                let mut prefix = std::mem::take(&mut line);
                prefix.truncate(ID_PREFIX);
                let room = ID_PREFIX.saturating_sub(prefix.len());
                prefix.extend_from_slice(&chunk[..room.min(chunk.len())]);
                skipping = Some((so_far, prefix));
            }
            None => line.extend_from_slice(chunk),
        }
        input.consume(take);
        if newline.is_none() {
            continue;
        }
        if let Some((size, prefix)) = skipping.take() {
            let id = id_from_prefix(&prefix).unwrap_or(Value::Null);
            tracing::warn!(bytes = size, "a message over {MAX_LINE} bytes was dropped");
            let reply = error(
                id,
                -32600,
                format!(
                    "Invalid Request: the message is {size} bytes, over the limit of {MAX_LINE} \
                     bytes ({} MiB) for one message; it was dropped. Send less at once (a \
                     tool's code, for example, is limited far below that: see \
                     `max_code_bytes` in `autotool config`).",
                    MAX_LINE >> 20
                ),
            );
            if answers.send(line_of(&reply)).is_err() {
                break;
            }
            continue;
        }
        match judge(&line) {
            Verdict::Pass => {
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Verdict::Answer(reply) => {
                if answers.send(reply).is_err() {
                    break;
                }
            }
            Verdict::Drop(why) => tracing::warn!("a malformed message was dropped: {why}"),
        }
        line.clear();
    }
    let _ = to_rmcp.shutdown().await;
}

/// Start the guard on `input` and `output` (the process's stdin and stdout in `serve`).
pub fn guarded_on<R, W>(input: R, output: W) -> Guarded
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_reader, to_rmcp) = tokio::io::duplex(1 << 20);
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer_done = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = rx.recv().await {
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(guard_lines(input, to_rmcp, tx.clone()));
    Guarded {
        reader: rmcp_reader,
        writer: LineSink {
            buf: Vec::new(),
            tx,
        },
        writer_done,
    }
}

/// Start the guard on the process's stdin and stdout.
pub fn guarded() -> Guarded {
    guarded_on(tokio::io::stdin(), tokio::io::stdout())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// (code, id, message) of a single answer.
    fn single(v: &Verdict) -> Option<(i64, Value, String)> {
        let Verdict::Answer(line) = v else {
            return None;
        };
        let v: Value = serde_json::from_slice(line).ok()?;
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert!(
            v.get("id").is_some(),
            "an error answer always carries an id: {v}"
        );
        Some((
            v["error"]["code"].as_i64()?,
            v["id"].clone(),
            v["error"]["message"].as_str()?.to_string(),
        ))
    }

    #[test]
    fn every_malformed_request_is_answered_with_its_id_where_it_can_be_read() {
        // (line, code, id, what the message must say)
        let cases: &[(&str, i64, Value, &str)] = &[
            ("not json", -32700, Value::Null, "not valid JSON"),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","#,
                -32700,
                json!(3),
                "not valid JSON",
            ),
            ("{}", -32600, Value::Null, "no JSON-RPC message"),
            (
                r#"{"name":"x"}"#,
                -32600,
                Value::Null,
                "no JSON-RPC message",
            ),
            ("42", -32600, Value::Null, "not a number"),
            (r#""ping""#, -32600, Value::Null, "not a string"),
            ("null", -32600, Value::Null, "not null"),
            ("[]", -32600, Value::Null, "empty batch"),
            (
                r#"{"id": 7, "method": "ping"}"#,
                -32600,
                json!(7),
                "\"jsonrpc\": \"2.0\" is missing",
            ),
            (
                r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
                -32600,
                json!("a"),
                "must be \"2.0\", not \"1.0\"",
            ),
            (
                r#"{"jsonrpc":2,"id":8,"method":"ping"}"#,
                -32600,
                json!(8),
                "must be \"2.0\", not 2",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}"#,
                -32600,
                Value::Null,
                "\"id\" must be a string or a number, not an object",
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                -32600,
                Value::Null,
                "not null",
            ),
            (
                r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
                -32600,
                Value::Null,
                "not an array",
            ),
            (
                r#"{"jsonrpc":"2.0","id":65}"#,
                -32600,
                json!(65),
                "needs a \"method\"",
            ),
            (
                r#"{"jsonrpc":"2.0","id":9,"method":42}"#,
                -32600,
                json!(9),
                "\"method\" must be a string",
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":"x"}"#,
                -32602,
                json!("a"),
                "\"params\" must be an object, not a string",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                -32600,
                json!(1.5),
                "Invalid Request",
            ),
        ];
        for (line, code, id, says) in cases {
            let got = single(&judge(line.as_bytes()))
                .unwrap_or_else(|| panic!("{line}: not answered: {:?}", judge(line.as_bytes())));
            assert_eq!((got.0, &got.1), (*code, id), "{line}: {}", got.2);
            assert!(got.2.contains(says), "{line}: {:?} lacks {says:?}", got.2);
        }
    }

    #[test]
    fn a_batch_is_answered_request_by_request_as_a_batch() {
        let line = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"},5]"#;
        let Verdict::Answer(reply) = judge(line.as_bytes()) else {
            panic!("a batch was not answered");
        };
        let v: Value = serde_json::from_slice(&reply).unwrap();
        let ids: Vec<Value> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].clone())
            .collect();
        assert_eq!(ids, [json!(1), json!("b"), Value::Null]);
        assert!(
            v[0]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("batches are not supported")
        );
        // Notifications only: one answer, saying why.
        let only = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
        let (code, id, _) = single(&judge(only.as_bytes())).unwrap();
        assert_eq!((code, id), (-32600, Value::Null));
    }

    #[test]
    fn well_formed_messages_go_to_rmcp_and_malformed_notifications_and_responses_are_not_answered()
    {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"$/lsp-ish"}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
            "   \n",
        ] {
            assert_eq!(judge(line.as_bytes()), Verdict::Pass, "{line}");
        }
        for line in [
            r#"{"method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":5}"#,
            r#"{"jsonrpc":"1.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":{},"result":{}}"#,
        ] {
            assert!(
                matches!(judge(line.as_bytes()), Verdict::Drop(_)),
                "{line}: {:?}",
                judge(line.as_bytes())
            );
        }
    }

    #[test]
    fn the_id_is_read_from_a_cut_or_broken_line_only_when_it_is_certain() {
        for (prefix, id) in [
            (
                r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"a":"#,
                Some(json!(12)),
            ),
            (
                r#"  {"params":{"x":[1,{"y":"}"}]},"id":"k","method""#,
                Some(json!("k")),
            ),
            (r#"{"jsonrpc":"2.0","id":12"#, None),
            (
                r#"{"jsonrpc":"2.0","method":"x","params":{"code":"...."#,
                None,
            ),
            (r#"{"id":{"a":1},"method":"x"}"#, None),
            (r#"[{"id":1}]"#, None),
            ("", None),
        ] {
            assert_eq!(id_from_prefix(prefix.as_bytes()), id, "{prefix}");
        }
    }

    #[tokio::test]
    async fn an_over_long_line_is_answered_with_its_size_the_limit_and_its_id_and_the_next_line_still_passes()
     {
        let mut huge = br#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"create_tool","arguments":{"code":""#.to_vec();
        huge.resize(MAX_LINE + 100, b'a');
        huge.extend_from_slice(b"\"}}}\n");
        let size = huge.len();
        let next = b"{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}\n".to_vec();
        let mut input = huge;
        input.extend_from_slice(&next);
        let (to_rmcp, mut rmcp_side) = tokio::io::duplex(1 << 16);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let reader = std::io::Cursor::new(input);
        let guard = tokio::spawn(guard_lines(reader, to_rmcp, tx));
        let answer = rx.recv().await.unwrap();
        let v: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(v["id"], json!(41), "{v}");
        assert_eq!(v["error"]["code"], json!(-32600));
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("{size} bytes")), "{message}");
        assert!(
            message.contains(&format!("limit of {MAX_LINE} bytes")),
            "{message}"
        );
        let mut passed = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut rmcp_side, &mut passed)
            .await
            .unwrap();
        assert_eq!(passed, next);
        guard.await.unwrap();
    }

    #[tokio::test]
    async fn a_line_at_the_limit_passes_whole() {
        let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.to_vec();
        let tail = b"\"}}\n";
        line.resize(MAX_LINE - tail.len(), b'b');
        line.extend_from_slice(tail);
        assert_eq!(line.len(), MAX_LINE);
        let (to_rmcp, mut rmcp_side) = tokio::io::duplex(1 << 16);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let expected = line.clone();
        let guard = tokio::spawn(guard_lines(std::io::Cursor::new(line), to_rmcp, tx));
        let mut passed = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut rmcp_side, &mut passed)
            .await
            .unwrap();
        guard.await.unwrap();
        assert!(passed == expected, "the line was changed or cut");
        assert!(rx.try_recv().is_err(), "it was answered");
    }

    #[test]
    fn rmcp_output_is_framed_into_whole_lines() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut sink = LineSink {
            buf: Vec::new(),
            tx,
        };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for chunk in [&b"{\"a\":"[..], b"1}\n{\"b\"", b":2}\n"] {
            assert!(matches!(
                Pin::new(&mut sink).poll_write(&mut cx, chunk),
                Poll::Ready(Ok(_))
            ));
        }
        assert_eq!(rx.try_recv().ok(), Some(b"{\"a\":1}\n".to_vec()));
        assert_eq!(rx.try_recv().ok(), Some(b"{\"b\":2}\n".to_vec()));
        assert!(rx.try_recv().is_err());
    }
}
