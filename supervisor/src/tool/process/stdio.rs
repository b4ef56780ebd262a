//! The tool's three pipes: stdin we can close on demand, stdout checked line by line before
//! rmcp sees it, and stderr kept in a bounded ring for error messages.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;

/// Bytes of stderr kept (the newest).
pub(super) const STDERR_RING: usize = 64 << 10;
/// Bytes of stderr quoted in an error message (the newest, from a line start when possible).
pub(super) const STDERR_IN_ERRORS: usize = 16 << 10;
/// Longest line accepted on the tool's stdout; longer is a protocol violation.
pub(super) const MAX_MESSAGE: usize = 16 << 20;
/// Characters of a bad stdout line quoted in an error message.
const EXCERPT: usize = 200;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The newest [`STDERR_RING`] bytes the tool wrote to stderr, and how many it wrote in all.
#[derive(Debug, Default)]
pub(super) struct StderrLog {
    ring: Mutex<Ring>,
    /// A duplicate of the pipe's read end, only to ask how much is still unread.
    pipe: Option<OwnedFd>,
}

#[derive(Debug, Default)]
struct Ring {
    buf: VecDeque<u8>,
    /// Bytes written since the start, including those no longer kept.
    total: u64,
}

impl StderrLog {
    /// A log for the stderr pipe `pipe` (which [`pump_stderr`] reads).
    pub fn new(pipe: &impl AsFd) -> Self {
        StderrLog {
            ring: Mutex::default(),
            pipe: pipe.as_fd().try_clone_to_owned().ok(),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut ring = lock(&self.ring);
        ring.total += bytes.len() as u64;
        let keep = &bytes[bytes.len().saturating_sub(STDERR_RING)..];
        let overflow = (ring.buf.len() + keep.len()).saturating_sub(STDERR_RING);
        ring.buf.drain(..overflow);
        ring.buf.extend(keep);
    }

    /// Bytes written so far, a mark for [`StderrLog::since`].
    pub fn total(&self) -> u64 {
        lock(&self.ring).total
    }

    /// Everything written after `mark` that is still kept.
    pub fn since(&self, mark: u64) -> String {
        let ring = lock(&self.ring);
        let new = usize::try_from(ring.total.saturating_sub(mark)).unwrap_or(usize::MAX);
        let skip = ring.buf.len().saturating_sub(new);
        let bytes: Vec<u8> = ring.buf.iter().skip(skip).copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The newest `max` bytes, starting at a line when one starts within them, trimmed.
    pub fn tail(&self, max: usize) -> String {
        let ring = lock(&self.ring);
        let skip = ring.buf.len().saturating_sub(max);
        let mut bytes: Vec<u8> = ring.buf.iter().skip(skip).copied().collect();
        if skip > 0
            && let Some(nl) = bytes.iter().position(|&b| b == b'\n')
        {
            bytes.drain(..=nl);
        }
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    /// Wait, at most `max`, until the pipe holds nothing unread: what the tool wrote before it
    /// answered is then in the log (best effort: a chunk the pump has just read may still be
    /// on its way in).
    pub async fn catch_up(&self, max: Duration) {
        let Some(pipe) = &self.pipe else { return };
        let deadline = tokio::time::Instant::now() + max;
        let unread = || rustix::io::ioctl_fionread(pipe).unwrap_or(0);
        if unread() == 0 {
            return;
        }
        while unread() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The pump files what it read right after reading it; give it that moment.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    /// Wait until nothing new has arrived for `quiet`, at most `max`: lets the stderr reader
    /// catch up with a traceback written just before an answer.
    pub async fn settle(&self, quiet: Duration, max: Duration) {
        let deadline = tokio::time::Instant::now() + max;
        let mut seen = self.total();
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(quiet).await;
            let now = self.total();
            if now == seen {
                return;
            }
            seen = now;
        }
    }
}

/// Copy the tool's stderr into `log` until it closes.
pub(super) async fn pump_stderr(mut stderr: impl AsyncRead + Unpin, log: Arc<StderrLog>) {
    let mut chunk = vec![0u8; 8 << 10];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => log.push(&chunk[..n]),
        }
    }
}

/// Why the tool's stdout stopped being forwarded, when it was not a plain end of file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation(pub String);

/// The one member every JSON-RPC 2.0 message has.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: std::borrow::Cow<'a, str>,
}

/// Is `line` (trimmed, not empty) a JSON-RPC 2.0 message? Batches are not: MCP dropped them in
/// 2025-06-18 and the Python SDK never sends one.
fn is_message(line: &[u8]) -> bool {
    line.first() == Some(&b'{')
        && serde_json::from_slice::<Envelope<'_>>(line).is_ok_and(|e| e.jsonrpc == "2.0")
}

/// Forward the tool's stdout to `to` (rmcp's reader) line by line, as long as every line is a
/// JSON-RPC message. rmcp itself skips lines that are not JSON and answers JSON that is not
/// JSON-RPC; a tool that prints to stdout (text, or JSON of its own) is broken, so the first
/// such line ends the stream and is reported through `on_violation` (before `to` is closed, so
/// whoever sees the end of the stream finds the reason set).
pub(super) async fn guard_stdout(
    stdout: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    on_violation: impl FnOnce(Violation),
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let violation = loop {
        line.clear();
        let limit = MAX_MESSAGE as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) => break None,
            Ok(_) => {}
            Err(e) => break Some(Violation(format!("reading its stdout failed: {e}"))),
        }
        if line.len() > MAX_MESSAGE {
            break Some(Violation(format!(
                "it wrote a line longer than {} MiB to stdout, beginning {}",
                MAX_MESSAGE >> 20,
                excerpt(&line)
            )));
        }
        let body = line.trim_ascii();
        if body.is_empty() {
            continue;
        }
        if !is_message(body) {
            break Some(Violation(format!(
                "it wrote this to stdout, which is not an MCP message: {}",
                excerpt(body)
            )));
        }
        let written = async {
            to.write_all(body).await?;
            to.write_all(b"\n").await?;
            to.flush().await
        };
        if written.await.is_err() {
            // rmcp's side is gone: nobody is listening any more.
            break None;
        }
    };
    if let Some(v) = violation {
        on_violation(v);
    }
    let _ = to.shutdown().await;
}

/// The start of a bad line, quoted.
fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    let mut cut: String = text.chars().take(EXCERPT).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

/// The tool's stdin, shared between rmcp's writer and the supervisor, which closes it to ask
/// the tool to exit.
#[derive(Debug, Clone)]
pub(super) struct SharedStdin(Arc<Mutex<Option<ChildStdin>>>);

impl SharedStdin {
    pub fn new(stdin: ChildStdin) -> Self {
        SharedStdin(Arc::new(Mutex::new(Some(stdin))))
    }

    /// Close the pipe: the tool reads end of file. Later writes fail with a broken pipe.
    pub fn close(&self) {
        drop(lock(&self.0).take());
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the tool's stdin is closed")
}

impl AsyncWrite for SharedStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match lock(&self.0).as_mut() {
            Some(stdin) => Pin::new(stdin).poll_write(cx, buf),
            None => Poll::Ready(Err(closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match lock(&self.0).as_mut() {
            Some(stdin) => Pin::new(stdin).poll_flush(cx),
            None => Poll::Ready(Err(closed())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match lock(&self.0).as_mut() {
            Some(stdin) => Pin::new(stdin).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_the_newest_bytes_and_counts_all() {
        let log = StderrLog::default();
        log.push(b"first line\n");
        let mark = log.total();
        log.push(&vec![b'x'; STDERR_RING]);
        log.push(b"\nlast line\n");
        assert_eq!(log.total(), 11 + STDERR_RING as u64 + 11);
        assert!(log.tail(STDERR_RING).ends_with("last line"));
        assert!(!log.tail(STDERR_RING).contains("first"));
        assert_eq!(log.tail(16), "last line");
        assert_eq!(log.since(mark).len(), STDERR_RING);
        assert_eq!(log.since(log.total()), "");
    }

    #[tokio::test]
    async fn guard_forwards_messages_and_stops_at_garbage() {
        let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\n  \nhello from print()\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
        let (mut read, write) = tokio::io::duplex(1024);
        let mut seen = None;
        guard_stdout(input, write, |v| seen = Some(v)).await;
        let mut out = String::new();
        read.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        assert_eq!(
            seen,
            Some(Violation(
                "it wrote this to stdout, which is not an MCP message: \"hello from print()\""
                    .into()
            ))
        );
    }

    #[tokio::test]
    async fn guard_ends_quietly_at_end_of_file() {
        let input: &[u8] =
            b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n{\"jsonrpc\": \"2.0\", \"id\": 1}";
        let (mut read, write) = tokio::io::duplex(1024);
        let mut seen = None;
        guard_stdout(input, write, |v| seen = Some(v)).await;
        let mut out = String::new();
        read.read_to_string(&mut out).await.unwrap();
        assert_eq!(
            out,
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n{\"jsonrpc\": \"2.0\", \"id\": 1}\n"
        );
        assert_eq!(seen, None);
    }

    #[test]
    fn only_json_rpc_counts_as_a_message() {
        assert!(is_message(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        assert!(is_message(br#"{"id":1,"jsonrpc":"2.0"}"#));
        assert!(!is_message(br#"{"answer": 42}"#));
        assert!(!is_message(br#"{"jsonrpc":"1.0"}"#));
        assert!(!is_message(br#"[{"jsonrpc":"2.0","id":1}]"#));
        assert!(!is_message(br#"{"jsonrpc":"2.0","id":1"#));
        assert!(!is_message(b"42"));
    }
}
