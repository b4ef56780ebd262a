"""Anthropic's Messages API through the official `anthropic` SDK.

The system prompt goes in `system`; the history in `messages`, alternating `user` and
`assistant`: the model's calls are `tool_use` blocks (`id`, `name`, `input` object) of an
assistant message, their results `tool_result` blocks (`tool_use_id`, `content`, `is_error`)
of the next user message, ahead of any text. The answer's `content` holds `text` and
`tool_use` blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anthropic

from ..tools import ToolDef, anthropic_tools
from ._transport import NO_KEY, SdkErrors, request
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
    from anthropic.types import MessageParam

ERRORS = SdkErrors(
    status=anthropic.APIStatusError,
    timeout=anthropic.APITimeoutError,
    connection=anthropic.APIConnectionError,
    validation=anthropic.APIResponseValidationError,
)


def sdk_base_url(base_url: str) -> str:
    """The root the SDK wants (it appends `/v1/messages`): a root given with `/v1` loses it."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url


class AnthropicMessages:
    """The Messages API."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        self.client = anthropic.AsyncAnthropic(
            api_key=config.api_key or NO_KEY,
            base_url=sdk_base_url(config.base_url),
            timeout=anthropic.Timeout(config.timeout, connect=min(config.timeout, CONNECT_TIMEOUT)),
            max_retries=0,
        )

    def describe(self) -> str:
        return self.config.describe()

    def __repr__(self) -> str:
        return f"AnthropicMessages({self.describe()!r})"

    def _headers(self) -> dict[str, str | anthropic.Omit]:
        if self.config.api_key:
            return {}
        return {"X-Api-Key": anthropic.omit, "Authorization": anthropic.omit}

    async def complete(self, system: str, history: Sequence[Item], tools: Sequence[ToolDef]) -> Turn:
        messages = request_messages(history)

        async def send() -> Any:
            return await self.client.messages.create(
                model=self.config.model,
                max_tokens=self.config.max_tokens,
                messages=messages,
                system=system or anthropic.omit,
                tools=anthropic_tools(tools) if tools else anthropic.omit,
                extra_headers=self._headers(),
            )

        answer = await request(self.config, ERRORS, send)
        to_dict = getattr(answer, "to_dict", None)
        if to_dict is None:
            raise BadResponse(f"an answer of type {type(answer).__name__}")
        return parse_message(to_dict(mode="json"))


def request_messages(history: Sequence[Item]) -> list[MessageParam]:
    """The conversation as Messages API `messages`: consecutive items of one role make one
    message, and a user message holds its tool results before any text."""
    grouped: list[tuple[str, list[dict[str, Any]]]] = []

    def push(role: str, block: dict[str, Any]) -> None:
        if grouped and grouped[-1][0] == role:
            grouped[-1][1].append(block)
        else:
            grouped.append((role, [block]))

    for item in history:
        if isinstance(item, User):
            if item.text:
                push("user", {"type": "text", "text": item.text})
        elif isinstance(item, Assistant):
            if item.text:
                push("assistant", {"type": "text", "text": item.text})
            for call in item.calls:
                arguments = dict(call.arguments) if isinstance(call.arguments, Mapping) else {}
                push("assistant", {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
        elif isinstance(item, ToolResult):
            push(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": item.call_id,
                    "content": item.output,
                    "is_error": item.is_error,
                },
            )
    messages: list[MessageParam] = []
    for role, blocks in grouped:
        # Results first: text after them is allowed, before them it is refused.
        blocks.sort(key=lambda b: b.get("type") != "tool_result")
        message: Any = {"role": role, "content": blocks}
        messages.append(message)
    return messages


def parse_message(answer: Mapping[str, Any]) -> Turn:
    """The model's turn in a Messages API answer."""
    content = answer.get("content")
    if not isinstance(content, list):
        raise BadResponse("no `content` array in the answer")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            fields = {}
            for name in ("id", "name"):
                value = block.get(name)
                if not isinstance(value, str):
                    raise BadResponse(f"a tool_use block without `{name}`")
                fields[name] = value
            arguments = block.get("input")
            calls.append(ToolCall(fields["id"], fields["name"], arguments if arguments is not None else {}))
        # Thinking blocks and the like are the model's own business.
    text = "\n".join(texts)
    return Turn(text or None, tuple(calls))
