//! The baseline: what trusted versions of a tool did, owed by every later version
//! ([`Stage::Baseline`](super::Stage::Baseline)).
//!
//! A version that passes verification leaves what it met ([`met`]): its smoke test with the
//! answer it gave, its declared examples, the inputs its declared relations were kept on, and
//! its `deterministic` and `non_degenerate` verdicts. When the version earns trust (it is promoted to `active`), the ledger adds those
//! to the tool's baseline, which only grows: a rewrite cannot drop an obligation by omitting
//! it (only the user can, `autotool tools baseline NAME --drop ID`, an audit event).
//!
//! Checking a new version against it ([`check`]): a smoke test or example obligation is called
//! again and must give the answer on record: the same value where the function was found
//! deterministic (and always for an example), the same shape otherwise (live data changes, its
//! form should not). A relation obligation calls its input as it is and transformed, and the
//! two answers must be alike, whether or not the new version still declares the relation. A
//! `deterministic` obligation fails when the new version declares the
//! function `NONDETERMINISTIC`; a function that is gone fails every obligation it had. Calls of
//! a tool that declares keys are made only with `verify: "thorough"`, so no API quota is spent
//! behind the user's back; those obligations are then skipped, and said so. Answers are
//! compared redacted, as they are kept.

use super::judge;
use super::probes::Probe;
use super::relations::{Pair, Relation};
use super::verdicts::{self, Answer, Check, Outcome, Verdict};
use super::{Stage, VerifyFailure};
use crate::redact::Redactor;
use crate::tool::process::{ToolInfo, ToolProcess};
use rmcp::model::JsonObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// Largest answer kept as it is; a larger one is kept as its shape.
pub const MAX_KEPT_ANSWER: usize = 16 << 10;

/// One thing a version did that later versions owe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Obligation {
    /// Its number in the tool's baseline (`None` before it joined one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    pub function: String,
    /// `smoke_test`, `example`, `relation`, `deterministic` or `non_degenerate`.
    pub check: Check,
    /// The call's arguments (for a relation: the input before it is transformed).
    pub arguments: JsonObject,
    /// For a relation: what it changes, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    /// The answer owed (smoke test, example), redacted; its shape when `exact` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Value>,
    /// Whether `answer` is compared as a value (else as a shape).
    pub exact: bool,
    /// The version it was met by.
    pub since_version: u32,
}

impl Obligation {
    /// `#3 smoke_test forecast({"city":"Paris"}) from v1`, `#4 relation
    /// lookup({"isbn":"0306406152"}) unchanged with isbn padded with spaces, from v1`.
    pub fn shown(&self) -> String {
        let id = self.id.map(|i| format!("#{i} ")).unwrap_or_default();
        let relation = self
            .relation
            .as_ref()
            .map(|r| format!(" unchanged with {},", r.describe()))
            .unwrap_or_default();
        format!(
            "{id}{} {}({}){relation} from v{}",
            self.check.name(),
            self.function,
            Value::Object(self.arguments.clone()),
            self.since_version
        )
    }
}

/// What `answer` looks like without its values: scalars as their type's name, an array as the
/// shape of its first item, an object as its keys' shapes.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
    }
}

/// `value` with every key value `redactor` knows replaced in its strings.
fn redacted(value: &Value, redactor: Option<&Redactor>) -> Value {
    let Some(r) = redactor else {
        return value.clone();
    };
    match value {
        Value::String(s) => Value::String(r.redact(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(|v| redacted(v, Some(r))).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (r.redact(k).into_owned(), redacted(v, Some(r))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What `version` met, from its smoke test (`smoke`: function, arguments, answer), its
/// examples, its relations' `pairs` and its verdicts, answers redacted. (The ledger keeps it
/// under the version it is committed as, whatever `version` says.)
pub fn met(
    version: u32,
    smoke: Option<(&str, &JsonObject, &Answer)>,
    examples: &[super::Example],
    pairs: &[Pair],
    verdicts: &[Verdict],
    redactor: Option<&Redactor>,
) -> Vec<Obligation> {
    let deterministic = |function: &str| {
        verdicts.iter().any(|v| {
            v.function == function
                && v.check == Check::Deterministic
                && v.outcome == Outcome::Passed
        })
    };
    let mut met = Vec::new();
    if let Some((function, arguments, answer)) = smoke
        && !answer.is_error
    {
        let value = redacted(&answer.value, redactor);
        let small = serde_json::to_string(&value).map_or(0, |s| s.len()) <= MAX_KEPT_ANSWER;
        let exact = small && deterministic(function);
        met.push(Obligation {
            id: None,
            function: function.to_string(),
            check: Check::SmokeTest,
            arguments: arguments.clone(),
            relation: None,
            answer: Some(if exact { value } else { shape(&value) }),
            exact,
            since_version: version,
        });
    }
    for v in verdicts.iter().filter(|v| v.outcome == Outcome::Passed) {
        match v.check {
            Check::Example => {
                let Some(example) = v
                    .example
                    .and_then(|n| examples.get(usize::try_from(n).ok()?.checked_sub(1)?))
                else {
                    continue;
                };
                met.push(Obligation {
                    id: None,
                    function: example.function.clone(),
                    check: Check::Example,
                    arguments: example.arguments.clone(),
                    relation: None,
                    answer: Some(redacted(&example.expect, redactor)),
                    exact: true,
                    since_version: version,
                });
            }
            Check::Relation => {
                for pair in pairs.iter().filter(|p| Some(p.index) == v.example) {
                    met.push(Obligation {
                        id: None,
                        function: pair.relation.function.clone(),
                        check: Check::Relation,
                        arguments: pair.original.clone(),
                        relation: Some(pair.relation.clone()),
                        answer: None,
                        exact: true,
                        since_version: version,
                    });
                }
            }
            Check::Deterministic | Check::NonDegenerate => met.push(Obligation {
                id: None,
                function: v.function.clone(),
                check: v.check,
                arguments: JsonObject::new(),
                relation: None,
                answer: None,
                exact: false,
                since_version: version,
            }),
            Check::SmokeTest | Check::Baseline | Check::Trigger | Check::Adversarial => {}
        }
    }
    met
}

/// How the new version is checked against the baseline.
pub(super) struct Owed<'a> {
    /// The tool's name, for the command that drops an obligation.
    pub tool: &'a str,
    pub baseline: &'a [Obligation],
    /// The tool declares keys and `thorough` was not asked for: no calls.
    pub no_calls: bool,
    /// The functions the new version lists in `NONDETERMINISTIC`.
    pub nondeterministic: &'a [String],
    pub redactor: Option<&'a Redactor>,
}

/// Check `owed` on `process`, given the new version's own `verdicts`; the first obligation not
/// met fails [`Stage::Baseline`], showing it, the old answer and the new one.
pub(super) async fn check(
    process: &ToolProcess,
    tools: &[ToolInfo],
    verdicts: &[Verdict],
    owed: &Owed<'_>,
    timeout: Duration,
    tool_file: &str,
) -> Result<Vec<Verdict>, VerifyFailure> {
    let mut out = Vec::with_capacity(owed.baseline.len());
    for ob in owed.baseline {
        let judged = |outcome, detail: String| Verdict {
            function: ob.function.clone(),
            check: Check::Baseline,
            example: None,
            outcome,
            detail: format!("{}: {detail}", ob.shown()),
        };
        if !tools.iter().any(|t| t.name == ob.function) {
            return Err(unmet(
                ob,
                owed.tool,
                format!(
                    "the function {} is gone; a rewrite must keep what a trusted version offered",
                    ob.function
                ),
            ));
        }
        let verdict = match ob.check {
            Check::SmokeTest | Check::Example | Check::Relation if owed.no_calls => judged(
                Outcome::Skipped,
                "not called: the tool declares keys; verify \"thorough\" calls it".into(),
            ),
            Check::SmokeTest | Check::Example => {
                let probe = Probe {
                    function: ob.function.clone(),
                    arguments: ob.arguments.clone(),
                    what: format!("baseline obligation {}", ob.shown()),
                };
                let answer =
                    judge::answer(process, &probe, timeout, tool_file, Stage::Baseline).await?;
                let now = Answer {
                    is_error: answer.is_error,
                    value: redacted(&answer.value, owed.redactor),
                };
                let owed_answer = ob.answer.clone().unwrap_or(Value::Null);
                let met = if ob.exact {
                    verdicts::meets(&now, &owed_answer)
                } else {
                    !now.is_error && shape(&now.value) == owed_answer
                };
                if !met {
                    let how = if ob.exact { "" } else { " (its shape)" };
                    return Err(unmet(
                        ob,
                        owed.tool,
                        format!(
                            "v{} answered{how} {}; this version answers {}",
                            ob.since_version,
                            Answer {
                                is_error: false,
                                value: owed_answer
                            }
                            .shown(),
                            if ob.exact {
                                now.shown()
                            } else {
                                format!("{} (shape {})", now.shown(), shape(&now.value))
                            }
                        ),
                    ));
                }
                judged(Outcome::Passed, "met".into())
            }
            Check::Relation => {
                // Kept from a pair that changed its input: it still does, unless the row was
                // written by another build.
                let (Some(relation), Ok(Some(transformed))) = (
                    &ob.relation,
                    ob.relation
                        .as_ref()
                        .map_or(Ok(None), |r| r.apply(&ob.arguments)),
                ) else {
                    out.push(judged(
                        Outcome::Skipped,
                        "its relation does not apply to its input".into(),
                    ));
                    continue;
                };
                let pair = Pair {
                    index: 0,
                    relation: relation.clone(),
                    original: ob.arguments.clone(),
                    transformed,
                };
                if let Some(why) = judge::not_taken(tools, relation) {
                    return Err(unmet(ob, owed.tool, why));
                }
                let what = format!("baseline obligation {}", ob.shown());
                let ((a, first), (b, second)) =
                    judge::answer_pair(process, &pair, &what, timeout, tool_file, Stage::Baseline)
                        .await?;
                // v1 answered the input (it is an example's); an error to both is no relation.
                if first.is_error || !first.same(&second) {
                    return Err(unmet(
                        ob,
                        owed.tool,
                        format!(
                            "v{} answered both alike, with a result; this version answers {} to {a} and {} to {b}",
                            ob.since_version,
                            first.shown(),
                            second.shown()
                        ),
                    ));
                }
                judged(Outcome::Passed, "met".into())
            }
            Check::Deterministic => {
                if owed.nondeterministic.contains(&ob.function) {
                    return Err(unmet(
                        ob,
                        owed.tool,
                        format!(
                            "{} gave the same answer to the same arguments in v{}; declaring it NONDETERMINISTIC now does not drop that",
                            ob.function, ob.since_version
                        ),
                    ));
                }
                let this = verdicts
                    .iter()
                    .find(|v| v.function == ob.function && v.check == Check::Deterministic);
                match this.map(|v| v.outcome) {
                    Some(Outcome::Passed) => judged(Outcome::Passed, "met".into()),
                    _ => judged(
                        Outcome::Skipped,
                        "this version's determinism was not judged".into(),
                    ),
                }
            }
            // A degenerate version already failed its own verdict.
            Check::NonDegenerate => judged(Outcome::Passed, "met".into()),
            Check::Baseline | Check::Trigger | Check::Adversarial => continue,
        };
        out.push(verdict);
    }
    Ok(out)
}

fn unmet(ob: &Obligation, tool: &str, what: String) -> VerifyFailure {
    let id = ob.id.map_or_else(|| "ID".to_string(), |i| i.to_string());
    VerifyFailure::new(
        Stage::Baseline,
        format!(
            "an obligation inherited from a trusted version is not met: {}: {what}. Repair the function so it meets it; if the change is intended, tell the user why: they can drop the obligation with `autotool tools baseline {tool} --drop {id}`",
            ob.shown()
        ),
        "",
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn shapes_keep_the_form_not_the_values() {
        assert_eq!(
            shape(&json!({"stories": [{"title": "a", "score": 1}], "next": null, "ok": true})),
            json!({"stories": [{"title": "string", "score": "number"}], "next": "null", "ok": "boolean"})
        );
        assert_eq!(
            shape(
                &json!({"stories": [{"title": "b", "score": 9}, {"x": 1}], "next": null, "ok": false})
            ),
            shape(&json!({"stories": [{"title": "a", "score": 1}], "next": null, "ok": true}))
        );
        assert_ne!(shape(&json!({"a": 1})), shape(&json!({"a": "1"})));
    }

    fn verdict(function: &str, check: Check, outcome: Outcome, example: Option<u32>) -> Verdict {
        Verdict {
            function: function.into(),
            check,
            example,
            outcome,
            detail: String::new(),
        }
    }

    #[test]
    fn what_a_version_met_is_exact_only_where_it_was_deterministic() {
        let args = json!({"city": "Paris"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let answer = Answer {
            is_error: false,
            value: json!({"temp": 21}),
        };
        let examples = [super::super::Example {
            function: "forecast".into(),
            arguments: args.clone(),
            expect: json!({"temp": 21}),
        }];
        let passed = [
            verdict("forecast", Check::Deterministic, Outcome::Passed, None),
            verdict("forecast", Check::Example, Outcome::Passed, Some(1)),
        ];
        let got = met(
            2,
            Some(("forecast", &args, &answer)),
            &examples,
            &[],
            &passed,
            None,
        );
        let checks: Vec<_> = got.iter().map(|o| (o.check, o.exact)).collect();
        assert_eq!(
            checks,
            [
                (Check::SmokeTest, true),
                (Check::Deterministic, false),
                (Check::Example, true)
            ]
        );
        assert_eq!(got[0].answer, Some(json!({"temp": 21})));

        // Recorded (live data): the smoke answer is kept as its shape.
        let recorded = [verdict(
            "forecast",
            Check::Deterministic,
            Outcome::Recorded,
            None,
        )];
        let got = met(
            2,
            Some(("forecast", &args, &answer)),
            &[],
            &[],
            &recorded,
            None,
        );
        assert_eq!(got.len(), 1);
        assert!(!got[0].exact);
        assert_eq!(got[0].answer, Some(json!({"temp": "number"})));
    }

    #[test]
    fn a_kept_relation_is_owed_on_each_input_it_was_kept_on() {
        use crate::verify::relations::Transform;
        let relation = |transform, value: Option<&str>| Relation {
            function: "lookup".into(),
            argument: "isbn".into(),
            transform,
            value: value.map(String::from),
        };
        let input = |isbn: &str| {
            json!({"isbn": isbn})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        let pair = |index, relation: Relation, isbn: &str| Pair {
            index,
            original: input(isbn),
            transformed: relation.apply(&input(isbn)).unwrap().unwrap(),
            relation,
        };
        let padded = relation(Transform::SurroundingWhitespace, None);
        let prefixed = relation(Transform::Prefix, Some("ISBN "));
        let pairs = [
            pair(1, padded.clone(), "0306406152"),
            pair(1, padded.clone(), "0140449132"),
            pair(2, prefixed.clone(), "0306406152"),
        ];
        // Relation 1 kept, relation 2 not judged (a tool with keys, verify "standard").
        let verdicts = [
            verdict("lookup", Check::Relation, Outcome::Passed, Some(1)),
            verdict("lookup", Check::Relation, Outcome::Skipped, Some(2)),
        ];
        let got = met(1, None, &[], &pairs, &verdicts, None);
        assert_eq!(
            got.iter()
                .map(|o| (
                    o.check,
                    Value::Object(o.arguments.clone()),
                    o.relation.clone()
                ))
                .collect::<Vec<_>>(),
            [
                (
                    Check::Relation,
                    json!({"isbn": "0306406152"}),
                    Some(padded.clone())
                ),
                (Check::Relation, json!({"isbn": "0140449132"}), Some(padded)),
            ]
        );
        let mut shown = got[0].clone();
        shown.id = Some(4);
        assert_eq!(
            shown.shown(),
            "#4 relation lookup({\"isbn\":\"0306406152\"}) unchanged with isbn padded with spaces, from v1"
        );
        // The relation travels with the obligation (the team record, the ledger's JSON).
        let back: Obligation =
            serde_json::from_value(serde_json::to_value(&got[0]).unwrap()).unwrap();
        assert_eq!(back, got[0]);
    }
}
