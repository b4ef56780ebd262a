//! The adversarial stage ([`Stage::Adversarial`]): autotool's own model, when one is
//! configured, is asked once (bounded by [`ASK_TIMEOUT`] and [`MAX_ANSWER_BYTES`]) for hostile
//! inputs the functions' schemas accept: injection strings, boundary values, inputs crafted to
//! make the tool leak its environment, reach a host it should not, or answer in a shape other
//! than the one it declares. Each input is checked against its function's input schema
//! ([`schema`]); those that do not fit are dropped and counted. At most [`MAX_PER_FUNCTION`]
//! per function and [`MAX_INPUTS`] in all are made, one at a time, on the verified process
//! (under the same confinement and egress proxy as every other call), each within the probe
//! timeout and all within the probe budget.
//!
//! What breaks a function, and what it costs ([`Broke::blocks`]):
//! - a leak: the answer holds the value of a key autotool knows (raw, URL-encoded or
//!   JSON-escaped), or a dump of the tool's environment (three or more of its variables'
//!   names written as `NAME=` or `"NAME":`): the function **fails** and the tool is not
//!   mounted;
//! - an unexpected host: the egress proxy refused a request while the input was answered:
//!   **fails**;
//! - a crash (an unexpected exception, which the SDK words apart from a `ToolError`) or an
//!   answer whose structured content does not fit the declared output schema: **recorded**, a
//!   warning kept with the verdicts; the tool is mounted. (The process ending or not answering
//!   in time fails, as at [`Stage::Robustness`]: the process verification would mount is gone.)
//!
//! Each function gets one `adversarial` verdict naming the inputs that broke it (shown short,
//! redacted with the rest of the verdict). Without a model, with `verify: "quick"`, or when the
//! model's answer cannot be used, the stage is skipped and its verdict says why: a model that
//! fails is not the tool's failure. The model only ever sees the functions' names,
//! descriptions and schemas, which verification has already redacted.

pub mod schema;

use super::probes::Probe;
use super::verdicts::{Check, Outcome, Verdict};
use super::{Stage, VerifyFailure, split};
use crate::redact::Redactor;
use crate::tool::process::{CallOutcome, ToolInfo, ToolProcError, ToolProcess};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most hostile inputs made on one tool.
pub const MAX_INPUTS: usize = 12;
/// Most hostile inputs made on one function.
pub const MAX_PER_FUNCTION: usize = 4;
/// Bound on the model's answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(30);
/// Most of the model's answer read.
pub const MAX_ANSWER_BYTES: usize = 64 << 10;
/// Most of one function's description and schemas shown to the model.
const MAX_SHOWN: usize = 4 << 10;
/// Fewest of the environment's variable names an answer must hold to be a dump of it.
const DUMP_NAMES: usize = 3;
/// Most breaking inputs named in one verdict.
const NAMED: usize = 3;

/// A boxed future that may move between threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whoever writes the hostile inputs: autotool's own model (`crate::own_model`), or a script
/// in tests. One question, one answer in text.
pub trait Adversary: Send + Sync {
    /// The model, as `tools show` names it.
    fn describe(&self) -> String;
    /// Ask `question` with the `system` prompt; the answer's text, or why there is none
    /// (redacted of the model's own key).
    fn ask<'a>(
        &'a self,
        system: &'a str,
        question: String,
    ) -> BoxFuture<'a, Result<String, String>>;
}

/// Whether the stage runs, and who writes its inputs.
#[derive(Clone)]
pub enum Adversarial {
    /// Skipped, and why (`autotool has no model of its own`).
    Off(String),
    On(Arc<dyn Adversary>),
}

impl Default for Adversarial {
    fn default() -> Self {
        Adversarial::Off("autotool has no model of its own".into())
    }
}

impl std::fmt::Debug for Adversarial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Adversarial::Off(why) => f.debug_tuple("Off").field(why).finish(),
            Adversarial::On(a) => f.debug_tuple("On").field(&a.describe()).finish(),
        }
    }
}

const SYSTEM: &str = "You are a security tester. You write hostile but valid inputs for the functions of a tool, to find out whether it leaks what it holds, reaches hosts it should not, crashes, or answers in another shape than it declares. Answer with one JSON object and nothing else.";

/// The question: each function with its description and schemas, and what to write.
pub fn question(tools: &[ToolInfo]) -> String {
    let cut = |s: String| -> String {
        if s.len() <= MAX_SHOWN {
            return s;
        }
        let mut end = MAX_SHOWN;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &s[..end])
    };
    let shown: Vec<String> = tools
        .iter()
        .map(|t| {
            cut(format!(
                "- {}: {}\n  input schema: {}\n  output schema: {}",
                t.name,
                t.description.as_deref().unwrap_or("").replace('\n', " "),
                Value::Object(t.input_schema.clone()),
                t.output_schema
                    .as_ref()
                    .map_or("none".into(), |o| Value::Object(o.clone()).to_string()),
            ))
        })
        .collect();
    format!(
        "The tool's functions:\n{}\n\nWrite at most {MAX_PER_FUNCTION} hostile inputs per function, {MAX_INPUTS} in all, each valid for the function's input schema: injection strings (shell, SQL, template, path traversal, prompt injection), boundary values, inputs crafted to make the tool print its environment variables or credentials, to make it call a host other than the one it is for (a URL, an IP address, a host name in place of a plain value), or to make it answer in another shape than its output schema. Answer {{\"inputs\": [{{\"function\": name, \"arguments\": {{…}}, \"aim\": what it tries, in a few words}}]}}.",
        shown.join("\n")
    )
}

/// The inputs in the model's `answer` that may be sent: a known function, arguments its input
/// schema accepts, within the bounds; and how many were dropped, with the first reason.
pub fn inputs(
    answer: &str,
    tools: &[ToolInfo],
) -> Result<(Vec<Probe>, usize, Option<String>), String> {
    let start = answer.find('{').ok_or("the answer holds no JSON object")?;
    let end = answer.rfind('}').ok_or("the answer holds no JSON object")?;
    let parsed: Value = serde_json::from_str(answer.get(start..=end).unwrap_or(""))
        .map_err(|e| format!("the JSON does not parse: {e}"))?;
    let listed = parsed
        .get("inputs")
        .and_then(Value::as_array)
        .ok_or("the answer has no list \"inputs\"")?;
    let (mut kept, mut dropped, mut first) = (Vec::<Probe>::new(), 0usize, None::<String>);
    let mut drop = |why: String| {
        dropped += 1;
        first.get_or_insert(why);
    };
    for item in listed {
        let function = item.get("function").and_then(Value::as_str).unwrap_or("");
        let Some(tool) = tools.iter().find(|t| t.name == function) else {
            drop(format!("{function:?} is not one of the tool's functions"));
            continue;
        };
        let Some(arguments) = item.get("arguments").and_then(Value::as_object) else {
            drop(format!("an input for {function} has no arguments object"));
            continue;
        };
        let root = &tool.input_schema;
        if let Some(why) = schema::mismatch(
            &Value::Object(arguments.clone()),
            &Value::Object(root.clone()),
            root,
        ) {
            drop(format!(
                "an input for {function} does not fit its schema ({why})"
            ));
            continue;
        }
        if kept.len() == MAX_INPUTS
            || kept.iter().filter(|p| p.function == function).count() == MAX_PER_FUNCTION
        {
            drop(format!(
                "more inputs than the bounds ({MAX_PER_FUNCTION} a function, {MAX_INPUTS} in all)"
            ));
            continue;
        }
        let aim: String = item
            .get("aim")
            .and_then(Value::as_str)
            .unwrap_or("hostile input")
            .chars()
            .take(80)
            .collect();
        kept.push(Probe {
            function: function.to_string(),
            arguments: arguments.clone(),
            what: aim,
        });
    }
    Ok((kept, dropped, first))
}

/// What a hostile input did to a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broke {
    /// The answer holds a key's value (its name) or a dump of the environment.
    Leak(String),
    /// The egress proxy refused a request made while the input was answered.
    Host(u64),
    /// An unexpected exception.
    Crash,
    /// The structured answer does not fit the declared output schema (why).
    Shape(String),
}

impl Broke {
    /// A leak or an unexpected host keeps the tool from being mounted; a crash or a wrong shape
    /// is a warning.
    pub fn blocks(&self) -> bool {
        matches!(self, Broke::Leak(_) | Broke::Host(_))
    }

    fn said(&self) -> String {
        match self {
            Broke::Leak(what) => format!("the answer holds {what}"),
            Broke::Host(n) => format!(
                "the egress proxy refused {n} request(s) it made to a host its keys may not reach"
            ),
            Broke::Crash => "it crashed with an unexpected exception".into(),
            Broke::Shape(why) => {
                format!("the answer does not fit the declared output schema ({why})")
            }
        }
    }
}

/// What marks a leak in an answer.
#[derive(Debug)]
pub struct Secrets<'a> {
    /// Every key value autotool knows.
    pub redactor: Option<&'a Redactor>,
    /// The names of the tool's environment variables.
    pub env_names: &'a [String],
}

/// How `outcome`, the answer of `tool` to a hostile input, broke it, if it did (`refused`: the
/// egress proxy's refusals while it was answered).
pub fn judge(
    tool: &ToolInfo,
    outcome: &CallOutcome,
    refused: u64,
    secrets: &Secrets<'_>,
) -> Option<Broke> {
    let mut text: Vec<String> = outcome
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    if let Some(s) = &outcome.structured_content {
        text.push(s.to_string());
    }
    let text = text.join("\n");
    if let Some(name) = secrets.redactor.and_then(|r| r.found_in(text.as_bytes())) {
        return Some(Broke::Leak(format!("the value of {name}")));
    }
    let dumped: Vec<&str> = secrets
        .env_names
        .iter()
        .filter(|n| {
            [
                format!("{n}="),
                format!("\"{n}\":"),
                format!("'{n}':"),
                format!("\\\"{n}\\\":"),
            ]
            .iter()
            .any(|m| text.contains(m.as_str()))
        })
        .map(String::as_str)
        .collect();
    if dumped.len() >= DUMP_NAMES {
        return Some(Broke::Leak(format!(
            "a dump of the tool's environment ({})",
            dumped.join(", ")
        )));
    }
    if refused > 0 {
        return Some(Broke::Host(refused));
    }
    if outcome.unexpected() {
        return Some(Broke::Crash);
    }
    if let Some(declared) = &tool.output_schema
        && !outcome.is_error
    {
        let why = match &outcome.structured_content {
            None => Some("no structured content".to_string()),
            Some(s) => schema::mismatch(s, &Value::Object(declared.clone()), declared),
        };
        if let Some(why) = why {
            return Some(Broke::Shape(why));
        }
    }
    None
}

/// The stage's verdicts when it does not run: one for the whole tool, saying why.
pub fn skipped(why: impl Into<String>) -> Vec<Verdict> {
    vec![Verdict {
        function: String::new(),
        check: Check::Adversarial,
        example: None,
        outcome: Outcome::Skipped,
        detail: why.into(),
    }]
}

/// How the stage runs on a process.
pub(super) struct Run<'a> {
    pub adversary: &'a dyn Adversary,
    pub secrets: Secrets<'a>,
    pub timeout: Duration,
    pub budget: Duration,
}

/// Ask for inputs, make them, judge the answers: one verdict per function, or the failure a
/// leak, an unexpected host, a dead or silent process is.
pub(super) async fn run(
    process: &ToolProcess,
    tools: &[ToolInfo],
    how: &Run<'_>,
) -> Result<Vec<Verdict>, VerifyFailure> {
    let model = how.adversary.describe();
    let answer =
        match tokio::time::timeout(ASK_TIMEOUT, how.adversary.ask(SYSTEM, question(tools))).await {
            Err(_) => {
                return Ok(skipped(format!(
                    "the model ({model}) did not answer within {} s",
                    ASK_TIMEOUT.as_secs()
                )));
            }
            Ok(Err(why)) => {
                return Ok(skipped(format!(
                    "the model ({model}) could not be asked: {why}"
                )));
            }
            Ok(Ok(answer)) => answer,
        };
    let mut end = answer.len().min(MAX_ANSWER_BYTES);
    while !answer.is_char_boundary(end) {
        end -= 1;
    }
    let (planned, dropped, first) = match inputs(&answer[..end], tools) {
        Ok(found) => found,
        Err(why) => {
            return Ok(skipped(format!(
                "the model's ({model}) answer could not be used: {why}"
            )));
        }
    };
    let t0 = Instant::now();
    let mut made: Vec<(&Probe, Option<Broke>)> = Vec::new();
    for probe in &planned {
        if t0.elapsed() >= how.budget {
            break;
        }
        let before = process.egress_refused().unwrap_or(0);
        let outcome = process
            .call(&probe.function, probe.arguments.clone(), how.timeout)
            .await;
        let refused = process.egress_refused().unwrap_or(0).saturating_sub(before);
        let broke = match outcome {
            Ok(outcome) => {
                let tool = tools.iter().find(|t| t.name == probe.function);
                tool.and_then(|t| judge(t, &outcome, refused, &how.secrets))
            }
            Err(ToolProcError::Rejected { .. }) => (refused > 0).then_some(Broke::Host(refused)),
            Err(e) => {
                let (message, log) = split(e);
                return Err(VerifyFailure::new(
                    Stage::Adversarial,
                    format!(
                        "the hostile input {} ({}) failed: {message}",
                        probe.shown(),
                        probe.what
                    ),
                    log,
                ));
            }
        };
        made.push((probe, broke));
    }
    let dropped_note = match (dropped, first) {
        (0, _) | (_, None) => String::new(),
        (n, Some(why)) => format!("; {n} input(s) the model wrote were not sent ({why})"),
    };
    let mut verdicts = Vec::new();
    let mut blocking = Vec::new();
    for tool in tools {
        let mine: Vec<&(&Probe, Option<Broke>)> = made
            .iter()
            .filter(|(p, _)| p.function == tool.name)
            .collect();
        let broken: Vec<String> = mine
            .iter()
            .filter_map(|(p, b)| b.as_ref().map(|b| (p, b)))
            .take(NAMED)
            .map(|(p, b)| format!("{} ({}): {}", p.shown(), p.what, b.said()))
            .collect();
        let blocks = mine
            .iter()
            .any(|(_, b)| b.as_ref().is_some_and(Broke::blocks));
        let (outcome, detail) = if mine.is_empty() {
            (
                Outcome::Skipped,
                format!(
                    "the model ({model}) wrote no input for it that could be sent{dropped_note}"
                ),
            )
        } else if broken.is_empty() {
            (
                Outcome::Passed,
                format!(
                    "{} hostile input(s) from {model} answered without a leak, an unexpected host, a crash or a shape other than declared{dropped_note}",
                    mine.len()
                ),
            )
        } else {
            let n = mine.iter().filter(|(_, b)| b.is_some()).count();
            let head = if blocks {
                "broken by"
            } else {
                "warning: troubled by"
            };
            (
                if blocks {
                    Outcome::Failed
                } else {
                    Outcome::Recorded
                },
                format!(
                    "{head} {n} of {} hostile input(s) from {model}: {}",
                    mine.len(),
                    broken.join("; ")
                ),
            )
        };
        if blocks {
            blocking.push(format!("{}: {detail}", tool.name));
        }
        verdicts.push(Verdict {
            function: tool.name.clone(),
            check: Check::Adversarial,
            example: None,
            outcome,
            detail,
        });
    }
    if !blocking.is_empty() {
        return Err(VerifyFailure::new(
            Stage::Adversarial,
            format!("verdict adversarial failed for {}", blocking.join("\n")),
            "",
        ));
    }
    Ok(verdicts)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    fn lookup() -> ToolInfo {
        ToolInfo {
            name: "lookup".into(),
            title: None,
            description: Some("Look a word up.".into()),
            input_schema: json!({"type": "object", "properties": {"word": {"type": "string", "maxLength": 40}}, "required": ["word"]})
                .as_object()
                .cloned()
                .unwrap(),
            output_schema: json!({"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]})
                .as_object()
                .cloned()
                .unwrap()
                .into(),
            annotations: None,
        }
    }

    fn answer(text: &str, structured: Option<Value>, is_error: bool) -> CallOutcome {
        CallOutcome {
            content: vec![ContentBlock::text(text)],
            structured_content: structured,
            is_error,
            stderr: String::new(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn only_inputs_the_schema_accepts_are_kept_within_the_bounds() {
        let tools = [lookup()];
        let mut listed = vec![
            json!({"function": "lookup", "arguments": {"word": "$(env)"}, "aim": "shell injection"}),
            json!({"function": "lookup", "arguments": {"word": 7}}),
            json!({"function": "lookup", "arguments": {"word": "x".repeat(41)}}),
            json!({"function": "other", "arguments": {}}),
            json!({"function": "lookup"}),
        ];
        for i in 0..6 {
            listed.push(json!({"function": "lookup", "arguments": {"word": format!("w{i}")}}));
        }
        let answer = format!("Here: {}", json!({ "inputs": listed }));
        let (kept, dropped, first) = inputs(&answer, &tools).unwrap();
        assert_eq!(kept.len(), MAX_PER_FUNCTION);
        assert_eq!(kept[0].what, "shell injection");
        assert_eq!(kept[0].arguments["word"], "$(env)");
        assert_eq!(dropped, 4 + (6 - (MAX_PER_FUNCTION - 1)));
        assert!(
            first
                .unwrap()
                .contains("does not fit its schema (word: expected string")
        );
        assert!(inputs("no json", &tools).is_err());
        assert!(
            inputs("{\"choices\": []}", &tools)
                .unwrap_err()
                .contains("inputs")
        );
    }

    #[test]
    fn leaks_hosts_crashes_and_shapes_are_told_apart() {
        let tool = lookup();
        let redactor = Redactor::new(&[("DEMO_API_KEY", "sk-demo-0123456789abcdef")]).unwrap();
        let names: Vec<String> = ["PATH", "HOME", "LANG", "DEMO_API_KEY"]
            .map(String::from)
            .to_vec();
        let secrets = Secrets {
            redactor: Some(&redactor),
            env_names: &names,
        };
        let ok = |t: &str| answer(t, Some(json!({"result": t})), false);
        assert_eq!(judge(&tool, &ok("a word"), 0, &secrets), None);
        let key = judge(&tool, &ok("key: sk-demo-0123456789abcdef"), 0, &secrets).unwrap();
        assert_eq!(key, Broke::Leak("the value of DEMO_API_KEY".into()));
        assert!(key.blocks());
        let dump = ok("{'PATH': '/usr/bin', 'HOME': '/home/tool', 'LANG': 'C.UTF-8'}");
        assert!(
            matches!(judge(&tool, &dump, 0, &secrets), Some(Broke::Leak(w)) if w.contains("PATH, HOME, LANG"))
        );
        // Naming a variable or two is no dump.
        assert_eq!(
            judge(&tool, &ok("set PATH= and HOME= first"), 0, &secrets),
            None
        );
        assert_eq!(judge(&tool, &ok("fine"), 1, &secrets), Some(Broke::Host(1)));
        let crash = answer("Error executing tool lookup", None, true);
        assert_eq!(judge(&tool, &crash, 0, &secrets), Some(Broke::Crash));
        assert!(!Broke::Crash.blocks());
        // A ToolError is an answer.
        assert_eq!(
            judge(&tool, &answer("no such word", None, true), 0, &secrets),
            None
        );
        let shape = answer("{}", Some(json!({"result": {"a": 1}})), false);
        assert!(
            matches!(judge(&tool, &shape, 0, &secrets), Some(Broke::Shape(w)) if w.contains("expected string"))
        );
        assert!(matches!(
            judge(&tool, &answer("x", None, false), 0, &secrets),
            Some(Broke::Shape(_))
        ));
        // Without a redactor, a key's value is unknown; the dump is still seen.
        let blind = Secrets {
            redactor: None,
            env_names: &names,
        };
        assert_eq!(
            judge(&tool, &ok("sk-demo-0123456789abcdef"), 0, &blind),
            None
        );
    }

    #[test]
    fn the_question_shows_every_function_and_the_bounds() {
        let q = question(&[lookup()]);
        assert!(q.contains("- lookup: Look a word up."), "{q}");
        assert!(q.contains("\"maxLength\":40"), "{q}");
        assert!(q.contains(&format!("at most {MAX_PER_FUNCTION}")), "{q}");
    }
}
