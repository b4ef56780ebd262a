//! One JSON request to a model API over HTTP: the client, its headers and timeout, retries with
//! backoff on 408, 409, 429, 5xx and failed connections (honouring `Retry-After`), and each
//! refusal turned into the [`ProviderError`] a user can act on.

use super::config::{ANTHROPIC_BASE_URL, Api, OPENAI_BASE_URL, ProviderConfig, RetryPolicy};
use super::provider::ProviderError;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::fmt;
use std::time::{Duration, SystemTime};

/// The `anthropic-version` header autotool's requests are written for.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How long connecting may take at most, within the request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of an error body goes into a message.
const DETAIL_LIMIT: usize = 500;

/// A client for one endpoint with its credentials.
pub(crate) struct Transport {
    client: reqwest::Client,
    api: Api,
    base_url: String,
    url: String,
    model: String,
    headers: HeaderMap,
    retry: RetryPolicy,
}

impl fmt::Debug for Transport {
    // The headers hold the key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transport")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Transport {
    pub(crate) fn new(config: &ProviderConfig) -> Result<Transport, ProviderError> {
        // reqwest is built without a TLS crypto provider of its own (see Cargo.toml): make ring
        // the process's, unless the embedding program installed one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(CONNECT_TIMEOUT))
            .user_agent(concat!("autotool/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Http(error_chain(&e)))?;

        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let key_header = |value: String| {
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::NotConfigured(
                    "the API key holds characters that cannot go in an HTTP header (a newline or \
                     quote?); set it again"
                        .into(),
                )
            })?;
            value.set_sensitive(true);
            Ok::<_, ProviderError>(value)
        };
        match config.api {
            Api::AnthropicMessages => {
                if let Some(key) = &config.api_key {
                    headers.insert(
                        HeaderName::from_static("x-api-key"),
                        key_header(key.clone())?,
                    );
                }
                headers.insert(
                    HeaderName::from_static("anthropic-version"),
                    HeaderValue::from_static(ANTHROPIC_VERSION),
                );
            }
            Api::OpenAiResponses | Api::ChatCompletions => {
                if let Some(key) = &config.api_key {
                    headers.insert(AUTHORIZATION, key_header(format!("Bearer {key}"))?);
                }
            }
        }
        Ok(Transport {
            client,
            api: config.api,
            base_url: config.base_url.clone(),
            url: config.endpoint(),
            model: config.model.clone(),
            headers,
            retry: config.retry,
        })
    }

    /// "openai-responses gpt-6-sol", with " at <root>" when the root is not the vendor's.
    pub(crate) fn describe(&self) -> String {
        let vendor = match self.api {
            Api::AnthropicMessages => ANTHROPIC_BASE_URL,
            Api::OpenAiResponses | Api::ChatCompletions => OPENAI_BASE_URL,
        };
        if self.base_url == vendor {
            format!("{} {}", self.api.name(), self.model)
        } else {
            format!("{} {} at {}", self.api.name(), self.model, self.base_url)
        }
    }

    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// Posts `body` and returns the JSON answer, retrying what may pass on a second try.
    pub(crate) async fn post(&self, body: &Value) -> Result<Value, ProviderError> {
        let body = body.to_string();
        let mut retry = 0;
        loop {
            let sent = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .body(body.clone())
                .send()
                .await;
            let (error, retry_after) = match sent {
                Err(e) if e.is_timeout() => return Err(ProviderError::Timeout),
                Err(e) if e.is_connect() => (ProviderError::Http(error_chain(&e)), None),
                Err(e) => return Err(ProviderError::Http(error_chain(&e))),
                Ok(response) => {
                    let status = response.status();
                    let retry_after = retry_after(response.headers(), SystemTime::now());
                    let text = match response.text().await {
                        Ok(text) => text,
                        Err(e) if e.is_timeout() => return Err(ProviderError::Timeout),
                        Err(e) => return Err(ProviderError::Http(error_chain(&e))),
                    };
                    if status.is_success() {
                        return serde_json::from_str(&text).map_err(|e| {
                            ProviderError::BadResponse(format!(
                                "HTTP {status} with a body that is not JSON ({e}): {}",
                                truncate(&text)
                            ))
                        });
                    }
                    let error =
                        classify(self.api, &self.model, &self.url, status, &text, retry_after);
                    if !retryable(status, &text) {
                        return Err(error);
                    }
                    (error, retry_after)
                }
            };
            if retry >= self.retry.max_retries {
                return Err(error);
            }
            let delay = match retry_after {
                Some(wait) if wait > self.retry.max_retry_after => return Err(error),
                Some(wait) => wait,
                None => self.retry.backoff(retry),
            };
            retry += 1;
            tracing::warn!(
                api = self.api.name(),
                retry,
                of = self.retry.max_retries,
                delay_ms = delay.as_millis() as u64,
                "model request failed ({error}); retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// Whether an error answer may pass on a second try: a timeout on the server's side (408),
/// a conflict (409), a rate limit (429, but not an exhausted quota, which waiting does not
/// fix) and server errors (5xx, including Anthropic's 529 "overloaded").
fn retryable(status: StatusCode, body: &str) -> bool {
    match status.as_u16() {
        429 => !body.contains("insufficient_quota"),
        408 | 409 => true,
        s => s >= 500,
    }
}

/// How long the server asks to wait: `retry-after-ms` (OpenAI), else `Retry-After` in seconds
/// or as an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return seconds(ms / 1000.0);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return seconds(secs);
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or_default())
}

fn seconds(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// The error an API answered with `status` and `body` stands for.
pub(crate) fn classify(
    api: Api,
    model: &str,
    url: &str,
    status: StatusCode,
    body: &str,
    retry_after: Option<Duration>,
) -> ProviderError {
    let detail = error_detail(status, body);
    let lower = detail.to_lowercase();
    let provider = api.name().to_owned();
    let model = model.to_owned();
    match status.as_u16() {
        401 => ProviderError::BadKey { provider, detail },
        403 if names_unknown_model(&lower) || lower.contains("access to model") => {
            ProviderError::UnknownModel { model, detail }
        }
        403 => ProviderError::BadKey { provider, detail },
        429 => ProviderError::RateLimited {
            provider,
            detail,
            retry_after,
        },
        s @ (408 | 409 | 500..) => ProviderError::Server { status: s, detail },
        _ if refuses_tools(&lower) => ProviderError::NoToolCalling { model, detail },
        400 | 404 | 422 if names_unknown_model(&lower) => {
            ProviderError::UnknownModel { model, detail }
        }
        404 => ProviderError::Rejected {
            status: 404,
            detail: format!(
                "{url} does not exist ({detail}); check the base URL (OpenAI-compatible servers \
                 usually end in /v1)"
            ),
        },
        s => ProviderError::Rejected { status: s, detail },
    }
}

/// Said by servers whose model cannot call tools: Ollama ("… does not support tools"),
/// vLLM without a tool parser, OpenRouter ("No endpoints found that support tool use").
fn refuses_tools(lower: &str) -> bool {
    [
        "does not support tool",
        "doesn't support tool",
        "support tool use",
        "tool use is not supported",
        "tools are not supported",
        "tool calling is not supported",
        "tool calls are not supported",
        "function calling is not supported",
        "does not support function calling",
        "enable-auto-tool-choice",
    ]
    .iter()
    .any(|s| lower.contains(s))
}

/// Said when a model is unknown: OpenAI's `model_not_found`, Anthropic's `not_found_error`
/// ("model: …"), Ollama's "model … not found, try pulling it first", vLLM's "The model … does
/// not exist", OpenRouter's "… is not a valid model ID".
fn names_unknown_model(lower: &str) -> bool {
    lower.contains("model_not_found")
        || (lower.contains("model")
            && [
                "not found",
                "not_found",
                "does not exist",
                "not a valid model",
                "invalid model",
                "unknown model",
                "no such model",
            ]
            .iter()
            .any(|s| lower.contains(s)))
}

/// The readable part of an error body: `{"error": {"type"|"code", "message"}}` (OpenAI,
/// Anthropic), `{"error": "…"}` (Ollama), `{"message"|"detail": "…"}`, else the text itself.
pub(crate) fn error_detail(status: StatusCode, body: &str) -> String {
    let json: Option<Value> = serde_json::from_str(body).ok();
    let found = json.as_ref().and_then(|v| {
        let error = v.get("error");
        if let Some(text) = error.and_then(Value::as_str) {
            return Some(text.to_owned());
        }
        if let Some(message) = error.and_then(|e| e.get("message")).and_then(Value::as_str) {
            let code = error
                .and_then(|e| e.get("code").filter(|c| !c.is_null()))
                .or_else(|| error.and_then(|e| e.get("type")))
                .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned));
            return Some(match code {
                Some(code) => format!("{code}: {message}"),
                None => message.to_owned(),
            });
        }
        ["message", "detail"]
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_str).map(str::to_owned))
    });
    let text = found.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no details given")
            .to_owned()
    } else {
        truncate(&text)
    }
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(DETAIL_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// An error with its causes, "a: b: c", since reqwest keeps the useful part (connection
/// refused, certificate unknown) in the sources.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn class(api: Api, status: u16, body: &str) -> ProviderError {
        classify(
            api,
            "m",
            "http://x/v1/chat/completions",
            StatusCode::from_u16(status).unwrap(),
            body,
            None,
        )
    }

    /// An API, an answer's status and body, and what it must be classified as.
    type Case = (Api, u16, &'static str, fn(&ProviderError) -> bool);

    #[test]
    fn refusals_seen_from_real_servers() {
        use ProviderError as E;
        let cases: &[Case] = &[
            (
                Api::OpenAiResponses,
                401,
                r#"{"error":{"message":"Incorrect API key provided: sk-abc.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
                |e| matches!(e, E::BadKey { detail, .. } if detail.starts_with("invalid_api_key: Incorrect")),
            ),
            (
                Api::AnthropicMessages,
                401,
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
                |e| matches!(e, E::BadKey { .. }),
            ),
            (
                Api::OpenAiResponses,
                404,
                r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
                |e| matches!(e, E::UnknownModel { .. }),
            ),
            (
                Api::AnthropicMessages,
                404,
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-x"}}"#,
                |e| matches!(e, E::UnknownModel { .. }),
            ),
            (
                Api::ChatCompletions,
                404,
                r#"{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}"#,
                |e| matches!(e, E::UnknownModel { .. }),
            ),
            (
                Api::ChatCompletions,
                400,
                r#"{"error":{"message":"registry.ollama.ai/library/gemma3:1b does not support tools","type":"invalid_request_error","param":null,"code":null}}"#,
                |e| matches!(e, E::NoToolCalling { .. }),
            ),
            (
                Api::ChatCompletions,
                400,
                r#"{"error":"registry.ollama.ai/library/llama3:8b does not support tools"}"#,
                |e| matches!(e, E::NoToolCalling { .. }),
            ),
            (
                Api::ChatCompletions,
                400,
                r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","code":400}"#,
                |e| matches!(e, E::NoToolCalling { .. }),
            ),
            (
                Api::ChatCompletions,
                404,
                r#"{"error":{"message":"No endpoints found that support tool use.","code":404}}"#,
                |e| matches!(e, E::NoToolCalling { .. }),
            ),
            (
                Api::ChatCompletions,
                404,
                "404 page not found",
                |e| matches!(e, E::Rejected { status: 404, detail } if detail.contains("base URL")),
            ),
            (
                Api::OpenAiResponses,
                429,
                r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
                |e| matches!(e, E::RateLimited { .. }),
            ),
            (
                Api::AnthropicMessages,
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                |e| matches!(e, E::Server { status: 529, detail } if detail == "overloaded_error: Overloaded"),
            ),
            (
                Api::AnthropicMessages,
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}"#,
                |e| matches!(e, E::Rejected { status: 400, .. }),
            ),
            (
                Api::ChatCompletions,
                502,
                "",
                |e| matches!(e, E::Server { status: 502, detail } if detail == "Bad Gateway"),
            ),
        ];
        for (api, status, body, check) in cases {
            let e = class(*api, *status, body);
            assert!(check(&e), "{status} {body} → {e:?}");
        }
    }

    #[test]
    fn exhausted_quota_is_not_retried() {
        assert!(retryable(StatusCode::TOO_MANY_REQUESTS, "{}"));
        assert!(!retryable(
            StatusCode::TOO_MANY_REQUESTS,
            r#"{"error":{"code":"insufficient_quota"}}"#
        ));
        assert!(retryable(StatusCode::from_u16(529).unwrap(), ""));
        assert!(!retryable(StatusCode::BAD_REQUEST, ""));
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, HeaderValue::from_static(v));
            }
            retry_after(&m, now)
        };
        assert_eq!(h(&[]), None);
        assert_eq!(h(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(
            h(&[("retry-after", "0.25")]),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            h(&[("retry-after", "1"), ("retry-after-ms", "40")]),
            Some(Duration::from_millis(40))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        let mut m = HeaderMap::new();
        m.insert("retry-after", HeaderValue::from_str(&date).unwrap());
        assert_eq!(retry_after(&m, now), Some(Duration::from_secs(7)));
        assert_eq!(h(&[("retry-after", "soon")]), None);
    }
}
