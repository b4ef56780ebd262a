//! The tool link: the supervisor's side of a tool's stdin and stdout. Everything the tool
//! writes is hostile input, checked here before rmcp parses any of it; everything written to
//! the tool goes out one whole message at a time, and a tool that stops reading is stopped.
//!
//! **A filter in front of rmcp, not an rmcp `ClientHandler`.** A handler only runs after
//! rmcp's service loop has parsed the whole message, logged it (every notification at `info`
//! with its payload; requests at `debug`, and a refusal at `warn` with the tool's id), and
//! spawned a task for each request whose answer then waits for the tool's stdin, holding the
//! request's id, without any bound on how many wait. A handler cannot undo any of that. So
//! [`guard_stdout`] reads each line within a byte bound, parses only its envelope (borrowing,
//! counting values, never building the payload), and decides:
//! - an **answer** to a request autotool sent and has not had answered yet: passed to rmcp,
//!   the only thing that ever is. It may hold at most [`Bounds::max_values`] JSON values, so
//!   rmcp's parse of it stays within a few MiB;
//! - a **request** from the tool (`ping`, `roots/list`, `sampling/createMessage`,
//!   `elicitation/create`, anything): refused right here with JSON-RPC error −32601 and a fixed
//!   message, echoing only its id, and counted; past [`REQUEST_BUDGET`] the tool is stopped;
//! - a **notification** (log messages, progress, cancellations, list changes): autotool uses
//!   none, so it is dropped. Notifications, and answers nobody asked for, draw on a rate budget
//!   (a burst of [`NOISE_BURST`] messages or [`NOISE_BURST_BYTES`], refilled at
//!   [`NOISE_RATE`] a second and [`NOISE_RATE_BYTES`] a second); a tool past it is stopped as
//!   flooding. At `debug` a log notification may be logged, redacted and then cut to
//!   [`LOGGED_BYTES`], at most [`LOGGED_BURST`] at once and [`LOGGED_RATE`] a second;
//! - a line over [`Bounds::max_line`] bytes, an id that is not an integer or a string of at
//!   most [`MAX_ID`] bytes, a method name over [`MAX_METHOD`] bytes: the tool is stopped,
//!   with a message saying which ([`Misuse`]); a line that is not JSON-RPC at all is reported
//!   as garbage on stdout.
//!
//! Nothing a tool sends is logged at the default level: the verdicts above log only numbers
//! and the names of known MCP methods.
//!
//! **Writes to the tool** ([`pump_stdin`]): rmcp writes into an in-memory pipe; one task moves
//! each whole line from it to the tool's stdin, with the link's refusals between lines, and
//! notes the id of every request it passes on (what an answer must match). A write that makes
//! no progress for [`STDIN_STALL`] means the tool stopped reading: it is stopped.
//!
//! **Memory** is bounded per process: one line buffer of at most `max_line` bytes (given back
//! after a long line), the envelope parse (borrowed), the refusals queue (at most
//! `REQUEST_BUDGET + 1` small messages), the in-memory pipes (64 KiB each), and the ids of
//! requests in flight. Nothing is queued between the pipe and rmcp but the 64 KiB pipe, and
//! nothing outlives the process.

use super::stdio::LINK_PIPE;
use crate::logging::redact_cut_str;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, watch};

/// Bytes of framing allowed around an answer's output: the JSON-RPC envelope, the result's
/// structure, `_meta`, escapes.
pub const FRAMING: usize = 64 << 10;
/// The longest id accepted from a tool, in bytes (a string; integers are bounded by being
/// integers).
pub const MAX_ID: usize = 128;
/// The longest method name accepted from a tool, in bytes.
pub const MAX_METHOD: usize = 128;
/// Requests from a tool that are refused before it is stopped as abusive.
pub const REQUEST_BUDGET: u32 = 4;
/// Notifications and unasked-for answers a tool may send at once…
pub const NOISE_BURST: f64 = 1000.0;
/// …and how many a second after that.
pub const NOISE_RATE: f64 = 200.0;
/// Bytes of notifications and unasked-for answers a tool may send at once…
pub const NOISE_BURST_BYTES: f64 = (1 << 20) as f64;
/// …and how many a second after that.
pub const NOISE_RATE_BYTES: f64 = (256 << 10) as f64;
/// Log notifications written at `debug` at once…
pub const LOGGED_BURST: f64 = 20.0;
/// …and how many a second after that.
pub const LOGGED_RATE: f64 = 2.0;
/// Bytes of a log notification's text kept at `debug` (after redaction).
pub const LOGGED_BYTES: usize = 512;
/// A write to the tool's stdin making no progress for this long stops the tool.
pub const STDIN_STALL: Duration = Duration::from_secs(5);
/// A line buffer grown past this is given back after the line.
const KEEP_CAPACITY: usize = 64 << 10;
/// How much of an over-long line is looked at to tell an answer from another message.
const SNIFF: usize = 512;

/// How much a tool may send in one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// `max_output_bytes`, which the other bounds follow from.
    pub max_output_bytes: usize,
    /// The longest line: room for the output twice (a function with a return annotation sends
    /// it as text and again as `structuredContent`) plus [`FRAMING`].
    pub max_line: usize,
    /// The most JSON values in one message: one per 16 bytes of `max_line`, at least 4096. A
    /// value costs a parser 32 bytes or more, so this keeps rmcp's parse of an answer within a
    /// few times its size, whatever its shape (`[0,0,0,…]` is 16 values a byte without it).
    pub max_values: usize,
}

impl Bounds {
    pub fn for_output(max_output_bytes: usize) -> Bounds {
        let max_line = max_output_bytes.saturating_mul(2).saturating_add(FRAMING);
        Bounds {
            max_output_bytes,
            max_line,
            max_values: (max_line / 16).max(4096),
        }
    }
}

/// How a tool misused its link to autotool; it was stopped for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misuse {
    /// A line over [`Bounds::max_line`]; `answer` when it looked like an answer.
    TooLarge {
        limit: usize,
        max_output_bytes: usize,
        answer: bool,
    },
    /// An answer with more than [`Bounds::max_values`] JSON values.
    TooComplex {
        limit: usize,
        max_output_bytes: usize,
    },
    /// An id that is not an integer or a string of at most [`MAX_ID`] bytes; `long` when it
    /// was a string over the bound.
    BadId { long: bool },
    /// A method name over [`MAX_METHOD`] bytes.
    LongMethod,
    /// More than [`REQUEST_BUDGET`] requests to autotool; `methods` names the standard MCP
    /// methods among them.
    Requests { count: u32, methods: Vec<String> },
    /// Notifications (and answers nobody asked for) past the rate budget.
    Flood { messages: u64, bytes: u64 },
    /// A write to its stdin made no progress for `after`.
    StdinStalled { after: Duration },
}

impl Misuse {
    /// What the tool did.
    pub fn what(&self) -> String {
        match self {
            Misuse::TooLarge {
                limit,
                max_output_bytes,
                answer: true,
            } => format!(
                "the tool's answer was too large: more than {} in one message, where an answer \
                 carries at most `max_output_bytes` ({}) of output, twice (text and \
                 structuredContent), plus {} of framing",
                size(*limit),
                size(*max_output_bytes),
                size(FRAMING)
            ),
            Misuse::TooLarge { limit, .. } => format!(
                "the tool wrote a message of more than {} that was not an answer (a notification \
                 or a request of its own), larger than any answer may be",
                size(*limit)
            ),
            Misuse::TooComplex {
                limit,
                max_output_bytes,
            } => format!(
                "the tool's answer was too large: it holds more than {limit} JSON values, more \
                 than an answer of `max_output_bytes` ({}) needs",
                size(*max_output_bytes)
            ),
            Misuse::BadId { long: true } => {
                format!("the tool sent a message whose id is longer than {MAX_ID} bytes")
            }
            Misuse::BadId { long: false } => "the tool sent a message whose id is neither a \
                                              string nor an integer, which MCP does not allow"
                .to_string(),
            Misuse::LongMethod => format!(
                "the tool sent a message whose method name is longer than {MAX_METHOD} bytes"
            ),
            Misuse::Requests { count, methods } => {
                let named = if methods.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", methods.join(", "))
                };
                format!(
                    "the tool sent {count} requests to autotool{named}, which serves none to \
                     tools: each was refused, and a tool that sends more than {REQUEST_BUDGET} is \
                     stopped as abusive"
                )
            }
            Misuse::Flood { messages, bytes } => format!(
                "the tool flooded autotool with notifications: {messages} messages ({}), more \
                 than autotool takes (bursts of {NOISE_BURST} messages or {}, then {NOISE_RATE} \
                 and {} a second)",
                size(*bytes as usize),
                size(NOISE_BURST_BYTES as usize),
                size(NOISE_RATE_BYTES as usize)
            ),
            Misuse::StdinStalled { after } => format!(
                "the tool stopped reading its stdin: autotool could not write to it for {} s",
                after.as_secs()
            ),
        }
    }

    /// What to do about it.
    pub fn advice(&self) -> &'static str {
        match self {
            Misuse::TooLarge { answer: true, .. } => {
                "Return less: cut, page or summarise the result inside the function, or raise \
                 `max_output_bytes`."
            }
            Misuse::TooComplex { .. } => {
                "Return less: cut, page or summarise the result inside the function."
            }
            Misuse::TooLarge { answer: false, .. } | Misuse::Flood { .. } => {
                "autotool uses no notifications from tools: log to stderr (`logging`, \
                 `print(..., file=sys.stderr)`)."
            }
            Misuse::BadId { .. } | Misuse::LongMethod => {
                "Write MCP messages only through the SDK (`mcp.run()`), never by hand."
            }
            Misuse::Requests { .. } => {
                "A tool answers autotool's requests and sends none of its own (no ping, \
                 roots/list, sampling or elicitation): take what the function needs as its \
                 arguments."
            }
            Misuse::StdinStalled { .. } => {
                "A tool must keep reading requests while it works: an `async def` function that \
                 blocks (sleeps, computes, waits on I/O without `await`) stops it; make it a \
                 plain `def`, or await instead of blocking."
            }
        }
    }
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}. {}", self.what(), self.advice())
    }
}

/// `n` bytes, readably.
fn size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Why [`guard_stdout`] stopped forwarding, when it was not a plain end of file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stop {
    /// Not an MCP message at all: the tool printed to stdout.
    Garbage(String),
    Misuse(Misuse),
}

/// The ids of requests autotool sent and the tool has not answered yet.
#[derive(Debug, Default, Clone)]
pub(super) struct Outstanding(Arc<Mutex<HashSet<u64>>>);

impl Outstanding {
    fn insert(&self, id: u64) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id);
    }

    fn remove(&self, id: u64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
    }
}

/// A token bucket: `capacity` at once, refilled at `rate` a second.
#[derive(Debug)]
struct Bucket {
    capacity: f64,
    rate: f64,
    level: f64,
    at: Instant,
}

impl Bucket {
    fn new(capacity: f64, rate: f64, now: Instant) -> Bucket {
        Bucket {
            capacity,
            rate,
            level: capacity,
            at: now,
        }
    }

    fn take(&mut self, n: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * self.rate).min(self.capacity);
        self.at = now;
        if self.level >= n {
            self.level -= n;
            true
        } else {
            false
        }
    }
}

/// What to do with one line from the tool.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// An answer autotool waits for: pass it to rmcp.
    Forward,
    /// A notification or an answer nobody asked for: drop it.
    Drop,
    /// A request from the tool: write this refusal to its stdin.
    Refuse(Vec<u8>),
    Stop(Stop),
}

/// The link's judgement of one tool's messages, and its budgets.
#[derive(Debug)]
pub(super) struct Inspector {
    bounds: Bounds,
    outstanding: Outstanding,
    /// For log lines: which tool.
    label: String,
    requests: u32,
    methods: BTreeSet<&'static str>,
    noise: Bucket,
    noise_bytes: Bucket,
    noise_total: (u64, u64),
    logged: Bucket,
    /// Log notifications not logged since the last one that was.
    unlogged: u64,
}

/// MCP's request methods a tool might send a client, named in a [`Misuse::Requests`].
const KNOWN_REQUESTS: &[&str] = &[
    "ping",
    "roots/list",
    "sampling/createMessage",
    "elicitation/create",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];

impl Inspector {
    pub fn new(bounds: Bounds, outstanding: Outstanding, label: String) -> Inspector {
        let now = Instant::now();
        Inspector {
            bounds,
            outstanding,
            label,
            requests: 0,
            methods: BTreeSet::new(),
            noise: Bucket::new(NOISE_BURST, NOISE_RATE, now),
            noise_bytes: Bucket::new(NOISE_BURST_BYTES, NOISE_RATE_BYTES, now),
            noise_total: (0, 0),
            logged: Bucket::new(LOGGED_BURST, LOGGED_RATE, now),
            unlogged: 0,
        }
    }

    /// Judge one line (trimmed, not empty, at most `max_line` bytes).
    pub fn inspect(&mut self, line: &[u8], now: Instant) -> Verdict {
        let counted = Cell::new(0usize);
        let parsed = {
            let mut de = serde_json::Deserializer::from_slice(line);
            let seed = EnvelopeSeed {
                counted: &counted,
                limit: self.bounds.max_values,
            };
            seed.deserialize(&mut de).and_then(|e| de.end().map(|()| e))
        };
        let envelope = match parsed {
            Ok(e) => e,
            Err(_) if counted.get() > self.bounds.max_values => {
                return Verdict::Stop(Stop::Misuse(Misuse::TooComplex {
                    limit: self.bounds.max_values,
                    max_output_bytes: self.bounds.max_output_bytes,
                }));
            }
            Err(_) => return garbage(line),
        };
        if envelope.jsonrpc.as_deref() != Some("2.0") {
            return garbage(line);
        }
        if let Some(method) = &envelope.method {
            if method.len() > MAX_METHOD {
                return Verdict::Stop(Stop::Misuse(Misuse::LongMethod));
            }
            return match envelope.id {
                Field::Absent => self.notification(method, line, now),
                Field::Present(Id::Number(n)) => self.refuse(method, IdText::Number(n)),
                Field::Present(Id::Text(s)) if s.len() <= MAX_ID => {
                    self.refuse(method, IdText::Text(s.into_owned()))
                }
                Field::Present(Id::Text(_)) => {
                    Verdict::Stop(Stop::Misuse(Misuse::BadId { long: true }))
                }
                Field::Present(Id::Null | Id::Other) => {
                    Verdict::Stop(Stop::Misuse(Misuse::BadId { long: false }))
                }
            };
        }
        if !envelope.answer {
            return Verdict::Stop(Stop::Garbage(
                "it wrote a JSON-RPC message that is neither a request, a notification nor an \
                 answer"
                    .into(),
            ));
        }
        let ours = match &envelope.id {
            Field::Present(Id::Number(n)) => u64::try_from(*n).ok(),
            Field::Present(Id::Text(s)) if s.len() <= MAX_ID => s.parse::<u64>().ok(),
            Field::Present(Id::Text(_)) => {
                return Verdict::Stop(Stop::Misuse(Misuse::BadId { long: true }));
            }
            Field::Present(Id::Other) => {
                return Verdict::Stop(Stop::Misuse(Misuse::BadId { long: false }));
            }
            // An error without an id (JSON-RPC allows it for a request it could not read).
            Field::Present(Id::Null) | Field::Absent => None,
        };
        if ours.is_some_and(|id| self.outstanding.remove(id)) {
            return Verdict::Forward;
        }
        self.noise(line.len(), now)
    }

    /// A notification: dropped, counted, perhaps logged at debug.
    fn notification(&mut self, method: &str, line: &[u8], now: Instant) -> Verdict {
        if let Verdict::Stop(s) = self.noise(line.len(), now) {
            return Verdict::Stop(s);
        }
        if method == "notifications/message" && tracing::enabled!(tracing::Level::DEBUG) {
            if self.logged.take(1.0, now) {
                self.log_message(line);
            } else {
                if self.unlogged == 0 {
                    tracing::debug!(
                        tool = %self.label,
                        "further log notifications from this tool are not logged for now \
                         (at most {LOGGED_RATE} a second)"
                    );
                }
                self.unlogged += 1;
            }
        }
        Verdict::Drop
    }

    fn log_message(&mut self, line: &[u8]) {
        #[derive(serde::Deserialize)]
        struct Message {
            params: Option<Params>,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            level: Option<serde_json::Value>,
            logger: Option<serde_json::Value>,
            data: Option<serde_json::Value>,
        }
        let Ok(Message { params: Some(p) }) = serde_json::from_slice::<Message>(line) else {
            return;
        };
        const LEVELS: &[&str] = &[
            "debug",
            "info",
            "notice",
            "warning",
            "error",
            "critical",
            "alert",
            "emergency",
        ];
        let level = p
            .level
            .as_ref()
            .and_then(|l| l.as_str())
            .and_then(|l| LEVELS.iter().find(|k| **k == l))
            .copied()
            .unwrap_or("?");
        let text = |v: Option<serde_json::Value>, max: usize| match v {
            None => String::new(),
            Some(serde_json::Value::String(s)) => redact_cut_str(&s, max),
            Some(other) => redact_cut_str(&other.to_string(), max),
        };
        let logger = text(p.logger, 64);
        let data = text(p.data, LOGGED_BYTES);
        let skipped = std::mem::take(&mut self.unlogged);
        tracing::debug!(
            tool = %self.label,
            level,
            logger = %logger,
            skipped,
            "tool log notification: {data}"
        );
    }

    /// Count a message autotool has no use for against the rate budget.
    fn noise(&mut self, bytes: usize, now: Instant) -> Verdict {
        self.noise_total.0 += 1;
        self.noise_total.1 += bytes as u64;
        let count = self.noise.take(1.0, now);
        let volume = self.noise_bytes.take(bytes as f64, now);
        if count && volume {
            Verdict::Drop
        } else {
            Verdict::Stop(Stop::Misuse(Misuse::Flood {
                messages: self.noise_total.0,
                bytes: self.noise_total.1,
            }))
        }
    }

    /// A request from the tool: refused and counted.
    fn refuse(&mut self, method: &str, id: IdText) -> Verdict {
        self.requests += 1;
        if let Some(known) = KNOWN_REQUESTS.iter().find(|k| **k == method) {
            self.methods.insert(known);
        }
        if self.requests > REQUEST_BUDGET {
            return Verdict::Stop(Stop::Misuse(Misuse::Requests {
                count: self.requests,
                methods: self.methods.iter().map(|m| m.to_string()).collect(),
            }));
        }
        let id = match id {
            IdText::Number(n) => serde_json::Value::from(n),
            IdText::Text(s) => serde_json::Value::String(s),
        };
        let refusal = serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32601,
                "message": "autotool serves no requests from tools: a tool only answers \
                            autotool's requests",
            },
        });
        let mut bytes = refusal.to_string().into_bytes();
        bytes.push(b'\n');
        Verdict::Refuse(bytes)
    }
}

enum IdText {
    Number(i64),
    Text(String),
}

/// A line that is not JSON-RPC: the start of it, redacted, for the error message (which goes
/// to the model after the render step, and so must not hold a piece of a key).
fn garbage(line: &[u8]) -> Verdict {
    Verdict::Stop(Stop::Garbage(format!(
        "it wrote this to stdout, which is not an MCP message: {}",
        excerpt(line)
    )))
}

/// Characters of a bad stdout line quoted in an error message.
const EXCERPT: usize = 200;

/// The start of a bad line, redacted then cut, quoted.
pub(super) fn excerpt(bytes: &[u8]) -> String {
    let (redacted, cut) = crate::logging::redact_cut(bytes, EXCERPT * 4);
    let text = String::from_utf8_lossy(&redacted);
    let text = text.trim_end();
    let mut quoted: String = text.chars().take(EXCERPT).collect();
    if cut || quoted.len() < text.len() {
        quoted.push('…');
    }
    format!("{quoted:?}")
}

/// Why a line over the bound is too long, as far as its start tells: an id or a method name
/// still open at the end of the first [`SNIFF`] bytes, else an answer (`"result"` or
/// `"error"` before any `"method"`) or another message too large. Only the wording of the error
/// depends on it: the tool is stopped either way.
fn too_long(line: &[u8], bounds: Bounds) -> Misuse {
    let head = &line[..line.len().min(SNIFF)];
    let find = |needle: &[u8]| head.windows(needle.len()).position(|w| w == needle);
    // Is the string value of member `key` still open at the end of `head`?
    let open_string = |key: &[u8]| {
        let Some(at) = find(key) else { return false };
        let rest = &head[at + key.len()..];
        let mut rest = rest.trim_ascii_start();
        let Some(after_colon) = rest.strip_prefix(b":") else {
            return false;
        };
        rest = after_colon.trim_ascii_start();
        let Some(value) = rest.strip_prefix(b"\"") else {
            return false;
        };
        let mut escaped = false;
        !value.iter().any(|&b| {
            let close = b == b'"' && !escaped;
            escaped = b == b'\\' && !escaped;
            close
        })
    };
    if open_string(b"\"id\"") {
        return Misuse::BadId { long: true };
    }
    if open_string(b"\"method\"") {
        return Misuse::LongMethod;
    }
    let method = find(b"\"method\"");
    let answer = [find(b"\"result\""), find(b"\"error\"")]
        .into_iter()
        .flatten()
        .min();
    Misuse::TooLarge {
        limit: bounds.max_line,
        max_output_bytes: bounds.max_output_bytes,
        answer: match (answer, method) {
            (Some(a), Some(m)) => a < m,
            (Some(_), None) => true,
            (None, _) => false,
        },
    }
}

/// Forward the tool's stdout to `to` (rmcp's reader), one checked line at a time: answers
/// autotool waits for go through, refusals go to `replies`, everything else is dropped or
/// stops the link. The reason for stopping is reported through `on_stop` before `to` is
/// closed, so whoever sees the end of the stream finds the reason set.
pub(super) async fn guard_stdout(
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

/// Capacity of the refusals queue: the whole budget, and the one that stops the tool.
pub(super) const REPLIES: usize = REQUEST_BUDGET as usize + 1;

/// The tool's stdin as the supervisor holds it: closing it asks the tool to exit.
#[derive(Debug, Clone)]
pub(super) struct StdinLink {
    closed: Arc<watch::Sender<bool>>,
}

impl StdinLink {
    /// Close the pipe: the tool reads end of file; rmcp's later writes fail.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }
}

/// What [`pump_stdin`] works with.
pub(super) struct StdinPump<R> {
    /// rmcp's writes, one JSON-RPC message a line.
    pub from_rmcp: R,
    pub replies: mpsc::Receiver<Vec<u8>>,
    pub stdin: ChildStdin,
    pub outstanding: Outstanding,
}

/// A stdin link and the pump behind it.
pub(super) fn stdin_link<R>(pump: StdinPump<R>) -> (StdinLink, StdinPumpTask<R>) {
    let (tx, rx) = watch::channel(false);
    (
        StdinLink {
            closed: Arc::new(tx),
        },
        StdinPumpTask { pump, closed: rx },
    )
}

/// The pump, ready to run.
pub(super) struct StdinPumpTask<R> {
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

// ---------------------------------------------------------------------------------------------
// The envelope parser: the members the link judges by, borrowed where it can; every value
// counted, none kept.

/// A member that may be missing.
#[derive(Debug, Default)]
enum Field<T> {
    #[default]
    Absent,
    Present(T),
}

/// A message's id as far as the link cares.
#[derive(Debug)]
enum Id<'a> {
    Number(i64),
    Text(Cow<'a, str>),
    Null,
    /// A float, an integer past i64, a boolean, an array or an object.
    Other,
}

#[derive(Debug)]
struct Envelope<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Field<Id<'a>>,
    method: Option<Cow<'a, str>>,
    /// It has a `result` or an `error`.
    answer: bool,
}

struct EnvelopeSeed<'c> {
    counted: &'c Cell<usize>,
    limit: usize,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Envelope<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message (an object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let count = Counter {
            counted: self.counted,
            limit: self.limit,
        };
        let mut envelope = Envelope {
            jsonrpc: None,
            id: Field::Absent,
            method: None,
            answer: false,
        };
        let mut seen = [false; 5];
        let mut once = |i: usize, name: &str| {
            if std::mem::replace(&mut seen[i], true) {
                Err(de::Error::custom(format!("duplicate member `{name}`")))
            } else {
                Ok(())
            }
        };
        while let Some(key) = map.next_key::<Text<'de>>()? {
            count.one()?;
            match &*key.0 {
                "jsonrpc" => {
                    once(0, "jsonrpc")?;
                    envelope.jsonrpc = Some(map.next_value::<Text<'de>>()?.0);
                }
                "id" => {
                    once(1, "id")?;
                    envelope.id = Field::Present(map.next_value::<Id<'de>>()?);
                }
                "method" => {
                    once(2, "method")?;
                    envelope.method = Some(map.next_value::<Text<'de>>()?.0);
                }
                "result" | "error" => {
                    once(if &*key.0 == "result" { 3 } else { 4 }, &key.0)?;
                    envelope.answer = true;
                    map.next_value_seed(count)?;
                }
                _ => map.next_value_seed(count)?,
            }
        }
        Ok(envelope)
    }
}

/// Walks any JSON value without keeping it, counting values; past `limit` it fails.
#[derive(Clone, Copy)]
struct Counter<'c> {
    counted: &'c Cell<usize>,
    limit: usize,
}

impl Counter<'_> {
    fn one<E: de::Error>(&self) -> Result<(), E> {
        let n = self.counted.get() + 1;
        self.counted.set(n);
        if n > self.limit {
            Err(E::custom("too many values"))
        } else {
            Ok(())
        }
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.one()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.one()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.one()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.one()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.one()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.one()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.one()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// A string, borrowed from the line when it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> de::Deserialize<'de> for Id<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id<'de>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an id")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Id<'de>, E> {
                Ok(Id::Number(n))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Id<'de>, E> {
                Ok(i64::try_from(n).map_or(Id::Other, Id::Number))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Id<'de>, E> {
                Ok(Id::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Id<'de>, E> {
                Ok(Id::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Id<'de>, E> {
                Ok(Id::Null)
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Id<'de>, E> {
                Ok(Id::Text(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Id<'de>, E> {
                Ok(Id::Text(Cow::Owned(s.to_owned())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Id<'de>, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Id::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Id<'de>, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Id::Other)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

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
        let error =
            line(json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "x"}}));
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
        let (out, replies, stop) =
            guard(input.into_bytes(), Bounds::for_output(1024), &[0, 1]).await;
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
}
