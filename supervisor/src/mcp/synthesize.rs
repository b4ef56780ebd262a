//! The `synthesize_tool` built-in: autotool's own model ([`crate::own_model`]) writes a tool
//! for a need in plain words, each of its `create_tool` calls goes through the same gate as a
//! host's (parsed, prepared, created, rendered and redacted for the model), and the outcome is
//! recorded in the ledger and rendered for the host. With the setting `synthesize_candidates`
//! above 1, the candidates of one round race ([`Library::race`]): each is verified, only the
//! best is committed, and the winner's answer says who it raced and why each one lost.
//! Every candidate is verified at [`CANDIDATE_THOROUGHNESS`], whatever `verify` its call asks
//! for: a candidate cannot leave its exam out with `"quick"` (and, in a race, win over a rival
//! that was examined and warned about, `crate::verify::rank`).

use super::render::{self, Renderer};
use super::request::{ParseError, Request};
use crate::library::race::Finish;
use crate::library::{CreateRequest, Library};
use crate::own_model::agent::ToolDef;
use crate::own_model::synthesize::{Bounds, INSTRUCTIONS, Outcome, synthesize};
use crate::verify::Thoroughness;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};

/// The level every candidate of autotool's own model is verified at, whatever its call's
/// `verify` says: the whole gate, as for a tool placed by hand. Not `"quick"`, which leaves the
/// adversarial, deterministic and non-degenerate checks out; not `"thorough"` either, which
/// would probe a tool that declares keys and so spend the user's API quota on the model's say.
pub const CANDIDATE_THOROUGHNESS: Thoroughness = Thoroughness::Standard;

/// One `create_tool` call of the model, parsed as a host's is, then set to
/// [`CANDIDATE_THOROUGHNESS`]; or the error result the model reads.
fn candidate(args: &JsonObject) -> Result<CreateRequest, CallToolResult> {
    match Request::parse("create_tool", args, false) {
        Ok(Request::Create(mut request)) => {
            request.thoroughness = CANDIDATE_THOROUGHNESS;
            Ok(request)
        }
        Ok(_) | Err(ParseError::UnknownTool(_)) => {
            Err(render::error_result("not a create_tool call"))
        }
        Err(ParseError::Arguments(e)) => Err(render::error_result(e)),
    }
}

/// One `create_tool` call of the model, through the same gate as a host's, and its result as
/// the model reads it (redacted).
async fn create_for_model(library: &Library, args: JsonObject) -> CallToolResult {
    let secrets = library.secrets();
    let renderer = Renderer {
        secrets: &secrets,
        cap: library.settings.max_output_bytes,
    };
    let result = match candidate(&args) {
        Ok(request) => match library.prepare(request) {
            Ok(prepared) => match library.create(prepared).await {
                Ok(created) => render::created(&created, library.settings.list_limit),
                Err(e) => render::create_failed(&e),
            },
            Err(e) => render::create_failed(&e),
        },
        Err(refused) => refused,
    };
    renderer.result(result)
}

/// One round's candidates, through the same gate as a host's `create_tool`: one alone is
/// created as a host's would be; several race, and only the best is committed. Each one's
/// result as the model reads it (redacted), in order.
async fn race_for_model(library: &Library, calls: Vec<JsonObject>) -> Vec<CallToolResult> {
    if calls.len() <= 1 {
        let mut out = Vec::new();
        for args in calls {
            out.push(create_for_model(library, args).await);
        }
        return out;
    }
    let secrets = library.secrets();
    let renderer = Renderer {
        secrets: &secrets,
        cap: library.settings.max_output_bytes,
    };
    let mut results: Vec<Option<CallToolResult>> = calls.iter().map(|_| None).collect();
    let mut prepared = Vec::new();
    let mut at = Vec::new();
    for (i, args) in calls.iter().enumerate() {
        match candidate(args) {
            Ok(request) => match library.prepare(request) {
                Ok(p) => {
                    prepared.push(p);
                    at.push(i);
                }
                Err(e) => results[i] = Some(render::create_failed(&e)),
            },
            Err(refused) => results[i] = Some(refused),
        }
    }
    let n = prepared.len();
    let finishes = library.race(prepared).await;
    let lost: Vec<serde_json::Value> = finishes
        .iter()
        .enumerate()
        .filter_map(|(r, f)| Some(serde_json::json!({"candidate": r + 1, "reason": f.reason()?})))
        .collect();
    for (r, finish) in finishes.into_iter().enumerate() {
        let i = at[r];
        results[i] = Some(match finish {
            Finish::Won(created) => {
                let mut result = render::created(&created, library.settings.list_limit);
                let said: Vec<String> = lost
                    .iter()
                    .map(|l| {
                        format!(
                            "candidate {} lost: {}",
                            l["candidate"],
                            l["reason"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                result.content.push(ContentBlock::text(format!(
                    "This was candidate {} of {n} written for the need; each was verified and \
                     this one did best (safety first). {}",
                    r + 1,
                    said.join("; ")
                )));
                if let Some(serde_json::Value::Object(o)) = result.structured_content.as_mut() {
                    o.insert(
                        "race".into(),
                        serde_json::json!({"candidates": n, "won": r + 1, "lost": lost}),
                    );
                }
                result
            }
            Finish::Lost { winner, why } => render::error_result(format!(
                "this candidate passed verification, but candidate {} of {n} did better and \
                 was kept: {why}",
                winner + 1
            )),
            Finish::Failed(e) => render::create_failed(&e),
        });
    }
    results
        .into_iter()
        .map(|r| renderer.result(r.unwrap_or_else(|| render::error_result("not raced"))))
        .collect()
}

/// The `synthesize_tool` call; `progress` hears each step (for the host's progress
/// notifications).
pub async fn synthesize_tool(
    library: &Library,
    need: &str,
    progress: &(dyn Fn(String) + Send + Sync),
) -> CallToolResult {
    let model = library.own_model.current();
    let Some(provider) = model.provider() else {
        return CallToolResult::error(vec![ContentBlock::text(format!(
            "synthesize_tool is not available: {}. Write the tool with create_tool instead.",
            model.why_not()
        ))]);
    };
    let secrets = library.secrets();
    let Some(create_tool) =
        crate::mcp::listing::builtin_tools(&secrets.names, library.settings.list_limit)
            .iter()
            .find(|t| t.name == "create_tool")
            .map(ToolDef::from)
    else {
        return CallToolResult::error(vec![ContentBlock::text(
            "synthesize_tool: create_tool is missing from the built-in tools",
        )]);
    };
    let snapshot = library.snapshot();
    let names: Vec<&str> = snapshot.tools.keys().map(|n| n.as_str()).collect();
    let system = format!(
        "{}\n\n{INSTRUCTIONS}\n\nTools mounted now (choose a new name unless the need is \
         to change one of them): {}.",
        create_tool.description,
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    );
    let bounds = Bounds {
        rounds: library.settings.synthesize_rounds.max(1),
        time: library.settings.synthesize_time,
        candidates: library.settings.synthesize_candidates.max(1),
    };
    tracing::info!(
        model = provider.describe(),
        candidates = bounds.candidates,
        "synthesize_tool: {need:?}"
    );
    let outcome = synthesize(
        provider.as_ref(),
        need,
        &system,
        create_tool,
        bounds,
        |calls| race_for_model(library, calls),
        progress,
    )
    .await;
    let need_shown: String = need.chars().take(300).collect();
    let (tool, kind, detail) = match &outcome {
        Outcome::Mounted { round, result } => (
            result
                .structured_content
                .as_ref()
                .and_then(|s| s["tool"].as_str())
                .map(str::to_string),
            crate::ledger::Event::Synthesized,
            format!("by {} in round {round}: {need_shown}", provider.describe()),
        ),
        _ => (
            None,
            crate::ledger::Event::SynthesisFailed,
            format!("by {}: {need_shown}", provider.describe()),
        ),
    };
    let detail = secrets.redact(&model.redact(&detail));
    if let Err(e) = library.registry.event(tool.as_deref(), kind, &detail) {
        tracing::warn!("recording the synthesis: {e}");
    }
    let mut result = outcome.into_result(&provider.describe(), bounds);
    // The model's own key is kept out too (the render step covers the tool keys).
    for block in &mut result.content {
        if let ContentBlock::Text(t) = block {
            t.text = model.redact(&t.text);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn args(verify: Option<&str>) -> JsonObject {
        let mut a = serde_json::json!({"name": "adder", "code": "print(1)\n"});
        if let Some(v) = verify {
            a["verify"] = v.into();
        }
        a.as_object().unwrap().clone()
    }

    #[test]
    fn a_candidate_is_verified_in_full_whatever_verify_it_asks_for() {
        for verify in [None, Some("quick"), Some("standard"), Some("thorough")] {
            let request = candidate(&args(verify)).unwrap();
            assert_eq!(request.thoroughness, Thoroughness::Standard, "{verify:?}");
        }
        // The control: the same call from a host is taken at its word.
        let Ok(Request::Create(host)) = Request::parse("create_tool", &args(Some("quick")), false)
        else {
            panic!("not a create_tool request");
        };
        assert_eq!(host.thoroughness, Thoroughness::Quick);
        // A call that is no create_tool is still refused, as before.
        let refused = candidate(&JsonObject::new()).unwrap_err();
        assert_eq!(refused.is_error, Some(true));
    }
}
