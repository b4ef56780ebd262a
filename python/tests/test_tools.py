"""`openai_tools`, `openai_chat_tools` and `anthropic_tools` on what serve lists, validated
against each SDK's own types: the pydantic models of the OpenAI SDK, and each SDK's request
parameter TypedDicts (required keys present, no key they do not define, values of their types)."""

from __future__ import annotations

from typing import Any, get_type_hints

import mcp.types as types
import pytest
from pydantic import TypeAdapter

import autotool
import fakes
from conftest import require


def check_typed_dict(value: dict[str, Any], typed_dict: Any) -> None:
    """`value` is a `typed_dict`: its required keys, only its keys, each of its type."""
    keys = set(get_type_hints(typed_dict))
    assert typed_dict.__required_keys__ <= value.keys(), (typed_dict.__name__, value.keys())
    assert value.keys() <= keys, (typed_dict.__name__, value.keys() - keys)
    TypeAdapter(typed_dict).validate_python(value, strict=True)


@pytest.fixture
async def listed() -> list[types.Tool]:
    """serve's listing with a created tool in it (its functions have output schemas)."""
    async with autotool.connect(quiet=True) as client:
        created = await client.call_tool("create_tool", {"name": "adder", "code": fakes.ADDER_TOOL})
        assert not autotool.is_error(created), autotool.result_text(created)
        tools = await client.list_tools()
    assert sorted(t.name for t in tools) == [
        "adder__add",
        "create_tool",
        "run_tool",
        "search_tools",
        "tool_info",
    ]
    return tools


def test_openai_responses_tools(listed: list[types.Tool]) -> None:
    require("openai")
    from openai.types.responses import FunctionTool, FunctionToolParam

    tools = autotool.openai_tools(listed)
    assert [t["name"] for t in tools] == [t.name for t in listed]
    for tool, source in zip(tools, listed, strict=True):
        check_typed_dict(dict(tool), FunctionToolParam)
        FunctionTool.model_validate(tool, strict=True)
        assert tool["type"] == "function" and tool["strict"] is False
        assert tool.get("description") == source.description
        params = tool["parameters"]
        assert params is not None and params["type"] == "object" and "properties" in params
    [add] = [t["parameters"] for t in tools if t["name"] == "adder__add"]
    assert add is not None and add["required"] == ["a", "b"]


def test_openai_chat_tools(listed: list[types.Tool]) -> None:
    require("openai")
    from openai.types.chat import ChatCompletionFunctionTool, ChatCompletionFunctionToolParam
    from openai.types.shared_params import FunctionDefinition

    tools = autotool.openai_chat_tools(listed)
    assert tools == autotool.openai_tools(listed, api="chat")
    for tool in tools:
        check_typed_dict(dict(tool), ChatCompletionFunctionToolParam)
        check_typed_dict(dict(tool["function"]), FunctionDefinition)
        ChatCompletionFunctionTool.model_validate(tool, strict=True)
    assert [t["function"]["name"] for t in tools] == [t.name for t in listed]


def test_anthropic_tools(listed: list[types.Tool]) -> None:
    require("anthropic")
    from anthropic.types import ToolParam

    tools = autotool.anthropic_tools(listed)
    for tool, source in zip(tools, listed, strict=True):
        check_typed_dict(dict(tool), ToolParam)
        assert tool["name"] == source.name
        assert tool["input_schema"]["type"] == "object"
        assert tool.get("description") == source.description


def test_conversions_follow_the_rust_rules() -> None:
    """The cases of the Rust library's conversions (own_model/agent): an object schema gets
    `properties`; the description falls back to the title; an empty one is left out; any
    listing shape is accepted."""
    wire = [
        {"name": "bare", "inputSchema": {"type": "object"}},
        {
            "name": "titled",
            "title": "A title",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {"name": "described", "description": "Says so.", "title": "ignored", "inputSchema": {"type": "object"}},
    ]
    responses = autotool.openai_tools(wire)
    assert responses == [
        {"type": "function", "name": "bare", "parameters": {"type": "object", "properties": {}}, "strict": False},
        {
            "type": "function",
            "name": "titled",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            "strict": False,
            "description": "A title",
        },
        {
            "type": "function",
            "name": "described",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
            "description": "Says so.",
        },
    ]
    assert autotool.openai_chat_tools(wire)[0] == {
        "type": "function",
        "function": {"name": "bare", "parameters": {"type": "object", "properties": {}}},
    }
    assert autotool.anthropic_tools(wire)[2] == {
        "name": "described",
        "input_schema": {"type": "object", "properties": {}},
        "description": "Says so.",
    }
    # SDK objects, a whole ListToolsResult, and ToolDefs convert alike.
    as_objects = [types.Tool.model_validate(t) for t in wire]
    assert autotool.openai_tools(as_objects) == responses
    assert autotool.openai_tools(types.ListToolsResult(tools=as_objects)) == responses
    assert autotool.openai_tools(autotool.tool_defs(wire)) == responses
    with pytest.raises(ValueError, match="responses"):
        autotool.openai_tools(wire, api="completions")  # type: ignore[call-overload]


def test_result_text() -> None:
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text="one"), types.TextContent(type="text", text="two")]
    )
    assert autotool.result_text(result) == "one\ntwo"
    assert not autotool.is_error(result)
    assert autotool.is_error({"content": [], "isError": True})
