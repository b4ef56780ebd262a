"""The tools serve lists, as each model API's tool definitions, and a result's text.

The same conversions as the Rust agent library (`docs/providers.md`, "How each API carries a
tool round trip"):

- OpenAI Responses: `{"type": "function", name, description, parameters, "strict": False}`
  (strict mode would need every property required, which MCP schemas do not promise);
- OpenAI Chat Completions: `{"type": "function", "function": {name, description, parameters}}`;
- Anthropic Messages: `{name, description, input_schema}`.

An MCP schema that is only `{"type": "object"}` gets `"properties": {}`, which some APIs require.
A tool's description is its `description`, else its `title`; an empty one is left out.

The results are plain dicts; to a type checker they are the SDKs' own parameter types
(`openai.types.responses.FunctionToolParam`, `openai.types.chat.ChatCompletionFunctionToolParam`,
`anthropic.types.ToolParam`), so they go straight into `client.responses.create(tools=...)`,
`client.chat.completions.create(tools=...)` and `client.messages.create(tools=...)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import mcp.types as types

if TYPE_CHECKING:
    from anthropic.types import ToolParam
    from openai.types.chat import ChatCompletionFunctionToolParam
    from openai.types.responses import FunctionToolParam

Listed = types.ListToolsResult | Iterable[types.Tool | Mapping[str, Any]]
"""What the conversions accept: a `tools/list` result, or its tools (SDK objects of either SDK
generation, or the JSON objects themselves)."""


@dataclass(frozen=True)
class ToolDef:
    """A tool a model may call, in no API's shape."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """A JSON Schema for the arguments (an object schema, as MCP's `inputSchema`)."""

    @staticmethod
    def from_mcp(tool: types.Tool | Mapping[str, Any]) -> ToolDef:
        wire = _wire(tool)
        schema = wire.get("inputSchema")
        return ToolDef(
            name=str(wire.get("name", "")),
            description=str(wire.get("description") or wire.get("title") or ""),
            input_schema=dict(schema) if isinstance(schema, Mapping) else {},
        )

    def parameters(self) -> dict[str, object]:
        """The arguments schema as the APIs accept it: an object schema with `properties`."""
        schema: dict[str, object] = dict(self.input_schema)
        schema.setdefault("type", "object")
        if schema.get("type") == "object":
            schema.setdefault("properties", {})
        return schema


def _wire(tool: object) -> dict[str, Any]:
    if isinstance(tool, Mapping):
        return dict(cast(Mapping[str, Any], tool))
    if isinstance(tool, ToolDef):
        return {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
    dump = getattr(tool, "model_dump", None)
    if dump is None:
        raise TypeError(f"expected an MCP tool or a mapping, not {type(tool).__name__}")
    return cast(dict[str, Any], dump(by_alias=True, mode="json", exclude_none=True))


def tool_defs(listed: Listed | Iterable[ToolDef]) -> list[ToolDef]:
    """The tools of `listed` as `ToolDef`s."""
    tools = getattr(listed, "tools", listed)
    return [t if isinstance(t, ToolDef) else ToolDef.from_mcp(t) for t in cast(Iterable[Any], tools)]


@overload
def openai_tools(
    listed: Listed | Iterable[ToolDef], *, api: Literal["responses"] = "responses"
) -> list[FunctionToolParam]: ...


@overload
def openai_tools(
    listed: Listed | Iterable[ToolDef], *, api: Literal["chat"]
) -> list[ChatCompletionFunctionToolParam]: ...


def openai_tools(
    listed: Listed | Iterable[ToolDef], *, api: Literal["responses", "chat"] = "responses"
) -> list[FunctionToolParam] | list[ChatCompletionFunctionToolParam]:
    """OpenAI function tools: the Responses API's (default), or with `api="chat"` the Chat
    Completions API's (the same as `openai_chat_tools`)."""
    if api == "chat":
        return openai_chat_tools(listed)
    if api != "responses":
        raise ValueError(f"api must be 'responses' or 'chat', not {api!r}")
    out: list[FunctionToolParam] = []
    for t in tool_defs(listed):
        tool: FunctionToolParam = {
            "type": "function",
            "name": t.name,
            "parameters": t.parameters(),
            "strict": False,
        }
        if t.description:
            tool["description"] = t.description
        out.append(tool)
    return out


def openai_chat_tools(listed: Listed | Iterable[ToolDef]) -> list[ChatCompletionFunctionToolParam]:
    """Chat Completions function tools (OpenAI, and compatible servers: Ollama, vLLM, ...)."""
    out: list[ChatCompletionFunctionToolParam] = []
    for t in tool_defs(listed):
        tool: ChatCompletionFunctionToolParam = {
            "type": "function",
            "function": {"name": t.name, "parameters": t.parameters()},
        }
        if t.description:
            tool["function"]["description"] = t.description
        out.append(tool)
    return out


def anthropic_tools(listed: Listed | Iterable[ToolDef]) -> list[ToolParam]:
    """Anthropic Messages API tool definitions."""
    out: list[ToolParam] = []
    for t in tool_defs(listed):
        tool: ToolParam = {"name": t.name, "input_schema": t.parameters()}
        if t.description:
            tool["description"] = t.description
        out.append(tool)
    return out


def result_text(result: types.CallToolResult | Mapping[str, Any]) -> str:
    """A call result's text blocks, joined by newlines: what goes back to the model. (autotool
    redacted every key value from it before it left serve.)"""
    wire = _wire(result)
    blocks = wire.get("content") or []
    return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")


def is_error(result: types.CallToolResult | Mapping[str, Any]) -> bool:
    """Whether a call result reports a failure (`isError`)."""
    return _wire(result).get("isError") is True
