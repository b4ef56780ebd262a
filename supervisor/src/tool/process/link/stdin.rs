//! The tool's stdin: whole messages from rmcp and the link's refusals, one at a time; the ids
//! of requests sent noted; a tool that stops reading reported.

use super::{KEEP_CAPACITY, Outstanding, REQUEST_BUDGET, STDIN_STALL};
use crate::tool::process::stdio::LINK_PIPE;
use serde::de::{self};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, watch};

/// Capacity of the refusals queue: the whole budget, and the one that stops the tool.
pub(in crate::tool::process) const REPLIES: usize = REQUEST_BUDGET as usize + 1;

/// The tool's stdin as the supervisor holds it: closing it asks the tool to exit.
#[derive(Debug, Clone)]
pub(in crate::tool::process) struct StdinLink {
    closed: Arc<watch::Sender<bool>>,
}

impl StdinLink {
    /// Close the pipe: the tool reads end of file; rmcp's later writes fail.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// What [`pump_stdin`] works with.
pub(in crate::tool::process) struct StdinPump<R> {
    /// rmcp's writes, one JSON-RPC message a line.
    pub from_rmcp: R,
    pub replies: mpsc::Receiver<Vec<u8>>,
    pub stdin: ChildStdin,
    pub outstanding: Outstanding,
}

/// A stdin link and the pump behind it.
pub(in crate::tool::process) fn stdin_link<R>(pump: StdinPump<R>) -> (StdinLink, StdinPumpTask<R>) {
    let (tx, rx) = watch::channel(false);
    (
        StdinLink {
            closed: Arc::new(tx),
        },
        StdinPumpTask { pump, closed: rx },
    )
}

/// The pump, ready to run.
pub(in crate::tool::process) struct StdinPumpTask<R> {
    pump: StdinPump<R>,
    closed: watch::Receiver<bool>,
}

impl<R: AsyncRead + Unpin> StdinPumpTask<R> {
    /// Move rmcp's messages and the link's refusals to the tool's stdin, each whole, until
    /// the link is closed, rmcp stops writing, or the tool stops reading (then `on_stall`).
    pub async fn run(self, on_stall: impl FnOnce(Duration)) {
        let StdinPumpTask { pump, mut closed } = self;
        let StdinPump {
            from_rmcp,
            mut replies,
            mut stdin,
            outstanding,
        } = pump;
        let mut reader = BufReader::with_capacity(LINK_PIPE, from_rmcp);
        let mut line = Vec::new();
        let mut replies_open = true;
        loop {
            let message = tokio::select! {
                biased;
                _ = closed.wait_for(|c| *c) => break,
                reply = replies.recv(), if replies_open => match reply {
                    Some(reply) => reply,
                    None => {
                        replies_open = false;
                        continue;
                    }
                },
                read = reader.read_until(b'\n', &mut line) => match read {
                    Ok(0) | Err(_) => break,
                    // At end of file without a newline: an incomplete message, never sent.
                    Ok(_) if !line.ends_with(b"\n") => break,
                    Ok(_) => {
                        note_request(&line, &outstanding);
                        std::mem::take(&mut line)
                    }
                },
            };
            let mut sent = 0;
            while sent < message.len() {
                let write = tokio::time::timeout(STDIN_STALL, stdin.write(&message[sent..]));
                tokio::select! {
                    biased;
                    _ = closed.wait_for(|c| *c) => return,
                    r = write => match r {
                        Err(_) => {
                            on_stall(STDIN_STALL);
                            return;
                        }
                        Ok(Ok(0) | Err(_)) => return,
                        Ok(Ok(n)) => sent += n,
                    },
                }
            }
            if line.capacity() > KEEP_CAPACITY {
                line = Vec::new();
            }
        }
    }
}

/// If `line` (one of rmcp's messages) is a request, remember its id: an answer must match one.
fn note_request(line: &[u8], outstanding: &Outstanding) {
    #[derive(serde::Deserialize)]
    struct Outgoing {
        id: Option<u64>,
        method: Option<de::IgnoredAny>,
    }
    if let Ok(Outgoing {
        id: Some(id),
        method: Some(_),
    }) = serde_json::from_slice::<Outgoing>(line)
    {
        outstanding.insert(id);
    }
}
