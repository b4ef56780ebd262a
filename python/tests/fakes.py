"""What the tests serve themselves on 127.0.0.1: a Hacker-News-like API that wants a key, and a
scripted model speaking the three APIs autotool's providers speak (OpenAI Responses, OpenAI
Chat Completions, Anthropic Messages), reached by the official SDKs through their base URLs.

The scripted model plays an agent growing a tool: on a task about Hacker News it writes `hn`
(declaring `HN_API_KEY`, reading `HN_API_BASE`), then calls `hn__top_stories` and answers with
what it returned; on an addition it writes the keyless `adder` and calls `adder__add`. A tool
already listed is called at once, with no create. A failed create ends the run with an answer
quoting the failure. Each request is recorded (path, headers, body) for the tests to check.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STORIES = [
    (101, "A sandbox for agent-written tools", 412),
    (102, "Landlock in practice", 287),
    (103, "Why your MCP server needs an egress proxy", 198),
    (104, "Show HN: a tiny HTTP/1.1 parser", 77),
]
TOP3 = [title for _, title, _ in STORIES[:3]]

HN_TOOL = '''import os
import httpx2
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

REQUIRED_ENV = ["HN_API_KEY"]
mcp = MCPServer("hn")


def _get(path: str):
    r = httpx2.get(
        os.environ["HN_API_BASE"] + path,
        headers={"Authorization": "Bearer " + os.environ.get("HN_API_KEY", "")},
        timeout=10,
    )
    if r.status_code != 200:
        raise ToolError(f"the API said {r.status_code}: {r.text[:200]}")
    return r.json()


@mcp.tool()
def top_stories(limit: int = 3) -> str:
    """The top stories, one per line: title and points."""
    ids = _get("/v0/topstories.json")[: max(0, min(limit, 10))]
    items = [_get(f"/v0/item/{i}.json") for i in ids]
    return "\\n".join(f"{it['title']} ({it['score']} points)" for it in items)


if __name__ == "__main__":
    mcp.run()
'''

ADDER_TOOL = '''from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = []
mcp = MCPServer("adder")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    mcp.run()
'''


# ---------------------------------------------------------------------------------------------
# Loopback servers


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        del format, args

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(min(length, 8 << 20)) if length else b""

    def _answer(self, reply: Reply) -> None:
        status, body, *rest = reply
        headers = rest[0] if rest else {}
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(self.server.route("GET", self.path, dict(self.headers.items()), b""))

    def do_POST(self) -> None:
        self._answer(self.server.route("POST", self.path, dict(self.headers.items()), self._body()))


Reply = tuple[int, object] | tuple[int, object, dict[str, str]]
"""A status and a JSON body (bytes: sent as they are), optionally with headers."""
Route = Callable[[str, str, dict[str, str], bytes], Reply]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, route: Route) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.route = route


@contextmanager
def serving(route: Route) -> Iterator[str]:
    """Serve `route` on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    server = _Server(route)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@dataclass
class HnApi:
    """The Hacker-News-like API: `/v0/topstories.json`, `/v0/item/<id>.json`, both wanting
    `Authorization: Bearer <key>`. Records the Authorization headers it was sent."""

    key: str
    seen: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, object]:
        del body
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        with self.lock:
            self.seen.append(auth)
        if auth != f"Bearer {self.key}":
            return 401, {"error": "missing or wrong API key"}
        if method != "GET":
            return 405, {"error": "GET only"}
        if path == "/v0/topstories.json":
            return 200, [s[0] for s in STORIES]
        match = re.fullmatch(r"/v0/item/(\d+)\.json", path)
        if match:
            for sid, title, score in STORIES:
                if sid == int(match.group(1)):
                    return 200, {"id": sid, "title": title, "score": score, "type": "story"}
        return 404, {"error": "no such item"}


# ---------------------------------------------------------------------------------------------
# The scripted model


@dataclass(frozen=True)
class Seen:
    """What the model sees of a conversation, in no API's terms."""

    task: str
    offered: list[str]
    calls: list[str]
    """The name of each call the model made so far."""
    results: list[tuple[str, bool]]
    """Each tool result so far: its text and whether it is flagged (or worded) as a failure."""


@dataclass(frozen=True)
class Move:
    """The model's next move: a call, or the final answer."""

    call: tuple[str, dict[str, Any]] | None = None
    answer: str | None = None


def next_move(seen: Seen) -> Move:
    """The scripted agent."""
    if "hacker news" in seen.task.lower():
        tool, function, code, arguments = "hn", "top_stories", HN_TOOL, {"limit": 3}
    else:
        tool, function, code, arguments = "adder", "add", ADDER_TOOL, {"a": 1234, "b": 4321}
    mounted = f"{tool}__{function}"
    if not seen.results:
        if mounted in seen.offered:
            return Move(call=(mounted, arguments))
        return Move(call=("create_tool", {"name": tool, "code": code, "description": f"the {tool} tool"}))
    text, failed = seen.results[-1]
    if failed:
        return Move(answer=f"I could not do it: {text}")
    if seen.calls[-1] == "create_tool":
        if mounted in seen.offered:
            return Move(call=(mounted, arguments))
        # Created but not listed yet (a client that does not list again): run_tool reaches it.
        return Move(call=("run_tool", {"tool": tool, "function": function, "arguments": arguments}))
    return Move(answer=f"Here is what {tool} returned:\n{text}")


@dataclass
class ModelServer:
    """The scripted model behind all three APIs (`/v1/responses`, `/v1/chat/completions`,
    `/v1/messages`). `requests` holds every request: (path, headers, body)."""

    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0

    def route(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, object]:
        if method != "POST":
            return 405, {"error": {"message": "POST only", "type": "invalid_request_error"}}
        try:
            request = json.loads(body)
        except ValueError:
            return 400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}}
        with self.lock:
            self.requests.append((path, {k.lower(): v for k, v in headers.items()}, request))
            self.counter += 1
            n = self.counter
        path = path.split("?")[0]
        if path.endswith("/responses"):
            return 200, self._responses(request, n)
        if path.endswith("/chat/completions"):
            return 200, self._chat(request, n)
        if path.endswith("/messages"):
            return 200, self._messages(request, n)
        return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}

    # Responses -------------------------------------------------------------------------------

    def _responses(self, request: dict[str, Any], n: int) -> dict[str, Any]:
        items = request.get("input")
        items = [{"type": "message", "role": "user", "content": items}] if isinstance(items, str) else items or []
        task = next((_text(i.get("content")) for i in items if i.get("role") == "user"), "")
        results = [
            (_text(i.get("output")), _text(i.get("output")).startswith("Error: "))
            for i in items
            if i.get("type") == "function_call_output"
        ]
        calls = [str(i.get("name")) for i in items if i.get("type") == "function_call"]
        offered = [t.get("name", "") for t in request.get("tools") or [] if t.get("type") == "function"]
        move = next_move(Seen(task, offered, calls, results))
        base: dict[str, Any] = {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1_700_000_000,
            "status": "completed",
            "model": request.get("model", "scripted"),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 10,
                "total_tokens": 20,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
        if move.call is not None:
            name, arguments = move.call
            base["output"] = [
                {
                    "type": "function_call",
                    "id": f"fc_{n}",
                    "call_id": f"call_{n}",
                    "name": name,
                    "arguments": json.dumps(arguments),
                    "status": "completed",
                }
            ]
        else:
            base["output"] = [
                {
                    "type": "message",
                    "id": f"msg_{n}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": move.answer or "", "annotations": []}],
                }
            ]
        return base

    # Chat Completions ------------------------------------------------------------------------

    def _chat(self, request: dict[str, Any], n: int) -> dict[str, Any]:
        messages = request.get("messages") or []
        task = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
        results = [
            (_text(m.get("content")), _text(m.get("content")).startswith("Error: "))
            for m in messages
            if m.get("role") == "tool"
        ]
        calls = [
            str((c.get("function") or {}).get("name"))
            for m in messages
            if m.get("role") == "assistant"
            for c in m.get("tool_calls") or []
        ]
        offered = [
            (t.get("function") or {}).get("name", "") for t in request.get("tools") or [] if t.get("type") == "function"
        ]
        move = next_move(Seen(task, offered, calls, results))
        message: dict[str, Any] = {"role": "assistant", "content": move.answer}
        finish = "stop"
        if move.call is not None:
            name, arguments = move.call
            message["tool_calls"] = [
                {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            ]
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.get("model", "scripted"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }

    # Anthropic Messages ----------------------------------------------------------------------

    def _messages(self, request: dict[str, Any], n: int) -> dict[str, Any]:
        messages = request.get("messages") or []
        task = ""
        results: list[tuple[str, bool]] = []
        calls: list[str] = []
        for m in messages:
            content = m.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for b in blocks:
                if m.get("role") == "user" and b.get("type") == "text" and not task:
                    task = b.get("text", "")
                if b.get("type") == "tool_use":
                    calls.append(str(b.get("name")))
                if b.get("type") == "tool_result":
                    results.append((_text(b.get("content")), bool(b.get("is_error"))))
        offered = [t.get("name", "") for t in request.get("tools") or []]
        move = next_move(Seen(task, offered, calls, results))
        if move.call is not None:
            name, arguments = move.call
            content_blocks: list[dict[str, Any]] = [
                {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": arguments}
            ]
            stop = "tool_use"
        else:
            content_blocks = [{"type": "text", "text": move.answer or ""}]
            stop = "end_turn"
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "scripted"),
            "content": content_blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }


def _text(value: object) -> str:
    """The text of a message's content in any of the APIs' shapes (a string, or parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(p.get("text") if isinstance(p, dict) else p) for p in value)
    return "" if value is None else str(value)
