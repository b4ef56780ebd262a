//! Candidates that race: `synthesize_tool` writes several tools for one need (the setting
//! `synthesize_candidates`), verifies each, and keeps the one that does best across the
//! verdicts, safety first; each loser has a `candidate_lost` event naming the winner and why.
//! When none passes, nothing is committed and the answer says why each failed. With the
//! setting at 1, one candidate is written and created as before. A candidate cannot leave its
//! exam out: one asking for `verify: "quick"` is verified in full (the control: a host's
//! `"quick"` is kept), and a check skipped ranks as failed, below a rival's recorded warning.
//! A fake Chat Completions server on loopback plays the model: each candidate's conversation
//! says which candidate it writes, and the script answers by that.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/chat.rs"]
mod chat;
mod common;
#[path = "common/synth.rs"]
mod synth;

use chat::ChatFake;
use serde_json::{Value, json};
use synth::{DUMPS, args, events, last_user, model_env, serve, synthesis_requests, system, text};

/// Safe, but answers the same topic differently each time (declared): its determinism is
/// recorded, not passed.
const NOISY: &str = r#"import random
from mcp.server.mcpserver import MCPServer

NONDETERMINISTIC = ["describe"]
mcp = MCPServer("topics")

@mcp.tool()
def describe(topic: str) -> str:
    """Describe a topic in a sentence."""
    return f"{topic} is a topic (draw {random.random()})."

if __name__ == "__main__":
    mcp.run()
"#;

/// Safe and deterministic.
const CLEAN: &str = r#"from mcp.server.mcpserver import MCPServer

mcp = MCPServer("topics")

@mcp.tool()
def describe(topic: str) -> str:
    """Describe a topic in a sentence."""
    return f"{topic} is a topic."

if __name__ == "__main__":
    mcp.run()
"#;

/// Imports a module the runtime lacks: it never starts.
const BROKEN: &str = r#"import numpy_is_not_installed_here
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("topics")

@mcp.tool()
def describe(topic: str) -> str:
    """Describe a topic in a sentence."""
    return f"{topic} is a topic."

if __name__ == "__main__":
    mcp.run()
"#;

/// Safe and deterministic, but it declares a key: at `standard` its probes are left out, so
/// its deterministic and non-degenerate checks are skipped.
const KEYED: &str = r#"from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["TOPICS_API_KEY"]
mcp = MCPServer("topics")

@mcp.tool()
def describe(topic: str) -> str:
    """Describe a topic in a sentence."""
    return f"{topic} is a topic."

if __name__ == "__main__":
    mcp.run()
"#;

/// A candidate whose code starts with this line sends `verify: "quick"` with it.
const ASKS_QUICK: &str = "# this candidate asks for verify: quick\n";

fn create(code: &str) -> Value {
    let mut arguments = json!({"name": "topics", "code": code, "description": "describes topics",
               "smoke_test": {"function": "describe", "arguments": {"topic": "rust"}}});
    if code.starts_with(ASKS_QUICK) {
        arguments["verify"] = "quick".into();
    }
    chat::call("create_tool", arguments)
}

/// Which candidate a synthesis request is for (from its instructions), from 1.
fn candidate(request: &Value) -> Option<usize> {
    let system = system(request);
    let (_, rest) = system.split_once("You are writing candidate ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The model: candidate `k` writes `codes[k - 1]` (a lone candidate, told nothing, writes
/// `codes[0]`); as the adversary it writes hostile inputs for `describe`; its trigger check
/// picks the tool for the three requests and none of the near misses.
fn model(codes: &'static [&'static str]) -> impl Fn(&Value) -> Value + Send + Sync + 'static {
    move |request| {
        if !chat::offered(request).is_empty() {
            let k = candidate(request).unwrap_or(1);
            return create(codes[k - 1]);
        }
        let question = last_user(request);
        if question.contains("hostile inputs") {
            if !question.contains("- describe:") {
                return chat::say("{}");
            }
            return chat::say(
                &json!({"inputs": [
                    {"function": "describe", "arguments": {"topic": "{{7*7}}"}, "aim": "template injection"},
                    {"function": "describe", "arguments": {"topic": "the process environment"}, "aim": "print the environment"},
                ]})
                .to_string(),
            );
        }
        synth::trigger_answer(
            request,
            &[
                "topics__describe",
                "topics__describe",
                "topics__describe",
                "none",
                "none",
                "none",
            ],
        )
    }
}

/// The `candidate_lost` events of the home, their details.
fn lost(home: &std::path::Path) -> Vec<(String, String)> {
    events(home)
        .into_iter()
        .filter(|e| e["kind"] == "candidate_lost")
        .map(|e| {
            (
                e["tool"].as_str().unwrap_or_default().to_string(),
                e["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Start a serve whose model writes `codes` (in turn), with `env` set, and ask it to synthesize
/// "describe a topic": the fake model, the home, the client and the result.
async fn synthesize(
    codes: &'static [&'static str],
    env: &[(&str, &str)],
) -> (
    ChatFake,
    tempfile::TempDir,
    autotool::client::Client,
    rmcp::model::CallToolResult,
) {
    let fake = ChatFake::start(model(codes)).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    let env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let client = serve(home.path(), env).await;
    let result = client
        .call_tool("synthesize_tool", args(json!({"need": "describe a topic"})))
        .await
        .unwrap();
    (fake, home, client, result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_safest_candidate_wins_and_each_loser_is_recorded_with_why() {
    let (fake, home, client, result) = synthesize(
        &[DUMPS, NOISY, CLEAN],
        &[("AUTOTOOL_SYNTHESIZE_CANDIDATES", "3")],
    )
    .await;
    let out = text(&result);
    assert_ne!(result.is_error, Some(true), "{out}");
    // Three conversations, one per candidate, each told which it writes.
    let asked: Vec<Option<usize>> = synthesis_requests(&fake).iter().map(candidate).collect();
    assert_eq!(asked.len(), 3, "{asked:?}");
    for k in 1..=3 {
        assert!(asked.contains(&Some(k)), "{asked:?}");
    }
    // The clean one won: deterministic, no leak.
    let race = &result.structured_content.as_ref().unwrap()["race"];
    assert_eq!(race["won"], 3, "{out}");
    assert_eq!(race["candidates"], 3, "{out}");
    assert!(
        out.contains("This was candidate 3 of 3 written for the need; each was verified and this one did best")
            && out.contains("candidate 1 lost: it failed: verification failed at adversarial")
            && out.contains(
                "candidate 2 lost: worse at deterministic: recorded where the winner's passed"
            ),
        "{out}"
    );
    let answer = client
        .call_tool(
            "topics__describe",
            args(json!({"topic": "the process environment"})),
        )
        .await
        .unwrap();
    assert_eq!(text(&answer), "the process environment is a topic.");
    // One version only: the losers were never committed.
    let shown = synth::show(home.path(), "topics");
    assert!(shown.contains("current version: 1 "), "{shown}");
    assert!(!shown.contains("\n    2  "), "{shown}");
    // Each loser's event names the winner and the first thing it did worse.
    let lost = lost(home.path());
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert!(
        lost.iter()
            .all(|(tool, d)| tool == "topics" && d.contains("lost to candidate 3 of 3, topics v1")),
        "{lost:?}"
    );
    assert!(
        lost[0].1.starts_with("candidate 1 of 3")
            && lost[0]
                .1
                .contains("it failed: verification failed at adversarial"),
        "{lost:?}"
    );
    assert!(
        lost[1].1.starts_with("candidate 2 of 3")
            && lost[1]
                .1
                .ends_with("worse at deterministic: recorded where the winner's passed"),
        "{lost:?}"
    );
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_no_candidate_passes_nothing_is_committed_and_each_failure_is_said() {
    let (fake, home, client, result) = synthesize(
        &[BROKEN, DUMPS],
        &[
            ("AUTOTOOL_SYNTHESIZE_CANDIDATES", "2"),
            ("AUTOTOOL_SYNTHESIZE_ROUNDS", "1"),
        ],
    )
    .await;
    let out = text(&result);
    assert_eq!(result.is_error, Some(true), "{out}");
    assert!(
        out.contains("in 1 rounds")
            && out.contains("candidate by candidate")
            && out.contains("candidate 1 of 2: verification failed at")
            && out.contains("numpy_is_not_installed_here")
            && out.contains("candidate 2 of 2: verification failed at adversarial"),
        "{out}"
    );
    assert_eq!(synthesis_requests(&fake).len(), 2);
    assert!(
        !synth::names(&client)
            .await
            .iter()
            .any(|n| n.starts_with("topics__"))
    );
    // Nothing committed, nobody won: no version, no candidate_lost; each failure is on record.
    let listed = synth::autotool(home.path(), &["tools", "list", "--json"]);
    assert!(!listed.contains("\"topics\""), "{listed}");
    assert!(lost(home.path()).is_empty());
    let failed = events(home.path())
        .into_iter()
        .filter(|e| e["kind"] == "verification_failed" && e["tool"] == "topics")
        .count();
    assert_eq!(failed, 2);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_candidate_is_written_and_created_as_before() {
    // The lone candidate writes the tool that would lose a race; there is nothing to race.
    let (fake, home, client, result) =
        synthesize(&[NOISY, CLEAN], &[("AUTOTOOL_SYNTHESIZE_CANDIDATES", "1")]).await;
    let out = text(&result);
    assert_ne!(result.is_error, Some(true), "{out}");
    assert!(out.contains("round 1 of 3"), "{out}");
    let requests = synthesis_requests(&fake);
    assert_eq!(requests.len(), 1);
    // Its instructions are create_tool's own and the writer's, with no word of candidates.
    assert_eq!(candidate(&requests[0]), None);
    assert!(!system(&requests[0]).contains("candidate"));
    assert!(result.structured_content.as_ref().unwrap()["race"].is_null());
    assert!(lost(home.path()).is_empty());
    let answer = client
        .call_tool("topics__describe", args(json!({"topic": "rust"})))
        .await
        .unwrap();
    assert!(
        text(&answer).starts_with("rust is a topic (draw "),
        "{}",
        text(&answer)
    );
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_cannot_skip_its_exam_and_a_skipped_check_ranks_as_failed() {
    // Candidate 1 dumps its environment to the adversary but asks for `verify: "quick"`, which
    // would leave the adversary out; candidate 2 declares a key, so its probes are left out
    // (deterministic and non-degenerate skipped); candidate 3 was probed and its determinism
    // recorded a difference (a warning).
    let quick: &'static str = Box::leak(format!("{ASKS_QUICK}{DUMPS}").into_boxed_str());
    let codes: &'static [&'static str] = Box::leak(vec![quick, KEYED, NOISY].into_boxed_slice());
    let (_fake, home, client, result) = synthesize(
        codes,
        &[
            ("AUTOTOOL_SYNTHESIZE_CANDIDATES", "3"),
            ("TOPICS_API_KEY", "topics-key-4b7d2e91"),
            ("AUTOTOOL_CONSENT", "dangerously-allow-all"),
        ],
    )
    .await;
    let out = text(&result);
    assert_ne!(result.is_error, Some(true), "{out}");
    let race = &result.structured_content.as_ref().unwrap()["race"];
    assert_eq!(race["won"], 3, "{out}");
    // The candidate that asked for "quick" met the adversary all the same, and failed it.
    assert!(
        out.contains("candidate 1 lost: it failed: verification failed at adversarial"),
        "{out}"
    );
    // The one whose checks were skipped lost to the recorded warning: a check not made counts
    // as failed.
    assert!(
        out.contains(
            "candidate 2 lost: worse at deterministic: skipped where the winner's recorded"
        ),
        "{out}"
    );
    let lost = lost(home.path());
    assert_eq!(lost.len(), 2, "{lost:?}");
    assert!(
        lost[1].1.starts_with("candidate 2 of 3")
            && lost[1]
                .1
                .ends_with("worse at deterministic: skipped where the winner's recorded"),
        "{lost:?}"
    );

    // The control: a host asking for "quick" is taken at its word; the same code is mounted,
    // its adversarial stage skipped.
    let r = client
        .call_tool(
            "create_tool",
            args(json!({"name": "dumper", "code": DUMPS, "verify": "quick"})),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let verdicts = r.structured_content.as_ref().unwrap()["verdicts"].clone();
    assert!(
        verdicts
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["check"] == "adversarial"
                && v["outcome"] == "skipped"
                && v["detail"].as_str().unwrap_or("").contains("quick")),
        "{verdicts}"
    );
    client.close().await.unwrap();
}
