//! `synthesize_tool`: autotool's own model, named by `$AUTOTOOL_HOME/.env` and nothing else,
//! writes a tool, has each failure fed back, and mounts the repair; a fake Chat Completions
//! server on loopback plays the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/chat.rs"]
mod chat;
mod common;

use autotool::client::{Client, ConnectOptions, connect};
use chat::ChatFake;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

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

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn args(v: Value) -> JsonObject {
    v.as_object().cloned().unwrap()
}

fn model_env(fake: &ChatFake) -> String {
    format!(
        "# autotool's own model\nOPENAI_BASE_URL={}\nexport OPENAI_LLM=\"fake-model\"\n",
        fake.base_url
    )
}

/// `autotool serve` on `home`, confined where this machine can, with `env` added.
async fn serve(home: &Path, env: Vec<(String, String)>) -> Client {
    let sandbox = match common::confining_launcher() {
        Ok(_) => "strict",
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "this machine cannot confine in CI: {why}"
            );
            eprintln!("note: running unconfined: {why}");
            "off"
        }
    };
    let runtime = common::runtime();
    let venv = runtime.interpreter.parent().and_then(Path::parent).unwrap();
    let mut vars = vec![
        ("AUTOTOOL_HOME".to_string(), home.display().to_string()),
        ("AUTOTOOL_RUNTIME".to_string(), venv.display().to_string()),
    ];
    vars.extend(env);
    connect(ConnectOptions {
        binary: Some(env!("CARGO_BIN_EXE_autotool").into()),
        args: vec!["serve".into(), "--sandbox".into(), sandbox.into()],
        env: vars,
        on_consent: None,
        quiet: true,
    })
    .await
    .unwrap()
}

async fn names(client: &Client) -> Vec<String> {
    client
        .list_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// Polls the tool list until `want` says yes about `synthesize_tool` being on it.
async fn wait_for_synthesize(client: &Client, want: bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let names = names(client).await;
        if names.iter().any(|n| n == "synthesize_tool") == want || Instant::now() > deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_tool_is_repaired_from_its_failure_and_mounted() {
    let fake = ChatFake::start(|request| match chat::tool_results(request).len() {
        0 => create(BROKEN),
        _ => create(FIXED),
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

    let requests = fake.requests();
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
