//! An agent loop of one's own over autotool's tools, with OpenAI's Responses API: list the
//! tools `autotool serve` offers over MCP, convert them with [`openai_tool_definitions`], and
//! run the calls the model asks for until it answers in text.
//!
//! ```text
//! OPENAI_API_KEY=sk-... cargo run -p autotool --example own_loop -- "Which tools can you call?"
//! ```
//!
//! `OPENAI_BASE_URL` and `OPENAI_LLM` point it at another server and model; `AUTOTOOL_BIN`
//! names the `autotool` binary (default: `autotool` on PATH).

use anyhow::{Context, bail};
use autotool::own_model::agent::{ToolDef, openai_tool_definitions};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::process::Stdio;

const MAX_TURNS: usize = 10;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let task = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Which tools can you call?".into());
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let base = var("OPENAI_BASE_URL", "https://api.openai.com/v1");
    let model = var("OPENAI_LLM", "gpt-6-sol");
    let key = std::env::var("OPENAI_API_KEY").ok();

    // autotool's MCP server on stdio, started as a host app starts it.
    let mut server = tokio::process::Command::new(var("AUTOTOOL_BIN", "autotool"))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start `autotool serve` (set AUTOTOOL_BIN)")?;
    let stdout = server.stdout.take().context("no stdout")?;
    let stdin = server.stdin.take().context("no stdin")?;
    let mcp = ().serve((stdout, stdin)).await?;

    // MCP tools → the Responses API's function tools.
    let listed = mcp.list_all_tools().await?;
    let tools: Vec<ToolDef> = listed.iter().map(ToolDef::from).collect();
    let tool_definitions = openai_tool_definitions(&tools);

    // autotool builds reqwest without a TLS crypto provider of its own; a program with its own
    // HTTP client does not need this line.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let mut input = vec![json!({"role": "user", "content": task})];
    for _ in 0..MAX_TURNS {
        let body = json!({
            "model": model,
            "input": input,
            "tools": tool_definitions,
            "store": false,
        });
        let mut request = http
            .post(format!("{base}/responses"))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(key) = &key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("the model API answered HTTP {status}: {text}");
        }
        let answer: Value = serde_json::from_str(&text)?;
        let output = answer["output"].as_array().cloned().unwrap_or_default();

        let calls: Vec<&Value> = output
            .iter()
            .filter(|item| item["type"] == "function_call")
            .collect();
        if calls.is_empty() {
            for item in &output {
                for part in item["content"].as_array().into_iter().flatten() {
                    if let Some(text) = part["text"].as_str() {
                        println!("{text}");
                    }
                }
            }
            return Ok(());
        }
        for call in calls {
            let name = call["name"].as_str().unwrap_or_default().to_owned();
            let raw = call["arguments"].as_str().unwrap_or("{}");
            let arguments = serde_json::from_str::<Value>(raw)
                .ok()
                .and_then(|a| a.as_object().cloned())
                .unwrap_or_default();
            eprintln!("calling {name} {raw}");
            let result = mcp
                .call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
                .await?;
            let mut output: Vec<&str> = result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect();
            if result.is_error == Some(true) {
                output.insert(0, "Error:");
            }
            // The call goes back as the model made it (without its item id, since nothing is
            // stored), then its output, paired by call_id.
            input.push(json!({
                "type": "function_call",
                "call_id": call["call_id"],
                "name": call["name"],
                "arguments": call["arguments"],
            }));
            input.push(json!({
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": output.join("\n"),
            }));
        }
    }
    bail!("no answer in text after {MAX_TURNS} turns")
}
