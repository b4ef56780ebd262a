//! `autotool::client::connect`: a program's own MCP client of a spawned `autotool serve`: it
//! lists and calls tools, and answers the consent question through its callback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::text;

use autotool::client::{ConnectOptions, connect};
use rmcp::model::JsonObject;
use serde_json::json;
use std::sync::{Arc, Mutex};

const TOOL: &str = r#"import os
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["CLIENT_API_KEY"]
mcp = MCPServer("peek")

@mcp.tool()
def peek() -> str:
    """What the key looks like from inside."""
    return "key=" + os.environ.get("CLIENT_API_KEY", "(none)")

if __name__ == "__main__":
    mcp.run()
"#;

fn args(v: serde_json::Value) -> JsonObject {
    v.as_object().cloned().unwrap()
}

fn options(home: &std::path::Path) -> ConnectOptions {
    let sandbox = common::sandbox();
    let binary = std::env::var_os("AUTOTOOL_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_autotool").into());
    ConnectOptions {
        binary: Some(binary),
        args: vec!["serve".into(), "--sandbox".into(), sandbox.into()],
        env: vec![
            ("AUTOTOOL_HOME".into(), home.display().to_string()),
            (
                "AUTOTOOL_RUNTIME".into(),
                common::runtime()
                    .interpreter
                    .parent()
                    .and_then(|b| b.parent())
                    .unwrap()
                    .display()
                    .to_string(),
            ),
            ("CLIENT_API_KEY".into(), "client-secret-0123456789".into()),
        ],
        on_consent: None,
        quiet: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_lists_calls_and_answers_consent() {
    let home = tempfile::tempdir().unwrap();
    let questions = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = questions.clone();
    let mut opts = options(home.path());
    opts.on_consent = Some(Arc::new(move |q: &str| {
        seen.lock().unwrap().push(q.to_string());
        true
    }));
    let client = connect(opts).await.unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "create_tool"));

    let created = client
        .call_tool("create_tool", args(json!({"name": "peek", "code": TOOL})))
        .await
        .unwrap();
    assert_ne!(created.is_error, Some(true), "{}", text(&created));
    assert_eq!(client.consent_questions(), 1);
    let asked = questions.lock().unwrap().clone();
    assert!(
        asked[0].contains("`peek`") && asked[0].contains("CLIENT_API_KEY"),
        "{asked:?}"
    );
    assert!(!asked[0].contains("client-secret"), "{asked:?}");

    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "peek__peek"), "{tools:?}");
    let result = client
        .call_tool("peek__peek", JsonObject::new())
        .await
        .unwrap();
    let out = text(&result);
    assert!(out.contains("key=[REDACTED:CLIENT_API_KEY]"), "{out}");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_consent_callback_the_key_is_refused_with_the_command() {
    let home = tempfile::tempdir().unwrap();
    let client = connect(options(home.path())).await.unwrap();
    let created = client
        .call_tool("create_tool", args(json!({"name": "peek", "code": TOOL})))
        .await
        .unwrap();
    assert_eq!(created.is_error, Some(true));
    let out = text(&created);
    assert!(
        out.contains("autotool tools approve peek CLIENT_API_KEY"),
        "{out}"
    );
    assert_eq!(client.consent_questions(), 0);
    client.close().await.unwrap();
}
