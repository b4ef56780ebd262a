//! How a tool misused its link, in words the agent reads: what it did and what to change.

use super::{
    FRAMING, MAX_ID, MAX_METHOD, NOISE_BURST, NOISE_BURST_BYTES, NOISE_RATE, NOISE_RATE_BYTES,
    REQUEST_BUDGET,
};
use std::fmt;
use std::time::Duration;

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
pub(super) fn size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}
