"""`autotool.core.llm`: the provider rules (the same table as the Rust providers' test,
`supervisor/tests/providers.rs`), what each API is sent through its official SDK and how its
answer is read, retries, and each error, against servers on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

import fakes
from autotool.core import llm
from autotool.core.llm import (
    ANTHROPIC_BASE_URL,
    OPENAI_BASE_URL,
    Api,
    Assistant,
    ProviderConfig,
    RetryPolicy,
    ToolCall,
    ToolDef,
    ToolResult,
    User,
)
from conftest import require

FAST = RetryPolicy(base_delay=0.01, max_delay=0.05)


@dataclass
class Replies:
    """A server that answers each request with the next reply queued (the last one repeats)
    and records what it was sent."""

    queue: list[fakes.Reply]
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> fakes.Reply:
        del method
        with self.lock:
            self.requests.append((path, {k.lower(): v for k, v in headers.items()}, json.loads(body or b"{}")))
            reply = self.queue.pop(0) if len(self.queue) > 1 else self.queue[0]
        if self.delay:
            time.sleep(self.delay)
        return reply


@pytest.fixture
def replies() -> Iterator[tuple[Replies, str]]:
    server = Replies(queue=[(500, {"error": "nothing queued"})])
    with fakes.serving(server.route) as base:
        yield server, base


def build(variables: dict[str, str], **changes: Any) -> llm.Provider:
    return replace(ProviderConfig.from_vars(variables), **changes).build()


TOOLS = [
    ToolDef("weather__now", "The weather now.", {"type": "object", "properties": {"city": {"type": "string"}}}),
    ToolDef("clock__time", "", {"type": "object"}),
]
HISTORY: list[llm.Item] = [
    User("What is the weather in Oslo?"),
    Assistant("Let me look.", (ToolCall("call_1", "weather__now", {"city": "Oslo"}),)),
    ToolResult("call_1", "weather__now", "4 °C, rain", False),
    Assistant(None, (ToolCall("call_2", "clock__time", "{not json"),)),
    ToolResult("call_2", "clock__time", "bad arguments", True),
]


# ---------------------------------------------------------------------------------------------
# The rules


LOCAL = "http://localhost:11434/v1"
CASES: list[tuple[dict[str, str], ProviderConfig | str]] = [
    ({"OPENAI_API_KEY": "sk-o"}, ProviderConfig(Api.OPENAI_RESPONSES, OPENAI_BASE_URL, "gpt-6-sol", "sk-o")),
    (
        {"ANTHROPIC_API_KEY": "sk-a"},
        ProviderConfig(Api.ANTHROPIC_MESSAGES, ANTHROPIC_BASE_URL, "claude-opus-5", "sk-a"),
    ),
    # OpenAI before Anthropic.
    (
        {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-a"},
        ProviderConfig(Api.OPENAI_RESPONSES, OPENAI_BASE_URL, "gpt-6-sol", "sk-o"),
    ),
    # A base URL means Chat Completions there, before either key; no key needed.
    (
        {"OPENAI_BASE_URL": LOCAL, "OPENAI_LLM": "llama3.1", "ANTHROPIC_API_KEY": "sk-a"},
        ProviderConfig(Api.CHAT_COMPLETIONS, LOCAL, "llama3.1", None),
    ),
    (
        {
            "OPENAI_BASE_URL": "https://openrouter.ai/api/v1/",
            "OPENAI_LLM": "anthropic/claude-opus-5",
            "OPENAI_API_KEY": "sk-or",
        },
        ProviderConfig(Api.CHAT_COMPLETIONS, "https://openrouter.ai/api/v1", "anthropic/claude-opus-5", "sk-or"),
    ),
    # AUTOTOOL_PROVIDER=openai keeps the Responses API with a custom base URL.
    (
        {"AUTOTOOL_PROVIDER": "openai", "OPENAI_BASE_URL": LOCAL, "OPENAI_API_KEY": "sk-o"},
        ProviderConfig(Api.OPENAI_RESPONSES, LOCAL, "gpt-6-sol", "sk-o"),
    ),
    # AUTOTOOL_PROVIDER beats the order of the keys.
    (
        {
            "AUTOTOOL_PROVIDER": "anthropic",
            "OPENAI_API_KEY": "sk-o",
            "ANTHROPIC_API_KEY": "sk-a",
            "ANTHROPIC_MODEL": "claude-haiku-5",
        },
        ProviderConfig(Api.ANTHROPIC_MESSAGES, ANTHROPIC_BASE_URL, "claude-haiku-5", "sk-a"),
    ),
    (
        {"AUTOTOOL_PROVIDER": "Chat", "OPENAI_API_KEY": "sk-o"},
        ProviderConfig(Api.CHAT_COMPLETIONS, OPENAI_BASE_URL, "gpt-6-sol", "sk-o"),
    ),
    (
        {"OPENAI_API_KEY": "sk-o", "OPENAI_LLM": "gpt-6-mini", "ANTHROPIC_MODEL": "ignored"},
        ProviderConfig(Api.OPENAI_RESPONSES, OPENAI_BASE_URL, "gpt-6-mini", "sk-o"),
    ),
    # An Anthropic-compatible server of one's own needs no key.
    (
        {"AUTOTOOL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": "http://127.0.0.1:8080"},
        ProviderConfig(Api.ANTHROPIC_MESSAGES, "http://127.0.0.1:8080", "claude-opus-5", None),
    ),
    # Empty and blank values count as unset.
    (
        {"OPENAI_API_KEY": " ", "ANTHROPIC_API_KEY": "sk-a"},
        ProviderConfig(Api.ANTHROPIC_MESSAGES, ANTHROPIC_BASE_URL, "claude-opus-5", "sk-a"),
    ),
    ({}, "no model is configured"),
    ({"OPENAI_LLM": "gpt-6-sol"}, "no model is configured"),
    ({"OPENAI_BASE_URL": LOCAL, "ANTHROPIC_API_KEY": "sk-a"}, "set OPENAI_LLM"),
    ({"AUTOTOOL_PROVIDER": "openai", "ANTHROPIC_API_KEY": "sk-a"}, "needs OPENAI_API_KEY"),
    ({"AUTOTOOL_PROVIDER": "anthropic", "OPENAI_API_KEY": "sk-o"}, "needs ANTHROPIC_API_KEY"),
    ({"AUTOTOOL_PROVIDER": "gemini", "OPENAI_API_KEY": "sk-o"}, "AUTOTOOL_PROVIDER=gemini names no API"),
    ({"OPENAI_BASE_URL": "localhost:11434", "OPENAI_LLM": "m"}, "is not an http(s) URL"),
    ({"OPENAI_API_KEY": "sk-o", "AUTOTOOL_LLM_TIMEOUT": "soon"}, "AUTOTOOL_LLM_TIMEOUT=soon"),
]


@pytest.mark.parametrize(("variables", "expected"), CASES)
def test_the_provider_is_picked_from_variables(variables: dict[str, str], expected: ProviderConfig | str) -> None:
    if isinstance(expected, ProviderConfig):
        assert ProviderConfig.from_vars(variables) == expected
    else:
        with pytest.raises(llm.NotConfigured, match=expected.replace("(", r"\(").replace(")", r"\)")):
            ProviderConfig.from_vars(variables)


def test_timeout_describe_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ProviderConfig.from_vars({"OPENAI_API_KEY": "sk-o", "AUTOTOOL_LLM_TIMEOUT": "300"}).timeout == 300.0
    assert ProviderConfig.from_vars({"OPENAI_API_KEY": "sk-o"}).describe() == "openai-responses gpt-6-sol"
    assert ProviderConfig.from_vars({"ANTHROPIC_API_KEY": "sk-a"}).describe() == "anthropic-messages claude-opus-5"
    assert (
        ProviderConfig.from_vars({"OPENAI_BASE_URL": LOCAL, "OPENAI_LLM": "qwen3:8b"}).describe()
        == "chat-completions qwen3:8b at http://localhost:11434/v1"
    )
    assert "sk-secret" not in repr(ProviderConfig.from_vars({"OPENAI_API_KEY": "sk-secret"}))
    # Endpoints, an Anthropic root given with /v1 included.
    assert (
        ProviderConfig(Api.ANTHROPIC_MESSAGES, "http://127.0.0.1:9/v1", "m").endpoint()
        == "http://127.0.0.1:9/v1/messages"
    )
    assert ProviderConfig(Api.CHAT_COMPLETIONS, LOCAL + "/", "m").endpoint() == LOCAL + "/chat/completions"
    # default_provider() reads the process environment.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    require("anthropic")
    assert llm.default_provider().describe() == "anthropic-messages claude-opus-5"


def test_backoff_doubles_within_jitter_and_caps() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=0.5)
    for retry, full in [(0, 0.1), (1, 0.2), (2, 0.4), (3, 0.5), (30, 0.5)]:
        delay = policy.backoff(retry)
        assert full / 2 <= delay <= full, (retry, delay)


# ---------------------------------------------------------------------------------------------
# Each API's round trip


def responses_answer(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": output}


async def test_responses_round_trip(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    server.queue = [
        (
            200,
            responses_answer(
                [
                    {"type": "reasoning", "id": "rs_1", "summary": []},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
                    {
                        "type": "function_call",
                        "id": "fc_9",
                        "call_id": "call_9",
                        "name": "weather__now",
                        "arguments": '{"city":"Bergen"}',
                    },
                    {
                        "type": "function_call",
                        "id": "fc_10",
                        "call_id": "call_10",
                        "name": "clock__time",
                        "arguments": "oops",
                    },
                ]
            ),
        )
    ]
    provider = build({"AUTOTOOL_PROVIDER": "openai", "OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": base + "/v1"})
    turn = await provider.complete("Be brief.", HISTORY, TOOLS)
    assert turn.text == "Checking."
    assert turn.calls == (
        ToolCall("call_9", "weather__now", {"city": "Bergen"}),
        ToolCall("call_10", "clock__time", "oops"),
    )
    [(path, headers, body)] = server.requests
    assert path == "/v1/responses" and headers["authorization"] == "Bearer sk-o"
    assert body["store"] is False and body["instructions"] == "Be brief." and body["model"] == "gpt-6-sol"
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "What is the weather in Oslo?"},
        {"type": "message", "role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_1", "name": "weather__now", "arguments": '{"city":"Oslo"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "4 °C, rain"},
        {"type": "function_call", "call_id": "call_2", "name": "clock__time", "arguments": "{not json"},
        {"type": "function_call_output", "call_id": "call_2", "output": "Error: bad arguments"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather__now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": False,
            "description": "The weather now.",
        },
        {
            "type": "function",
            "name": "clock__time",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        },
    ]


async def test_chat_completions_round_trip(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    server.queue = [
        (
            200,
            {
                "id": "c1",
                "object": "chat.completion",
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "type": "function",
                                    "function": {"name": "weather__now", "arguments": '{"city":"Bergen"}'},
                                },
                                {"id": "x7", "type": "function", "function": {"name": "clock__time", "arguments": ""}},
                            ],
                        },
                    }
                ],
            },
        )
    ]
    provider = build({"OPENAI_BASE_URL": base + "/v1", "OPENAI_LLM": "llama3.1"})
    turn = await provider.complete("Be brief.", HISTORY, TOOLS)
    # A call without an id gets call_<n>; empty arguments are an empty object.
    assert turn.text is None
    assert turn.calls == (ToolCall("call_0", "weather__now", {"city": "Bergen"}), ToolCall("x7", "clock__time", {}))
    [(path, headers, body)] = server.requests
    assert path == "/v1/chat/completions" and "authorization" not in headers
    assert body["model"] == "llama3.1"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather__now", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4 °C, rain"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": "clock__time", "arguments": "{not json"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: bad arguments"},
    ]
    assert body["tools"][1] == {
        "type": "function",
        "function": {"name": "clock__time", "parameters": {"type": "object", "properties": {}}},
    }


async def test_chat_completions_with_a_key(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    server.queue = [(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]})]
    provider = build({"OPENAI_BASE_URL": base + "/v1", "OPENAI_LLM": "m", "OPENAI_API_KEY": "sk-or"})
    assert (await provider.complete("", [User("hi")], [])).text == "hi"
    [(_, headers, body)] = server.requests
    assert headers["authorization"] == "Bearer sk-or"
    assert "tools" not in body and body["messages"] == [{"role": "user", "content": "hi"}]


async def test_anthropic_messages_round_trip(replies: tuple[Replies, str]) -> None:
    require("anthropic")
    server, base = replies
    server.queue = [
        (
            200,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "stop_reason": "tool_use",
                "content": [
                    {"type": "thinking", "thinking": "…", "signature": "s"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather__now", "input": {"city": "Bergen"}},
                ],
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )
    ]
    # A root given with /v1 still reaches /v1/messages.
    provider = build({"ANTHROPIC_API_KEY": "sk-a", "ANTHROPIC_BASE_URL": base + "/v1"})
    turn = await provider.complete("Be brief.", HISTORY, TOOLS)
    assert turn.text == "Checking."
    assert turn.calls == (ToolCall("toolu_1", "weather__now", {"city": "Bergen"}),)
    [(path, _, body)] = server.requests
    assert path == "/v1/messages"
    assert body["system"] == "Be brief." and body["max_tokens"] == 16384 and body["model"] == "claude-opus-5"
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is the weather in Oslo?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_1", "name": "weather__now", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "4 °C, rain", "is_error": False}],
        },
        # Arguments that were not an object go back as an empty one.
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_2", "name": "clock__time", "input": {}}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_2", "content": "bad arguments", "is_error": True}],
        },
    ]
    assert body["tools"] == [
        {
            "name": "weather__now",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            "description": "The weather now.",
        },
        {"name": "clock__time", "input_schema": {"type": "object", "properties": {}}},
    ]


async def test_anthropic_results_come_before_text_and_a_local_server_gets_no_key(replies: tuple[Replies, str]) -> None:
    require("anthropic")
    server, base = replies
    server.queue = [(200, {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}]})]
    provider = build({"AUTOTOOL_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": base})
    history: list[llm.Item] = [
        User("go"),
        Assistant(None, (ToolCall("t1", "a", {}),)),
        ToolResult("t1", "a", "done"),
        User("and now?"),
    ]
    assert (await provider.complete("", history, [])).text == "ok"
    [(_, headers, body)] = server.requests
    assert "x-api-key" not in headers and "authorization" not in headers
    assert body["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "done", "is_error": False},
        {"type": "text", "text": "and now?"},
    ]


# ---------------------------------------------------------------------------------------------
# Retries and errors

CHAT_OK = (200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}}]})


def chat(base: str, **changes: Any) -> llm.Provider:
    return build({"OPENAI_BASE_URL": base + "/v1", "OPENAI_LLM": "m"}, **{"retry": FAST, **changes})


async def test_rate_limit_is_retried_after_the_wait_the_server_asks(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    server.queue = [
        (429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after-ms": "300"}),
        CHAT_OK,
    ]
    started = time.monotonic()
    assert (await chat(base).complete("", [User("hi")], [])).text == "fine"
    assert len(server.requests) == 2
    assert time.monotonic() - started >= 0.3  # the server's wait, not the short backoff


async def test_server_errors_are_retried_and_bounded(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    server.queue = [(503, {"error": "busy"}), (500, {"error": "oops"}), CHAT_OK]
    assert (await chat(base).complete("", [User("hi")], [])).text == "fine"
    assert len(server.requests) == 3
    server.requests.clear()
    server.queue = [(502, {"error": "down"})]
    with pytest.raises(llm.ServerError, match="HTTP 502"):
        await chat(base).complete("", [User("hi")], [])
    assert len(server.requests) == 1 + FAST.max_retries


async def test_what_is_not_retried(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    # A wait longer than autotool sleeps ends the attempt at once, naming the wait.
    server.queue = [(429, {"error": {"message": "later", "type": "rate_limit"}}, {"retry-after": "120"})]
    with pytest.raises(llm.RateLimited, match="asks to wait 120 s"):
        await chat(base).complete("", [User("hi")], [])
    # An exhausted quota: waiting does not pay the bill.
    server.queue = [
        (
            429,
            {
                "error": {
                    "message": "You exceeded your quota",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
        )
    ]
    with pytest.raises(llm.RateLimited, match="insufficient_quota"):
        await chat(base).complete("", [User("hi")], [])
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("reply", "error", "words"),
    [
        (
            (401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
            llm.BadKey,
            "check OPENAI_API_KEY",
        ),
        (
            (404, {"error": {"message": "The model `m` does not exist", "code": "model_not_found"}}),
            llm.UnknownModel,
            "OPENAI_LLM",
        ),
        (
            (400, {"error": "registry.ollama.ai/library/llama3:8b does not support tools"}),
            llm.NoToolCalling,
            "cannot call tools",
        ),
        (
            (404, {"error": {"message": "No endpoints found that support tool use.", "code": 404}}),
            llm.NoToolCalling,
            "tool calling",
        ),
        ((404, {"detail": "Not Found"}), llm.Rejected, "/v1/chat/completions does not exist"),
        ((422, {"message": "bad field"}), llm.Rejected, "HTTP 422: bad field"),
        ((200, {"unexpected": True}), llm.BadResponse, "choices"),
    ],
    ids=["bad-key", "unknown-model", "no-tools-ollama", "no-tools-openrouter", "not-found", "rejected", "wrong-shape"],
)
async def test_each_refusal_says_what_to_do(
    reply: fakes.Reply, error: type[Exception], words: str, replies: tuple[Replies, str]
) -> None:
    require("openai")
    server, base = replies
    server.queue = [reply]
    with pytest.raises(error, match=words):
        await chat(base).complete("", [User("hi")], [])
    assert len(server.requests) == 1


async def test_an_anthropic_bad_key_names_its_variable(replies: tuple[Replies, str]) -> None:
    require("anthropic")
    server, base = replies
    server.queue = [(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})]
    provider = build({"ANTHROPIC_API_KEY": "sk-a", "ANTHROPIC_BASE_URL": base}, retry=FAST)
    with pytest.raises(llm.BadKey, match="ANTHROPIC_API_KEY"):
        await provider.complete("", [User("hi")], [])


async def test_a_silent_server_times_out(replies: tuple[Replies, str]) -> None:
    require("openai")
    server, base = replies
    server.queue = [CHAT_OK]
    server.delay = 3.0
    started = time.monotonic()
    with pytest.raises(llm.ProviderTimeout, match="AUTOTOOL_LLM_TIMEOUT"):
        await chat(base, timeout=0.5).complete("", [User("hi")], [])
    # Not retried: one request, and well before the server would have answered.
    assert len(server.requests) == 1 and time.monotonic() - started < 2.5


async def test_a_server_that_is_not_there_is_reported() -> None:
    require("openai")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port now: every retry is refused at once.
    with pytest.raises(llm.Unreachable, match="cannot reach the model API"):
        await chat(f"http://127.0.0.1:{port}").complete("", [User("hi")], [])


def test_a_missing_sdk_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_anthropic(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "anthropic" or name.startswith("anthropic."):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "autotool.core._messages", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_anthropic)
    with pytest.raises(llm.NotConfigured, match=r"autotool-mcp\[models\]"):
        ProviderConfig.from_vars({"ANTHROPIC_API_KEY": "sk-a"}).build()
