//! The tool's stderr, kept in a bounded ring for error messages (its stdin and stdout are the
//! tool link: [`super::link`]).

use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Bytes of stderr kept (the newest).
pub(super) const STDERR_RING: usize = 64 << 10;
/// Bytes of stderr quoted in an error message (the newest, from a line start when possible).
pub(super) const STDERR_IN_ERRORS: usize = 16 << 10;
/// Capacity of each in-memory pipe between the tool link and rmcp.
pub(super) const LINK_PIPE: usize = 64 << 10;

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

/// Bytes a tool's stderr file grows to before it is moved to `<file>.1` (replacing the one
/// there) and started again: at most twice this is kept per tool.
pub const STDERR_FILE_CAP: u64 = 256 << 10;

/// Where a tool's stderr is kept on disk (`$AUTOTOOL_HOME/logs/tools/<name>.log`), and the
/// redactor it passes first (the key values the process holds), so nothing a tool echoes of
/// a key is written.
#[derive(Debug, Clone)]
pub struct StderrFile {
    pub path: std::path::PathBuf,
    pub redactor: Option<Arc<crate::redact::Redactor>>,
}

/// Appends a tool's stderr, redacted, to its [`StderrFile`], moving it aside past
/// [`STDERR_FILE_CAP`]. Every failure to write is ignored: the file is a convenience, the ring
/// is what errors quote.
struct FileSink {
    path: std::path::PathBuf,
    stream: Option<crate::redact::StreamRedactor<Arc<crate::redact::Redactor>>>,
    scratch: Vec<u8>,
}

impl FileSink {
    fn new(file: StderrFile) -> FileSink {
        if let Some(dir) = file.path.parent() {
            let _ = crate::home::ensure_dir(dir, 0o700);
        }
        FileSink {
            path: file.path,
            stream: file.redactor.map(crate::redact::StreamRedactor::new),
            scratch: Vec::new(),
        }
    }

    fn write(&mut self, bytes: &[u8], last: bool) {
        use std::io::Write;
        self.scratch.clear();
        match &mut self.stream {
            Some(stream) => {
                stream.push(bytes, &mut self.scratch);
                if last {
                    stream.finish(&mut self.scratch);
                }
            }
            None => self.scratch.extend_from_slice(bytes),
        }
        if self.scratch.is_empty() {
            return;
        }
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= STDERR_FILE_CAP) {
            let mut aside = self.path.clone().into_os_string();
            aside.push(".1");
            let _ = std::fs::rename(&self.path, aside);
        }
        let opened = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path);
        if let Ok(mut f) = opened {
            let _ = f.write_all(&self.scratch);
        }
    }
}

use std::os::unix::fs::OpenOptionsExt;

/// Copy the tool's stderr into `log` (and, redacted, into `file`) until it closes.
pub(super) async fn pump_stderr(
    mut stderr: impl AsyncRead + Unpin,
    log: Arc<StderrLog>,
    file: Option<StderrFile>,
) {
    let mut chunk = vec![0u8; 8 << 10];
    let mut sink = file.map(FileSink::new);
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                if let Some(sink) = &mut sink {
                    sink.write(&[], true);
                }
                return;
            }
            Ok(n) => {
                log.push(&chunk[..n]);
                if let Some(sink) = &mut sink {
                    sink.write(&chunk[..n], false);
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_file_is_redacted_across_reads_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools/t.log");
        let redactor = crate::redact::Redactor::new(&[("K", "sk-split-value-0123")]).unwrap();
        let mut sink = FileSink::new(StderrFile {
            path: path.clone(),
            redactor: Some(Arc::new(redactor)),
        });
        // A value split across two reads is still caught.
        sink.write(b"leaked sk-split-", false);
        sink.write(b"value-0123 here\n", false);
        sink.write(b"", true);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "leaked [REDACTED:K] here\n");
        // Past the cap it is moved aside: at most two files' worth.
        let line = vec![b'x'; 8 << 10];
        for _ in 0..(3 * STDERR_FILE_CAP as usize / line.len()) {
            sink.write(&line, false);
        }
        sink.write(b"", true);
        let len = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let aside = dir.path().join("tools/t.log.1");
        assert!(len(&aside) >= STDERR_FILE_CAP, "{}", len(&aside));
        assert!(len(&path) + len(&aside) <= 2 * STDERR_FILE_CAP + (16 << 10));
    }

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
}
