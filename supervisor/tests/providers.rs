//! The model providers against fake servers on loopback that speak each API: the requests they
//! receive (auth headers, model, tool definitions, a tool call and its result sent back) and
//! what the providers make of their answers, refusals, rate limits, failures and silence.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use autotool::own_model::agent::{
    Api, Item, Provider, ProviderConfig, ProviderError, ToolCall, ToolDef, Turn,
    anthropic_tool_definitions, openai_chat_tool_definitions, openai_tool_definitions,
    provider_from_vars,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

// ---------------------------------------------------------------------------------------------
// The fake server

/// A request the fake received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: http::HeaderMap,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
}

/// What the fake answers one request with.
#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Reply {
    status(200, body)
}

fn status(status: u16, body: Value) -> Reply {
    Reply {
        status,
        headers: vec![],
        body: body.to_string(),
        delay: Duration::ZERO,
    }
}

/// An HTTP/1.1 server on 127.0.0.1 that records each request and gives the next scripted
/// answer (a 599 once they run out, which no test expects).
struct Fake {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    async fn start(replies: Vec<Reply>) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        return;
                    };
                    let (seen, replies) = (seen.clone(), replies.clone());
                    let service = service_fn(move |request: Request<Incoming>| {
                        let (seen, replies) = (seen.clone(), replies.clone());
                        async move {
                            let (parts, body) = request.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            seen.lock().unwrap().push(Seen {
                                path: parts.uri.path().to_owned(),
                                headers: parts.headers,
                                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                            });
                            let reply = replies.lock().unwrap().pop_front().unwrap_or(Reply {
                                status: 599,
                                headers: vec![],
                                body: "the fake has no more answers".into(),
                                delay: Duration::ZERO,
                            });
                            tokio::time::sleep(reply.delay).await;
                            let mut response = Response::builder()
                                .status(reply.status)
                                .header("content-type", "application/json");
                            for (name, value) in reply.headers {
                                response = response.header(name, value);
                            }
                            Ok::<_, Infallible>(
                                response.body(Full::new(Bytes::from(reply.body))).unwrap(),
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
        Fake { url, seen, task }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A provider from `pairs` that retries quickly.
fn provider(pairs: &[(&str, &str)]) -> Box<dyn Provider> {
    let mut config = ProviderConfig::from_vars(&vars(pairs)).unwrap();
    config.retry.base_delay = Duration::from_millis(1);
    config.build().unwrap()
}

fn openai(fake: &Fake) -> Box<dyn Provider> {
    provider(&[
        ("AUTOTOOL_PROVIDER", "openai"),
        ("OPENAI_BASE_URL", &format!("{}/v1", fake.url)),
        ("OPENAI_API_KEY", "sk-test-openai"),
    ])
}

fn anthropic(fake: &Fake) -> Box<dyn Provider> {
    provider(&[
        ("ANTHROPIC_BASE_URL", &fake.url),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
    ])
}

fn chat(fake: &Fake) -> Box<dyn Provider> {
    provider(&[
        ("OPENAI_BASE_URL", &format!("{}/v1", fake.url)),
        ("OPENAI_LLM", "qwen3:8b"),
    ])
}

const SYSTEM: &str = "You are autotool's agent.";

/// The tools every round trip offers: one with parameters, one without any.
fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "weather__forecast".into(),
            description: "The forecast for a city.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }),
        },
        ToolDef {
            name: "clock__now".into(),
            description: "The time.".into(),
            input_schema: json!({"type": "object"}),
        },
    ]
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    }
}

fn result(call_id: &str, name: &str, output: &str, is_error: bool) -> Item {
    Item::ToolResult {
        call_id: call_id.into(),
        name: name.into(),
        output: output.into(),
        is_error,
    }
}

/// The agent's side of a round trip: ask, run the calls the model wants (answering from
/// `results`), send them back, and return both turns.
async fn round_trip(provider: &dyn Provider, results: &[(&str, bool)]) -> (Turn, Turn) {
    let tools = tools();
    let mut history = vec![Item::User("Weather in Oslo, and the time?".into())];
    let first = provider.complete(SYSTEM, &history, &tools).await.unwrap();
    history.push(first.to_item());
    for (call, (output, is_error)) in first.calls.iter().zip(results) {
        history.push(result(&call.id, &call.name, output, *is_error));
    }
    let second = provider.complete(SYSTEM, &history, &tools).await.unwrap();
    (first, second)
}

// ---------------------------------------------------------------------------------------------
// Round trips, one per API

#[tokio::test]
async fn responses_api_round_trip() {
    let fake = Fake::start(vec![
        ok(json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-6-sol",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
                {"type": "function_call", "id": "fc_1", "call_id": "call_w", "status": "completed",
                 "name": "weather__forecast", "arguments": "{\"city\":\"Oslo\"}"},
                {"type": "function_call", "id": "fc_2", "call_id": "call_t", "status": "completed",
                 "name": "clock__now", "arguments": "{}"},
            ],
        })),
        ok(json!({
            "id": "resp_2", "object": "response", "status": "completed",
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Sunny, and it is noon."}]}],
        })),
    ])
    .await;
    let p = openai(&fake);
    assert_eq!(
        p.describe(),
        format!("openai-responses gpt-6-sol at {}/v1", fake.url)
    );
    let (first, second) = round_trip(&*p, &[("sunny, 21 °C", false), ("12:00", false)]).await;
    assert_eq!(
        first,
        Turn {
            text: Some("Let me look.".into()),
            calls: vec![
                call("call_w", "weather__forecast", json!({"city": "Oslo"})),
                call("call_t", "clock__now", json!({})),
            ],
        }
    );
    assert_eq!(second.text.as_deref(), Some("Sunny, and it is noon."));
    assert!(second.calls.is_empty());

    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        assert_eq!(request.path, "/v1/responses");
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-test-openai")
        );
        assert_eq!(request.header("content-type"), Some("application/json"));
    }
    let tool_defs = json!([
        {"type": "function", "name": "weather__forecast", "description": "The forecast for a city.",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]},
         "strict": false},
        {"type": "function", "name": "clock__now", "description": "The time.",
         "parameters": {"type": "object", "properties": {}}, "strict": false},
    ]);
    let question = json!({"type": "message", "role": "user",
                          "content": "Weather in Oslo, and the time?"});
    assert_eq!(
        seen[0].body,
        json!({
            "model": "gpt-6-sol",
            "instructions": SYSTEM,
            "input": [question],
            "tools": tool_defs,
            "store": false,
        })
    );
    // The follow-up carries the calls (by call_id, without item ids) and their outputs.
    assert_eq!(
        seen[1].body,
        json!({
            "model": "gpt-6-sol",
            "instructions": SYSTEM,
            "input": [
                question,
                {"type": "message", "role": "assistant", "content": "Let me look."},
                {"type": "function_call", "call_id": "call_w", "name": "weather__forecast",
                 "arguments": "{\"city\":\"Oslo\"}"},
                {"type": "function_call", "call_id": "call_t", "name": "clock__now",
                 "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21 °C"},
                {"type": "function_call_output", "call_id": "call_t", "output": "12:00"},
            ],
            "tools": tool_defs,
            "store": false,
        })
    );
}

#[tokio::test]
async fn anthropic_messages_round_trip() {
    let fake = Fake::start(vec![
        ok(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-5",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_w", "name": "weather__forecast",
                 "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "toolu_t", "name": "clock__now", "input": {}},
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 20},
        })),
        ok(json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-opus-5",
            "content": [{"type": "text", "text": "Sunny; the clock failed."}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 30, "output_tokens": 5},
        })),
    ])
    .await;
    let p = anthropic(&fake);
    assert_eq!(
        p.describe(),
        format!("anthropic-messages claude-opus-5 at {}", fake.url)
    );
    let (first, second) = round_trip(&*p, &[("sunny, 21 °C", false), ("no clock", true)]).await;
    assert_eq!(
        first,
        Turn {
            text: Some("Let me look.".into()),
            calls: vec![
                call("toolu_w", "weather__forecast", json!({"city": "Oslo"})),
                call("toolu_t", "clock__now", json!({})),
            ],
        }
    );
    assert_eq!(second.text.as_deref(), Some("Sunny; the clock failed."));

    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(request.header("authorization"), None);
    }
    let tool_defs = json!([
        {"name": "weather__forecast", "description": "The forecast for a city.",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}},
        {"name": "clock__now", "description": "The time.",
         "input_schema": {"type": "object", "properties": {}}},
    ]);
    let question = json!({"role": "user",
                          "content": [{"type": "text", "text": "Weather in Oslo, and the time?"}]});
    assert_eq!(
        seen[0].body,
        json!({
            "model": "claude-opus-5",
            "max_tokens": 16384,
            "system": SYSTEM,
            "messages": [question],
            "tools": tool_defs,
        })
    );
    // Both results in one user message after the assistant's, the failed one flagged.
    assert_eq!(
        seen[1].body,
        json!({
            "model": "claude-opus-5",
            "max_tokens": 16384,
            "system": SYSTEM,
            "messages": [
                question,
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_w", "name": "weather__forecast",
                     "input": {"city": "Oslo"}},
                    {"type": "tool_use", "id": "toolu_t", "name": "clock__now", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_w", "content": "sunny, 21 °C",
                     "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_t", "content": "no clock",
                     "is_error": true},
                ]},
            ],
            "tools": tool_defs,
        })
    );
}

#[tokio::test]
async fn chat_completions_round_trip() {
    let fake = Fake::start(vec![
        ok(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "qwen3:8b",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "call_w", "type": "function",
                     "function": {"name": "weather__forecast", "arguments": "{\"city\":\"Oslo\"}"}},
                    {"id": "call_t", "type": "function",
                     "function": {"name": "clock__now", "arguments": "{}"}},
                ],
            }}],
        })),
        ok(json!({
            "id": "chatcmpl-2", "object": "chat.completion", "model": "qwen3:8b",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Sunny; no clock."}}],
        })),
    ])
    .await;
    let p = chat(&fake);
    assert_eq!(
        p.describe(),
        format!("chat-completions qwen3:8b at {}/v1", fake.url)
    );
    let (first, second) = round_trip(&*p, &[("sunny, 21 °C", false), ("no clock", true)]).await;
    assert_eq!(
        first,
        Turn {
            text: None,
            calls: vec![
                call("call_w", "weather__forecast", json!({"city": "Oslo"})),
                call("call_t", "clock__now", json!({})),
            ],
        }
    );
    assert_eq!(second.text.as_deref(), Some("Sunny; no clock."));

    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        assert_eq!(request.path, "/v1/chat/completions");
        // A local server: no key configured, none sent.
        assert_eq!(request.header("authorization"), None);
    }
    let tool_defs = json!([
        {"type": "function", "function": {
            "name": "weather__forecast", "description": "The forecast for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}},
        {"type": "function", "function": {
            "name": "clock__now", "description": "The time.",
            "parameters": {"type": "object", "properties": {}}}},
    ]);
    let opening = [
        json!({"role": "system", "content": SYSTEM}),
        json!({"role": "user", "content": "Weather in Oslo, and the time?"}),
    ];
    assert_eq!(
        seen[0].body,
        json!({"model": "qwen3:8b", "messages": opening, "tools": tool_defs})
    );
    assert_eq!(
        seen[1].body,
        json!({
            "model": "qwen3:8b",
            "messages": [
                opening[0], opening[1],
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_w", "type": "function",
                     "function": {"name": "weather__forecast", "arguments": "{\"city\":\"Oslo\"}"}},
                    {"id": "call_t", "type": "function",
                     "function": {"name": "clock__now", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 °C"},
                {"role": "tool", "tool_call_id": "call_t", "content": "Error: no clock"},
            ],
            "tools": tool_defs,
        })
    );
}

#[tokio::test]
async fn openai_key_goes_to_a_chat_completions_server_that_wants_one() {
    let fake = Fake::start(vec![ok(json!({
        "choices": [{"message": {"role": "assistant", "content": "hi"}}],
    }))])
    .await;
    let p = provider(&[
        ("OPENAI_BASE_URL", &format!("{}/api/v1", fake.url)),
        ("OPENAI_LLM", "openai/gpt-6-sol"),
        ("OPENAI_API_KEY", "sk-or-test"),
    ]);
    let turn = p
        .complete("", &[Item::User("hi".into())], &[])
        .await
        .unwrap();
    assert_eq!(turn.text.as_deref(), Some("hi"));
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/api/v1/chat/completions");
    assert_eq!(seen[0].header("authorization"), Some("Bearer sk-or-test"));
    // No system prompt, no tools: neither is sent.
    assert_eq!(
        seen[0].body,
        json!({"model": "openai/gpt-6-sol", "messages": [{"role": "user", "content": "hi"}]})
    );
}

// ---------------------------------------------------------------------------------------------
// Retries

fn chat_text(text: &str) -> Reply {
    ok(json!({"choices": [{"message": {"role": "assistant", "content": text}}]}))
}

async fn ask(p: &dyn Provider) -> Result<Turn, ProviderError> {
    p.complete("", &[Item::User("hello".into())], &[]).await
}

#[tokio::test]
async fn rate_limit_is_retried_after_the_wait_the_server_asks() {
    let mut limited = status(
        429,
        json!({"error": {"message": "Rate limit reached", "type": "requests",
                         "code": "rate_limit_exceeded"}}),
    );
    limited.headers.push(("retry-after", "0.2".into()));
    let fake = Fake::start(vec![limited, chat_text("done")]).await;
    let mut config = ProviderConfig::from_vars(&vars(&[
        ("OPENAI_BASE_URL", &fake.url),
        ("OPENAI_LLM", "m"),
    ]))
    .unwrap();
    // Without the server's word the backoff would wait 1.5 to 3 s.
    config.retry.base_delay = Duration::from_secs(3);
    let p = config.build().unwrap();
    let start = Instant::now();
    let turn = ask(&*p).await.unwrap();
    let waited = start.elapsed();
    assert_eq!(turn.text.as_deref(), Some("done"));
    assert_eq!(fake.seen().len(), 2);
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_millis(1400),
        "{waited:?}"
    );
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    let fake = Fake::start(vec![
        status(500, json!({"error": {"message": "boom", "type": "server_error"}})),
        status(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        ok(json!({"content": [{"type": "text", "text": "fine"}], "stop_reason": "end_turn"})),
    ])
    .await;
    let turn = ask(&*anthropic(&fake)).await.unwrap();
    assert_eq!(turn.text.as_deref(), Some("fine"));
    let seen = fake.seen();
    assert_eq!(seen.len(), 3);
    // The same request each time.
    assert_eq!(seen[0].body, seen[2].body);
}

#[tokio::test]
async fn retries_are_bounded() {
    let fake = Fake::start(vec![status(502, json!({})); 5]).await;
    let mut config = ProviderConfig::from_vars(&vars(&[
        ("OPENAI_BASE_URL", &fake.url),
        ("OPENAI_LLM", "m"),
    ]))
    .unwrap();
    config.retry.base_delay = Duration::from_millis(1);
    config.retry.max_retries = 2;
    let error = ask(&*config.build().unwrap()).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Server { status: 502, .. }),
        "{error:?}"
    );
    assert_eq!(fake.seen().len(), 3);
    assert!(error.to_string().contains("try again later"), "{error}");
}

#[tokio::test]
async fn a_long_retry_after_ends_the_attempt_at_once() {
    let mut limited = status(429, json!({"error": {"message": "slow down"}}));
    limited.headers.push(("retry-after", "3600".into()));
    let fake = Fake::start(vec![limited]).await;
    let error = ask(&*openai(&fake)).await.unwrap_err();
    match &error {
        ProviderError::RateLimited { retry_after, .. } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("wait 3600 s"), "{error}");
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn an_exhausted_quota_is_not_retried() {
    let fake = Fake::start(vec![status(
        429,
        json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                         "type": "insufficient_quota", "code": "insufficient_quota"}}),
    )])
    .await;
    let error = ask(&*openai(&fake)).await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::RateLimited { detail, .. } if detail.contains("quota")),
        "{error:?}"
    );
    assert_eq!(fake.seen().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Refusals a user must act on: never retried, each naming what to change

#[tokio::test]
async fn a_bad_key_names_the_variable_to_fix() {
    let fake = Fake::start(vec![status(
        401,
        json!({"error": {"message": "Incorrect API key provided: sk-test-***enai.",
                         "type": "invalid_request_error", "code": "invalid_api_key"}}),
    )])
    .await;
    let error = ask(&*openai(&fake)).await.unwrap_err();
    assert!(matches!(error, ProviderError::BadKey { .. }), "{error:?}");
    assert!(error.to_string().contains("OPENAI_API_KEY"), "{error}");
    assert_eq!(fake.seen().len(), 1);

    let fake = Fake::start(vec![status(
        401,
        json!({"type": "error",
               "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )])
    .await;
    let error = ask(&*anthropic(&fake)).await.unwrap_err();
    assert!(matches!(error, ProviderError::BadKey { .. }), "{error:?}");
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"), "{error}");
    assert!(error.to_string().contains("invalid x-api-key"), "{error}");
}

#[tokio::test]
async fn an_unknown_model_is_named() {
    let cases = [
        (
            openai as fn(&Fake) -> Box<dyn Provider>,
            "gpt-6-sol",
            json!({"error": {"message": "The model `gpt-6-sol` does not exist or you do not have access to it.",
                             "type": "invalid_request_error", "code": "model_not_found"}}),
        ),
        (
            anthropic,
            "claude-opus-5",
            json!({"type": "error", "error": {"type": "not_found_error",
                                              "message": "model: claude-opus-5"}}),
        ),
        (
            chat,
            "qwen3:8b",
            json!({"error": {"message": "model \"qwen3:8b\" not found, try pulling it first",
                             "type": "api_error", "param": null, "code": null}}),
        ),
    ];
    for (make, expected, body) in cases {
        let fake = Fake::start(vec![status(404, body)]).await;
        let error = ask(&*make(&fake)).await.unwrap_err();
        match &error {
            ProviderError::UnknownModel { model, .. } => assert_eq!(model, expected),
            other => panic!("{other:?}"),
        }
        assert!(error.to_string().contains("ANTHROPIC_MODEL"), "{error}");
        assert_eq!(fake.seen().len(), 1);
    }
}

#[tokio::test]
async fn a_model_without_tool_calling_is_named() {
    let fake = Fake::start(vec![status(
        400,
        json!({"error": {"message": "registry.ollama.ai/library/gemma3:1b does not support tools",
                         "type": "invalid_request_error", "param": null, "code": null}}),
    )])
    .await;
    let error = chat(&fake)
        .complete(SYSTEM, &[Item::User("hi".into())], &tools())
        .await
        .unwrap_err();
    match &error {
        ProviderError::NoToolCalling { model, detail } => {
            assert_eq!(model, "qwen3:8b");
            assert!(detail.contains("does not support tools"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().contains("OPENAI_LLM"), "{error}");
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let mut slow = chat_text("too late");
    slow.delay = Duration::from_secs(10);
    let fake = Fake::start(vec![slow]).await;
    let mut config = ProviderConfig::from_vars(&vars(&[
        ("OPENAI_BASE_URL", &fake.url),
        ("OPENAI_LLM", "m"),
        ("AUTOTOOL_LLM_TIMEOUT", "0.3"),
    ]))
    .unwrap();
    config.retry.base_delay = Duration::from_millis(1);
    let start = Instant::now();
    let error = ask(&*config.build().unwrap()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Timeout), "{error:?}");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert!(
        error.to_string().contains("AUTOTOOL_LLM_TIMEOUT"),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_is_not_there_is_reported() {
    // A port that was just free.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = provider(&[
        ("OPENAI_BASE_URL", &format!("http://127.0.0.1:{port}/v1")),
        ("OPENAI_LLM", "m"),
    ]);
    let error = ask(&*p).await.unwrap_err();
    assert!(matches!(error, ProviderError::Http(_)), "{error:?}");
    assert!(error.to_string().contains("OPENAI_BASE_URL"), "{error}");
}

#[tokio::test]
async fn an_answer_in_the_wrong_shape_is_reported() {
    // A Chat Completions answer where a Responses answer belongs (AUTOTOOL_PROVIDER mixed up).
    let fake = Fake::start(vec![chat_text("hi")]).await;
    let error = ask(&*openai(&fake)).await.unwrap_err();
    assert!(matches!(error, ProviderError::BadResponse(_)), "{error:?}");
    assert!(error.to_string().contains("AUTOTOOL_PROVIDER"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// Picking a provider

#[test]
fn the_provider_is_picked_from_variables() {
    use autotool::own_model::agent::config::{ANTHROPIC_BASE_URL, OPENAI_BASE_URL};
    let key = |k: &str| Some(k.to_owned());
    let local = "http://localhost:11434/v1";
    /// Variables, and the configuration they make or a part of the refusal.
    type Case<'a> = (Vec<(&'a str, &'a str)>, Result<ProviderConfig, &'a str>);
    let cases: Vec<Case> = vec![
        (
            vec![("OPENAI_API_KEY", "sk-o")],
            Ok(ProviderConfig::new(
                Api::OpenAiResponses,
                OPENAI_BASE_URL,
                "gpt-6-sol",
                key("sk-o"),
            )),
        ),
        (
            vec![("ANTHROPIC_API_KEY", "sk-a")],
            Ok(ProviderConfig::new(
                Api::AnthropicMessages,
                ANTHROPIC_BASE_URL,
                "claude-opus-5",
                key("sk-a"),
            )),
        ),
        // OpenAI before Anthropic.
        (
            vec![("OPENAI_API_KEY", "sk-o"), ("ANTHROPIC_API_KEY", "sk-a")],
            Ok(ProviderConfig::new(
                Api::OpenAiResponses,
                OPENAI_BASE_URL,
                "gpt-6-sol",
                key("sk-o"),
            )),
        ),
        // A base URL means Chat Completions there, before either key; no key needed.
        (
            vec![
                ("OPENAI_BASE_URL", local),
                ("OPENAI_LLM", "llama3.1"),
                ("ANTHROPIC_API_KEY", "sk-a"),
            ],
            Ok(ProviderConfig::new(
                Api::ChatCompletions,
                local,
                "llama3.1",
                None,
            )),
        ),
        (
            vec![
                ("OPENAI_BASE_URL", "https://openrouter.ai/api/v1/"),
                ("OPENAI_LLM", "anthropic/claude-opus-5"),
                ("OPENAI_API_KEY", "sk-or"),
            ],
            Ok(ProviderConfig::new(
                Api::ChatCompletions,
                "https://openrouter.ai/api/v1",
                "anthropic/claude-opus-5",
                key("sk-or"),
            )),
        ),
        // AUTOTOOL_PROVIDER=openai keeps the Responses API with a custom base URL.
        (
            vec![
                ("AUTOTOOL_PROVIDER", "openai"),
                ("OPENAI_BASE_URL", local),
                ("OPENAI_API_KEY", "sk-o"),
            ],
            Ok(ProviderConfig::new(
                Api::OpenAiResponses,
                local,
                "gpt-6-sol",
                key("sk-o"),
            )),
        ),
        // AUTOTOOL_PROVIDER beats the order of the keys.
        (
            vec![
                ("AUTOTOOL_PROVIDER", "anthropic"),
                ("OPENAI_API_KEY", "sk-o"),
                ("ANTHROPIC_API_KEY", "sk-a"),
                ("ANTHROPIC_MODEL", "claude-haiku-5"),
            ],
            Ok(ProviderConfig::new(
                Api::AnthropicMessages,
                ANTHROPIC_BASE_URL,
                "claude-haiku-5",
                key("sk-a"),
            )),
        ),
        (
            vec![("AUTOTOOL_PROVIDER", "Chat"), ("OPENAI_API_KEY", "sk-o")],
            Ok(ProviderConfig::new(
                Api::ChatCompletions,
                OPENAI_BASE_URL,
                "gpt-6-sol",
                key("sk-o"),
            )),
        ),
        (
            vec![
                ("OPENAI_API_KEY", "sk-o"),
                ("OPENAI_LLM", "gpt-6-mini"),
                ("ANTHROPIC_MODEL", "ignored"),
            ],
            Ok(ProviderConfig::new(
                Api::OpenAiResponses,
                OPENAI_BASE_URL,
                "gpt-6-mini",
                key("sk-o"),
            )),
        ),
        // An Anthropic-compatible server of one's own needs no key.
        (
            vec![
                ("AUTOTOOL_PROVIDER", "anthropic"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080"),
            ],
            Ok(ProviderConfig::new(
                Api::AnthropicMessages,
                "http://127.0.0.1:8080",
                "claude-opus-5",
                None,
            )),
        ),
        // Empty and blank values count as unset.
        (
            vec![("OPENAI_API_KEY", " "), ("ANTHROPIC_API_KEY", "sk-a")],
            Ok(ProviderConfig::new(
                Api::AnthropicMessages,
                ANTHROPIC_BASE_URL,
                "claude-opus-5",
                key("sk-a"),
            )),
        ),
        (vec![], Err("no model is configured")),
        (
            vec![("OPENAI_LLM", "gpt-6-sol")],
            Err("no model is configured"),
        ),
        (
            vec![("OPENAI_BASE_URL", local), ("ANTHROPIC_API_KEY", "sk-a")],
            Err("set OPENAI_LLM"),
        ),
        (
            vec![
                ("AUTOTOOL_PROVIDER", "openai"),
                ("ANTHROPIC_API_KEY", "sk-a"),
            ],
            Err("needs OPENAI_API_KEY"),
        ),
        (
            vec![
                ("AUTOTOOL_PROVIDER", "anthropic"),
                ("OPENAI_API_KEY", "sk-o"),
            ],
            Err("needs ANTHROPIC_API_KEY"),
        ),
        (
            vec![("AUTOTOOL_PROVIDER", "gemini"), ("OPENAI_API_KEY", "sk-o")],
            Err("AUTOTOOL_PROVIDER=gemini names no API"),
        ),
        (
            vec![("OPENAI_BASE_URL", "localhost:11434"), ("OPENAI_LLM", "m")],
            Err("is not an http(s) URL"),
        ),
        (
            vec![("OPENAI_API_KEY", "sk-o"), ("AUTOTOOL_LLM_TIMEOUT", "soon")],
            Err("AUTOTOOL_LLM_TIMEOUT=soon"),
        ),
    ];
    for (pairs, expected) in cases {
        let got = ProviderConfig::from_vars(&vars(&pairs));
        match (got, expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{pairs:?}"),
            (Err(e), Err(part)) => {
                assert!(matches!(e, ProviderError::NotConfigured(_)), "{e:?}");
                assert!(e.to_string().contains(part), "{pairs:?}: {e}");
            }
            (got, expected) => panic!("{pairs:?}: got {got:?}, expected {expected:?}"),
        }
    }

    let timeout = ProviderConfig::from_vars(&vars(&[
        ("OPENAI_API_KEY", "sk-o"),
        ("AUTOTOOL_LLM_TIMEOUT", "300"),
    ]))
    .unwrap()
    .timeout;
    assert_eq!(timeout, Duration::from_secs(300));
    let described = |pairs: &[(&str, &str)]| provider_from_vars(&vars(pairs)).unwrap().describe();
    assert_eq!(
        described(&[("OPENAI_API_KEY", "sk-o")]),
        "openai-responses gpt-6-sol"
    );
    assert_eq!(
        described(&[("ANTHROPIC_API_KEY", "sk-a")]),
        "anthropic-messages claude-opus-5"
    );
}

/// Run in a child process (the test binary itself) with a made-up environment: checks that
/// `default_provider` reads the process's variables. Does nothing in a normal test run.
#[test]
fn child_default_provider() {
    let Ok(expected) = std::env::var("AUTOTOOL_TEST_CHILD_PROVIDER") else {
        return;
    };
    let described = match autotool::own_model::agent::default_provider() {
        Ok(p) => p.describe(),
        Err(e) => format!("error: {e}"),
    };
    if expected.starts_with("error: ") {
        assert!(described.starts_with(&expected), "{described}");
    } else {
        assert_eq!(described, expected);
    }
}

#[test]
fn default_provider_reads_the_environment() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("ANTHROPIC_API_KEY", "sk-a")],
            "anthropic-messages claude-opus-5",
        ),
        (
            &[
                ("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1"),
                ("OPENAI_LLM", "qwen3"),
                ("OPENAI_API_KEY", "sk-o"),
            ],
            "chat-completions qwen3 at http://127.0.0.1:1234/v1",
        ),
        (&[], "error: no model is configured"),
    ];
    for (env, expected) in cases {
        let mut child = Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", "child_default_provider", "--test-threads=1"])
            .env_clear()
            .env("AUTOTOOL_TEST_CHILD_PROVIDER", expected);
        for (k, v) in *env {
            child.env(k, v);
        }
        let out = child.output().unwrap();
        assert!(
            out.status.success(),
            "{env:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "the child ran no test"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions of MCP tools

#[test]
fn mcp_tools_convert_to_each_apis_definitions() {
    let schema = json!({
        "type": "object",
        "properties": {"query": {"type": "string"}, "max_results": {"type": "integer", "default": 5}},
        "required": ["query"],
    });
    let search = rmcp::model::Tool::new(
        "tavily__search",
        "Search the web.",
        Arc::new(schema.as_object().unwrap().clone()),
    );
    let bare = rmcp::model::Tool::new_with_raw(
        "clock__now",
        None,
        Arc::new(json!({"type": "object"}).as_object().unwrap().clone()),
    );
    let tools: Vec<ToolDef> = [&search, &bare].into_iter().map(ToolDef::from).collect();
    assert_eq!(
        tools,
        vec![
            ToolDef {
                name: "tavily__search".into(),
                description: "Search the web.".into(),
                input_schema: schema.clone(),
            },
            ToolDef {
                name: "clock__now".into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            },
        ]
    );
    let bare_schema = json!({"type": "object", "properties": {}});
    assert_eq!(
        openai_tool_definitions(&tools),
        vec![
            json!({"type": "function", "name": "tavily__search", "description": "Search the web.",
                   "parameters": schema, "strict": false}),
            json!({"type": "function", "name": "clock__now", "parameters": bare_schema,
                   "strict": false}),
        ]
    );
    assert_eq!(
        openai_chat_tool_definitions(&tools),
        vec![
            json!({"type": "function", "function": {"name": "tavily__search",
                   "description": "Search the web.", "parameters": schema}}),
            json!({"type": "function", "function": {"name": "clock__now",
                   "parameters": bare_schema}}),
        ]
    );
    assert_eq!(
        anthropic_tool_definitions(&tools),
        vec![
            json!({"name": "tavily__search", "description": "Search the web.",
                   "input_schema": schema}),
            json!({"name": "clock__now", "input_schema": bare_schema}),
        ]
    );
}
