//! The stdio transport of `autotool serve`, with a guard in front of rmcp.
//!
//! rmcp drops a line that is not JSON without a word, and answers a message it cannot read as a
//! request with `-32600` and no `id`. A host then waits forever on that id. The guard reads each
//! line first: what is not JSON gets a `-32700` parse error; an object with an `id` but no
//! `method` (and no `result` or `error`) gets `-32600` with its `id`; a request whose `params`
//! are neither an object nor an array gets `-32602` with its `id`. Everything else goes to rmcp
//! unchanged. Every line written to stdout is whole: rmcp's output and the guard's answers are
//! framed into lines and written by one task, so they never interleave.

use serde_json::{Value, json};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{
    AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;

/// Largest line accepted from the host; a longer one is answered with an error and skipped.
pub const MAX_LINE: usize = 64 << 20;

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

fn answer(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

/// What the guard does with one line from the host: pass it to rmcp, or answer it itself.
pub fn judge(line: &[u8]) -> Option<Vec<u8>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Some(answer(
                Value::Null,
                -32700,
                format!("Parse error: the line is not JSON ({e})"),
            ));
        }
    };
    let Value::Object(obj) = &value else {
        return None;
    };
    let id = obj.get("id").cloned();
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    match (obj.get("method"), id) {
        (None, Some(id)) if !is_response => Some(answer(
            id,
            -32600,
            "Invalid Request: a request needs a \"method\"".into(),
        )),
        (Some(Value::String(method)), Some(id)) => match obj.get("params") {
            Some(Value::Object(_) | Value::Array(_) | Value::Null) | None => None,
            Some(_) => Some(answer(
                id,
                -32602,
                format!("Invalid params for {method}: \"params\" must be an object"),
            )),
        },
        _ => None,
    }
}

/// Start the guard on the process's stdin and stdout.
pub fn guarded() -> Guarded {
    let (rmcp_reader, mut to_rmcp) = tokio::io::duplex(1 << 20);
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer_done = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = rx.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let answers = tx.clone();
    tokio::spawn(async move {
        let mut stdin = BufReader::with_capacity(1 << 16, tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut stdin)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
                // Skip the rest of the over-long line.
                let mut rest = Vec::new();
                let _ = stdin.read_until(b'\n', &mut rest).await;
                let _ = answers.send(answer(
                    Value::Null,
                    -32600,
                    format!("Invalid Request: a line longer than {MAX_LINE} bytes was dropped"),
                ));
                continue;
            }
            if let Some(reply) = judge(&line) {
                if answers.send(reply).is_err() {
                    break;
                }
                continue;
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
        }
        let _ = to_rmcp.shutdown().await;
    });
    Guarded {
        reader: rmcp_reader,
        writer: LineSink {
            buf: Vec::new(),
            tx,
        },
        writer_done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_and_id(reply: Option<Vec<u8>>) -> Option<(i64, Value)> {
        let v: Value = serde_json::from_slice(&reply?).ok()?;
        Some((v["error"]["code"].as_i64()?, v["id"].clone()))
    }

    #[test]
    fn the_guard_answers_only_what_rmcp_would_mishandle() {
        let cases: &[(&str, Option<(i64, Value)>)] = &[
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","#,
                Some((-32700, Value::Null)),
            ),
            ("not json", Some((-32700, Value::Null))),
            (r#"{"jsonrpc":"2.0","id":65}"#, Some((-32600, json!(65)))),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":"x"}"#,
                Some((-32602, json!("a"))),
            ),
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}"#,
                None,
            ),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, None),
            ("   \n", None),
        ];
        for (line, want) in cases {
            assert_eq!(&code_and_id(judge(line.as_bytes())), want, "{line}");
        }
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
