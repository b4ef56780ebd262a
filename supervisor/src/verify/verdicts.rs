//! Verdicts no tool author writes: whether a function's answers mean anything, judged from the
//! calls verification makes, and the examples a tool declares, checked.
//!
//! - [`Check::NonDegenerate`]: a function that gives one and the same successful answer to at
//!   least [`DEGENERATE_INPUTS`] distinct inputs (plain values and the robustness probes' edge
//!   cases, garbage included) in which every argument took at least two values answers nothing:
//!   it fails. A function without arguments is not judged; nor is one whose probes left an
//!   argument at one value (the answer may hang on it), or that was probed with fewer inputs.
//!   An acknowledgement is not degenerate: a function that declares a side effect (its MCP
//!   annotations say `readOnlyHint: false` or `destructiveHint: true`) may answer `"sent"` to
//!   everything; and a constant answer to well-formed inputs that still refuses garbage (an
//!   error to an edge case) differs across the inputs, so it passes as it is.
//! - [`Check::Deterministic`]: the same arguments twice must give the same answer, for a tool
//!   that holds no keys and reached no network while it was verified (a confined tool whose
//!   egress proxy saw no connection). A function listed in `NONDETERMINISTIC` (a clock,
//!   randomness) may differ: the difference is recorded, not failed. Where the network was or
//!   may have been reached (`--sandbox off`), a difference is recorded only.
//! - [`Check::Example`]: each entry of `EXAMPLES` called, its answer compared with `expect`.
//! - [`Check::Relation`]: each entry of `RELATIONS` ([`super::relations`]): an example's input
//!   and the same input transformed must be answered alike.
//!
//! An answer is compared as a value ([`Answer`]): the structured result (a return value
//! FastMCP wraps as `{"result": …}` unwrapped), otherwise the text, read as JSON when it is
//! JSON. Numbers compare by value (`1` equals `1.0`).

use crate::tool::process::CallOutcome;
use rmcp::model::JsonObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Fewest distinct inputs answered alike that make a function degenerate.
pub const DEGENERATE_INPUTS: usize = 3;
/// Longest answer shown in a verdict's detail.
const SHOWN: usize = 160;

/// Which check a verdict is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Deterministic,
    NonDegenerate,
    /// An entry of `EXAMPLES` (which one: [`Verdict::example`]).
    Example,
    /// An entry of `RELATIONS` (which one: [`Verdict::example`]).
    Relation,
    /// The smoke test, as an obligation of later versions ([`super::baseline`]).
    SmokeTest,
    /// An obligation inherited from a trusted version, checked.
    Baseline,
    /// Whether autotool's own model picks the tool for requests it should serve and not for
    /// near misses (of the whole tool, `function` empty).
    Trigger,
    /// Hostile inputs autotool's own model wrote, made on the tool ([`super::adversary`]).
    Adversarial,
}

impl Check {
    /// Every check.
    pub const ALL: [Check; 8] = [
        Check::Deterministic,
        Check::NonDegenerate,
        Check::Example,
        Check::Relation,
        Check::SmokeTest,
        Check::Baseline,
        Check::Trigger,
        Check::Adversarial,
    ];

    /// `deterministic`, `non_degenerate`, `example`, `relation`, `smoke_test`, `baseline`,
    /// `trigger`, `adversarial`.
    pub fn name(self) -> &'static str {
        match self {
            Check::Deterministic => "deterministic",
            Check::NonDegenerate => "non_degenerate",
            Check::Example => "example",
            Check::Relation => "relation",
            Check::SmokeTest => "smoke_test",
            Check::Baseline => "baseline",
            Check::Trigger => "trigger",
            Check::Adversarial => "adversarial",
        }
    }

    /// The check named `name`.
    pub fn named(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Passed,
    Failed,
    /// A difference that is allowed (declared, or the network may explain it), kept on record.
    Recorded,
    /// Not judged, and why is in the detail.
    Skipped,
}

impl Outcome {
    /// `passed`, `failed`, `recorded`, `skipped`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Recorded => "recorded",
            Outcome::Skipped => "skipped",
        }
    }

    /// The outcome named `name`.
    pub fn named(name: &str) -> Option<Outcome> {
        [
            Outcome::Passed,
            Outcome::Failed,
            Outcome::Recorded,
            Outcome::Skipped,
        ]
        .into_iter()
        .find(|o| o.name() == name)
    }
}

/// One check of one function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub function: String,
    pub check: Check,
    /// For [`Check::Example`]: which entry of `EXAMPLES`, from 1; for [`Check::Relation`],
    /// which entry of `RELATIONS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<u32>,
    pub outcome: Outcome,
    /// What was seen, in a sentence (answers shortened).
    pub detail: String,
}

impl Verdict {
    /// `non_degenerate`, or `example 2`, or `relation 1`.
    pub fn label(&self) -> String {
        match self.example {
            Some(n) => format!("{} {n}", self.check.name()),
            None => self.check.name().to_string(),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.function.is_empty() {
            write!(f, "{} {}", self.label(), self.outcome.name())?;
        } else {
            write!(
                f,
                "{}: {} {}",
                self.function,
                self.label(),
                self.outcome.name()
            )?;
        }
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

/// A trigger verdict's detail ends with this and the fit: `… (fit 0.67)`.
const FIT_MARK: &str = " (fit ";

/// The detail of a trigger verdict: `summary`, then the fit.
pub fn trigger_detail(summary: &str, fit: f64) -> String {
    format!("{summary}{FIT_MARK}{fit:.2})")
}

/// The fit a trigger verdict's detail ends with.
pub fn fit_in(detail: &str) -> Option<f64> {
    let (_, rest) = detail.rsplit_once(FIT_MARK)?;
    rest.strip_suffix(')')?.parse().ok()
}

/// A function's answer to one call, as compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The tool reported an error (a `ToolError`, or arguments it refused).
    pub is_error: bool,
    pub value: Value,
}

impl Answer {
    /// The answer in `outcome`.
    pub fn of(outcome: &CallOutcome) -> Answer {
        let text = || {
            outcome
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let value = match &outcome.structured_content {
            _ if outcome.is_error => Value::String(text()),
            Some(Value::Object(o)) if o.len() == 1 && o.contains_key("result") => {
                o.get("result").cloned().unwrap_or(Value::Null)
            }
            Some(structured) => structured.clone(),
            None => {
                let text = text();
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            }
        };
        Answer {
            is_error: outcome.is_error,
            value,
        }
    }

    /// The same answer: both errors or both results, with equal values.
    pub fn same(&self, other: &Answer) -> bool {
        self.is_error == other.is_error && same_value(&self.value, &other.value)
    }

    /// The answer in a few words, for a verdict's detail.
    pub fn shown(&self) -> String {
        let shown = shorten(&self.value.to_string());
        if self.is_error {
            format!("the error {shown}")
        } else {
            shown
        }
    }
}

/// `a` and `b` equal as JSON values, numbers by value.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// Whether `answer` is what an example expects: a result equal to `expect` (a text answer
/// also matches an `expect` string equal to its text).
pub fn meets(answer: &Answer, expect: &Value) -> bool {
    if answer.is_error {
        return false;
    }
    if same_value(&answer.value, expect) {
        return true;
    }
    match expect {
        // A text answer read as JSON (`"3"` became 3) still meets `"3"`.
        Value::String(s) if !answer.value.is_string() => {
            let text = answer.value.to_string();
            text.as_str() == s.as_str()
        }
        _ => false,
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() <= SHOWN {
        return s.to_string();
    }
    let head: String = s.chars().take(SHOWN).collect();
    format!("{head}… [{} characters]", s.chars().count())
}

/// The arguments a function's schema names.
pub fn arguments_of(input_schema: &JsonObject) -> Vec<String> {
    input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// Whether a function's MCP annotations declare a side effect (`readOnlyHint: false` or
/// `destructiveHint: true`, said explicitly): then one answer to everything is an
/// acknowledgement (`"sent"`, `"ok"`), not a degenerate function.
pub fn declares_side_effect(annotations: Option<&Value>) -> bool {
    annotations.is_some_and(|a| {
        a.get("readOnlyHint") == Some(&Value::Bool(false))
            || a.get("destructiveHint") == Some(&Value::Bool(true))
    })
}

/// The [`Check::NonDegenerate`] verdict on `function`, which takes `arguments`, from its
/// `answers` (arguments, answer); `None` when it takes no arguments. `side_effect`: it
/// declares one ([`declares_side_effect`]), so a constant answer is an acknowledgement.
pub fn non_degenerate(
    function: &str,
    arguments: &[String],
    answers: &[(&JsonObject, &Answer)],
    side_effect: bool,
) -> Option<Verdict> {
    if arguments.is_empty() {
        return None;
    }
    let verdict = |outcome, detail: String| Verdict {
        function: function.to_string(),
        check: Check::NonDegenerate,
        example: None,
        outcome,
        detail,
    };
    let mut inputs: Vec<String> = answers
        .iter()
        .map(|(a, _)| Value::Object((*a).clone()).to_string())
        .collect();
    inputs.sort();
    inputs.dedup();
    if inputs.len() < DEGENERATE_INPUTS {
        return Some(verdict(
            Outcome::Skipped,
            format!(
                "{} distinct inputs were tried, fewer than {DEGENERATE_INPUTS}",
                inputs.len()
            ),
        ));
    }
    // An argument the probes left at one value (left out counts as a value) may be what the
    // answer hangs on.
    let unvaried = arguments.iter().find(|name| {
        let mut seen: Vec<String> = answers
            .iter()
            .map(|(a, _)| {
                a.get(name.as_str())
                    .map_or_else(String::new, Value::to_string)
            })
            .collect();
        seen.sort();
        seen.dedup();
        seen.len() < 2
    });
    if let Some(name) = unvaried {
        return Some(verdict(
            Outcome::Skipped,
            format!("the probes did not vary {name}"),
        ));
    }
    let (_, first) = answers.first()?;
    let constant = !first.is_error && answers.iter().all(|(_, a)| a.same(first));
    Some(if constant && side_effect {
        verdict(
            Outcome::Passed,
            format!(
                "an acknowledgement: it declares a side effect and answered {} to each of {} \
                 distinct inputs",
                first.shown(),
                inputs.len()
            ),
        )
    } else if constant {
        verdict(
            Outcome::Failed,
            format!(
                "it answered {} to each of {} distinct inputs, well-formed and garbage alike. \
                 If that answer acknowledges an action (a message sent, a light switched), \
                 declare the side effect: @mcp.tool(annotations=ToolAnnotations(\
                 readOnlyHint=False)) (from mcp.types import ToolAnnotations); a function that \
                 refuses bad input (raise ToolError) is not judged constant either",
                first.shown(),
                inputs.len()
            ),
        )
    } else {
        verdict(
            Outcome::Passed,
            format!("{} distinct inputs, answers that differ", inputs.len()),
        )
    })
}

/// Whether a difference between two answers to the same call fails the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// It holds no keys and reached no network: an undeclared difference fails.
    Enforced,
    /// The function is listed in `NONDETERMINISTIC`.
    Declared,
    /// It holds keys, or reached (or may have reached) the network: a difference is recorded.
    MayReachNetwork,
}

/// The [`Check::Deterministic`] verdict on `function`, called twice with `arguments`.
pub fn deterministic(
    function: &str,
    arguments: &JsonObject,
    first: &Answer,
    second: &Answer,
    strictness: Strictness,
) -> Verdict {
    let call = format!(
        "{function}({})",
        shorten(&Value::Object(arguments.clone()).to_string())
    );
    let (outcome, detail) = if first.same(second) {
        (Outcome::Passed, format!("{call} answered alike twice"))
    } else {
        let seen = format!(
            "{call} answered {} and then {}",
            first.shown(),
            second.shown()
        );
        match strictness {
            Strictness::Enforced => (Outcome::Failed, seen),
            Strictness::Declared => (
                Outcome::Recorded,
                format!("{seen}; declared in NONDETERMINISTIC"),
            ),
            Strictness::MayReachNetwork => (
                Outcome::Recorded,
                format!("{seen}; the tool holds keys or reaches the network"),
            ),
        }
    };
    Verdict {
        function: function.to_string(),
        check: Check::Deterministic,
        example: None,
        outcome,
        detail,
    }
}

/// The [`Check::Example`] verdict on example `index` (from 1).
pub fn example(function: &str, index: u32, expect: &Value, answer: &Answer) -> Verdict {
    let (outcome, detail) = if meets(answer, expect) {
        (Outcome::Passed, format!("answered {}", answer.shown()))
    } else {
        (
            Outcome::Failed,
            format!(
                "expected {}, got {}",
                shorten(&expect.to_string()),
                answer.shown()
            ),
        )
    };
    Verdict {
        function: function.to_string(),
        check: Check::Example,
        example: Some(index),
        outcome,
        detail,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;
    use std::time::Duration;

    fn outcome(text: &str, structured: Option<Value>, is_error: bool) -> CallOutcome {
        CallOutcome {
            content: vec![ContentBlock::text(text)],
            structured_content: structured,
            is_error,
            stderr: String::new(),
            duration: Duration::ZERO,
        }
    }

    fn ok(value: Value) -> Answer {
        Answer {
            is_error: false,
            value,
        }
    }

    fn args(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn answers_are_read_as_values() {
        let wrapped = outcome("3", Some(json!({"result": 3})), false);
        assert_eq!(Answer::of(&wrapped), ok(json!(3)));
        let object = outcome("{}", Some(json!({"a": 1, "b": 2})), false);
        assert_eq!(Answer::of(&object), ok(json!({"a": 1, "b": 2})));
        assert_eq!(
            Answer::of(&outcome("[1, 2]", None, false)),
            ok(json!([1, 2]))
        );
        assert_eq!(Answer::of(&outcome("hi", None, false)), ok(json!("hi")));
        let error = Answer::of(&outcome("bad", Some(json!({"result": 1})), true));
        assert!(error.is_error && error.value == json!("bad"));
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(same_value(&json!({"x": [1, 2.0]}), &json!({"x": [1.0, 2]})));
        assert!(!same_value(&json!(1), &json!(2)));
        assert!(!same_value(&json!({"x": 1}), &json!({"x": 1, "y": 2})));
        assert!(!same_value(&json!("1"), &json!(1)));
    }

    #[test]
    fn a_constant_answer_to_distinct_inputs_is_degenerate() {
        let inputs = [
            args(json!({"q": "a"})),
            args(json!({"q": ""})),
            args(json!({"q": "😀"})),
        ];
        let same = ok(json!("sunny"));
        let q = ["q".to_string()];
        let answers: Vec<_> = inputs.iter().map(|a| (a, &same)).collect();
        let v = non_degenerate("forecast", &q, &answers, false).unwrap();
        assert_eq!(v.outcome, Outcome::Failed, "{v}");
        assert!(
            v.detail.contains("\"sunny\"") && v.detail.contains("3 distinct"),
            "{v}"
        );

        // Control: one answer differing is enough.
        let other = ok(json!("rain"));
        let mut answers = answers;
        answers[2].1 = &other;
        assert_eq!(
            non_degenerate("forecast", &q, &answers, false)
                .unwrap()
                .outcome,
            Outcome::Passed
        );

        // Errors alike are not judged degenerate here; too few inputs are not judged at all;
        // a function without arguments is not judged.
        let error = Answer {
            is_error: true,
            value: json!("no"),
        };
        let errors: Vec<_> = inputs.iter().map(|a| (a, &error)).collect();
        assert_eq!(
            non_degenerate("f", &q, &errors, false).unwrap().outcome,
            Outcome::Passed
        );
        let repeated = [
            (&inputs[0], &same),
            (&inputs[0], &same),
            (&inputs[1], &same),
        ];
        assert_eq!(
            non_degenerate("f", &q, &repeated, false).unwrap().outcome,
            Outcome::Skipped
        );
        assert_eq!(non_degenerate("f", &[], &answers, false), None);
        // An argument the probes never varied leaves the verdict unjudged: the answer may hang
        // on it (`len(items)` with items always empty).
        let both = ["q".to_string(), "items".to_string()];
        let v = non_degenerate("f", &both, &answers, false).unwrap();
        assert_eq!(v.outcome, Outcome::Skipped, "{v}");
        assert!(v.detail.contains("did not vary items"), "{v}");
    }

    #[test]
    fn a_difference_fails_only_where_nothing_explains_it() {
        let a = args(json!({"n": 1}));
        let (one, two) = (ok(json!(1)), ok(json!(2)));
        let v = deterministic("roll", &a, &one, &two, Strictness::Enforced);
        assert_eq!(v.outcome, Outcome::Failed);
        assert!(v.detail.contains("answered 1 and then 2"), "{v}");
        for s in [Strictness::Declared, Strictness::MayReachNetwork] {
            assert_eq!(
                deterministic("roll", &a, &one, &two, s).outcome,
                Outcome::Recorded
            );
        }
        assert_eq!(
            deterministic("roll", &a, &one, &one.clone(), Strictness::Enforced).outcome,
            Outcome::Passed
        );
    }

    #[test]
    fn examples_compare_the_value() {
        assert_eq!(
            example("add", 1, &json!(3), &ok(json!(3.0))).outcome,
            Outcome::Passed
        );
        let v = example("add", 2, &json!(3), &ok(json!(4)));
        assert_eq!(
            (v.outcome, v.label().as_str()),
            (Outcome::Failed, "example 2")
        );
        assert!(v.detail.contains("expected 3, got 4"), "{v}");
        let error = Answer {
            is_error: true,
            value: json!("3"),
        };
        assert_eq!(
            example("add", 1, &json!("3"), &error).outcome,
            Outcome::Failed
        );
    }

    #[test]
    fn the_fit_reads_back_from_a_trigger_detail() {
        let detail = trigger_detail(
            "trigger rate 0.33 (fit 9) …; missed: [\"x (fit 1)\"]",
            0.111,
        );
        assert_eq!(fit_in(&detail), Some(0.11));
        assert_eq!(fit_in("no fit here"), None);
    }

    #[test]
    fn names_round_trip() {
        for c in Check::ALL {
            assert_eq!(Check::named(c.name()), Some(c));
        }
        for o in [
            Outcome::Passed,
            Outcome::Failed,
            Outcome::Recorded,
            Outcome::Skipped,
        ] {
            assert_eq!(Outcome::named(o.name()), Some(o));
        }
    }
}
