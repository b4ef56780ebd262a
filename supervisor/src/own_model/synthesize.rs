//! `synthesize_tool {need}`: autotool writes a tool itself, with its own model.
//!
//! - [`OwnModel`]: the model `$AUTOTOOL_HOME/.env` names, and only that file: a key in the host's
//!   environment (or serve's) is never used for it, so nothing is billed by surprise. The file
//!   is stat'ed on every poll of `serve` and reread when it changes, so adding a model needs no
//!   restart: `synthesize_tool` joins the tool list (hosts hear `list_changed`) as soon as a
//!   provider can be built from the file, and leaves it when none can.
//! - [`synthesize`]: the loop. The model gets `create_tool`'s own description as its
//!   instructions and one tool, `create_tool` (the same schema the host sees). Each round its
//!   call goes through the same `create` path as a host's: lint, declarations, launch confined,
//!   list, smoke test, then mounted. A failure (already redacted) goes back to the model as the
//!   call's result, and so does a mounted tool's failed trigger check (its description does not
//!   draw the requests it serves, [`super::trigger`]); it tries again, for at most [`DEFAULT_ROUNDS`](crate::library::settings::DEFAULT_ROUNDS) rounds and
//!   [`DEFAULT_TIME_BOUND`](crate::library::settings::DEFAULT_TIME_BOUND) in all (the settings `synthesize_rounds` and `synthesize_timeout`).
//! - Candidates: with the setting `synthesize_candidates` above 1, each round asks the model
//!   for that many candidates at once, each in a conversation of its own (its instructions say
//!   which candidate it writes); their calls are raced (`crate::library::race`: each verified,
//!   the best one kept) and each failure goes back to the conversation that wrote it. When one
//!   is mounted only its conversation goes on (to repair a failed trigger check). When none
//!   passes, the answer gives each candidate's failure, each bounded to [`FAILURE_SHARE`].
//!
//! Keys: no consent is asked while synthesizing, since there is no code to ask about until the model
//! has written it. A synthesized tool gets the keys it declares only where the user already
//! approved them (or serve runs with `--dangerously-allow-all-tools`); otherwise the result's key
//! notes say what the user can run (`autotool tools approve TOOL KEY`), and the first call of
//! the tool asks for consent like any other call.

use crate::own_model::agent::{Item, Provider, ToolCall, ToolDef};
use crate::redact::Redactor;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;
use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The words after `create_tool`'s own description in the model's instructions.
pub const INSTRUCTIONS: &str = "\
You are autotool's tool writer. A host agent needs a tool; its need is the user message. Write \
the tool and call create_tool with it: a short snake_case name, the whole code, a one-line \
description, and a smoke_test calling one function with realistic arguments. A key the user has \
not approved for this tool is not given to it during verification, so give a smoke_test only for \
a function that works without keys (or none). If create_tool fails, read the stage and the log, \
fix the code and call create_tool again with the same name. Only create_tool calls count: do \
not answer in text.";

/// Identity of the `.env` file as last read: device, inode, size, modification and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// autotool's own model, as `$AUTOTOOL_HOME/.env` named it when last read.
#[derive(Default)]
pub struct OwnModel {
    /// `None` before the first read, `Some(None)` when there was no file.
    stamp: Option<Option<Stamp>>,
    provider: Option<Arc<dyn Provider>>,
    /// Why there is no provider, for a host that calls `synthesize_tool` anyway.
    why_not: String,
    /// The `.env`'s key-like values, kept out of what the host sees of a model error.
    redactor: Option<Redactor>,
}

impl std::fmt::Debug for OwnModel {
    /// The model's description only: no value from the file.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnModel")
            .field("provider", &self.provider.as_ref().map(|p| p.describe()))
            .field("why_not", &self.why_not)
            .finish_non_exhaustive()
    }
}

impl OwnModel {
    /// Synthesis switched off for this process (no file is read).
    pub fn off() -> OwnModel {
        OwnModel {
            stamp: Some(None),
            why_not: "synthesize_tool is switched off here (the setting `synthesize` is off: \
                      `autotool config --get synthesize` says where)"
                .to_string(),
            ..OwnModel::default()
        }
    }

    /// The model `path` (a `.env` file) names, or why there is none.
    pub fn read(path: &Path) -> OwnModel {
        let stamp = Some(stamp(path));
        let not = |why: String| OwnModel {
            stamp,
            why_not: why,
            ..OwnModel::default()
        };
        let env = match crate::dotenv::read(path) {
            Ok(Some(env)) => env,
            Ok(None) => {
                return not(format!(
                    "autotool has no model of its own: {} does not exist. Put OPENAI_API_KEY, \
                     ANTHROPIC_API_KEY, or OPENAI_BASE_URL and OPENAI_LLM in it (keys in the \
                     host's environment are never used for autotool's own model)",
                    path.display()
                ));
            }
            Err(e) => return not(e.to_string()),
        };
        for skipped in &env.skipped {
            tracing::warn!(file = %path.display(), "{skipped}");
        }
        let secrets: Vec<(&String, &String)> = env
            .vars
            .iter()
            .filter(|(k, _)| {
                ["KEY", "TOKEN", "SECRET", "PASSWORD"]
                    .iter()
                    .any(|s| k.to_ascii_uppercase().ends_with(s))
            })
            .collect();
        let redactor = Redactor::new(&secrets).ok();
        match crate::own_model::agent::provider_from_vars(&env.vars) {
            Ok(provider) => OwnModel {
                stamp,
                provider: Some(Arc::from(provider)),
                why_not: String::new(),
                redactor,
            },
            Err(e) => not(format!("{}: {e}", path.display())),
        }
    }

    /// The provider, when the file names a usable model.
    pub fn provider(&self) -> Option<Arc<dyn Provider>> {
        self.provider.clone()
    }

    /// Why there is no provider (empty when there is one).
    pub fn why_not(&self) -> &str {
        &self.why_not
    }

    /// `text` with the `.env`'s own key-like values replaced.
    pub fn redact(&self, text: &str) -> String {
        match &self.redactor {
            Some(r) => r.redact(text).into_owned(),
            None => text.to_string(),
        }
    }
}

/// autotool's own model as last read, shared by every connection of one serve.
#[derive(Debug, Default)]
pub struct ModelSlot(std::sync::RwLock<Arc<OwnModel>>);

impl ModelSlot {
    /// The model as last read.
    pub fn current(&self) -> Arc<OwnModel> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reread `path` (`$AUTOTOOL_HOME/.env`) if it changed since the last read (a `stat` when
    /// it did not); with `enabled` false, synthesis stays off. Returns whether
    /// `synthesize_tool` came or went.
    pub fn refresh(&self, enabled: bool, path: &Path) -> bool {
        let old = self.current();
        if !enabled {
            if old.stamp.is_none() {
                *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(OwnModel::off());
            }
            return false;
        }
        let now = stamp(path);
        if old.stamp == Some(now) {
            return false;
        }
        let new = OwnModel::read(path);
        match (&new.provider, &old.provider) {
            (Some(p), _) => tracing::info!(
                "autotool's own model: {}; synthesize_tool is offered",
                p.describe()
            ),
            (None, Some(_)) => {
                tracing::warn!("synthesize_tool is no longer offered: {}", new.why_not)
            }
            (None, None) if now.is_some() => {
                tracing::warn!("synthesize_tool is not offered: {}", new.why_not)
            }
            (None, None) => {}
        }
        let flipped = new.provider.is_some() != old.provider.is_some();
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new);
        flipped
    }
}

/// How long the loop may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub rounds: usize,
    pub time: Duration,
    /// Candidates written for the need in each round, raced (at least 1).
    pub candidates: usize,
}

/// How a synthesis ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A tool was verified and mounted in `round`: `create_tool`'s result.
    Mounted {
        round: usize,
        result: CallToolResult,
    },
    /// Every round failed; the last failure as the model saw it.
    GaveUp { rounds: usize, last_failure: String },
    /// The model could not be asked (its error says what to do).
    ModelFailed {
        round: usize,
        error: String,
        last_failure: Option<String>,
    },
    /// The time bound passed before a tool was mounted.
    OutOfTime {
        rounds: usize,
        last_failure: Option<String>,
    },
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Outcome {
    /// The answer to the host.
    pub fn into_result(self, model: &str, bounds: Bounds) -> CallToolResult {
        let last = |failure: Option<String>| match failure {
            Some(f) if bounds.candidates > 1 => {
                format!(" The last round's failures, candidate by candidate:\n{f}")
            }
            Some(f) => format!(" The last failure:\n{f}"),
            None => String::new(),
        };
        let advice = "Write the tool yourself with create_tool, or call synthesize_tool again \
                      with a more precise need.";
        match self {
            Outcome::Mounted { round, mut result } => {
                result.content.insert(
                    0,
                    ContentBlock::text(format!(
                        "synthesize_tool: autotool's model ({model}) wrote this tool; it passed \
                         verification in round {round} of {}.",
                        bounds.rounds
                    )),
                );
                if let Some(Value::Object(o)) = result.structured_content.as_mut() {
                    o.insert("rounds".into(), Value::from(round));
                }
                result
            }
            Outcome::GaveUp {
                rounds,
                last_failure,
            } => CallToolResult::error(vec![ContentBlock::text(format!(
                "synthesize_tool could not make a working tool in {rounds} rounds (autotool's \
                 model: {model}). {advice}{}",
                last(Some(last_failure))
            ))]),
            Outcome::ModelFailed {
                round,
                error,
                last_failure,
            } => CallToolResult::error(vec![ContentBlock::text(format!(
                "synthesize_tool stopped in round {round}: autotool's model ({model}) failed: \
                 {error}. {advice}{}",
                last(last_failure)
            ))]),
            Outcome::OutOfTime {
                rounds,
                last_failure,
            } => CallToolResult::error(vec![ContentBlock::text(format!(
                "synthesize_tool ran out of time ({} s) after {rounds} rounds (autotool's \
                 model: {model}). {advice}{}",
                bounds.time.as_secs(),
                last(last_failure)
            ))]),
        }
    }
}

/// Why a `create_tool` call of the model cannot run: its arguments are not an object. The text
/// goes back to the model as the call's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ArgumentsError {
    #[error(
        "the arguments were not a JSON object ({bytes} bytes of text that does not parse as \
         JSON); send name, code, description and smoke_test as a JSON object"
    )]
    Text { bytes: usize },
    #[error("the arguments must be a JSON object with name and code, not {got}")]
    NotAnObject { got: &'static str },
}

/// One round's call: the first `create_tool` call of the turn, its arguments as an object, or
/// why it cannot run.
fn pick(calls: &[ToolCall]) -> Option<(&ToolCall, Result<JsonObject, ArgumentsError>)> {
    let call = calls.iter().find(|c| c.name == "create_tool")?;
    let args = match &call.arguments {
        Value::Object(o) => Ok(o.clone()),
        Value::String(raw) => Err(ArgumentsError::Text { bytes: raw.len() }),
        Value::Array(_) => Err(ArgumentsError::NotAnObject { got: "an array" }),
        Value::Null => Err(ArgumentsError::NotAnObject { got: "null" }),
        _ => Err(ArgumentsError::NotAnObject { got: "a scalar" }),
    };
    Some((call, args))
}

/// One candidate's conversation with the model: its instructions and its history.
struct Lane {
    /// Which candidate it writes, from 1.
    candidate: usize,
    system: String,
    history: Vec<Item>,
}

/// A `create_tool` call of one lane in a round, waiting for the race.
struct Entry {
    lane: usize,
    call_id: String,
    call_name: String,
    name: String,
}

/// The instructions of candidate `k` of `n`: `system` alone when there is one candidate.
fn lane_system(system: &str, k: usize, n: usize) -> String {
    if n == 1 {
        return system.to_string();
    }
    format!(
        "{system}\n\nYou are writing candidate {k} of {n} for this need. The other candidates are \
         written independently; each is verified, and only the one that does best across the \
         verdicts is kept, safety first (a leak or a crash on hostile input loses to a tool \
         without one, whatever else it does). Write the most robust tool you can."
    )
}

/// `text` within `budget` bytes: its first line, then as much of its end as fits.
fn bounded(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_string();
    }
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let mut head = first.len().min(budget / 2);
    while !first.is_char_boundary(head) {
        head -= 1;
    }
    let room = budget.saturating_sub(head + 8);
    let mut from = rest.len().saturating_sub(room);
    while !rest.is_char_boundary(from) {
        from += 1;
    }
    format!("{}\n[…]\n{}", &first[..head], &rest[from..])
}

/// Most of one candidate's failure kept in what the host is told when several failed.
pub const FAILURE_SHARE: usize = 8 << 10;

/// The loop: ask `provider` for `bounds.candidates` tools meeting `need` (one conversation
/// each), `race` them (each `create_tool` call's arguments in; each one's result out, at most
/// one of them a success: the candidate kept), feed each failure back to the candidate that
/// wrote it, for at most `bounds`. `create_tool` is the one tool offered; `progress` hears each
/// step.
pub async fn synthesize<F, Fut>(
    provider: &dyn Provider,
    need: &str,
    system: &str,
    create_tool: ToolDef,
    bounds: Bounds,
    mut race: F,
    progress: &(dyn Fn(String) + Send + Sync),
) -> Outcome
where
    F: FnMut(Vec<JsonObject>) -> Fut,
    Fut: Future<Output = Vec<CallToolResult>>,
{
    let deadline = Instant::now() + bounds.time;
    let tools = [create_tool];
    let n = bounds.candidates.max(1);
    let mut lanes: Vec<Lane> = (1..=n)
        .map(|k| Lane {
            candidate: k,
            system: lane_system(system, k, n),
            history: vec![Item::User(need.to_string())],
        })
        .collect();
    let mut last_failure: Option<String> = None;
    // A tool mounted in an earlier round whose trigger check was fed back: still the outcome
    // if no later round does better.
    let mut mounted: Option<(usize, CallToolResult)> = None;
    for round in 1..=bounds.rounds {
        let Some(left) = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        else {
            return settle(
                mounted,
                Outcome::OutOfTime {
                    rounds: round - 1,
                    last_failure,
                },
            );
        };
        progress(if lanes.len() == 1 {
            format!("round {round}: asking the model for the tool")
        } else {
            format!(
                "round {round}: asking the model for {} candidates",
                lanes.len()
            )
        });
        let turns = crate::join::all(
            lanes
                .iter()
                .map(|l| {
                    tokio::time::timeout(left, provider.complete(&l.system, &l.history, &tools))
                })
                .collect(),
        )
        .await;
        if turns.iter().any(Result::is_err) {
            return settle(
                mounted,
                Outcome::OutOfTime {
                    rounds: round - 1,
                    last_failure,
                },
            );
        }
        if turns.iter().all(|t| matches!(t, Ok(Err(_)))) {
            let error = turns
                .into_iter()
                .find_map(|t| t.ok()?.err())
                .map(|e| e.to_string())
                .unwrap_or_default();
            return settle(
                mounted,
                Outcome::ModelFailed {
                    round,
                    error,
                    last_failure,
                },
            );
        }
        // Each lane's failure this round, and the calls that go to the race.
        let mut failures: Vec<(usize, String)> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut arguments: Vec<JsonObject> = Vec::new();
        for (at, turn) in turns.into_iter().enumerate() {
            let lane = &mut lanes[at];
            let turn = match turn {
                Ok(Ok(turn)) => turn,
                // Another lane answered: this one sits the round out.
                Ok(Err(e)) => {
                    failures.push((at, format!("autotool's model failed: {e}")));
                    continue;
                }
                Err(_) => continue,
            };
            lane.history.push(turn.to_item());
            let picked = pick(&turn.calls);
            let chosen = picked.as_ref().map(|(c, _)| c.id.clone());
            // Every call of the turn gets a result (the APIs require one per call id); only
            // the first create_tool call runs.
            for call in &turn.calls {
                if Some(&call.id) == chosen.as_ref() {
                    continue;
                }
                let why = if call.name == "create_tool" {
                    "skipped: one create_tool call per turn is run"
                } else {
                    "there is no such tool here: only create_tool is offered"
                };
                lane.history.push(Item::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    output: why.to_string(),
                    is_error: true,
                });
            }
            match picked {
                None => {
                    let said = turn.text.unwrap_or_default();
                    let said: String = said.chars().take(500).collect();
                    lane.history.push(Item::User(
                        "Call create_tool with the tool's code; an answer in text does not count."
                            .into(),
                    ));
                    failures.push((
                        at,
                        format!("the model answered without calling create_tool: {said:?}"),
                    ));
                }
                Some((call, Err(why))) => {
                    let why = why.to_string();
                    lane.history.push(Item::ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        output: why.clone(),
                        is_error: true,
                    });
                    failures.push((at, why));
                }
                Some((call, Ok(args))) => {
                    let name = args
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string();
                    entries.push(Entry {
                        lane: at,
                        call_id: call.id.clone(),
                        call_name: call.name.clone(),
                        name,
                    });
                    arguments.push(args);
                }
            }
        }
        if !entries.is_empty() {
            let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            progress(format!("round {round}: verifying {}", names.join(", ")));
            let results = race(arguments).await;
            let won = results.iter().position(|r| r.is_error != Some(true));
            if let Some(w) = won.filter(|w| *w < entries.len()) {
                let entry = &entries[w];
                let (name, lane_at) = (entry.name.clone(), entry.lane);
                let Some(result) = results.into_iter().nth(w) else {
                    continue;
                };
                progress(format!("round {round}: {name} is mounted"));
                // A description that does not draw the right requests is fed back while
                // rounds are left; the tool stays mounted either way.
                let trigger = result
                    .structured_content
                    .as_ref()
                    .map(|s| &s["trigger_check"])
                    .filter(|t| t["passed"] == Value::Bool(false))
                    .map(|t| t["summary"].as_str().unwrap_or("").to_string());
                let Some(summary) = trigger.filter(|_| round < bounds.rounds) else {
                    return Outcome::Mounted { round, result };
                };
                let feedback = format!(
                    "{name} is mounted and works, but its trigger check failed: {summary}. \
                     Rewrite the tool's description and its functions' docstrings so an agent \
                     picks it for the requests it serves and not for the near misses, then call \
                     create_tool again with the same name and code."
                );
                // Only the winner's conversation goes on.
                let mut lane = lanes.swap_remove(lane_at);
                lane.history.push(Item::ToolResult {
                    call_id: entries[w].call_id.clone(),
                    name: entries[w].call_name.clone(),
                    output: feedback.clone(),
                    is_error: true,
                });
                lane.system = system.to_string();
                lanes = vec![lane];
                progress(format!("round {round}: {name}'s trigger check failed"));
                last_failure = Some(feedback);
                mounted = Some((round, result));
                continue;
            }
            for (entry, result) in entries.iter().zip(results) {
                let text = text_of(&result);
                lanes[entry.lane].history.push(Item::ToolResult {
                    call_id: entry.call_id.clone(),
                    name: entry.call_name.clone(),
                    output: text.clone(),
                    is_error: true,
                });
                failures.push((entry.lane, text));
            }
        }
        failures.sort_by_key(|(at, _)| *at);
        if lanes.len() == 1 {
            let failure = failures.pop().map(|(_, f)| f).unwrap_or_default();
            let first = failure.lines().next().unwrap_or_default();
            progress(format!("round {round} failed: {first}"));
            last_failure = Some(failure);
        } else {
            let mut all = Vec::new();
            for (at, failure) in &failures {
                let k = lanes[*at].candidate;
                let first = failure.lines().next().unwrap_or_default();
                progress(format!("round {round}: candidate {k} failed: {first}"));
                all.push(format!(
                    "candidate {k} of {n}: {}",
                    bounded(failure, FAILURE_SHARE)
                ));
            }
            last_failure = Some(all.join("\n\n"));
        }
    }
    settle(
        mounted,
        Outcome::GaveUp {
            rounds: bounds.rounds,
            last_failure: last_failure.unwrap_or_default(),
        },
    )
}

/// `outcome`, unless a tool was mounted in an earlier round: then that.
fn settle(mounted: Option<(usize, CallToolResult)>, outcome: Outcome) -> Outcome {
    match mounted {
        Some((round, result)) => Outcome::Mounted { round, result },
        None => outcome,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::own_model::agent::{BoxFuture, ProviderError, Turn};
    use serde_json::json;
    use std::sync::Mutex;

    /// A model that plays scripted turns and records the history it was sent each time.
    #[derive(Debug)]
    struct Scripted {
        turns: Mutex<Vec<Result<Turn, ProviderError>>>,
        seen: Mutex<Vec<Vec<Item>>>,
        systems: Mutex<Vec<String>>,
    }

    impl Scripted {
        fn new(turns: Vec<Result<Turn, ProviderError>>) -> Scripted {
            Scripted {
                turns: Mutex::new(turns.into_iter().rev().collect()),
                seen: Mutex::new(Vec::new()),
                systems: Mutex::new(Vec::new()),
            }
        }
    }

    impl Provider for Scripted {
        fn describe(&self) -> String {
            "scripted".into()
        }
        fn complete<'a>(
            &'a self,
            system: &'a str,
            history: &'a [Item],
            tools: &'a [ToolDef],
        ) -> BoxFuture<'a, Result<Turn, ProviderError>> {
            assert_eq!(tools.len(), 1);
            self.seen.lock().unwrap().push(history.to_vec());
            self.systems.lock().unwrap().push(system.to_string());
            let next = self.turns.lock().unwrap().pop().unwrap();
            Box::pin(async move { next })
        }
    }

    fn call(id: &str, name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args,
        }
    }

    fn create_call(id: &str, code: &str) -> Result<Turn, ProviderError> {
        Ok(Turn {
            text: None,
            calls: vec![call(
                id,
                "create_tool",
                json!({"name": "adder", "code": code}),
            )],
        })
    }

    fn tool_def() -> ToolDef {
        ToolDef {
            name: "create_tool".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }
    }

    /// A `create` that fails code containing "broken" at lint and mounts anything else.
    fn fake_create(
        args: JsonObject,
        log: &Mutex<Vec<String>>,
    ) -> impl Future<Output = CallToolResult> + use<> {
        let code = args["code"].as_str().unwrap().to_string();
        log.lock().unwrap().push(code.clone());
        async move {
            if code.contains("broken") {
                CallToolResult::error(vec![ContentBlock::text(
                    "verification failed at lint: SyntaxError on line 1",
                )])
            } else {
                let mut r = CallToolResult::success(vec![ContentBlock::text("Created adder v1")]);
                r.structured_content = Some(json!({"tool": "adder", "version": 1}));
                r
            }
        }
    }

    /// A race of `fake_create`s: the first candidate that passes is kept, the others lose.
    fn fake_race(
        candidates: Vec<JsonObject>,
        log: &Mutex<Vec<String>>,
    ) -> impl Future<Output = Vec<CallToolResult>> + use<> {
        let results: Vec<_> = candidates
            .into_iter()
            .map(|a| fake_create(a, log))
            .collect();
        async move {
            let mut out: Vec<CallToolResult> = Vec::new();
            for r in results {
                let r = r.await;
                let won = out.iter().any(|o| o.is_error != Some(true));
                out.push(if won && r.is_error != Some(true) {
                    CallToolResult::error(vec![ContentBlock::text("lost the race")])
                } else {
                    r
                });
            }
            out
        }
    }

    const BOUNDS: Bounds = Bounds {
        rounds: 3,
        time: Duration::from_secs(30),
        candidates: 1,
    };

    #[tokio::test]
    async fn a_failure_goes_back_and_the_repair_is_mounted() {
        let model = Scripted::new(vec![
            create_call("c1", "broken"),
            create_call("c2", "fixed"),
        ]);
        let created = Mutex::new(Vec::new());
        let steps = Mutex::new(Vec::new());
        let outcome = synthesize(
            &model,
            "add numbers",
            "sys",
            tool_def(),
            BOUNDS,
            |a| fake_race(a, &created),
            &|s| steps.lock().unwrap().push(s),
        )
        .await;
        let Outcome::Mounted { round, .. } = outcome.clone() else {
            panic!("{outcome:?}")
        };
        assert_eq!(round, 2);
        assert_eq!(*created.lock().unwrap(), ["broken", "fixed"]);
        let seen = model.seen.lock().unwrap();
        assert_eq!(seen[0], vec![Item::User("add numbers".into())]);
        let Item::ToolResult {
            call_id,
            output,
            is_error,
            ..
        } = &seen[1][2]
        else {
            panic!("{:?}", seen[1])
        };
        assert_eq!(call_id, "c1");
        assert!(*is_error && output.contains("failed at lint"), "{output}");
        let result = outcome.into_result("scripted", BOUNDS);
        assert!(text_of(&result).contains("round 2 of 3"));
        assert_eq!(result.structured_content.unwrap()["rounds"], 2);
        assert_eq!(
            *steps.lock().unwrap(),
            [
                "round 1: asking the model for the tool",
                "round 1: verifying adder",
                "round 1 failed: verification failed at lint: SyntaxError on line 1",
                "round 2: asking the model for the tool",
                "round 2: verifying adder",
                "round 2: adder is mounted",
            ]
        );
    }

    #[tokio::test]
    async fn rounds_are_bounded_and_the_last_failure_is_reported() {
        let model = Scripted::new(vec![
            create_call("c1", "broken 1"),
            Ok(Turn {
                text: Some("I would rather explain".into()),
                calls: vec![],
            }),
            Ok(Turn {
                text: None,
                calls: vec![
                    call("x", "web_search", json!({})),
                    call("c3", "create_tool", json!("{not json")),
                    call("c4", "create_tool", json!({"name": "a", "code": "b"})),
                ],
            }),
        ]);
        let created = Mutex::new(Vec::new());
        let outcome = synthesize(
            &model,
            "need",
            "sys",
            tool_def(),
            BOUNDS,
            |a| fake_race(a, &created),
            &|_| {},
        )
        .await;
        let Outcome::GaveUp {
            rounds,
            last_failure,
        } = &outcome
        else {
            panic!("{outcome:?}")
        };
        assert_eq!(*rounds, 3);
        assert!(last_failure.contains("not a JSON object"), "{last_failure}");
        assert_eq!(*created.lock().unwrap(), ["broken 1"]);
        // The text-only turn was answered with a reminder, and every call of the last turn
        // would get a result.
        let seen = model.seen.lock().unwrap();
        assert!(matches!(seen[2].last(), Some(Item::User(u)) if u.contains("create_tool")));
        let result = outcome.into_result("scripted", BOUNDS);
        assert_eq!(result.is_error, Some(true));
        let text = text_of(&result);
        assert!(
            text.contains("in 3 rounds") && text.contains("not a JSON object"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_model_error_stops_at_once() {
        let model = Scripted::new(vec![
            create_call("c1", "broken"),
            Err(ProviderError::Timeout),
        ]);
        let created = Mutex::new(Vec::new());
        let outcome = synthesize(
            &model,
            "need",
            "sys",
            tool_def(),
            BOUNDS,
            |a| fake_race(a, &created),
            &|_| {},
        )
        .await;
        let Outcome::ModelFailed {
            round,
            last_failure,
            ..
        } = &outcome
        else {
            panic!("{outcome:?}")
        };
        assert_eq!(*round, 2);
        assert!(last_failure.as_deref().unwrap().contains("lint"));
    }

    #[tokio::test]
    async fn no_model_request_starts_after_the_time_bound() {
        let model = Scripted::new(vec![]);
        let outcome = synthesize(
            &model,
            "need",
            "sys",
            tool_def(),
            Bounds {
                rounds: 3,
                time: Duration::ZERO,
                candidates: 2,
            },
            |a| fake_race(a, &Mutex::new(Vec::new())),
            &|_| {},
        )
        .await;
        assert_eq!(
            outcome,
            Outcome::OutOfTime {
                rounds: 0,
                last_failure: None
            }
        );
    }

    #[tokio::test]
    async fn candidates_are_written_apart_raced_and_each_repaired_from_its_own_failure() {
        // Round 1: both broken; round 2: the first still broken, the second fixed.
        let model = Scripted::new(vec![
            create_call("a1", "broken a"),
            create_call("b1", "broken b"),
            create_call("a2", "broken a again"),
            create_call("b2", "fixed b"),
        ]);
        let created = Mutex::new(Vec::new());
        let steps = Mutex::new(Vec::new());
        let bounds = Bounds {
            candidates: 2,
            ..BOUNDS
        };
        let outcome = synthesize(
            &model,
            "add numbers",
            "sys",
            tool_def(),
            bounds,
            |a| fake_race(a, &created),
            &|s| steps.lock().unwrap().push(s),
        )
        .await;
        let Outcome::Mounted { round, .. } = &outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(*round, 2);
        assert_eq!(
            *created.lock().unwrap(),
            ["broken a", "broken b", "broken a again", "fixed b"]
        );
        // Each candidate is its own conversation, told which it is.
        let systems = model.systems.lock().unwrap();
        assert!(systems[0].starts_with("sys") && systems[0].contains("candidate 1 of 2"));
        assert!(systems[1].contains("candidate 2 of 2"));
        let seen = model.seen.lock().unwrap();
        let fed_back = |history: &[Item]| -> Vec<String> {
            history
                .iter()
                .filter_map(|i| match i {
                    Item::ToolResult { call_id, .. } => Some(call_id.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(fed_back(&seen[2]), ["a1"]);
        assert_eq!(fed_back(&seen[3]), ["b1"]);
        assert_eq!(
            steps.lock().unwrap()[..4],
            [
                "round 1: asking the model for 2 candidates",
                "round 1: verifying adder, adder",
                "round 1: candidate 1 failed: verification failed at lint: SyntaxError on line 1",
                "round 1: candidate 2 failed: verification failed at lint: SyntaxError on line 1",
            ]
        );
    }

    #[tokio::test]
    async fn when_no_candidate_passes_each_failure_is_said() {
        let model = Scripted::new(vec![
            create_call("a1", "broken a"),
            Ok(Turn {
                text: Some("no code from me".into()),
                calls: vec![],
            }),
        ]);
        let bounds = Bounds {
            rounds: 1,
            candidates: 2,
            ..BOUNDS
        };
        let outcome = synthesize(
            &model,
            "need",
            "sys",
            tool_def(),
            bounds,
            |a| fake_race(a, &Mutex::new(Vec::new())),
            &|_| {},
        )
        .await;
        let result = outcome.into_result("scripted", bounds);
        assert_eq!(result.is_error, Some(true));
        let text = text_of(&result);
        assert!(
            text.contains("candidate by candidate")
                && text.contains("candidate 1 of 2: verification failed at lint")
                && text.contains("candidate 2 of 2: the model answered without calling"),
            "{text}"
        );
    }

    #[test]
    fn a_long_failure_keeps_its_first_line_and_its_end() {
        let long = format!(
            "verification failed at launch: boom\n{}\nValueError: x",
            "é".repeat(9000)
        );
        let kept = bounded(&long, 1000);
        assert!(kept.len() <= 1000, "{}", kept.len());
        assert!(kept.starts_with("verification failed at launch: boom\n[…]\n"));
        assert!(kept.ends_with("ValueError: x"));
        assert_eq!(bounded("short", 1000), "short");
    }

    #[test]
    fn the_model_comes_from_the_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        let none = OwnModel::read(&path);
        assert!(none.provider().is_none());
        assert!(none.why_not().contains("does not exist"), "{none:?}");
        std::fs::write(&path, "# nothing yet\n").unwrap();
        assert!(OwnModel::read(&path).why_not().contains("no model"));
        std::fs::write(
            &path,
            "OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_LLM=local\nOPENAI_API_KEY=sk-own-0123\n",
        )
        .unwrap();
        let model = OwnModel::read(&path);
        let provider = model.provider().expect("a provider");
        assert!(provider.describe().contains("local"), "{model:?}");
        assert!(!format!("{model:?}").contains("sk-own"));
        assert_eq!(
            model.redact("key sk-own-0123 leaked"),
            "key [REDACTED:OPENAI_API_KEY] leaked"
        );
    }
}
