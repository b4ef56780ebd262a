"""OpenAI's two APIs through the official `openai` SDK: the Responses API (`OpenAIResponses`)
and Chat Completions (`ChatCompletions`: OpenAI itself, Ollama, LM Studio, vLLM, OpenRouter).

Responses: the system prompt goes in `instructions`; the history in `input` as messages,
`function_call` items (the model's calls, without their item `id`) and `function_call_output`
items paired by `call_id`; requests carry `store: false`, so nothing is kept on OpenAI's side.
The answer's `output` holds `message` items (`output_text`, `refusal`) and `function_call`
items whose `arguments` are a JSON string.

Chat Completions: the system prompt is the first message; the model's calls are an assistant
message's `tool_calls` (arguments as a JSON string); each result is a `tool` message with its
`tool_call_id`. A call without an id (some local servers) gets `call_<n>`.

A failed call's result starts with `Error: `, since neither API has an error flag.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import openai

from ..tools import ToolDef, openai_chat_tools, openai_tools
from ._transport import NO_KEY, SdkErrors, error_detail, request
from .llm import (
    CONNECT_TIMEOUT,
    Assistant,
    BadResponse,
    Item,
    ProviderConfig,
    ToolCall,
    ToolResult,
    Turn,
    User,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam

ERRORS = SdkErrors(
    status=openai.APIStatusError,
    timeout=openai.APITimeoutError,
    connection=openai.APIConnectionError,
    validation=openai.APIResponseValidationError,
)


def arguments_text(arguments: object) -> str:
    """Arguments as the APIs carry them: the JSON text, or the model's own text when it was
    not JSON."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, separators=(",", ":"))


def parse_arguments(raw: str) -> object:
    """Arguments an API carried as a string, read back (not JSON: kept as the text)."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def result_text(output: str, is_error: bool) -> str:
    return f"Error: {output}" if is_error else output


def _client(config: ProviderConfig) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key=config.api_key or NO_KEY,
        base_url=config.base_url,
        timeout=openai.Timeout(config.timeout, connect=min(config.timeout, CONNECT_TIMEOUT)),
        max_retries=0,
    )


def _headers(config: ProviderConfig) -> dict[str, str | openai.Omit]:
    return {} if config.api_key else {"Authorization": openai.omit}


def _dict(model: object) -> dict[str, Any]:
    to_dict = getattr(model, "to_dict", None)
    if to_dict is None:
        raise BadResponse(f"an answer of type {type(model).__name__}")
    value = to_dict(mode="json")
    if not isinstance(value, dict):
        raise BadResponse("the answer is not a JSON object")
    return value


class OpenAIResponses:
    """OpenAI's Responses API."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.client = _client(config)

    def describe(self) -> str:
        return self.config.describe()

    def __repr__(self) -> str:
        return f"OpenAIResponses({self.describe()!r})"

    async def complete(self, system: str, history: Sequence[Item], tools: Sequence[ToolDef]) -> Turn:
        items = request_input(history)

        async def send() -> Any:
            if tools:
                return await self.client.responses.create(
                    model=self.config.model,
                    input=items,
                    store=False,
                    instructions=system or openai.omit,
                    tools=openai_tools(tools),
                    extra_headers=_headers(self.config),
                )
            return await self.client.responses.create(
                model=self.config.model,
                input=items,
                store=False,
                instructions=system or openai.omit,
                extra_headers=_headers(self.config),
            )

        return parse_response(_dict(await request(self.config, ERRORS, send)))


def request_input(history: Sequence[Item]) -> list[ResponseInputItemParam]:
    """The conversation as Responses API `input` items."""
    items: list[ResponseInputItemParam] = []
    for item in history:
        if isinstance(item, User):
            items.append({"type": "message", "role": "user", "content": item.text})
        elif isinstance(item, Assistant):
            if item.text:
                items.append({"type": "message", "role": "assistant", "content": item.text})
            for call in item.calls:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": arguments_text(call.arguments),
                    }
                )
        elif isinstance(item, ToolResult):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": item.call_id,
                    "output": result_text(item.output, item.is_error),
                }
            )
    return items


def parse_response(answer: Mapping[str, Any]) -> Turn:
    """The model's turn in a Responses API answer."""
    error = answer.get("error")
    if error:
        message = error.get("message", "") if isinstance(error, Mapping) else str(error)
        raise BadResponse(f"the response failed: {message}")
    output = answer.get("output")
    if not isinstance(output, list):
        raise BadResponse("no `output` array in the answer")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in output:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if not isinstance(part, Mapping):
                    continue
                text = {"output_text": part.get("text"), "refusal": part.get("refusal")}.get(str(part.get("type")))
                if isinstance(text, str):
                    texts.append(text)
        elif kind == "function_call":
            fields = {}
            for name in ("call_id", "name"):
                value = item.get(name)
                if not isinstance(value, str):
                    raise BadResponse(f"a function_call without `{name}`")
                fields[name] = value
            raw = item.get("arguments")
            calls.append(
                ToolCall(fields["call_id"], fields["name"], parse_arguments(raw if isinstance(raw, str) else ""))
            )
        # Reasoning and other items are the model's own business.
    text = "\n".join(texts)
    return Turn(text or None, tuple(calls))


class ChatCompletions:
    """A Chat Completions server."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.client = _client(config)

    def describe(self) -> str:
        return self.config.describe()

    def __repr__(self) -> str:
        return f"ChatCompletions({self.describe()!r})"

    async def complete(self, system: str, history: Sequence[Item], tools: Sequence[ToolDef]) -> Turn:
        messages = chat_messages(system, history)

        async def send() -> Any:
            if tools:
                return await self.client.chat.completions.create(
                    model=self.config.model,
                    messages=messages,
                    tools=openai_chat_tools(tools),
                    extra_headers=_headers(self.config),
                )
            return await self.client.chat.completions.create(
                model=self.config.model, messages=messages, extra_headers=_headers(self.config)
            )

        return parse_chat(_dict(await request(self.config, ERRORS, send)))


def chat_messages(system: str, history: Sequence[Item]) -> list[ChatCompletionMessageParam]:
    """The conversation as Chat Completions `messages`."""
    messages: list[ChatCompletionMessageParam] = []
    if system:
        messages.append({"role": "system", "content": system})
    for item in history:
        if isinstance(item, User):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, Assistant):
            if item.calls:
                # Null content only beside calls: some servers refuse a message with neither.
                messages.append(
                    {
                        "role": "assistant",
                        "content": item.text,
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": arguments_text(call.arguments)},
                            }
                            for call in item.calls
                        ],
                    }
                )
            else:
                messages.append({"role": "assistant", "content": item.text or ""})
        elif isinstance(item, ToolResult):
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.call_id,
                    "content": result_text(item.output, item.is_error),
                }
            )
    return messages


def parse_chat(answer: Mapping[str, Any]) -> Turn:
    """The model's turn in a Chat Completions answer."""
    # Some gateways (OpenRouter) report a failed upstream with 200 and an `error` object.
    if "choices" not in answer and "error" in answer:
        raise BadResponse(f"an error instead of an answer: {error_detail(200, json.dumps(answer))}")
    choices = answer.get("choices")
    message = (
        choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else None
    )
    if not isinstance(message, Mapping):
        raise BadResponse("no `choices[0].message` in the answer")
    content = message.get("content")
    text = content if isinstance(content, str) and content else None
    calls: list[ToolCall] = []
    for index, call in enumerate(message.get("tool_calls") or []):
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise BadResponse("a tool call without `function`")
        name = function.get("name")
        if not isinstance(name, str):
            raise BadResponse("a tool call without a name")
        # Arguments are a JSON string by the API; some local servers send the object itself.
        raw = function.get("arguments")
        arguments: object = parse_arguments(raw) if isinstance(raw, str) else ({} if raw is None else raw)
        # Some local servers leave the id out; the result must still be paired with the call.
        call_id = call.get("id")
        calls.append(ToolCall(call_id if isinstance(call_id, str) and call_id else f"call_{index}", name, arguments))
    return Turn(text, tuple(calls))
