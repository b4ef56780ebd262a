//! How verification fails: the [`Stage`] a failure happened at, the [`VerifyFailure`] the agent
//! reads (what went wrong, what to do, the log), and the one rule for logs: redacted before they
//! are cut ([`cap_head`], [`cap_tail`], [`tail_of`]); a traceback summed up at the tool's own
//! frame ([`traceback_summary`]).

use super::LOG_CAP;
use crate::redact::Redactor;
use crate::tool::process::ToolProcError;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A verification stage. [`Stage::name`] is stable: hosts and logs may match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Lint,
    Declarations,
    Packages,
    Launch,
    Initialize,
    ListTools,
    SmokeTest,
    Examples,
    Relations,
    Robustness,
    Adversarial,
    Baseline,
}

impl Stage {
    /// Every stage, in the order they run.
    pub const ALL: [Stage; 12] = [
        Stage::Lint,
        Stage::Declarations,
        Stage::Packages,
        Stage::Launch,
        Stage::Initialize,
        Stage::ListTools,
        Stage::SmokeTest,
        Stage::Examples,
        Stage::Relations,
        Stage::Robustness,
        Stage::Adversarial,
        Stage::Baseline,
    ];

    /// `lint`, `declarations`, `packages`, `launch`, `initialize`, `list_tools`, `smoke_test`,
    /// `examples`, `relations`, `robustness`, `adversarial`, `baseline`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Lint => "lint",
            Stage::Declarations => "declarations",
            Stage::Packages => "packages",
            Stage::Launch => "launch",
            Stage::Initialize => "initialize",
            Stage::ListTools => "list_tools",
            Stage::SmokeTest => "smoke_test",
            Stage::Examples => "examples",
            Stage::Relations => "relations",
            Stage::Robustness => "robustness",
            Stage::Adversarial => "adversarial",
            Stage::Baseline => "baseline",
        }
    }

    /// What to do after a failure here.
    fn next_step(self) -> &'static str {
        match self {
            Stage::Lint => {
                "Fix the code where the message above says (the lines ruff names, or the declaration), then create the tool again."
            }
            Stage::Declarations => "Fix the declaration, then create the tool again.",
            Stage::Packages => {
                "Change REQUIRED_PACKAGES as the message says (autotool installs wheels only, from the package index the user configured), then create the tool again."
            }
            Stage::Launch => {
                "This is about the machine or autotool's setup, not the tool's code: `autotool doctor` says what is missing."
            }
            Stage::Initialize => {
                "The module must import without errors, create `mcp = MCPServer(\"name\")`, register functions with `@mcp.tool()` and end with `mcp.run()`; it may write only MCP messages to stdout (diagnostics go to stderr). Fix the error below, then create the tool again."
            }
            Stage::ListTools => "Fix the tool's functions, then create the tool again.",
            Stage::SmokeTest => {
                "Fix the function (or the smoke test's arguments), then create the tool again."
            }
            Stage::Examples => {
                "An example the code declares in EXAMPLES did not hold. Fix the function, or the example if the function is right, then create the tool again."
            }
            Stage::Relations => {
                "A relation the code declares in RELATIONS did not hold: the function answered the changed input differently. Make the function treat that change as the relation says (strip surrounding whitespace, ignore case, accept the prefix or suffix, not depend on the list's order), or remove the relation if it should not hold, then create the tool again."
            }
            Stage::Baseline => {
                "A trusted version of this tool met the obligation above; every later version owes it. Fix the function, then create the tool again."
            }
            Stage::Adversarial => {
                "autotool's own model wrote hostile inputs the function's schema accepts, and the answer to the one above leaked what the tool holds (a key's value, a dump of its environment) or sent the tool to a host its keys may not reach. Answer only what the function is for: never echo environment variables, never build a URL or host from the caller's input, and refuse such input with ToolError. Then create the tool again."
            }
            Stage::Robustness => {
                "Probes are edge-case calls autotool derives from each function's input schema (empty and huge strings, unicode, boundary numbers, missing optional arguments). Make the function answer such input with a result, or raise ToolError with a message the caller can act on; a range it cannot serve can be refused by the schema itself (`Annotated[int, Field(ge=1, le=100)]`). Then create the tool again. A tool whose calls change things outside it can be created with \"verify\": \"quick\", which skips the probes."
            }
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a tool did not pass. `Display` is the text for the agent that wrote it: the stage, what
/// went wrong, what to do, then the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyFailure {
    pub stage: Stage,
    /// What went wrong, in a sentence or two (without the log).
    pub message: String,
    /// Ruff's report (lint), or the tool's stderr with its traceback (later stages); may be
    /// empty. Unredacted.
    pub log: String,
}

impl VerifyFailure {
    pub(super) fn new(stage: Stage, message: impl Into<String>, log: impl Into<String>) -> Self {
        VerifyFailure {
            stage,
            message: message.into(),
            log: log.into(),
        }
    }

    /// The same failure with every known key value replaced in its message and log.
    pub fn redacted(self, redactor: Option<&Redactor>) -> Self {
        match redactor {
            None => self,
            Some(r) => VerifyFailure {
                stage: self.stage,
                message: r.redact(&self.message).into_owned(),
                log: r.redact(&self.log).into_owned(),
            },
        }
    }
}

tokio::task_local! {
    /// The redactor of the verification running on this task: every cut of a log
    /// ([`cap_head`], [`cap_tail`], [`tail_of`]) redacts through it first.
    pub(super) static SCRUB: Option<Arc<Redactor>>;
}

/// `text` with every value the running verification's redactor knows replaced (unchanged
/// outside a verification).
fn scrub(text: &str) -> std::borrow::Cow<'_, str> {
    SCRUB
        .try_with(|r| r.as_ref().map(|r| r.redact(text).into_owned()))
        .ok()
        .flatten()
        .map_or(std::borrow::Cow::Borrowed(text), std::borrow::Cow::Owned)
}

impl std::fmt::Display for VerifyFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "verification failed at {}: {}\n{}",
            self.stage,
            self.message,
            self.stage.next_step()
        )?;
        let log = self.log.trim_end();
        match self.stage {
            Stage::Initialize if log.is_empty() => {
                write!(f, "\n--- the tool's stderr: it wrote nothing ---")
            }
            _ if log.is_empty() => Ok(()),
            Stage::Lint => write!(f, "\n--- ruff's report ---\n{log}"),
            _ => write!(f, "\n--- the tool's stderr (traceback included) ---\n{log}"),
        }
    }
}

impl std::error::Error for VerifyFailure {}

/// At most [`LOG_CAP`] bytes of `text`, its start kept, redacted before it is cut.
pub(super) fn cap_head(text: &str) -> String {
    let text = scrub(text);
    if text.len() <= LOG_CAP {
        return text.to_string();
    }
    let mut end = LOG_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes]", &text[..end], text.len() - end)
}

/// At most [`LOG_CAP`] bytes of `text`, its end kept.
pub(super) fn cap_tail(text: &str) -> String {
    tail_of(text, LOG_CAP)
}

/// At most `max` bytes of `text` (on a character boundary), its end kept, with a note of how
/// much came before; redacted (inside a verification) before it is cut. A traceback lives at
/// the end of a log.
pub fn tail_of(text: &str, max: usize) -> String {
    let text = scrub(text);
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("[… {start} bytes before]\n{}", &text[start..])
}

/// A process error as (what happened, the tool's stderr).
pub(super) fn split(e: ToolProcError) -> (String, String) {
    match e {
        ToolProcError::Initialize {
            reason,
            stderr_tail,
        } => (
            format!("the tool did not start as an MCP server: {reason}"),
            stderr_tail,
        ),
        ToolProcError::Timeout {
            operation,
            after,
            stderr_tail,
        } => (
            format!(
                "`{operation}` got no answer within {:.1} s, so the tool process was stopped",
                after.as_secs_f64()
            ),
            stderr_tail,
        ),
        ToolProcError::Exited {
            operation,
            exit,
            stderr_tail,
            ..
        } => (
            format!("the tool process ended ({exit}) before answering `{operation}`"),
            stderr_tail,
        ),
        ToolProcError::Misused {
            operation,
            misuse,
            stderr_tail,
        } => (
            format!(
                "during `{operation}`, {}, so the tool was stopped. {}",
                misuse.what(),
                misuse.advice()
            ),
            stderr_tail,
        ),
        ToolProcError::Protocol {
            operation,
            what,
            stderr_tail,
        } => (
            format!(
                "the tool broke the MCP protocol during `{operation}`: {what}; print diagnostics to stderr, never to stdout"
            ),
            stderr_tail,
        ),
        other => (other.to_string(), String::new()),
    }
}

/// The exception of the first traceback in `stderr` that passes through the tool's own file,
/// with that frame: `ZeroDivisionError: division by zero (tool.py, line 10, in divide)`.
pub fn traceback_summary(stderr: &str, tool_file: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("Traceback (most recent call last):") {
            i += 1;
            continue;
        }
        let mut frame = None;
        i += 1;
        while i < lines.len() && lines[i].starts_with(' ') {
            frame = tool_frame(lines[i], tool_file).or(frame);
            i += 1;
        }
        if let (Some(frame), Some(raised)) = (frame, lines.get(i)) {
            let raised = raised.trim();
            if !raised.is_empty() {
                return Some(format!("{raised} ({frame})"));
            }
        }
    }
    None
}

/// `  File "/tool/tool.py", line 10, in divide` → `tool.py, line 10, in divide`.
fn tool_frame(line: &str, tool_file: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("File \"")?;
    let (path, place) = rest.split_once("\", ")?;
    let ours = path == tool_file || path.ends_with(&format!("/{tool_file}"));
    ours.then(|| format!("{tool_file}, {place}"))
}
