"""The snippets of docs/python.md, run exactly as they are written there, against the scripted
model on 127.0.0.1 (each API through its official SDK's base URL) and the Hacker-News-like API.

The quick start runs as its own Python process, its `input()` answered on stdin, as a user
would run it; the own-loop fragment runs with top-level `await`, given the `name` and
`arguments` a model would have asked for.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import fakes
from conftest import require, snippet

QUICKSTART_TIMEOUT = 180


def run_snippet(code: str, env: dict[str, str], stdin: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "snippet.py"
    path.write_text(code)
    return subprocess.run(
        [sys.executable, str(path)],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=QUICKSTART_TIMEOUT,
    )


def model_env(api: str, base: str) -> dict[str, str]:
    """The variables that point `default_provider()` at the scripted model, per API."""
    if api == "responses":
        # AUTOTOOL_PROVIDER=openai keeps the Responses API at a base URL of one's own.
        return {"OPENAI_API_KEY": "sk-test-openai", "OPENAI_BASE_URL": base + "/v1", "AUTOTOOL_PROVIDER": "openai"}
    if api == "chat":
        return {"OPENAI_BASE_URL": base + "/v1", "OPENAI_LLM": "scripted-chat"}
    return {"ANTHROPIC_API_KEY": "sk-test-anthropic", "ANTHROPIC_BASE_URL": base}


def created(model: fakes.ModelServer) -> list[str]:
    """The names of the tools the model asked create_tool for, over every request it got."""
    names: list[str] = []
    for _, _, body in model.requests:
        for call in _calls(body):
            if call[0] == "create_tool":
                names.append(str(call[1].get("name")))
    return sorted(set(names))


def create_tool_description(body: dict[str, Any]) -> str:
    """create_tool's description in a request of any of the three APIs."""
    for tool in body.get("tools") or []:
        function = tool.get("function") or tool
        if function.get("name") == "create_tool":
            return str(function.get("description", ""))
    raise AssertionError("create_tool was not offered")


def _calls(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    import json

    out: list[tuple[str, dict[str, Any]]] = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "function_call":
            out.append((item["name"], json.loads(item.get("arguments") or "{}")))
    for message in body.get("messages") or []:
        for call in message.get("tool_calls") or []:
            out.append((call["function"]["name"], json.loads(call["function"].get("arguments") or "{}")))
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.append((block["name"], block.get("input") or {}))
    return out


@pytest.mark.parametrize("api", ["responses", "chat", "anthropic"])
def test_quickstart_consent_accepted(
    api: str, hn: fakes.HnApi, model: tuple[fakes.ModelServer, str], tmp_path: Path
) -> None:
    require("anthropic" if api == "anthropic" else "openai")
    server, base = model
    env = dict(os.environ, **model_env(api, base))
    done = run_snippet(snippet("quickstart"), env, "y\n", tmp_path)
    assert done.returncode == 0, done.stderr
    # The question: asked once, naming the tool and the key, never the key's value.
    assert done.stdout.count("[y/N]") == 1, done.stdout
    question = done.stdout.split("[y/N]")[0]
    assert "`hn`" in question and "HN_API_KEY" in question, question
    assert hn.key not in done.stdout + done.stderr
    # The tool ran with the key and the answer carries what it fetched.
    assert f"Bearer {hn.key}" in hn.seen
    for title in fakes.TOP3:
        assert title in done.stdout, done.stdout
    assert fakes.STORIES[3][1] not in done.stdout
    assert created(server) == ["hn"]
    # Every request went to the API the rules picked, through its SDK.
    paths = {path for path, _, _ in server.requests}
    assert paths == {{"responses": "/v1/responses", "chat": "/v1/chat/completions", "anthropic": "/v1/messages"}[api]}
    headers = server.requests[0][1]
    if api == "responses":
        assert headers.get("authorization") == "Bearer sk-test-openai"
        assert all(body.get("store") is False for _, _, body in server.requests)
    elif api == "chat":
        # A server of one's own with no key set: no Authorization header at all.
        assert "authorization" not in headers
    else:
        # The key as the SDK sends it (anthropic 2.x: a bearer token; older ones: x-api-key).
        sent = {headers.get("x-api-key"), headers.get("authorization")}
        assert sent & {"sk-test-anthropic", "Bearer sk-test-anthropic"}, headers
        assert headers.get("anthropic-version"), "the SDK names the API version it speaks"
    assert any("stainless" in k for k in headers), "the request did not come through an official SDK"
    # serve did not get the model's key: the key names offered to the model (create_tool's
    # description) name HN_API_KEY and no model variable (test_client shows the control).
    described = create_tool_description(server.requests[0][2])
    assert "HN_API_KEY" in described
    assert "OPENAI_API_KEY" not in described and "ANTHROPIC_API_KEY" not in described


@pytest.mark.parametrize("answer", ["n\n", None], ids=["declined", "no-terminal"])
def test_quickstart_consent_declined(
    answer: str | None, hn: fakes.HnApi, model: tuple[fakes.ModelServer, str], tmp_path: Path
) -> None:
    require("openai")
    server, base = model
    env = dict(os.environ, **model_env("responses", base))
    done = run_snippet(snippet("quickstart"), env, answer, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "HN_API_KEY" in done.stdout.split("[y/N]")[0]
    # Nothing ran with the key: the API was never reached, and the model was told how to approve.
    assert hn.seen == []
    outputs = [
        i["output"] for _, _, b in server.requests for i in b["input"] if i.get("type") == "function_call_output"
    ]
    assert len(outputs) == 1 and outputs[0].startswith("Error: consent needed"), outputs
    assert "consent needed" in done.stdout, done.stdout
    assert "autotool tools approve hn HN_API_KEY" in done.stdout
    for title in fakes.TOP3:
        assert title not in done.stdout


def test_quickstart_second_run_finds_the_tool(
    hn: fakes.HnApi, model: tuple[fakes.ModelServer, str], tmp_path: Path
) -> None:
    require("openai")
    server, base = model
    env = dict(os.environ, **model_env("responses", base))
    first = run_snippet(snippet("quickstart"), env, "y\n", tmp_path)
    assert first.returncode == 0, first.stderr
    assert created(server) == ["hn"]
    server.requests.clear()
    second = run_snippet(snippet("quickstart"), env, "y\n", tmp_path)
    assert second.returncode == 0, second.stderr
    # Listed from the first request on, called without a create, and not asked about again.
    first_tools = [t.get("name") for t in server.requests[0][2].get("tools") or []]
    assert "hn__top_stories" in first_tools
    assert created(server) == []
    assert "[y/N]" not in second.stdout
    for title in fakes.TOP3:
        assert title in second.stdout


async def test_own_loop_fragment(tmp_path: Path) -> None:
    """The fragment, unchanged, with top-level await; the model asked for create_tool."""
    import autotool

    code = compile(snippet("own-loop-fragment"), "<docs/python.md>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    scope: dict[str, Any] = {
        "autotool": autotool,
        "name": "create_tool",
        "arguments": {"name": "adder", "code": fakes.ADDER_TOOL},
    }
    await eval(code, scope)
    listed, tools, result = scope["listed"], scope["tools"], scope["result"]
    assert [t.name for t in listed] == ["create_tool", "run_tool", "search_tools", "tool_info"]
    assert [t["name"] for t in tools] == ["create_tool", "run_tool", "search_tools", "tool_info"]
    assert all(t["type"] == "function" and t["strict"] is False for t in tools)
    assert not autotool.is_error(result), autotool.result_text(result)
    assert "adder__add" in autotool.result_text(result)


def test_own_loop(model: tuple[fakes.ModelServer, str], tmp_path: Path) -> None:
    require("openai")
    server, base = model
    env = dict(os.environ, OPENAI_API_KEY="sk-test-openai", OPENAI_BASE_URL=base + "/v1")
    done = run_snippet(snippet("own-loop"), env, "", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "5555" in done.stdout, done.stdout
    assert created(server) == ["adder"]
    # The second request offered the tool the first one created.
    offered = [t.get("name") for t in server.requests[1][2].get("tools") or []]
    assert "adder__add" in offered
