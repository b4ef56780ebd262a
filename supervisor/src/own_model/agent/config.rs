//! Which model API to use, where, with which model and key: decided from variables by a pure
//! function ([`ProviderConfig::from_vars`]), then built into a [`Provider`].

use super::chat_completions::ChatCompletions;
use super::messages::AnthropicMessages;
use super::provider::{Provider, ProviderError};
use super::responses::OpenAiResponses;
use super::transport::Transport;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The model used with OpenAI's APIs unless `OPENAI_LLM` names another.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-6-sol";
/// The model used with Anthropic's API unless `ANTHROPIC_MODEL` names another.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-opus-5";
/// OpenAI's API root (`OPENAI_BASE_URL` replaces it; the paths `/responses` and
/// `/chat/completions` are appended).
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// Anthropic's API root (`ANTHROPIC_BASE_URL` replaces it; `/v1/messages` is appended).
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// How long one request may take, headers and body, unless `AUTOTOOL_LLM_TIMEOUT` says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The answer length asked of the Anthropic Messages API, which requires one.
pub const DEFAULT_MAX_TOKENS: u32 = 16_384;

/// The three APIs autotool speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI's Responses API (`POST {base}/responses`).
    OpenAiResponses,
    /// Anthropic's Messages API (`POST {base}/v1/messages`).
    AnthropicMessages,
    /// Any OpenAI-compatible Chat Completions server (`POST {base}/chat/completions`).
    ChatCompletions,
}

impl Api {
    /// The name [`Provider::describe`] and errors use.
    pub fn name(self) -> &'static str {
        match self {
            Api::OpenAiResponses => "openai-responses",
            Api::AnthropicMessages => "anthropic-messages",
            Api::ChatCompletions => "chat-completions",
        }
    }
}

/// How failed requests are retried: 408, 409, 429 and 5xx answers and failed connections, up
/// to `max_retries` times, waiting `base_delay · 2ⁿ` (at most `max_delay`) with jitter, or what
/// `Retry-After` asks when it asks at most `max_retry_after`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// A longer `Retry-After` ends the attempt at once with [`ProviderError::RateLimited`].
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0 for the first): the exponential step, of which
    /// a random half is taken off so that clients refused together do not return together.
    pub fn backoff(&self, retry: u32) -> Duration {
        let step = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.max_delay);
        step.mul_f64(0.5 + fastrand::f64() / 2.0)
    }
}

/// Everything needed to reach one model.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub api: Api,
    /// The API root, without a trailing slash.
    pub base_url: String,
    pub model: String,
    /// `None` for a server that needs none (a local one).
    pub api_key: Option<String>,
    /// Per request, from sending to the last byte of the answer.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// The answer length asked for where the API requires one (Anthropic).
    pub max_tokens: u32,
}

impl fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl ProviderConfig {
    /// A configuration with the default timeout, retries and answer length.
    pub fn new(
        api: Api,
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: Option<String>,
    ) -> ProviderConfig {
        ProviderConfig {
            api,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            model: model.into(),
            api_key,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// Picks the API from variables (empty values count as unset):
    ///
    /// 1. `AUTOTOOL_PROVIDER=openai|anthropic|chat` forces the Responses API, the Messages API
    ///    or Chat Completions;
    /// 2. else `OPENAI_BASE_URL` means an OpenAI-compatible Chat Completions server there
    ///    (Ollama, LM Studio, vLLM, OpenRouter), with the model `OPENAI_LLM` (required) and
    ///    `OPENAI_API_KEY` if set;
    /// 3. else `OPENAI_API_KEY` means OpenAI's Responses API;
    /// 4. else `ANTHROPIC_API_KEY` means Anthropic's Messages API.
    ///
    /// Models: `OPENAI_LLM` (default [`DEFAULT_OPENAI_MODEL`]) for both OpenAI APIs,
    /// `ANTHROPIC_MODEL` (default [`DEFAULT_ANTHROPIC_MODEL`]). Roots: `OPENAI_BASE_URL`,
    /// `ANTHROPIC_BASE_URL`. A key is required for the vendor's own root, optional for another.
    /// `AUTOTOOL_LLM_TIMEOUT` sets the per-request timeout in seconds.
    pub fn from_vars(vars: &BTreeMap<String, String>) -> Result<ProviderConfig, ProviderError> {
        let get = |name: &str| {
            vars.get(name)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let openai_key = get("OPENAI_API_KEY");
        let openai_base = get("OPENAI_BASE_URL");
        let anthropic_key = get("ANTHROPIC_API_KEY");
        let anthropic_base = get("ANTHROPIC_BASE_URL");

        let api = match get("AUTOTOOL_PROVIDER").map(|p| p.to_ascii_lowercase()) {
            Some(p) => match p.as_str() {
                "openai" | "responses" | "openai-responses" => Api::OpenAiResponses,
                "anthropic" | "messages" | "anthropic-messages" => Api::AnthropicMessages,
                "chat" | "chat-completions" => Api::ChatCompletions,
                _ => {
                    return Err(ProviderError::NotConfigured(format!(
                        "AUTOTOOL_PROVIDER={p} names no API autotool speaks: use openai (OpenAI's \
                         Responses API), anthropic (Anthropic's Messages API) or chat (an \
                         OpenAI-compatible Chat Completions server), or leave it unset"
                    )));
                }
            },
            None if openai_base.is_some() => Api::ChatCompletions,
            None if openai_key.is_some() => Api::OpenAiResponses,
            None if anthropic_key.is_some() => Api::AnthropicMessages,
            None => {
                return Err(ProviderError::NotConfigured(
                    "no model is configured: set OPENAI_API_KEY (OpenAI), ANTHROPIC_API_KEY \
                     (Anthropic), or OPENAI_BASE_URL and OPENAI_LLM (an OpenAI-compatible server \
                     such as Ollama at http://localhost:11434/v1); autotool's own commands read \
                     them from $AUTOTOOL_HOME/.env"
                        .into(),
                ));
            }
        };

        let (var, base, key, key_var, default_base) = match api {
            Api::AnthropicMessages => (
                "ANTHROPIC_BASE_URL",
                anthropic_base,
                anthropic_key,
                "ANTHROPIC_API_KEY",
                ANTHROPIC_BASE_URL,
            ),
            Api::OpenAiResponses | Api::ChatCompletions => (
                "OPENAI_BASE_URL",
                openai_base,
                openai_key,
                "OPENAI_API_KEY",
                OPENAI_BASE_URL,
            ),
        };
        if let Some(base) = &base {
            check_url(var, base)?;
        }
        if key.is_none() && base.is_none() {
            return Err(ProviderError::NotConfigured(format!(
                "{} needs {key_var} (or {var} for a server of your own that needs no key)",
                api.name()
            )));
        }
        let model = match api {
            Api::AnthropicMessages => {
                get("ANTHROPIC_MODEL").unwrap_or_else(|| DEFAULT_ANTHROPIC_MODEL.into())
            }
            Api::OpenAiResponses => {
                get("OPENAI_LLM").unwrap_or_else(|| DEFAULT_OPENAI_MODEL.into())
            }
            Api::ChatCompletions => match (get("OPENAI_LLM"), &base) {
                (Some(model), _) => model,
                (None, None) => DEFAULT_OPENAI_MODEL.into(),
                (None, Some(base)) => {
                    return Err(ProviderError::NotConfigured(format!(
                        "OPENAI_BASE_URL is set, so autotool speaks Chat Completions to {base}; \
                         set OPENAI_LLM to the model that server runs (for Ollama, one that \
                         `ollama list` shows)"
                    )));
                }
            },
        };
        let mut config =
            ProviderConfig::new(api, base.unwrap_or_else(|| default_base.into()), model, key);
        if let Some(timeout) = get("AUTOTOOL_LLM_TIMEOUT") {
            config.timeout = timeout
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    ProviderError::NotConfigured(format!(
                        "AUTOTOOL_LLM_TIMEOUT={timeout} is not a number of seconds above 0"
                    ))
                })?;
        }
        Ok(config)
    }

    /// Where requests go.
    pub fn endpoint(&self) -> String {
        match self.api {
            Api::OpenAiResponses => format!("{}/responses", self.base_url),
            Api::ChatCompletions => format!("{}/chat/completions", self.base_url),
            // Anthropic's root has no version; accept one given with it all the same.
            Api::AnthropicMessages if self.base_url.ends_with("/v1") => {
                format!("{}/messages", self.base_url)
            }
            Api::AnthropicMessages => format!("{}/v1/messages", self.base_url),
        }
    }

    /// The provider this configuration describes.
    pub fn build(self) -> Result<Box<dyn Provider>, ProviderError> {
        let transport = Transport::new(&self)?;
        Ok(match self.api {
            Api::OpenAiResponses => Box::new(OpenAiResponses::new(transport)),
            Api::AnthropicMessages => Box::new(AnthropicMessages::new(transport, self.max_tokens)),
            Api::ChatCompletions => Box::new(ChatCompletions::new(transport)),
        })
    }
}

fn check_url(var: &str, value: &str) -> Result<(), ProviderError> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(()),
        _ => Err(ProviderError::NotConfigured(format!(
            "{var}={value} is not an http(s) URL; give the API root, such as \
             http://localhost:11434/v1"
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_caps() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
            ..RetryPolicy::default()
        };
        for (retry, full) in [(0, 100), (1, 200), (2, 400), (3, 500), (30, 500)] {
            let d = policy.backoff(retry).as_millis();
            assert!(d >= full / 2 && d <= full, "retry {retry}: {d} ms");
        }
    }

    #[test]
    fn endpoints() {
        let c = |api, base| ProviderConfig::new(api, base, "m", None).endpoint();
        assert_eq!(
            c(Api::OpenAiResponses, "https://api.openai.com/v1/"),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            c(Api::ChatCompletions, "http://localhost:11434/v1"),
            "http://localhost:11434/v1/chat/completions"
        );
        assert_eq!(
            c(Api::AnthropicMessages, "https://api.anthropic.com"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            c(Api::AnthropicMessages, "http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1/messages"
        );
    }

    #[test]
    fn debug_hides_the_key() {
        let c = ProviderConfig::new(
            Api::OpenAiResponses,
            OPENAI_BASE_URL,
            "m",
            Some("sk-secret".into()),
        );
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
