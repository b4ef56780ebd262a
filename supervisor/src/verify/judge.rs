//! The calls [`verdicts`](super::verdicts) are judged from, made on the verified process:
//! [`Stage::Examples`](super::Stage::Examples) (each declared example called and compared),
//! [`Stage::Relations`](super::Stage::Relations) (each declared relation's pairs of calls
//! answered alike) and,
//! after the robustness probes, the non-degeneracy and determinism verdicts (each function's
//! plain call made a second time). The first failed verdict fails its stage, named.

use super::declarations::Example;
use super::probes::{self, Probe};
use super::relations::{Pair, Relation};
use super::verdicts::{self, Answer, Check, Outcome, Strictness, Verdict};
use super::{Skipped, Stage, VerifyFailure};
use crate::tool::process::{SandboxMode, ToolInfo, ToolProcess};
use rmcp::model::JsonObject;
use std::time::Duration;

/// Check `examples` on `process`: every function they name must be one of `tools`; they are
/// called unless `skip` says why not (their verdicts then say so).
pub(super) async fn examples(
    process: &ToolProcess,
    tools: &[ToolInfo],
    examples: &[Example],
    skip: Option<Skipped>,
    timeout: Duration,
    tool_file: &str,
) -> Result<Vec<Verdict>, VerifyFailure> {
    for (i, example) in examples.iter().enumerate() {
        if !tools.iter().any(|t| t.name == example.function) {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            return Err(VerifyFailure::new(
                Stage::Examples,
                format!(
                    "EXAMPLES entry {} names the function {:?}, which is not one of the tool's functions ({})",
                    i + 1,
                    example.function,
                    names.join(", ")
                ),
                "",
            ));
        }
    }
    let mut verdicts = Vec::with_capacity(examples.len());
    for (i, example) in examples.iter().enumerate() {
        let index = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if let Some(why) = skip {
            verdicts.push(Verdict {
                function: example.function.clone(),
                check: Check::Example,
                example: Some(index),
                outcome: Outcome::Skipped,
                detail: skipped_because(why).into(),
            });
            continue;
        }
        let probe = Probe {
            function: example.function.clone(),
            arguments: example.arguments.clone(),
            what: format!("EXAMPLES entry {index}"),
        };
        let answer = answer(process, &probe, timeout, tool_file, Stage::Examples).await?;
        let verdict = verdicts::example(&example.function, index, &example.expect, &answer);
        if verdict.outcome == Outcome::Failed {
            return Err(VerifyFailure::new(
                Stage::Examples,
                format!(
                    "verdict {} failed for {}: {}({}) {}",
                    verdict.label(),
                    verdict.function,
                    verdict.function,
                    serde_json::Value::Object(example.arguments.clone()),
                    verdict.detail
                ),
                "",
            ));
        }
        verdicts.push(verdict);
    }
    Ok(verdicts)
}

/// Check `relations` on `process` by their `pairs` (each called as it is and transformed, the
/// answers compared), unless `skip` says why not. A relation on an argument its function does
/// not take (in `tools`), or the first pair answered differently, fails [`Stage::Relations`],
/// naming the relation (and both inputs and both answers).
pub(super) async fn relations(
    process: &ToolProcess,
    tools: &[ToolInfo],
    (relations, pairs): (&[Relation], &[Pair]),
    skip: Option<Skipped>,
    timeout: Duration,
    tool_file: &str,
) -> Result<Vec<Verdict>, VerifyFailure> {
    for (i, relation) in relations.iter().enumerate() {
        if let Some(why) = not_taken(tools, relation) {
            return Err(VerifyFailure::new(
                Stage::Relations,
                format!("RELATIONS entry {}: {why}", i + 1),
                "",
            ));
        }
    }
    let mut verdicts = Vec::with_capacity(relations.len());
    for (i, relation) in relations.iter().enumerate() {
        let index = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let verdict = |outcome, detail: String| Verdict {
            function: relation.function.clone(),
            check: Check::Relation,
            example: Some(index),
            outcome,
            detail: format!("{}: {detail}", relation.describe()),
        };
        if let Some(why) = skip {
            verdicts.push(verdict(Outcome::Skipped, skipped_because(why).into()));
            continue;
        }
        let mut seen = None;
        for pair in pairs.iter().filter(|p| p.index == index) {
            let what = format!("RELATIONS entry {index}: {}", relation.describe());
            let (original, transformed) =
                answer_pair(process, pair, &what, timeout, tool_file, Stage::Relations).await?;
            if !original.1.same(&transformed.1) {
                return Err(VerifyFailure::new(
                    Stage::Relations,
                    format!(
                        "verdict relation {index} failed for {}: RELATIONS entry {index} says \
                         its answer does not change with {}, but {} answered {} and {} \
                         answered {}",
                        relation.function,
                        relation.describe(),
                        original.0,
                        original.1.shown(),
                        transformed.0,
                        transformed.1.shown()
                    ),
                    "",
                ));
            }
            seen = Some(seen.map_or((original, transformed, 1), |(a, b, n)| (a, b, n + 1)));
        }
        if let Some(((a, answer), (b, _), n)) = seen {
            let inputs = if n == 1 { "input" } else { "inputs" };
            verdicts.push(verdict(
                Outcome::Passed,
                format!(
                    "kept on {n} {inputs}: {a} and {b} both answered {}",
                    answer.shown()
                ),
            ));
        }
    }
    Ok(verdicts)
}

/// Why `relation` cannot hold of the functions `tools` lists: its function is not one of them,
/// or does not take its argument (an argument the schema lacks would be dropped, and every
/// input answered alike).
pub(super) fn not_taken(tools: &[ToolInfo], relation: &Relation) -> Option<String> {
    let Some(tool) = tools.iter().find(|t| t.name == relation.function) else {
        return Some(format!("there is no function {}", relation.function));
    };
    let arguments = verdicts::arguments_of(&tool.input_schema);
    (!arguments.contains(&relation.argument)).then(|| {
        format!(
            "{} takes no argument {:?} (its arguments: {})",
            relation.function,
            relation.argument,
            arguments.join(", ")
        )
    })
}

/// A pair's two calls, each shown (`f({…})`) with its answer.
pub(super) async fn answer_pair(
    process: &ToolProcess,
    pair: &Pair,
    what: &str,
    timeout: Duration,
    tool_file: &str,
    stage: Stage,
) -> Result<((String, Answer), (String, Answer)), VerifyFailure> {
    let probe = |arguments: &JsonObject| Probe {
        function: pair.relation.function.clone(),
        arguments: arguments.clone(),
        what: what.to_string(),
    };
    let (original, transformed) = (probe(&pair.original), probe(&pair.transformed));
    let first = answer(process, &original, timeout, tool_file, stage).await?;
    let second = answer(process, &transformed, timeout, tool_file, stage).await?;
    Ok(((original.shown(), first), (transformed.shown(), second)))
}

/// `probe`'s answer; a refusal (a JSON-RPC error) is an error answer, and a crash or a dead
/// process fails `stage`.
pub(super) async fn answer(
    process: &ToolProcess,
    probe: &Probe,
    timeout: Duration,
    tool_file: &str,
    stage: Stage,
) -> Result<Answer, VerifyFailure> {
    let answer = probes::call(process, probe, timeout, tool_file)
        .await
        .map_err(|mut f| {
            f.stage = stage;
            f
        })?;
    Ok(answer.unwrap_or(Answer {
        is_error: true,
        value: "the tool refused the call (a JSON-RPC error)".into(),
    }))
}

/// What the tool's process is and may do, for the determinism verdict.
pub(super) struct Reach<'a> {
    /// It declares keys.
    pub holds_keys: bool,
    /// Functions listed in `NONDETERMINISTIC`.
    pub nondeterministic: &'a [String],
    pub sandbox: SandboxMode,
}

/// The non-degeneracy and determinism verdicts on every function of `tools`, from the answers
/// `made` to the `planned` probes, each function's first probe made again.
pub(super) async fn after_probes(
    process: &ToolProcess,
    tools: &[ToolInfo],
    planned: &[Probe],
    made: &[(usize, Option<Answer>)],
    reach: &Reach<'_>,
    timeout: Duration,
    tool_file: &str,
) -> Result<Vec<Verdict>, VerifyFailure> {
    let mut verdicts = Vec::new();
    let mut repeats: Vec<(&Probe, Answer, Answer)> = Vec::new();
    for tool in tools {
        let answers: Vec<(&JsonObject, &Answer)> = made
            .iter()
            .filter_map(|(i, a)| {
                let probe = planned.get(*i)?;
                (probe.function == tool.name).then_some((&probe.arguments, a.as_ref()?))
            })
            .collect();
        let arguments = verdicts::arguments_of(&tool.input_schema);
        let side_effect = verdicts::declares_side_effect(tool.annotations.as_ref());
        if let Some(v) = verdicts::non_degenerate(&tool.name, &arguments, &answers, side_effect) {
            verdicts.push(v);
        }
        let first = made.iter().find_map(|(i, a)| {
            let probe = planned.get(*i)?;
            (probe.function == tool.name).then_some((probe, a.clone()?))
        });
        if let Some((probe, answer)) = first
            && let Some(again) = probes::call(process, probe, timeout, tool_file).await?
        {
            repeats.push((probe, answer, again));
        }
    }
    // Whether the network was reached is known once every call is made.
    let reached = match reach.sandbox {
        SandboxMode::Off => true,
        _ => process.egress_opened().unwrap_or(0) > 0,
    };
    for (probe, first, again) in repeats {
        let strictness = if reach.nondeterministic.contains(&probe.function) {
            Strictness::Declared
        } else if reach.holds_keys || reached {
            Strictness::MayReachNetwork
        } else {
            Strictness::Enforced
        };
        verdicts.push(verdicts::deterministic(
            &probe.function,
            &probe.arguments,
            &first,
            &again,
            strictness,
        ));
    }
    if let Some(failed) = verdicts.iter().find(|v| v.outcome == Outcome::Failed) {
        let advice = match failed.check {
            Check::NonDegenerate => {
                "A function must answer according to its arguments; one that truly has a single answer takes no arguments.".to_string()
            }
            _ => format!(
                "A function must give the same answer to the same arguments; if it reads a clock or draws random numbers, declare it: NONDETERMINISTIC = [{:?}].",
                failed.function
            ),
        };
        return Err(VerifyFailure::new(
            Stage::Robustness,
            format!(
                "verdict {} failed for {}: {}. {advice}",
                failed.label(),
                failed.function,
                failed.detail
            ),
            "",
        ));
    }
    Ok(verdicts)
}

/// The verdicts a tool whose probes did not run gets: each function's checks skipped, saying
/// why.
pub(super) fn skipped(tools: &[ToolInfo], why: Skipped) -> Vec<Verdict> {
    tools
        .iter()
        .flat_map(|t| {
            [Check::NonDegenerate, Check::Deterministic].map(|check| Verdict {
                function: t.name.clone(),
                check,
                example: None,
                outcome: Outcome::Skipped,
                detail: skipped_because(why).into(),
            })
        })
        .collect()
}

fn skipped_because(why: Skipped) -> &'static str {
    match why {
        Skipped::Quick => "verify \"quick\" makes no calls beyond the smoke test",
        Skipped::DeclaresKeys => {
            "the tool declares keys, so calls could spend an API's quota; verify \"thorough\" makes them"
        }
    }
}
