//! Logging for every command: one `tracing` setup, and the rules every log line obeys on its
//! way out.
//!
//! - **Where.** `autotool serve` logs to stderr and to `$AUTOTOOL_HOME/logs/serve.log`
//!   ([`init_serve`]); the other commands to stderr only ([`init_stderr`]). Never to stdout:
//!   in stdio mode it is the host's JSON-RPC channel.
//! - **How much.** `AUTOTOOL_LOG` (the `EnvFilter` syntax: `debug`, `info,autotool=debug`, …),
//!   else `info` for serve and `warn` for the others. rmcp's own events are kept to `warn` and
//!   above unless `AUTOTOOL_LOG` names `rmcp`: its client side logs what a tool sends at `info`
//!   and `debug` (the tool's `initialize` answer, every notification with its payload, requests
//!   with their ids), and none of that may reach a log at the default level.
//! - **Redacted, then cut, then escaped.** Every line passes the redactor current for the process
//!   ([`set_redactor`], called whenever the supervisor's key snapshot changes) and is then cut
//!   to [`MAX_LINE`] bytes, so no line is unbounded and no key value is written, whole or in
//!   part: the cut falls after redaction, and bytes that might still be the start of a value
//!   when the input is cut short are dropped ([`redact_cut`]). Control characters are then shown
//!   escaped ([`crate::terminal`]), so a tool's or a registry's words quoted in a log line never
//!   drive the terminal it is read on.
//! - **Bounded on disk.** `serve.log` rotates at [`SERVE_LOG_MAX_BYTES`] and keeps
//!   [`SERVE_LOG_KEEP`] old files (`serve.log.1` the newest), so the logs of a home take at most
//!   four times 10 MiB. Every supervisor on the machine shares the one file: a rotation happens
//!   under `flock`, and a process whose file was rotated by another notices within a second
//!   ([`LogFile`]). Hand-written because the crates at hand rotate by time (`tracing-appender`)
//!   or assume a single writing process.

use crate::home::Home;
use crate::redact::{Redactor, StreamRedactor};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// The longest log line written, in bytes (an error with the tail of a tool's stderr fits).
pub const MAX_LINE: usize = 16 << 10;
/// `serve.log` is rotated before it grows past this.
pub const SERVE_LOG_MAX_BYTES: u64 = 10 << 20;
/// Rotated `serve.log` files kept (`serve.log.1` … `serve.log.3`).
pub const SERVE_LOG_KEEP: usize = 3;
/// How often a writer checks whether another process rotated the file under it.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);
/// Input bytes fed to the redactor at a time while cutting.
const REDACT_CHUNK: usize = 4 << 10;

/// The redactor every log line passes, once the supervisor has set one.
static REDACTOR: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

/// Make `redactor` the one every log line (and [`redact_cut`]) uses from now on. The
/// supervisor calls it whenever its key snapshot changes, so a key added while serving is
/// redacted from the next line on.
pub fn set_redactor(redactor: Arc<Redactor>) {
    *REDACTOR.write().unwrap_or_else(PoisonError::into_inner) = Some(redactor);
}

#[cfg(test)]
thread_local! {
    /// A unit test's own redactor, which wins over the process-wide one on its thread: other
    /// tests of the same process (a library refreshing its keys) set that one at any moment.
    static TEST_REDACTOR: std::cell::RefCell<Option<Arc<Redactor>>> =
        const { std::cell::RefCell::new(None) };
}

/// The redactor set last, if any.
pub fn current_redactor() -> Option<Arc<Redactor>> {
    #[cfg(test)]
    if let Some(own) = TEST_REDACTOR.with(|t| t.borrow().clone()) {
        return Some(own);
    }
    REDACTOR
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// `text` redacted with the current redactor, then cut to at most `max` bytes (at a character
/// boundary); `true` when something was cut. Only as much of `text` is searched as the output
/// needs, and what the redactor still held back when the input was cut short (it may be the
/// start of a value) is dropped, never written.
pub fn redact_cut(text: &[u8], max: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::with_capacity(text.len().min(max) + 64);
    let mut whole = true;
    match current_redactor() {
        None => {
            out.extend_from_slice(&text[..text.len().min(max + 1)]);
            whole = text.len() <= max;
        }
        Some(redactor) => {
            let mut stream = StreamRedactor::new(&*redactor);
            let mut fed = 0;
            while fed < text.len() && out.len() <= max {
                let end = (fed + REDACT_CHUNK).min(text.len());
                stream.push(&text[fed..end], &mut out);
                fed = end;
            }
            if fed == text.len() {
                stream.finish(&mut out);
            } else {
                whole = false;
            }
        }
    }
    if out.len() > max {
        let mut cut = max;
        // Back off to the start of a UTF-8 character.
        while cut > 0 && out.get(cut).is_some_and(|b| b & 0xC0 == 0x80) {
            cut -= 1;
        }
        out.truncate(cut);
        whole = false;
    }
    (out, !whole)
}

/// [`redact_cut`] as text, with `…` where it was cut.
pub fn redact_cut_str(text: &str, max: usize) -> String {
    let (bytes, cut) = redact_cut(text.as_bytes(), max);
    let mut s = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        s.push('…');
    }
    s
}

/// The level filter: `AUTOTOOL_LOG`, else `default`; rmcp at `warn` unless named.
pub fn filter(default: &str) -> EnvFilter {
    let asked = std::env::var("AUTOTOOL_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty());
    filter_from(asked.as_deref(), default)
}

/// [`filter`] with `asked` standing for `AUTOTOOL_LOG`.
pub fn filter_from(asked: Option<&str>, default: &str) -> EnvFilter {
    let build = |spec: &str| {
        let spec = if spec.contains("rmcp") {
            spec.to_string()
        } else {
            format!("{spec},rmcp=warn")
        };
        EnvFilter::try_new(spec)
    };
    asked
        .and_then(|s| build(s).ok())
        .or_else(|| build(default).ok())
        .unwrap_or_else(|| EnvFilter::new("warn"))
}

/// `autotool serve`'s logging: stderr and `serve.log` in `home` (stderr alone when the file
/// cannot be opened), at `info` unless `AUTOTOOL_LOG` says otherwise.
pub fn init_serve(home: &Home) {
    let mut sinks: Vec<Arc<dyn Sink>> = vec![Arc::new(Stderr)];
    let path = home.log_dir().join("serve.log");
    match LogFile::open(&path, SERVE_LOG_MAX_BYTES, SERVE_LOG_KEEP) {
        Ok(file) => sinks.push(Arc::new(file)),
        Err(e) => {
            init(Lines::new(sinks), "info");
            tracing::warn!(
                "cannot write {}: {e}; logging to stderr only",
                path.display()
            );
            return;
        }
    }
    init(Lines::new(sinks), "info");
}

/// Logging to stderr only, at `default` unless `AUTOTOOL_LOG` says otherwise.
pub fn init_stderr(default: &str) {
    init(Lines::new(vec![Arc::new(Stderr)]), default);
}

fn init(lines: Lines, default: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter(default))
        .with_ansi(false)
        .with_writer(lines)
        .try_init();
}

/// Somewhere finished log lines go.
pub trait Sink: Send + Sync {
    /// Write one line (redacted, cut, ending in a newline). Errors are dropped: a log that
    /// cannot be written must not stop the supervisor.
    fn line(&self, line: &[u8]);
}

/// The process's stderr.
#[derive(Debug, Clone, Copy)]
pub struct Stderr;

impl Sink for Stderr {
    fn line(&self, line: &[u8]) {
        let _ = io::stderr().lock().write_all(line);
    }
}

/// Lines kept in memory (tests).
impl<W: Write + Send> Sink for Mutex<W> {
    fn line(&self, line: &[u8]) {
        let _ = self
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write_all(line);
    }
}

/// The `tracing` writer: each event becomes one line, redacted and cut ([`finish_line`]),
/// handed to every sink.
#[derive(Clone)]
pub struct Lines {
    sinks: Arc<[Arc<dyn Sink>]>,
}

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines")
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl Lines {
    pub fn new(sinks: Vec<Arc<dyn Sink>>) -> Lines {
        Lines {
            sinks: sinks.into(),
        }
    }
}

impl<'a> MakeWriter<'a> for Lines {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            buf: Vec::new(),
            sinks: self.sinks.clone(),
        }
    }
}

/// One event being written; the line goes out when the writer is dropped.
pub struct LineWriter {
    buf: Vec<u8>,
    sinks: Arc<[Arc<dyn Sink>]>,
}

impl std::fmt::Debug for LineWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineWriter")
            .field("pending", &self.buf.len())
            .finish()
    }
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let line = finish_line(&self.buf);
        for sink in self.sinks.iter() {
            sink.line(&line);
        }
    }
}

/// An event as written: redacted, cut to [`MAX_LINE`] with a note saying so, control
/// characters escaped ([`crate::terminal::escape_text`]: a log quotes tools and registries, and
/// is read on a terminal), one newline at the end.
pub fn finish_line(event: &[u8]) -> Vec<u8> {
    let body = event.strip_suffix(b"\n").unwrap_or(event);
    let (line, cut) = redact_cut(body, MAX_LINE);
    let mut line = crate::terminal::escape_text_bytes(&line).into_owned();
    if cut {
        line.extend_from_slice(format!(" …[line cut at {MAX_LINE} bytes]").as_bytes());
    }
    line.push(b'\n');
    line
}

/// A log file with a size bound, rotated to `NAME.1` … `NAME.KEEP`, shared safely by several
/// processes appending to it.
///
/// Before each line the writer looks at the file's size (its own descriptor, so other
/// processes' lines count) and rotates when the line would take it past the bound. A rotation
/// takes an exclusive `flock` on the file, checks that the name still points at it (another
/// process may have rotated it meanwhile), shifts `NAME.i` to `NAME.i+1` (the oldest falls
/// off), renames `NAME` to `NAME.1` and opens a fresh `NAME` (0600). A writer that did not
/// rotate learns of it within [`FOLLOW_EVERY`] and reopens the name, so what it writes lands
/// in the current file.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    state: Mutex<Open>,
}

#[derive(Debug)]
struct Open {
    file: File,
    id: (u64, u64),
    checked: Instant,
}

impl LogFile {
    /// Open (create, append) `path`, rotating at `max_bytes` and keeping `keep` old files.
    pub fn open(path: &Path, max_bytes: u64, keep: usize) -> io::Result<LogFile> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let open = Open::at(path)?;
        Ok(LogFile {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            state: Mutex::new(open),
        })
    }

    /// Append `line`, rotating first when it would take the file past the bound.
    pub fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut open = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if open.checked.elapsed() >= FOLLOW_EVERY {
            if self.moved(&open) {
                *open = Open::at(&self.path)?;
            }
            open.checked = Instant::now();
        }
        let len = open.file.metadata()?.len();
        if len > 0 && len + line.len() as u64 > self.max_bytes {
            self.rotate(&mut open)?;
        }
        open.file.write_all(line)
    }

    /// Whether the name no longer points at the file `open` holds.
    fn moved(&self, open: &Open) -> bool {
        std::fs::metadata(&self.path).map_or(true, |m| (m.dev(), m.ino()) != open.id)
    }

    fn rotate(&self, open: &mut Open) -> io::Result<()> {
        rustix::fs::flock(&open.file, rustix::fs::FlockOperation::LockExclusive)?;
        if !self.moved(open) {
            let numbered = |i: usize| {
                let mut name = self.path.clone().into_os_string();
                name.push(format!(".{i}"));
                PathBuf::from(name)
            };
            if self.keep == 0 {
                let _ = std::fs::remove_file(&self.path);
            } else {
                for i in (1..self.keep).rev() {
                    let _ = std::fs::rename(numbered(i), numbered(i + 1));
                }
                std::fs::rename(&self.path, numbered(1))?;
            }
        }
        // The old descriptor, and with it the lock, goes with the replaced `Open`.
        *open = Open::at(&self.path)?;
        Ok(())
    }
}

impl Open {
    fn at(path: &Path) -> io::Result<Open> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        let meta = file.metadata()?;
        Ok(Open {
            file,
            id: (meta.dev(), meta.ino()),
            checked: Instant::now(),
        })
    }
}

impl Sink for LogFile {
    fn line(&self, line: &[u8]) {
        let _ = self.write_line(line);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Run `f` with a redactor of these secrets on this thread only (see [`TEST_REDACTOR`]).
    fn with_redactor<T>(secrets: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
        let own = Arc::new(Redactor::new(secrets).unwrap());
        TEST_REDACTOR.with(|t| *t.borrow_mut() = Some(own));
        let out = f();
        TEST_REDACTOR.with(|t| *t.borrow_mut() = None);
        out
    }

    #[test]
    fn a_line_is_redacted_then_cut_and_never_leaves_a_piece_of_a_value() {
        let value = "sk-live-0123456789abcdef";
        with_redactor(&[("API_KEY", value)], || {
            let line = format!("INFO tool said {value} twice {value}\n");
            let out = String::from_utf8(finish_line(line.as_bytes())).unwrap();
            assert_eq!(
                out,
                "INFO tool said [REDACTED:API_KEY] twice [REDACTED:API_KEY]\n"
            );
            // A value straddling the cut: whatever is written holds no prefix of it.
            for pad in MAX_LINE - value.len()..MAX_LINE + 2 {
                let line = format!("{}{value}{}\n", "x".repeat(pad), "y".repeat(100));
                let out = finish_line(line.as_bytes());
                assert!(out.len() <= MAX_LINE + 64, "{} bytes", out.len());
                let text = String::from_utf8_lossy(&out);
                assert!(
                    !text.contains("sk-live"),
                    "pad {pad}: a piece of the value got out"
                );
                assert!(
                    text.ends_with("bytes]\n"),
                    "pad {pad}: no note: {}",
                    &text[text.len() - 40..]
                );
            }
        });
    }

    #[test]
    fn a_huge_event_costs_only_what_the_line_needs() {
        with_redactor(&[("API_KEY", "abcd-secret-value")], || {
            let event = format!("{}\n", "z".repeat(8 << 20));
            let out = finish_line(event.as_bytes());
            assert!(out.len() < MAX_LINE + 64);
        });
    }

    #[test]
    fn redact_cut_keeps_characters_whole() {
        with_redactor(&[], || {
            let (out, cut) = redact_cut("ééééé".as_bytes(), 5);
            assert!(cut);
            assert_eq!(String::from_utf8(out).unwrap(), "éé");
            let (out, cut) = redact_cut(b"short", 5);
            assert!(!cut);
            assert_eq!(out, b"short");
        });
    }

    #[test]
    fn rmcp_is_kept_to_warnings_unless_named() {
        let shown = |f: EnvFilter| f.to_string();
        assert!(shown(filter_from(None, "info")).contains("rmcp=warn"));
        assert!(shown(filter_from(Some("debug"), "info")).contains("rmcp=warn"));
        assert!(!shown(filter_from(Some("debug,rmcp=debug"), "info")).contains("rmcp=warn"));
        // An unreadable AUTOTOOL_LOG falls back to the default.
        let fallback = shown(filter_from(Some("[[[not a filter"), "info"));
        assert!(
            fallback.contains("info") && fallback.contains("rmcp=warn"),
            "{fallback}"
        );
    }

    fn sizes(dir: &Path) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
        all.sort();
        all
    }

    #[test]
    fn the_log_rotates_at_its_bound_and_keeps_three_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.log");
        let log = LogFile::open(&path, 1000, 3).unwrap();
        for i in 0..100 {
            log.write_line(format!("line {i:04} {}\n", "x".repeat(88)).as_bytes())
                .unwrap();
        }
        let files = sizes(dir.path());
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["serve.log", "serve.log.1", "serve.log.2", "serve.log.3"]
        );
        for (name, len) in &files {
            assert!(*len <= 1000, "{name} is {len} bytes");
        }
        let newest = std::fs::read_to_string(&path).unwrap();
        assert!(newest.ends_with(&format!("line 0099 {}\n", "x".repeat(88))));
        let older = std::fs::read_to_string(dir.path().join("serve.log.1")).unwrap();
        assert!(older.contains("line 0089"), "{older}");
    }

    #[test]
    fn two_writers_sharing_the_file_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.log");
        let a = LogFile::open(&path, 2000, 2).unwrap();
        let b = LogFile::open(&path, 2000, 2).unwrap();
        for i in 0..200 {
            let w = if i % 2 == 0 { &a } else { &b };
            w.write_line(format!("{i:04} {}\n", "y".repeat(45)).as_bytes())
                .unwrap();
        }
        let files = sizes(dir.path());
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["serve.log", "serve.log.1", "serve.log.2"]);
        for (name, len) in &files {
            assert!(*len <= 2000, "{name} is {len} bytes");
        }
        // A writer that did not rotate follows the name within a second.
        std::thread::sleep(FOLLOW_EVERY);
        a.write_line(b"after a\n").unwrap();
        b.write_line(b"after b\n").unwrap();
        let newest = std::fs::read_to_string(&path).unwrap();
        assert!(
            newest.contains("after a") && newest.contains("after b"),
            "{newest}"
        );
    }

    #[test]
    fn the_log_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.log");
        LogFile::open(&path, 100, 1)
            .unwrap()
            .write_line(b"x\n")
            .unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
