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

//!
//! Layout: `inspect` judges one line (its parse in `envelope`, its misuses in `misuse`),
//! `stdout` runs the judgement over the tool's stdout, `stdin` pumps rmcp's writes to the
//! tool; the bounds and the ids in flight they share are here.

mod envelope;
mod inspect;
mod misuse;
mod stdin;
mod stdout;
#[cfg(test)]
mod tests;

pub(super) use inspect::Inspector;
pub use misuse::Misuse;
pub(super) use stdin::{REPLIES, StdinLink, StdinPump, stdin_link};
pub(super) use stdout::guard_stdout;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

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
