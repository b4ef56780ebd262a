"""The model an agent talks to: which API, where, with which model and key, decided by the
same rules and defaults as autotool's Rust providers (`docs/providers.md`), then reached
through the official SDKs (`pip install autotool-mcp[models]`: `openai`, `anthropic`).

`default_provider()` reads the process environment; `provider_from_vars(mapping)` any mapping.
In this order (empty values count as unset):

1. `AUTOTOOL_PROVIDER=openai|anthropic|chat` forces the Responses API, the Messages API or
   Chat Completions (`openai` with `OPENAI_BASE_URL` keeps the Responses API at that URL);
2. `OPENAI_BASE_URL` set: Chat Completions there (Ollama, LM Studio, vLLM, OpenRouter), with the
   model `OPENAI_LLM` (required) and `OPENAI_API_KEY` if set (a local server needs none);
3. `OPENAI_API_KEY` set: OpenAI's Responses API;
4. `ANTHROPIC_API_KEY` set: Anthropic's Messages API;
5. nothing: `NotConfigured`, naming these variables.

Models: `OPENAI_LLM` (default `gpt-6-sol`), `ANTHROPIC_MODEL` (default `claude-opus-5`). Roots:
`OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `ANTHROPIC_BASE_URL` (default
`https://api.anthropic.com`; given with `/v1` it still works). `AUTOTOOL_LLM_TIMEOUT`: seconds
one request may take (default 120, connecting at most 30 of them).

Failed requests are retried as the Rust providers retry them (the SDKs' own retries are off):
408, 409, 429 (not an exhausted quota) and 5xx answers and failed connections, at most 4 times,
waiting `0.5 s · 2ⁿ` (at most 30 s) less a random part of up to half, or what `retry-after-ms` /
`Retry-After` asks when it asks at most 60 s. A timeout is not retried. Every other refusal is a
`ProviderError` whose message says what to do.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol
from urllib.parse import urlsplit

from ..tools import ToolDef

DEFAULT_OPENAI_MODEL = "gpt-6-sol"
"""The model used with OpenAI's APIs unless `OPENAI_LLM` names another."""
DEFAULT_ANTHROPIC_MODEL = "claude-opus-5"
"""The model used with Anthropic's API unless `ANTHROPIC_MODEL` names another."""
OPENAI_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's API root (`/responses` and `/chat/completions` are appended)."""
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Anthropic's API root (`/v1/messages` is appended)."""
DEFAULT_TIMEOUT = 120.0
"""Seconds one request may take, unless `AUTOTOOL_LLM_TIMEOUT` says."""
CONNECT_TIMEOUT = 30.0
"""Seconds connecting may take at most, within the request timeout."""
DEFAULT_MAX_TOKENS = 16_384
"""The answer length asked of the Anthropic Messages API, which requires one."""


class Api(Enum):
    """The three APIs autotool speaks."""

    OPENAI_RESPONSES = "openai-responses"
    """OpenAI's Responses API (`POST {base}/responses`)."""
    ANTHROPIC_MESSAGES = "anthropic-messages"
    """Anthropic's Messages API (`POST {base}/v1/messages`)."""
    CHAT_COMPLETIONS = "chat-completions"
    """Any OpenAI-compatible Chat Completions server (`POST {base}/chat/completions`)."""


# ---------------------------------------------------------------------------------------------
# The conversation


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for."""

    id: str
    """The API's id for the call; the result goes back under the same id."""
    name: str
    arguments: object
    """Normally a dict. Arguments the model wrote that are not valid JSON are kept as the raw
    text (a str), so the tool's complaint can go back to the model."""


@dataclass(frozen=True)
class User:
    """The user's words."""

    text: str


@dataclass(frozen=True)
class Assistant:
    """One turn of the model: its text, its calls, or both."""

    text: str | None
    calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """What a call returned (redacted by autotool before it got here)."""

    call_id: str
    name: str
    output: str
    is_error: bool = False


Item = User | Assistant | ToolResult
"""One entry of the conversation."""


@dataclass(frozen=True)
class Turn:
    """What the model answered in one turn."""

    text: str | None
    calls: tuple[ToolCall, ...] = ()

    def to_item(self) -> Assistant:
        """The history entry that records this turn."""
        return Assistant(self.text, self.calls)


class Provider(Protocol):
    """A model API an agent can talk to."""

    def describe(self) -> str:
        """The API and model, e.g. "openai-responses gpt-6-sol"."""
        ...

    async def complete(self, system: str, history: Sequence[Item], tools: Sequence[ToolDef]) -> Turn:
        """One turn: the model reads the system prompt, the history and the tools it may
        call, and answers with text, calls, or both. Retries what may pass on a second try."""
        ...


# ---------------------------------------------------------------------------------------------
# Errors: each message says what to do next (the same words as the Rust providers').


def _key_var(provider: str) -> str:
    return "ANTHROPIC_API_KEY" if "anthropic" in provider.lower() else "OPENAI_API_KEY"


class ProviderError(Exception):
    """Why a model request failed."""


class NotConfigured(ProviderError):
    """The variables do not name a usable model."""


class BadKey(ProviderError):
    """401 or 403: the key is missing, wrong, revoked or lacks permission."""

    def __init__(self, provider: str, detail: str) -> None:
        super().__init__(
            f"{provider} refused the API key ({detail}); check {_key_var(provider)}: it must hold a valid, active key"
        )
        self.provider, self.detail = provider, detail


class UnknownModel(ProviderError):
    """The API does not know the model, or the key may not use it."""

    def __init__(self, model: str, detail: str) -> None:
        super().__init__(
            f"the model {model!r} is not available ({detail}); choose one the account or server "
            "offers: OPENAI_LLM for OpenAI and Chat Completions servers, ANTHROPIC_MODEL for "
            "Anthropic (for Ollama, `ollama pull` it first)"
        )
        self.model, self.detail = model, detail


class NoToolCalling(ProviderError):
    """The model (or the server running it) cannot call tools, which the agent needs."""

    def __init__(self, model: str, detail: str) -> None:
        super().__init__(
            f"the model {model!r} cannot call tools ({detail}); autotool's agent needs tool "
            "calling: choose a model that supports it with OPENAI_LLM or ANTHROPIC_MODEL (Ollama "
            'lists such models under "tools"; vLLM needs --enable-auto-tool-choice and '
            "--tool-call-parser)"
        )
        self.model, self.detail = model, detail


class RateLimited(ProviderError):
    """429 after every retry, a wait longer than autotool sleeps, or an exhausted quota."""

    def __init__(self, provider: str, detail: str, retry_after: float | None = None) -> None:
        wait = f", and asks to wait {int(retry_after)} s" if retry_after is not None else ""
        super().__init__(
            f"{provider} is rate-limiting these requests ({detail}){wait}; wait and try again, "
            "or check the account's rate limits and billing"
        )
        self.provider, self.detail, self.retry_after = provider, detail, retry_after


class ServerError(ProviderError):
    """5xx (or 408/409) after every retry."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(
            f"the model API failed with HTTP {status} ({detail}) on every retry; it may be down "
            "or overloaded: try again later"
        )
        self.status, self.detail = status, detail


class ProviderTimeout(ProviderError):
    """No answer within the per-request timeout."""

    def __init__(self) -> None:
        super().__init__(
            "the model API did not answer within the request timeout; try again, or raise "
            "AUTOTOOL_LLM_TIMEOUT (seconds, default 120) for a slow local model"
        )


class Unreachable(ProviderError):
    """The API could not be reached at all."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"cannot reach the model API: {why}; check the base URL (OPENAI_BASE_URL or "
            "ANTHROPIC_BASE_URL), that the server is running, and the network"
        )
        self.why = why


class Rejected(ProviderError):
    """Any other refusal of the request (4xx)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"the model API rejected the request with HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class BadResponse(ProviderError):
    """The answer is not in the shape the API promises."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"the model API answered in a shape autotool cannot read ({why}); check that the "
            "base URL points at the API autotool expects there (AUTOTOOL_PROVIDER)"
        )
        self.why = why


# ---------------------------------------------------------------------------------------------
# The choice


@dataclass(frozen=True)
class RetryPolicy:
    """How failed requests are retried (see the module's doc)."""

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 60.0
    """A longer `Retry-After` ends the attempt at once."""

    def backoff(self, retry: int) -> float:
        """The wait before retry number `retry` (0 for the first): the exponential step, of
        which a random half is taken off so that clients refused together do not return
        together."""
        step = min(self.base_delay * (2.0 ** min(retry, 60)), self.max_delay)
        return step * (0.5 + random.random() / 2)


@dataclass(frozen=True)
class ProviderConfig:
    """Everything needed to reach one model."""

    api: Api
    base_url: str
    """The API root, without a trailing slash."""
    model: str
    api_key: str | None = field(default=None, repr=False)
    """`None` for a server that needs none (a local one)."""
    timeout: float = DEFAULT_TIMEOUT
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_tokens: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))

    def __repr__(self) -> str:
        key = "(set)" if self.api_key else None
        return (
            f"ProviderConfig(api={self.api}, base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={key}, timeout={self.timeout}, retry={self.retry}, max_tokens={self.max_tokens})"
        )

    @staticmethod
    def from_vars(variables: Mapping[str, str]) -> ProviderConfig:
        """The configuration the variables name (rules: the module's doc)."""

        def get(name: str) -> str | None:
            value = variables.get(name)
            return value.strip() if value is not None and value.strip() else None

        openai_key, openai_base = get("OPENAI_API_KEY"), get("OPENAI_BASE_URL")
        anthropic_key, anthropic_base = get("ANTHROPIC_API_KEY"), get("ANTHROPIC_BASE_URL")

        forced = get("AUTOTOOL_PROVIDER")
        if forced is not None:
            name = forced.lower()
            if name in ("openai", "responses", "openai-responses"):
                api = Api.OPENAI_RESPONSES
            elif name in ("anthropic", "messages", "anthropic-messages"):
                api = Api.ANTHROPIC_MESSAGES
            elif name in ("chat", "chat-completions"):
                api = Api.CHAT_COMPLETIONS
            else:
                raise NotConfigured(
                    f"AUTOTOOL_PROVIDER={name} names no API autotool speaks: use openai (OpenAI's "
                    "Responses API), anthropic (Anthropic's Messages API) or chat (an "
                    "OpenAI-compatible Chat Completions server), or leave it unset"
                )
        elif openai_base is not None:
            api = Api.CHAT_COMPLETIONS
        elif openai_key is not None:
            api = Api.OPENAI_RESPONSES
        elif anthropic_key is not None:
            api = Api.ANTHROPIC_MESSAGES
        else:
            raise NotConfigured(
                "no model is configured: set OPENAI_API_KEY (OpenAI), ANTHROPIC_API_KEY "
                "(Anthropic), or OPENAI_BASE_URL and OPENAI_LLM (an OpenAI-compatible server "
                "such as Ollama at http://localhost:11434/v1); autotool's own commands read "
                "them from $AUTOTOOL_HOME/.env"
            )

        if api is Api.ANTHROPIC_MESSAGES:
            var, base, key, key_var, default_base = (
                "ANTHROPIC_BASE_URL",
                anthropic_base,
                anthropic_key,
                "ANTHROPIC_API_KEY",
                ANTHROPIC_BASE_URL,
            )
        else:
            var, base, key, key_var, default_base = (
                "OPENAI_BASE_URL",
                openai_base,
                openai_key,
                "OPENAI_API_KEY",
                OPENAI_BASE_URL,
            )
        if base is not None:
            _check_url(var, base)
        if key is None and base is None:
            raise NotConfigured(f"{api.value} needs {key_var} (or {var} for a server of your own that needs no key)")
        if api is Api.ANTHROPIC_MESSAGES:
            model = get("ANTHROPIC_MODEL") or DEFAULT_ANTHROPIC_MODEL
        elif api is Api.OPENAI_RESPONSES:
            model = get("OPENAI_LLM") or DEFAULT_OPENAI_MODEL
        else:
            llm = get("OPENAI_LLM")
            if llm is not None:
                model = llm
            elif base is None:
                model = DEFAULT_OPENAI_MODEL
            else:
                raise NotConfigured(
                    f"OPENAI_BASE_URL is set, so autotool speaks Chat Completions to {base}; set "
                    "OPENAI_LLM to the model that server runs (for Ollama, one that `ollama list` "
                    "shows)"
                )
        config = ProviderConfig(api, base or default_base, model, key)
        timeout = get("AUTOTOOL_LLM_TIMEOUT")
        if timeout is not None:
            try:
                seconds = float(timeout)
            except ValueError:
                seconds = math.nan
            if not (math.isfinite(seconds) and seconds > 0):
                raise NotConfigured(f"AUTOTOOL_LLM_TIMEOUT={timeout} is not a number of seconds above 0")
            config = replace(config, timeout=seconds)
        return config

    def endpoint(self) -> str:
        """Where requests go."""
        if self.api is Api.OPENAI_RESPONSES:
            return f"{self.base_url}/responses"
        if self.api is Api.CHAT_COMPLETIONS:
            return f"{self.base_url}/chat/completions"
        # Anthropic's root has no version; accept one given with it all the same.
        if self.base_url.endswith("/v1"):
            return f"{self.base_url}/messages"
        return f"{self.base_url}/v1/messages"

    def describe(self) -> str:
        """ "openai-responses gpt-6-sol", with " at <root>" when the root is not the vendor's."""
        vendor = ANTHROPIC_BASE_URL if self.api is Api.ANTHROPIC_MESSAGES else OPENAI_BASE_URL
        if self.base_url == vendor:
            return f"{self.api.value} {self.model}"
        return f"{self.api.value} {self.model} at {self.base_url}"

    def build(self) -> Provider:
        """The provider this configuration describes, on the official SDK of its API."""
        try:
            if self.api is Api.ANTHROPIC_MESSAGES:
                from ._messages import AnthropicMessages

                return AnthropicMessages(self)
            from ._openai import ChatCompletions, OpenAIResponses

            if self.api is Api.OPENAI_RESPONSES:
                return OpenAIResponses(self)
            return ChatCompletions(self)
        except ImportError as exc:
            raise NotConfigured(
                f"{self.api.value} needs the {exc.name or 'model'} SDK: install "
                "autotool-mcp[models] (pip install 'autotool-mcp[models]')"
            ) from exc


def _check_url(var: str, value: str) -> None:
    try:
        parts = urlsplit(value)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise NotConfigured(
            f"{var}={value} is not an http(s) URL; give the API root, such as http://localhost:11434/v1"
        )


def provider_from_vars(variables: Mapping[str, str]) -> Provider:
    """The provider the given variables name (rules: the module's doc)."""
    return ProviderConfig.from_vars(variables).build()


def default_provider() -> Provider:
    """The provider the process environment names (rules: the module's doc).

    autotool's own commands do not use this: they read `$AUTOTOOL_HOME/.env`, so keys in a
    host's environment are never billed by surprise. A program of your own that calls this
    chooses to use its environment's keys."""
    return provider_from_vars(dict(os.environ))


__all__ = [
    "ANTHROPIC_BASE_URL",
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OPENAI_MODEL",
    "DEFAULT_TIMEOUT",
    "OPENAI_BASE_URL",
    "Api",
    "Assistant",
    "BadKey",
    "BadResponse",
    "Item",
    "NoToolCalling",
    "NotConfigured",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "Rejected",
    "RetryPolicy",
    "ServerError",
    "ToolCall",
    "ToolDef",
    "ToolResult",
    "Turn",
    "UnknownModel",
    "Unreachable",
    "User",
    "default_provider",
    "provider_from_vars",
]
