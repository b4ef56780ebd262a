//! Trigger checks: does a tool fire when it should, and stay quiet when it shouldn't? Asked of
//! autotool's own model after a tool is verified and mounted (skipped, and said so, without
//! one).
//!
//! Two questions, each one bounded turn with no tools: first the model, shown the new tool,
//! writes [`REQUESTS`] requests a user might make that the tool should serve and as many near
//! misses (requests that sound alike but are meant for other tools, or for none); then, shown
//! the whole tool list (every mounted function with its description, at most [`MAX_LISTED`]),
//! it names the one function it would call for each request, or `none`. The trigger rate is
//! the share of the first set for which it picked one of the tool's functions, the
//! false-trigger rate the share of the near misses for which it did. The check passes with a
//! trigger rate of at least [`MIN_TRIGGER`] and a false-trigger rate of at most
//! [`MAX_FALSE_TRIGGER`]; a failing one does not unmount the tool (it works), but it lowers the
//! tool in `search_tools` and `synthesize_tool` feeds it back for a better description.

use super::agent::{Item, Provider};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// Requests of each kind the model writes.
pub const REQUESTS: usize = 3;
/// Least trigger rate that passes.
pub const MIN_TRIGGER: f64 = 2.0 / 3.0;
/// Greatest false-trigger rate that passes.
pub const MAX_FALSE_TRIGGER: f64 = 1.0 / 3.0;
/// Most functions shown in the second question.
pub const MAX_LISTED: usize = 100;
/// Bound on each of the two questions.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Longest request kept.
const MAX_REQUEST: usize = 300;

/// A function as the model is shown it.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The mounted name (`tool__function`).
    pub name: String,
    pub description: String,
}

/// One request and what the model picked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Picked {
    pub request: String,
    /// The mounted function picked; `None`: none.
    pub picked: Option<String>,
    /// The pick is one of the checked tool's functions.
    pub own: bool,
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerCheck {
    /// Requests the tool should serve.
    pub should: Vec<Picked>,
    /// Near misses.
    pub should_not: Vec<Picked>,
    pub trigger_rate: f64,
    pub false_trigger_rate: f64,
    pub passed: bool,
}

impl TriggerCheck {
    /// How well the description draws the right requests: `trigger × (1 − false trigger)`, in
    /// 0..=1, for ranking.
    pub fn fit(&self) -> f64 {
        self.trigger_rate * (1.0 - self.false_trigger_rate)
    }

    /// `trigger rate 1.00 (3 of 3 …), false-trigger rate 0.00 (0 of 3 …)`, and what went wrong
    /// when it did.
    pub fn summary(&self) -> String {
        let own = |set: &[Picked]| set.iter().filter(|p| p.own).count();
        let mut out = format!(
            "trigger rate {:.2} ({} of {} requests it should serve picked it), false-trigger rate {:.2} ({} of {} near misses picked it)",
            self.trigger_rate,
            own(&self.should),
            self.should.len(),
            self.false_trigger_rate,
            own(&self.should_not),
            self.should_not.len(),
        );
        let missed: Vec<&str> = self
            .should
            .iter()
            .filter(|p| !p.own)
            .map(|p| p.request.as_str())
            .collect();
        if !missed.is_empty() {
            out.push_str(&format!("; missed: {missed:?}"));
        }
        let stolen: Vec<&str> = self
            .should_not
            .iter()
            .filter(|p| p.own)
            .map(|p| p.request.as_str())
            .collect();
        if !stolen.is_empty() {
            out.push_str(&format!("; picked for near misses: {stolen:?}"));
        }
        out
    }
}

/// The JSON object in a model's answer (the first `{` to the last `}`).
fn json_in(text: &str) -> Result<Value, String> {
    let start = text.find('{').ok_or("the answer holds no JSON object")?;
    let end = text.rfind('}').ok_or("the answer holds no JSON object")?;
    serde_json::from_str(&text[start..=end]).map_err(|e| format!("the JSON does not parse: {e}"))
}

fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    let items = value[key]
        .as_array()
        .ok_or_else(|| format!("the answer has no list {key:?}"))?;
    Ok(items
        .iter()
        .filter_map(Value::as_str)
        .map(|s| s.chars().take(MAX_REQUEST).collect())
        .take(REQUESTS * 2)
        .collect())
}

async fn ask(provider: &dyn Provider, system: &str, question: String) -> Result<String, String> {
    let history = [Item::User(question)];
    match tokio::time::timeout(TIMEOUT, provider.complete(system, &history, &[])).await {
        Err(_) => Err(format!(
            "the model did not answer within {} s",
            TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(turn)) => turn
            .text
            .ok_or_else(|| "the model answered with no text".into()),
    }
}

/// Run the check on `tool` (its functions among `listed`, which is the whole tool list).
pub async fn check(
    provider: &dyn Provider,
    tool: &str,
    description: &str,
    listed: &[Listed],
) -> Result<TriggerCheck, String> {
    let prefix = format!("{tool}{}", autotool_policy::names::SEPARATOR);
    let own_functions: Vec<&Listed> = listed
        .iter()
        .filter(|l| l.name.starts_with(&prefix))
        .collect();
    if own_functions.is_empty() {
        return Err(format!("{tool} has no function in the tool list"));
    }
    let shown = |ls: &[&Listed]| {
        ls.iter()
            .map(|l| format!("- {}: {}", l.name, l.description.replace('\n', " ")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let first = ask(
        provider,
        "You test whether a tool's description makes an agent call it when it should, and not otherwise. Answer with one JSON object and nothing else.",
        format!(
            "The tool `{tool}`: {description}\nIts functions:\n{}\n\nWrite {REQUESTS} requests a user might make that this tool should serve, and {REQUESTS} near misses: requests that sound alike but are meant for other tools, or for none. Answer {{\"should\": [{REQUESTS} strings], \"should_not\": [{REQUESTS} strings]}}.",
            shown(&own_functions)
        ),
    )
    .await?;
    let first = json_in(&first)?;
    let should = strings(&first, "should")?;
    let should_not = strings(&first, "should_not")?;
    if should.is_empty() || should_not.is_empty() {
        return Err("the model wrote no requests".into());
    }
    let everything: Vec<&Listed> = listed.iter().take(MAX_LISTED).collect();
    let requests: Vec<&String> = should.iter().chain(&should_not).collect();
    let second = ask(
        provider,
        "You are an agent choosing which tool to call. Answer with one JSON object and nothing else.",
        format!(
            "Tools:\n{}\n\nFor each request below, name the one tool you would call for it, or \"none\".\n{}\n\nAnswer {{\"choices\": [one name or \"none\" per request, in order]}}.",
            shown(&everything),
            requests
                .iter()
                .enumerate()
                .map(|(i, r)| format!("{}. {r}", i + 1))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    )
    .await?;
    let choices = strings(&json_in(&second)?, "choices")?;
    let judged = |set: &[String], offset: usize| -> Vec<Picked> {
        set.iter()
            .enumerate()
            .map(|(i, request)| {
                let picked = choices
                    .get(offset + i)
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty() && c != "none");
                Picked {
                    request: request.clone(),
                    own: picked.as_deref().is_some_and(|p| p.starts_with(&prefix)),
                    picked,
                }
            })
            .collect()
    };
    let should = judged(&should, 0);
    let should_not = judged(&should_not, should.len());
    let rate =
        |set: &[Picked]| set.iter().filter(|p| p.own).count() as f64 / set.len().max(1) as f64;
    let trigger_rate = rate(&should);
    let false_trigger_rate = rate(&should_not);
    Ok(TriggerCheck {
        passed: trigger_rate >= MIN_TRIGGER && false_trigger_rate <= MAX_FALSE_TRIGGER,
        should,
        should_not,
        trigger_rate,
        false_trigger_rate,
    })
}
