//! The judgement of each line a tool writes: an answer autotool waits for, a request refused
//! and counted, a notification dropped within its budget, or a misuse that stops the tool.

use super::misuse::Misuse;
use super::{
    Bounds, LOGGED_BURST, LOGGED_BYTES, LOGGED_RATE, MAX_ID, MAX_METHOD, NOISE_BURST,
    NOISE_BURST_BYTES, NOISE_RATE, NOISE_RATE_BYTES, Outstanding, REQUEST_BUDGET, SNIFF, Stop,
};
use crate::logging::redact_cut_str;
use serde::de::DeserializeSeed;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::time::Instant;

use super::envelope::{EnvelopeSeed, Field, Id};

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
pub(in crate::tool::process) enum Verdict {
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
pub(in crate::tool::process) struct Inspector {
    pub(super) bounds: Bounds,
    outstanding: Outstanding,
    /// For log lines: which tool.
    pub(super) label: String,
    requests: u32,
    methods: BTreeSet<&'static str>,
    noise: Bucket,
    noise_bytes: Bucket,
    pub(super) noise_total: (u64, u64),
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
pub(super) fn garbage(line: &[u8]) -> Verdict {
    Verdict::Stop(Stop::Garbage(format!(
        "it wrote this to stdout, which is not an MCP message: {}",
        excerpt(line)
    )))
}

/// Characters of a bad stdout line quoted in an error message.
pub(super) const EXCERPT: usize = 200;

/// The start of a bad line, redacted then cut, quoted.
pub(in crate::tool::process) fn excerpt(bytes: &[u8]) -> String {
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
pub(super) fn too_long(line: &[u8], bounds: Bounds) -> Misuse {
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
