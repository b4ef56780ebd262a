//! What `autotool demo` serves itself on loopback, so it runs offline with no key: a small
//! Hacker-News-like API that wants a key, and a scripted model that speaks the OpenAI-compatible
//! Chat Completions API and plays an agent growing a tool for it.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

type Body = Full<Bytes>;

fn respond(status: StatusCode, body: Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// Serve `handle` on 127.0.0.1 (a free port) until `stop`; returns the address.
async fn serve_loopback<F, Fut>(handle: F, stop: CancellationToken) -> std::io::Result<SocketAddr>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                () = stop.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((s, _)) => s,
                    Err(_) => continue,
                },
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let handle = handle.clone();
                    async move { Ok::<_, Infallible>(handle(req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// The stories the fake API knows.
pub const STORIES: &[(u64, &str, u64)] = &[
    (101, "A sandbox for agent-written tools", 412),
    (102, "Landlock in practice", 287),
    (103, "Why your MCP server needs an egress proxy", 198),
    (104, "Show HN: a tiny HTTP/1.1 parser", 77),
];

/// An upstream failure as a proxy in front of an API would send it: a 200 with an HTML page
/// where JSON was expected.
fn upstream_error() -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(
        b"<html><body>502 Bad Gateway (upstream timed out)</body></html>",
    )));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/html"),
    );
    r
}

/// A Hacker-News-like API on loopback that wants `Authorization: Bearer <key>`:
/// `/v0/topstories.json`, `/v0/item/<id>.json`, and `/v0/whoami`, which (carelessly) echoes
/// the credential it was sent.
pub async fn fake_api(key: String, stop: CancellationToken) -> std::io::Result<SocketAddr> {
    fake_api_switched(key, Arc::new(AtomicBool::new(false)), stop).await
}

/// [`fake_api`] whose items break (an HTML error page where JSON was expected) while `broken`
/// is set; its `/v0/beststories.json` is always broken that way.
pub async fn fake_api_switched(
    key: String,
    broken: Arc<AtomicBool>,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let key: Arc<str> = key.into();
    serve_loopback(
        move |req: Request<Incoming>| {
            let key = key.clone();
            let broken = broken.clone();
            async move {
                let auth = req
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                if auth != format!("Bearer {key}") {
                    return respond(
                        StatusCode::UNAUTHORIZED,
                        json!({"error": "missing or wrong API key"}),
                    );
                }
                let path = req.uri().path().to_string();
                if req.method() != Method::GET {
                    return respond(StatusCode::METHOD_NOT_ALLOWED, json!({"error": "GET only"}));
                }
                if path == "/v0/topstories.json" {
                    let ids: Vec<u64> = STORIES.iter().map(|s| s.0).collect();
                    return respond(StatusCode::OK, json!(ids));
                }
                if path == "/v0/beststories.json"
                    || (broken.load(Ordering::Relaxed) && path.starts_with("/v0/item/"))
                {
                    return upstream_error();
                }
                if path == "/v0/whoami" {
                    return respond(StatusCode::OK, json!({"authorization_seen": auth}));
                }
                if let Some(id) = path
                    .strip_prefix("/v0/item/")
                    .and_then(|r| r.strip_suffix(".json"))
                    .and_then(|n| n.parse::<u64>().ok())
                    && let Some((id, title, score)) = STORIES.iter().find(|s| s.0 == id)
                {
                    return respond(
                        StatusCode::OK,
                        json!({"id": id, "title": title, "score": score, "type": "story"}),
                    );
                }
                respond(StatusCode::NOT_FOUND, json!({"error": "no such item"}))
            }
        },
        stop,
    )
    .await
}

/// The tool the scripted model writes first: it imports a library the runtime does not have,
/// so verification fails at launch with a traceback.
pub const HN_TOOL_V1: &str = r#"import os
import requests
from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = ["HN_API_KEY"]
mcp = MCPServer("hn")

@mcp.tool()
def top_stories(limit: int = 3) -> str:
    """The top stories, one per line."""
    base = os.environ.get("HN_API_BASE", "https://hn.example")
    return requests.get(base + "/v0/topstories.json").text

if __name__ == "__main__":
    mcp.run()
"#;

/// The repaired tool: `httpx2`, errors as `ToolError`, the base URL from `HN_API_BASE`.
pub const HN_TOOL_V2: &str = r#"import os
import httpx2
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

REQUIRED_ENV = ["HN_API_KEY"]
mcp = MCPServer("hn")


def _get(path: str):
    base = os.environ.get("HN_API_BASE", "https://hn.example")
    r = httpx2.get(
        base + path,
        headers={"Authorization": "Bearer " + os.environ.get("HN_API_KEY", "")},
        timeout=10,
    )
    if r.status_code != 200:
        raise ToolError(f"the API said {r.status_code}: {r.text[:200]}")
    return r.json()


@mcp.tool()
def top_stories(limit: int = 3) -> str:
    """The top stories, one per line: title and points."""
    ids = _get("/v0/topstories.json")[:limit]
    items = [_get(f"/v0/item/{i}.json") for i in ids]
    return "\n".join(f"{it['title']} ({it['score']} points)" for it in items)


@mcp.tool()
def whoami() -> str:
    """Which credential the API saw (it echoes it back)."""
    return str(_get("/v0/whoami"))


@mcp.tool()
def mirror(url: str) -> str:
    """Fetch any URL (the sandbox decides whether it may)."""
    try:
        r = httpx2.get(url, timeout=10)
        return f"{r.status_code}: {r.text[:300]}"
    except Exception as e:
        return f"refused: {e}"


if __name__ == "__main__":
    mcp.run()
"#;

/// The scripted agent's next move, from the conversation so far (Chat Completions messages):
/// a tool call `(name, arguments)`, or the final answer.
pub fn next_move(messages: &[Value]) -> Result<(String, Value), String> {
    let results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect();
    let call = |name: &str, args: Value| Ok((name.to_string(), args));
    match results.len() {
        0 => call(
            "create_tool",
            json!({"name": "hn", "code": HN_TOOL_V1,
                   "description": "Hacker-News-like stories",
                   "smoke_test": {"function": "top_stories", "arguments": {"limit": 1}}}),
        ),
        // Whatever the first attempt said, the second is the repaired tool.
        1 => call(
            "create_tool",
            json!({"name": "hn", "code": HN_TOOL_V2,
                   "description": "Hacker-News-like stories",
                   "smoke_test": {"function": "top_stories", "arguments": {"limit": 1}}}),
        ),
        2 => call("hn__top_stories", json!({"limit": 3})),
        3 => call("hn__whoami", json!({})),
        4 => call("hn__mirror", json!({"url": "http://evil.example/collect"})),
        _ => Err(format!(
            "Here are today's top stories:\n{}",
            results.get(2).copied().unwrap_or("(none)")
        )),
    }
}

/// A model on loopback speaking the Chat Completions API (`POST /v1/chat/completions`), whose
/// turns are [`next_move`]. It checks the request carries the tools it calls.
pub async fn scripted_model(stop: CancellationToken) -> std::io::Result<SocketAddr> {
    serve_loopback(
        |req: Request<Incoming>| async move {
            if req.method() != Method::POST || !req.uri().path().ends_with("/chat/completions") {
                return respond(
                    StatusCode::NOT_FOUND,
                    json!({"error": {"message": "not found"}}),
                );
            }
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => {
                    return respond(
                        StatusCode::BAD_REQUEST,
                        json!({"error": {"message": e.to_string()}}),
                    );
                }
            };
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let messages = request["messages"].as_array().cloned().unwrap_or_default();
            let offered: Vec<String> = request["tools"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let turn = if offered.is_empty() {
                // autotool's own questions (the adversarial stage, trigger checks), not the
                // agent's turns.
                Err(own_question(&messages))
            } else {
                next_move(&messages)
            };
            let message = match turn {
                Ok((name, args)) => {
                    if !offered.contains(&name) && name != "create_tool" {
                        // The mounted tool is not in this request's list yet: go through run_tool.
                        let (tool, function) = name.split_once("__").unwrap_or((&name, ""));
                        let args = json!({"tool": tool, "function": function, "arguments": args});
                        tool_call_message(messages.len(), "run_tool", &args)
                    } else {
                        tool_call_message(messages.len(), &name, &args)
                    }
                }
                Err(text) => json!({"role": "assistant", "content": text}),
            };
            let finish = if message.get("tool_calls").is_some() {
                "tool_calls"
            } else {
                "stop"
            };
            respond(
                StatusCode::OK,
                json!({
                    "id": format!("chatcmpl-demo-{}", messages.len()),
                    "object": "chat.completion",
                    "model": request["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                }),
            )
        },
        stop,
    )
    .await
}

/// The answer to one of autotool's own questions: hostile inputs for a `lookup` function (one
/// reading a credential by its name), else an empty object (a check the demo leaves skipped).
pub fn own_question(messages: &[Value]) -> String {
    let question = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    if question.contains("hostile inputs") && question.contains("- lookup:") {
        json!({"inputs": [
            {"function": "lookup", "arguments": {"word": "'; DROP TABLE words; --"}, "aim": "SQL injection"},
            {"function": "lookup", "arguments": {"word": "HN_API_KEY"}, "aim": "read a credential from the environment"},
        ]})
        .to_string()
    } else {
        "{}".into()
    }
}

fn tool_call_message(n: usize, name: &str, args: &Value) -> Value {
    json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": format!("call_{n}"),
            "type": "function",
            "function": {"name": name, "arguments": args.to_string()},
        }],
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn tool(content: &str) -> Value {
        json!({"role": "tool", "content": content})
    }

    #[test]
    fn the_script_writes_repairs_calls_and_answers() {
        let mut messages = vec![json!({"role": "user", "content": "top stories?"})];
        let (name, args) = next_move(&messages).unwrap();
        assert_eq!(name, "create_tool");
        assert_eq!(args["code"], HN_TOOL_V1);
        messages.push(tool(
            "verification failed at launch: No module named 'requests'",
        ));
        let (name, args) = next_move(&messages).unwrap();
        assert_eq!(
            (name.as_str(), args["code"].as_str()),
            ("create_tool", Some(HN_TOOL_V2))
        );
        messages.push(tool("Created hn v2"));
        assert_eq!(next_move(&messages).unwrap().0, "hn__top_stories");
        messages.push(tool("A sandbox for agent-written tools (412 points)"));
        assert_eq!(next_move(&messages).unwrap().0, "hn__whoami");
        messages.push(tool(
            "{'authorization_seen': 'Bearer [REDACTED:HN_API_KEY]'}",
        ));
        assert_eq!(next_move(&messages).unwrap().0, "hn__mirror");
        messages.push(tool("refused: 403"));
        let answer = next_move(&messages).unwrap_err();
        assert!(
            answer.contains("A sandbox for agent-written tools"),
            "{answer}"
        );
    }
}
