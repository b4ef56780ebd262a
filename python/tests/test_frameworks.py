"""The framework examples of docs/python.md, as written there, against `autotool serve` (the
wheel's, in CI): the OpenAI Agents SDK's `MCPServerStdio` on the scripted model's Responses
API, and LangChain's MCP adapters with a kept session and in their default stateless mode.

How many serve processes each example starts is counted: `AUTOTOOL_BIN` points at a wrapper
that notes each start in a file and execs the real binary, so the examples' own
`autotool.autotool_binary()` picks it up unchanged.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import fakes
from autotool._binary import autotool_binary
from conftest import require, snippet

TIMEOUT = 180


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """AUTOTOOL_BIN is a wrapper that appends a line to the returned file per start."""
    real = autotool_binary()
    starts = tmp_path / "serve-starts"
    wrapper = tmp_path / "autotool-counted"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{starts}"\nexec "{real}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("AUTOTOOL_BIN", str(wrapper))
    return starts


def run(
    code: str, env: dict[str, str], cwd: Path, args: tuple[str, ...] = (), stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    path = cwd / "example.py"
    path.write_text(code)
    return subprocess.run(
        [sys.executable, str(path), *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=TIMEOUT,
    )


def starts(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_openai_agents_sdk(model: tuple[fakes.ModelServer, str], counted: Path, tmp_path: Path) -> None:
    require("agents")
    server, base = model
    env = dict(os.environ, OPENAI_API_KEY="sk-test-openai", OPENAI_BASE_URL=base + "/v1")
    done = run(snippet("agents-sdk"), env, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "5555" in done.stdout, done.stdout
    # The agent created the tool, saw it listed on its next turn, and called it; one serve.
    assert starts(counted) == ["serve"]
    names = [[t.get("name") for t in body.get("tools") or []] for _, _, body in server.requests]
    assert "create_tool" in names[0] and "adder__add" not in names[0]
    assert "adder__add" in names[1]
    outputs = [
        i for _, _, body in server.requests for i in body.get("input") or [] if i.get("type") == "function_call_output"
    ]
    assert any("5555" in str(i.get("output")) for i in outputs)


def test_langchain_session(counted: Path, tmp_path: Path) -> None:
    require("langchain_mcp_adapters")
    done = run(snippet("langchain-session"), dict(os.environ), tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    # LangChain prints each result as its content blocks: the create's, then the call's.
    created, called = done.stdout.strip().splitlines()
    assert "Created adder v1: mounted adder__add" in created, done.stdout
    assert "'text': '5555'" in called, done.stdout
    # A kept session: one serve for the create, the listing and the call.
    assert starts(counted) == ["serve"]


@pytest.mark.parametrize("answer", ["y", "n"])
def test_langchain_consent(answer: str, hn: fakes.HnApi, counted: Path, tmp_path: Path) -> None:
    """The consent example: the question reaches `input()` through LangChain's elicitation
    callback; yes mounts the tool, no mounts nothing and names the approve command."""
    require("langchain_mcp_adapters")
    tool = tmp_path / "hn.py"
    tool.write_text(fakes.HN_TOOL)
    done = run(snippet("langchain-consent"), dict(os.environ), tmp_path, (str(tool),), answer + "\n")
    assert done.returncode == 0, done.stderr[-4000:]
    # The question went to input(), naming the tool and the key, never the value.
    assert "Allow the tool `hn` to use HN_API_KEY?" in done.stdout and hn.key not in done.stdout, done.stdout
    created, functions = done.stdout.strip().splitlines()[-2:]
    if answer == "y":
        assert "Created hn v1: mounted hn__top_stories" in created, done.stdout
        assert functions == "['hn__top_stories']", done.stdout
    else:
        assert "autotool tools approve hn HN_API_KEY" in created, done.stdout
        assert functions == "[]", done.stdout
    assert starts(counted) == ["serve"]


def test_langchain_stateless_starts_a_serve_per_call(counted: Path, tmp_path: Path) -> None:
    require("langchain_mcp_adapters")
    done = run(snippet("langchain-stateless"), dict(os.environ), tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    # Two answers of search_tools (nothing is created here, so neither finds a tool).
    answers = done.stdout.strip().splitlines()
    assert len(answers) == 2 and all('No tool matches "adder"' in a for a in answers), done.stdout
    # One serve to list the tools, then one more for each of the two calls.
    assert starts(counted) == ["serve", "serve", "serve"]
