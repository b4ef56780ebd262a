//! `autotool run "<task>"` as a user runs it: a process in a project directory whose `.env`
//! points at a fake Chat Completions model on loopback. The model writes a broken tool, reads
//! the failure, writes the fix, calls it and answers; the printed steps say so, and the tool is
//! left in `./tools`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/chat.rs"]
mod chat;
mod common;
use common::sandbox;

use chat::ChatFake;
use serde_json::json;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// Imports a module the runtime lacks: the process ends before `initialize`.
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

/// Wants a key from the `.env`, granted without a prompt.
const FIXED: &str = r#"import os
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

REQUIRED_ENV = ["ADDER_API_KEY"]
mcp = MCPServer("adder")

@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers (with a licence key)."""
    if not os.environ.get("ADDER_API_KEY"):
        raise ToolError("no ADDER_API_KEY")
    return a + b

if __name__ == "__main__":
    mcp.run()
"#;

async fn autotool_run(dir: &Path, task: &str) -> Output {
    let venv = common::runtime().interpreter;
    let venv = venv.parent().and_then(Path::parent).unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_autotool"))
        .args(["run", task])
        .current_dir(dir)
        .env_remove("AUTOTOOL_HOME")
        .env("AUTOTOOL_RUNTIME", venv)
        .env("AUTOTOOL_SANDBOX", sandbox())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(180), child)
        .await
        .expect("autotool run finished within 3 minutes")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autotool_run_writes_repairs_calls_and_answers_printing_each_step() {
    let fake = ChatFake::start(|request| {
        let results = chat::tool_results(request);
        let create = |code: &str| {
            chat::call(
                "create_tool",
                json!({"name": "adder", "code": code, "description": "adds",
                       "smoke_test": {"function": "add", "arguments": {"a": 1, "b": 1}}}),
            )
        };
        match results.len() {
            0 => create(BROKEN),
            1 => create(FIXED),
            2 => chat::call("adder__add", json!({"a": 2, "b": 3})),
            _ => chat::say(&format!("2 + 3 = {}", results[2])),
        }
    })
    .await;
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join(".env"),
        format!(
            "OPENAI_BASE_URL={}\nOPENAI_LLM=fake-model\nOPENAI_API_KEY=sk-model-0123456789\n\
             ADDER_API_KEY=adder-key-0123456789\n",
            fake.base_url
        ),
    )
    .unwrap();

    let out = autotool_run(project.path(), "What is 2 + 3? Use a tool.").await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let want = [
        "autotool run: model chat-completions fake-model",
        "[tool] writing adder (12 lines of Python)",
        "[verify] adder failed at initialize",
        "ModuleNotFoundError: No module named 'numpy_is_not_installed_here'",
        "[tool] writing adder (16 lines of Python)",
        "[verify] adder v1 passed: mounted adder__add",
        "[keys] granted ADDER_API_KEY",
        "[call] adder__add {\"a\":2,\"b\":3}",
        "[result] 5",
        "[answer] 2 + 3 = 5",
    ];
    let mut rest: &str = &stdout;
    for line in want {
        let at = rest
            .find(line)
            .unwrap_or_else(|| panic!("{line:?} missing (in order) from:\n{stdout}"));
        rest = &rest[at + line.len()..];
    }
    assert!(!stdout.contains("adder-key-0123456789") && !stdout.contains("sk-model"));

    // The tool and the ledger are the project's; the model saw the failure.
    assert!(project.path().join("tools/adder").is_dir());
    assert!(project.path().join("autotool.db").is_file());
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:#?}");
    assert!(chat::tool_results(&requests[1])[0].contains("numpy_is_not_installed_here"));
    // The agent writes its own tools: synthesize_tool is not offered to it.
    assert!(!chat::offered(&requests[0]).contains(&"synthesize_tool".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_in_dot_env_it_says_what_to_set() {
    let project = tempfile::tempdir().unwrap();
    let out = autotool_run(project.path(), "anything").await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_LLM",
        ".env",
    ] {
        assert!(stderr.contains(var), "{var}: {stderr}");
    }
    std::fs::write(project.path().join(".env"), "HN_API_KEY=only-a-tool-key\n").unwrap();
    let out = autotool_run(project.path(), "anything").await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("names no model"), "{stderr}");
    assert!(!project.path().join("tools").exists());
}
