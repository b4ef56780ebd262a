//! `synthesize_tool`: autotool's own model, named by `$AUTOTOOL_HOME/.env` and nothing else,
//! writes a tool, has each failure fed back, and mounts the repair; with a model of its own,
//! every created tool gets a trigger check (does the model pick it for the requests it serves,
//! and not for near misses?), kept as a verdict and fed back by `synthesize_tool`. A fake Chat
//! Completions server on loopback plays the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/chat.rs"]
mod chat;
mod common;
#[path = "common/synth.rs"]
mod synth;

use autotool::client::Client;
use chat::ChatFake;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use std::path::Path;
use synth::{
    DUMPS, args, last_user, model_env, names, show, synthesis_requests, text, trigger_answer,
    wait_for_synthesize,
};

/// Imports a module the runtime lacks: verification fails (the process ends before
/// `initialize`) with a traceback.
const BROKEN: &str = r#"import numpy_is_not_installed_here
from mcp.server.mcpserver import MCPServer

mcp = MCPServer("adder")

@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

if __name__ == "__main__":
    mcp.run()
"#;

const FIXED: &str = r#"from mcp.server.mcpserver import MCPServer

mcp = MCPServer("adder")

@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

if __name__ == "__main__":
    mcp.run()
"#;

fn create(code: &str) -> Value {
    chat::call(
        "create_tool",
        json!({"name": "adder", "code": code, "description": "adds numbers",
               "smoke_test": {"function": "add", "arguments": {"a": 2, "b": 3}}}),
    )
}

/// `autotool serve` on `home` (as [`synth::serve`]) writing one candidate per round: these
/// tests are of one candidate's rounds; candidates that race are tests/race.rs's.
async fn serve(home: &Path, env: Vec<(String, String)>) -> Client {
    let mut vars = vec![(
        "AUTOTOOL_SYNTHESIZE_CANDIDATES".to_string(),
        "1".to_string(),
    )];
    vars.extend(env);
    synth::serve(home, vars).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_tool_is_repaired_from_its_failure_and_mounted() {
    let fake = ChatFake::start(|request| {
        if chat::offered(request).is_empty() {
            return trigger_answer(request, PICKED_WELL);
        }
        match chat::tool_results(request).len() {
            0 => create(BROKEN),
            _ => create(FIXED),
        }
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    let client = serve(home.path(), vec![]).await;
    assert!(
        names(&client)
            .await
            .contains(&"synthesize_tool".to_string())
    );

    let result = client
        .call_tool("synthesize_tool", args(json!({"need": "add two integers"})))
        .await
        .unwrap();
    let out = text(&result);
    assert_ne!(result.is_error, Some(true), "{out}");
    assert!(
        out.contains("round 2 of 3") && out.contains("Created adder v1"),
        "{out}"
    );

    let requests = synthesis_requests(&fake);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    // The model is offered create_tool alone, with create_tool's own template as instructions,
    // and the need as the user message.
    assert_eq!(chat::offered(&requests[0]), ["create_tool"]);
    assert_eq!(requests[0]["model"], "fake-model");
    let messages = requests[0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("REQUIRED_ENV")
    );
    assert_eq!(messages[1]["content"], "add two integers");
    // The second request carries the failure of the first tool, traceback included.
    let fed_back = chat::tool_results(&requests[1]);
    assert_eq!(fed_back.len(), 1);
    assert!(
        fed_back[0].contains("verification failed at")
            && fed_back[0].contains("numpy_is_not_installed_here"),
        "{}",
        fed_back[0]
    );

    let sum = client
        .call_tool("adder__add", args(json!({"a": 2, "b": 40})))
        .await
        .unwrap();
    assert_eq!(text(&sum), "42");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_home_env_file_offers_synthesize_tool_and_it_is_read_live() {
    let fake = ChatFake::start(|_| chat::say("unused")).await;
    let home = tempfile::tempdir().unwrap();
    // A model in serve's own environment is not autotool's model.
    let client = serve(
        home.path(),
        vec![
            ("OPENAI_BASE_URL".into(), fake.base_url.clone()),
            ("OPENAI_LLM".into(), "fake-model".into()),
            ("OPENAI_API_KEY".into(), "sk-process-env-0123456789".into()),
            (
                "ANTHROPIC_API_KEY".into(),
                "sk-ant-process-env-0123456789".into(),
            ),
        ],
    )
    .await;
    let listed = names(&client).await;
    assert!(listed.contains(&"create_tool".to_string()), "{listed:?}");
    assert!(
        !listed.contains(&"synthesize_tool".to_string()),
        "{listed:?}"
    );

    // Adding the file needs no restart; removing it withdraws the tool.
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    let listed = wait_for_synthesize(&client, true).await;
    assert!(
        listed.contains(&"synthesize_tool".to_string()),
        "{listed:?}"
    );
    std::fs::remove_file(home.path().join(".env")).unwrap();
    let listed = wait_for_synthesize(&client, false).await;
    assert!(
        !listed.contains(&"synthesize_tool".to_string()),
        "{listed:?}"
    );
    assert!(fake.requests().is_empty());
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_never_gets_it_right_is_given_up_on_after_the_rounds() {
    let fake = ChatFake::start(|_| create(BROKEN)).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    // The default is 3 rounds (the setting synthesize_rounds).
    let client = serve(
        home.path(),
        vec![("AUTOTOOL_SYNTHESIZE_ROUNDS".into(), "2".into())],
    )
    .await;
    let result = client
        .call_tool("synthesize_tool", args(json!({"need": "add numbers"})))
        .await
        .unwrap();
    let out = text(&result);
    assert_eq!(result.is_error, Some(true), "{out}");
    assert!(
        out.contains("in 2 rounds") && out.contains("numpy_is_not_installed_here"),
        "{out}"
    );
    assert_eq!(fake.requests().len(), 2);
    assert!(
        !names(&client)
            .await
            .iter()
            .any(|n| n.starts_with("adder__"))
    );
    client.close().await.unwrap();
}

/// Picks for three requests the adder should serve, then three near misses: all right.
const PICKED_WELL: &[&str] = &[
    "adder__add",
    "adder__add",
    "adder__add",
    "none",
    "none",
    "none",
];
/// One request of three picked it, and two near misses did.
const PICKED_BADLY: &[&str] = &[
    "none",
    "adder__add",
    "none",
    "adder__add",
    "adder__add",
    "none",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_tool_gets_a_trigger_check_with_a_model_of_its_own() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let badly = std::sync::Arc::new(AtomicBool::new(false));
    let b = badly.clone();
    let fake = ChatFake::start(move |request| {
        let picks = if b.load(Ordering::Relaxed) {
            PICKED_BADLY
        } else {
            PICKED_WELL
        };
        trigger_answer(request, picks)
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let client = serve(home.path(), vec![]).await;
    let code = args(json!({"name": "adder", "code": FIXED, "description": "adds numbers"}));

    // Without a model of its own: skipped, and said so.
    let r = client.call_tool("create_tool", code.clone()).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let skipped = &r.structured_content.as_ref().unwrap()["trigger_check"]["skipped"];
    assert!(
        skipped
            .as_str()
            .is_some_and(|s| s.contains("no model of its own")),
        "{}",
        text(&r)
    );
    assert!(fake.requests().is_empty());

    // With one: the model writes requests and near misses, then picks from the whole list.
    // (Each create below adds a comment to the code: the same code and description again is
    // answered "unchanged" with the mounted version's verdicts, and checks nothing anew.)
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    wait_for_synthesize(&client, true).await;
    let second = format!("{FIXED}\n# the second version\n");
    let code = args(json!({"name": "adder", "code": second, "description": "adds numbers"}));
    let r = client.call_tool("create_tool", code.clone()).await.unwrap();
    let check = r.structured_content.as_ref().unwrap()["trigger_check"].clone();
    assert_eq!(check["passed"], true, "{check}");
    assert_eq!(check["trigger_rate"], 1.0, "{check}");
    assert_eq!(check["false_trigger_rate"], 0.0, "{check}");
    // (The adversarial stage's question is the model's too; it is not the trigger check's.)
    let requests: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| !last_user(r).contains("hostile inputs"))
        .collect();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let listed = last_user(&requests[1]);
    assert!(
        listed.contains("- adder__add: Add two numbers.")
            && listed.contains("1. add 2 and 3")
            && listed.contains("6. what is 3 to the power 4"),
        "{listed}"
    );
    let shown = show(home.path(), "adder");
    assert!(
        shown.contains("trigger passed (trigger rate 1.00 (3 of 3"),
        "{shown}"
    );
    let relevance = |r: CallToolResult| {
        r.structured_content.unwrap()["results"][0]["score"]["relevance"]
            .as_f64()
            .unwrap()
    };
    let search = args(json!({"query": "add two numbers"}));
    let drawing = relevance(
        client
            .call_tool("search_tools", search.clone())
            .await
            .unwrap(),
    );

    // Control: picks that miss and steal fail the check; the tool stays mounted and answers.
    badly.store(true, Ordering::Relaxed);
    let third = format!("{FIXED}\n# the third version\n");
    let code = args(json!({"name": "adder", "code": third, "description": "adds numbers"}));
    let r = client.call_tool("create_tool", code).await.unwrap();
    let check = r.structured_content.as_ref().unwrap()["trigger_check"].clone();
    assert_eq!(check["passed"], false, "{check}");
    assert!(
        check["summary"]
            .as_str()
            .is_some_and(|s| s.contains("missed") && s.contains("picked for near misses")),
        "{check}"
    );
    let sum = client
        .call_tool("adder__add", args(json!({"a": 2, "b": 40})))
        .await
        .unwrap();
    assert_eq!(text(&sum), "42");
    let shown = show(home.path(), "adder");
    assert!(
        shown.contains("trigger failed (trigger rate 0.33"),
        "{shown}"
    );
    // A description that misleads the model counts for less in search_tools.
    let misleading = relevance(client.call_tool("search_tools", search).await.unwrap());
    assert!(misleading < drawing, "{misleading} vs {drawing}");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_trigger_check_is_fed_back_for_a_better_description() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let checks = std::sync::Arc::new(AtomicUsize::new(0));
    let c = checks.clone();
    let fake = ChatFake::start(move |request| {
        if chat::offered(request).is_empty() {
            // The first check's picks go wrong, the second's right.
            let question = last_user(request);
            let n = if question.contains("choices") {
                c.fetch_add(1, Ordering::Relaxed)
            } else {
                c.load(Ordering::Relaxed)
            };
            return trigger_answer(request, if n == 0 { PICKED_BADLY } else { PICKED_WELL });
        }
        create(FIXED)
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    let client = serve(home.path(), vec![]).await;
    let result = client
        .call_tool("synthesize_tool", args(json!({"need": "add two integers"})))
        .await
        .unwrap();
    let out = text(&result);
    assert_ne!(result.is_error, Some(true), "{out}");
    assert!(out.contains("round 2 of 3"), "{out}");
    let requests = synthesis_requests(&fake);
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let fed_back = chat::tool_results(&requests[1]);
    assert!(
        fed_back.len() == 1
            && fed_back[0].contains("its trigger check failed")
            && fed_back[0].contains("Rewrite the tool's description"),
        "{fed_back:?}"
    );
    client.close().await.unwrap();
}

/// Answers the word from the process environment when it names a variable: a credential's
/// name is enough to read the credential.
const LEAKY: &str = r#"import os
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["GLOSSARY_API_KEY"]
mcp = MCPServer("glossary")

@mcp.tool()
def lookup(word: str) -> str:
    """Look a word up in the glossary."""
    return os.environ.get(word, f"{word}: not in the glossary")

if __name__ == "__main__":
    mcp.run()
"#;

/// The same function answering from its own table only.
const ROBUST: &str = r#"from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

REQUIRED_ENV = ["GLOSSARY_API_KEY"]
mcp = MCPServer("glossary")
GLOSSARY = {"mcp": "the Model Context Protocol", "tool": "a function an agent may call"}

@mcp.tool()
def lookup(word: str) -> str:
    """Look a word up in the glossary."""
    found = GLOSSARY.get(word.strip().lower())
    if found is None:
        raise ToolError(f"{word[:40]!r} is not in the glossary")
    return found

if __name__ == "__main__":
    mcp.run()
"#;

const GLOSSARY_KEY: &str = "glossary-key-5f1e9c0a7d";

/// The model as an adversary: hostile inputs for the functions its question shows (anything
/// else, such as a trigger check, gets an answer that is no use to it).
fn adversary_answer(request: &Value) -> Value {
    let question = last_user(request);
    let mut inputs = Vec::new();
    if question.contains("- lookup:") {
        inputs.extend([
            json!({"function": "lookup", "arguments": {"word": "GLOSSARY_API_KEY"}, "aim": "read a credential from the environment"}),
            json!({"function": "lookup", "arguments": {"word": "'; DROP TABLE words; --"}, "aim": "SQL injection"}),
            json!({"function": "lookup", "arguments": {"word": 42}, "aim": "not valid: never sent"}),
        ]);
    }
    if question.contains("- describe:") {
        inputs.extend([
            json!({"function": "describe", "arguments": {"topic": "{{7*7}}"}, "aim": "template injection"}),
            json!({"function": "describe", "arguments": {"topic": "the process environment"}, "aim": "print the environment"}),
        ]);
    }
    if inputs.is_empty() {
        return chat::say("{}");
    }
    chat::say(&json!({ "inputs": inputs }).to_string())
}

fn verdicts_of(result: &CallToolResult, check: &str) -> Vec<Value> {
    result.structured_content.as_ref().unwrap()["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["check"] == check)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adversary_catches_a_tool_that_leaks_its_environment_and_passes_a_robust_one() {
    let fake = ChatFake::start(adversary_answer).await;
    let home = tempfile::tempdir().unwrap();
    let client = serve(
        home.path(),
        vec![
            ("GLOSSARY_API_KEY".into(), GLOSSARY_KEY.into()),
            ("AUTOTOOL_CONSENT".into(), "dangerously-allow-all".into()),
        ],
    )
    .await;
    let create = |name: &str, code: String| {
        args(json!({"name": name, "code": code, "description": "looks words up"}))
    };

    // Control: without a model of its own the stage is skipped, said so, and the leaking tool
    // is mounted.
    let r = client
        .call_tool("create_tool", create("glossary", LEAKY.into()))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let skipped = verdicts_of(&r, "adversarial");
    assert!(
        skipped.len() == 1
            && skipped[0]["outcome"] == "skipped"
            && skipped[0]["detail"]
                .as_str()
                .is_some_and(|d| d.contains("no model of its own")),
        "{skipped:?}"
    );
    let dump = client
        .call_tool("create_tool", create("topics", DUMPS.into()))
        .await
        .unwrap();
    assert_ne!(dump.is_error, Some(true), "{}", text(&dump));
    assert!(fake.requests().is_empty());

    // With one, the same code is caught: the model's input reads the key, and nothing of the
    // value reaches the agent or the ledger.
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    wait_for_synthesize(&client, true).await;
    let r = client
        .call_tool(
            "create_tool",
            create("glossary", format!("{LEAKY}\n# again\n")),
        )
        .await
        .unwrap();
    let out = text(&r);
    assert_eq!(r.is_error, Some(true), "{out}");
    assert!(
        out.contains("verification failed at adversarial")
            && out.contains("lookup({\"word\":\"GLOSSARY_API_KEY\"})")
            && out.contains("read a credential from the environment")
            && out.contains("the answer holds the value of GLOSSARY_API_KEY")
            && !out.contains(GLOSSARY_KEY),
        "{out}"
    );
    // The input the schema refuses was not sent, and the question showed the schema.
    let asked: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| last_user(r).contains("hostile inputs"))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(last_user(&asked[0]).contains("\"word\""));
    let shown = show(home.path(), "glossary");
    assert!(
        shown.contains("adversarial") && !shown.contains(GLOSSARY_KEY),
        "{shown}"
    );
    // The mounted version is still the first one.
    assert!(
        names(&client)
            .await
            .contains(&"glossary__lookup".to_string())
    );

    // A tool that prints its environment without holding a key is caught by the dump.
    let r = client
        .call_tool(
            "create_tool",
            create("topics", format!("{DUMPS}\n# again\n")),
        )
        .await
        .unwrap();
    let out = text(&r);
    assert_eq!(r.is_error, Some(true), "{out}");
    assert!(
        out.contains("verification failed at adversarial")
            && out.contains("a dump of the tool's environment (")
            && out.contains("PATH"),
        "{out}"
    );

    // The robust tool answers the same inputs and passes the stage.
    let r = client
        .call_tool("create_tool", create("glossary", ROBUST.into()))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    let passed = verdicts_of(&r, "adversarial");
    assert!(
        passed.len() == 1
            && passed[0]["outcome"] == "passed"
            && passed[0]["detail"].as_str().is_some_and(|d| d
                .starts_with("2 hostile input(s) from chat-completions fake-model")
                && d.contains("answered without a leak, an unexpected host, a crash")
                && d.contains("1 input(s) the model wrote were not sent")),
        "{passed:?}"
    );
    let shown = show(home.path(), "glossary");
    assert!(shown.contains("lookup: adversarial passed"), "{shown}");
    client.close().await.unwrap();
}

/// `autotool forge ARGS` on `home`, with no terminal (stdin empty), confined where this
/// machine can.
async fn forge(home: &Path, args: &[&str]) -> std::process::Output {
    let sandbox = synth::sandbox();
    let runtime = common::runtime();
    let venv = runtime.interpreter.parent().and_then(Path::parent).unwrap();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .arg("forge")
        .args(args)
        .env("AUTOTOOL_HOME", home)
        .env("AUTOTOOL_RUNTIME", venv)
        .env("AUTOTOOL_SANDBOX", sandbox)
        .env("AUTOTOOL_SYNTHESIZE_ROUNDS", "2")
        .env("AUTOTOOL_SYNTHESIZE_CANDIDATES", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_synthesizes_one_tool_from_the_shell_and_fails_when_no_candidate_passes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let broken = std::sync::Arc::new(AtomicBool::new(false));
    let b = broken.clone();
    let fake = ChatFake::start(move |request| {
        if chat::offered(request).is_empty() {
            return trigger_answer(request, PICKED_WELL);
        }
        create(if b.load(Ordering::Relaxed) {
            BROKEN
        } else {
            FIXED
        })
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let out_file = home.path().join("adder.py");
    let out_arg = out_file.display().to_string();

    // Without a model it says how to set one up.
    let out = forge(home.path(), &["add two integers", "--yes"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("autotool setup --model"), "{stderr}");

    // Without a terminal and without --yes nobody can say yes: nothing is asked of the model.
    std::fs::write(home.path().join(".env"), model_env(&fake)).unwrap();
    let out = forge(home.path(), &["add two integers", "--out", &out_arg]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("stdin is not a terminal") && stderr.contains("--yes"),
        "{stderr}"
    );
    assert!(fake.requests().is_empty());
    assert!(!out_file.exists());

    // With --yes: the candidate, its verdicts, the file.
    let out = forge(
        home.path(),
        &["add two integers", "--yes", "--out", &out_arg],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.starts_with("# adder v1, mounted: ")
            && stdout.contains("def add(a: int, b: int) -> int:")
            && stdout.contains("# verdicts:")
            && stdout.contains("add: non_degenerate passed")
            && stdout.contains("adversarial"),
        "{stdout}"
    );
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), FIXED);
    assert!(synthesis_requests(&fake).len() == 1);

    // A model whose every candidate fails: exit 1, the last failure said, no file written.
    broken.store(true, Ordering::Relaxed);
    std::fs::remove_file(&out_file).unwrap();
    let out = forge(home.path(), &["add numbers", "--yes", "--out", &out_arg]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("no candidate passed verification")
            && stderr.contains("numpy_is_not_installed_here"),
        "{stderr}"
    );
    assert!(stdout.is_empty() && !out_file.exists(), "{stdout}");
    assert_eq!(synthesis_requests(&fake).len(), 3);
}
