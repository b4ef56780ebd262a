//! A tool's channel to the other tools it declares in `USES`: the supervisor's end of a stream
//! socket whose other end the tool holds at [`USES_FD`](super::child::USES_FD) (the runtime's
//! `autotool_uses` module speaks it).
//!
//! The protocol is one JSON object per line, one request at a time: the tool sends
//! `{"name": "weather__forecast", "arguments": {...}}`, the supervisor answers
//! `{"result": ...}` or `{"error": "why"}`. A request longer than [`MAX_REQUEST_BYTES`] is
//! answered with an error and the channel is closed; a request that is not such an object is
//! answered with an error. What a name may reach, and how, is the [`UsesHandler`]'s decision
//! (the library's: `crate::library::uses`); this side only carries it.

use rmcp::model::JsonObject;
use serde::Deserialize;
use std::future::Future;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The largest request line read from a tool.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// What answers a tool's calls of other tools' functions.
pub trait UsesHandler: Send + Sync + std::fmt::Debug {
    /// Call mounted function `name` with `arguments` for the tool: its answer (redacted), or
    /// why not.
    fn call(
        &self,
        name: String,
        arguments: JsonObject,
    ) -> Pin<Box<dyn Future<Output = Result<serde_json::Value, String>> + Send + '_>>;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    name: String,
    #[serde(default)]
    arguments: JsonObject,
}

/// Serve the channel until the tool closes its end (it exited) or breaks the protocol's bound.
pub(super) async fn serve(ours: UnixStream, handler: Arc<dyn UsesHandler>) {
    let stream = match ours
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(ours))
    {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("serving a tool's uses channel: {e}");
            return;
        }
    };
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut line = Vec::new();
        let limit = u64::try_from(MAX_REQUEST_BYTES).unwrap_or(u64::MAX) + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let too_long = line.len() > MAX_REQUEST_BYTES;
        if !line.ends_with(b"\n") && !too_long {
            // The tool closed its end mid-line.
            return;
        }
        let answer = if too_long {
            Err(format!(
                "the request is larger than {MAX_REQUEST_BYTES} bytes; the channel is closed"
            ))
        } else {
            match serde_json::from_slice::<Request>(&line) {
                Ok(req) => handler.call(req.name, req.arguments).await,
                Err(e) => Err(format!(
                    "autotool could not read the request ({e}); send {{\"name\": \
                     \"tool__function\", \"arguments\": {{...}}}} on one line"
                )),
            }
        };
        let message = match answer {
            Ok(result) => serde_json::json!({ "result": result }),
            Err(error) => serde_json::json!({ "error": error }),
        };
        let mut bytes = serde_json::to_vec(&message).unwrap_or_default();
        bytes.push(b'\n');
        if write.write_all(&bytes).await.is_err() || too_long {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Echo;

    impl UsesHandler for Echo {
        fn call(
            &self,
            name: String,
            arguments: JsonObject,
        ) -> Pin<Box<dyn Future<Output = Result<serde_json::Value, String>> + Send + '_>> {
            Box::pin(async move {
                if name == "t__f" {
                    Ok(serde_json::Value::Object(arguments))
                } else {
                    Err(format!("no {name}"))
                }
            })
        }
    }

    async fn exchange(theirs: &mut tokio::net::UnixStream, line: &[u8]) -> Option<String> {
        theirs.write_all(line).await.unwrap();
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match theirs.read(&mut byte).await.unwrap() {
                0 => return None,
                _ if byte[0] == b'\n' => return Some(String::from_utf8(got).unwrap()),
                _ => got.push(byte[0]),
            }
        }
    }

    #[tokio::test]
    async fn one_line_per_request_and_answer_with_bounded_requests() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        theirs.set_nonblocking(true).unwrap();
        let mut theirs = tokio::net::UnixStream::from_std(theirs).unwrap();
        let served = tokio::spawn(serve(ours, Arc::new(Echo)));
        assert_eq!(
            exchange(
                &mut theirs,
                b"{\"name\": \"t__f\", \"arguments\": {\"a\": 1}}\n"
            )
            .await,
            Some("{\"result\":{\"a\":1}}".into())
        );
        assert_eq!(
            exchange(&mut theirs, b"{\"name\": \"u__g\"}\n").await,
            Some("{\"error\":\"no u__g\"}".into())
        );
        let garbage = exchange(&mut theirs, b"[1, 2]\n").await.unwrap();
        assert!(garbage.contains("could not read the request"), "{garbage}");
        let mut huge = vec![b'x'; MAX_REQUEST_BYTES + 10];
        huge.push(b'\n');
        let refused = exchange(&mut theirs, &huge).await.unwrap();
        assert!(refused.contains("larger than"), "{refused}");
        // And the channel is closed after it.
        tokio::time::timeout(std::time::Duration::from_secs(5), served)
            .await
            .unwrap()
            .unwrap();
    }
}
