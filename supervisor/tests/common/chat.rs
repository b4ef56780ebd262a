//! A fake model for tests: an OpenAI-compatible Chat Completions server on 127.0.0.1 whose
//! answers a script decides from each request, and which records every request it receives.
//! Included with `#[path]` by the tests that need it.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;

/// The script: from a request body (`model`, `messages`, `tools`), the assistant message to
/// answer with ([`call`] or [`say`]).
pub type Script = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

/// The running fake; it stops when dropped.
pub struct ChatFake {
    /// The API root to put in `OPENAI_BASE_URL` (ends in `/v1`).
    pub base_url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ChatFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ChatFake {
    /// Serve `script` on a free port of 127.0.0.1.
    pub async fn start(script: impl Fn(&Value) -> Value + Send + Sync + 'static) -> ChatFake {
        let script: Script = Arc::new(script);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let requests = requests.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (requests, script) = (requests.clone(), script.clone());
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (requests, script) = (requests.clone(), script.clone());
                        async move {
                            let path = request.uri().path().to_string();
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            let (status, answer) = if path.ends_with("/chat/completions") {
                                requests.lock().unwrap().push(body.clone());
                                (200, completion(&body, script(&body)))
                            } else {
                                (
                                    404,
                                    json!({"error": {"message": format!("no {path} here")}}),
                                )
                            };
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(status)
                                    .header("content-type", "application/json")
                                    .body(Full::new(Bytes::from(answer.to_string())))
                                    .unwrap(),
                            )
                        }
                    });
                    tokio::spawn(async move {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        });
        ChatFake {
            base_url,
            requests,
            task,
        }
    }

    /// Every request received so far (the bodies).
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

fn completion(request: &Value, message: Value) -> Value {
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": request["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    })
}

/// An assistant message calling `name` with `arguments`.
pub fn call(name: &str, arguments: Value) -> Value {
    json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": format!("call_{}", next_id()),
            "type": "function",
            "function": {"name": name, "arguments": arguments.to_string()},
        }],
    })
}

/// An assistant message saying `text`.
pub fn say(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// The contents of the `tool` messages of a request, in order.
pub fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The names of the tools a request offered.
pub fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn next_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
