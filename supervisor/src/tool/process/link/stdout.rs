//! The tool's stdout: each line read within its bound, judged, and only awaited answers passed
//! on to rmcp.

use super::inspect::Inspector;
use super::inspect::{Verdict, too_long};
use super::{KEEP_CAPACITY, Stop};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Forward the tool's stdout to `to` (rmcp's reader), one checked line at a time: answers
/// autotool waits for go through, refusals go to `replies`, everything else is dropped or
/// stops the link. The reason for stopping is reported through `on_stop` before `to` is
/// closed, so whoever sees the end of the stream finds the reason set.
pub(in crate::tool::process) async fn guard_stdout(
    stdout: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut inspector: Inspector,
    replies: mpsc::Sender<Vec<u8>>,
    on_stop: impl FnOnce(Stop),
) {
    let max_line = inspector.bounds.max_line;
    // Room for the line and its `\r\n`.
    let take = max_line as u64 + 2;
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let stop = loop {
        // A buffer a long line grew is given back once the line is dealt with, so a tool that
        // answered large and went quiet holds nothing here.
        if line.capacity() > KEEP_CAPACITY {
            line = Vec::new();
        }
        line.clear();
        match (&mut reader).take(take).read_until(b'\n', &mut line).await {
            Ok(0) => break None,
            Ok(_) => {}
            Err(e) => break Some(Stop::Garbage(format!("reading its stdout failed: {e}"))),
        }
        let body = line.trim_ascii();
        if body.len() > max_line || (!line.ends_with(b"\n") && line.len() as u64 == take) {
            break Some(Stop::Misuse(too_long(&line, inspector.bounds)));
        }
        if body.is_empty() {
            continue;
        }
        let verdict = inspector.inspect(body, Instant::now());
        match verdict {
            Verdict::Forward => {
                let written = async {
                    to.write_all(body).await?;
                    to.write_all(b"\n").await?;
                    to.flush().await
                };
                if written.await.is_err() {
                    // rmcp's side is gone: nobody is listening any more.
                    break None;
                }
            }
            Verdict::Drop => {}
            Verdict::Refuse(reply) => {
                // Never waits: the queue holds the whole budget, and past it the tool stops.
                let _ = replies.try_send(reply);
            }
            Verdict::Stop(stop) => break Some(stop),
        }
        if line.capacity() > KEEP_CAPACITY {
            line = Vec::new();
        }
    };
    drop(line);
    if let Some(stop) = stop {
        if let Stop::Misuse(m) = &stop {
            tracing::warn!(tool = %inspector.label, "stopping the tool: {m}");
        }
        on_stop(stop);
    }
    let _ = to.shutdown().await;
}
