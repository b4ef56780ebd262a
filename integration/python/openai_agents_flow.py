"""The OpenAI Agents SDK (`openai-agents`, the real package from PyPI) as the host of
`autotool serve`, on its default timeouts: `agents.mcp.MCPServerStdio` with
`client_session_timeout_seconds` left at 5 s. No model is needed: the script drives the MCP
server object directly, as the SDK's agent loop would (connect, list tools, call them).

It creates a first tool on a fresh home and calls it. A `create_tool` that comes back saying
the runtime is still being prepared is called again after the time it names, as an agent would;
every call must answer within the SDK's timeout. Prints one JSON summary line on stdout.

Runs in its own environment (`openai-agents` brings its own `mcp`), not the tools' runtime.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
import traceback

from agents.mcp import MCPServerStdio

TOOL = '''from mcp.server.mcpserver import MCPServer

mcp = MCPServer("greeter")


@mcp.tool()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


if __name__ == "__main__":
    mcp.run()
'''

# Passed on to `autotool serve` explicitly: MCPServerStdio gives a server only a few basic
# variables of its own.
SERVE_ENV = ("HOME", "PATH", "AUTOTOOL_HOME", "AUTOTOOL_LAUNCHER", "AUTOTOOL_LOG", "XDG_CACHE_HOME",
             "AUTOTOOL_PYTHON", "RUST_BACKTRACE")


def text_of(result) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def is_error(result) -> bool:
    # `is_error` in the mcp 2.x types the SDK runs on; `isError` in 1.x.
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


async def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--autotool", required=True)
    ap.add_argument("--sandbox", default="strict")
    ap.add_argument("--attempts", type=int, default=8)
    args = ap.parse_args()
    env = {k: os.environ[k] for k in SERVE_ENV if k in os.environ}
    summary: dict = {"calls": [], "created": False}
    started = time.monotonic()
    server = MCPServerStdio(
        params={"command": args.autotool, "args": ["serve", "--sandbox", args.sandbox], "env": env},
        name="autotool",
    )
    summary["client_session_timeout_seconds"] = server.client_session_timeout_seconds
    async with server:
        summary["connected_s"] = round(time.monotonic() - started, 3)
        tools = await server.list_tools()
        summary["tools"] = sorted(t.name for t in tools)
        arguments = {"name": "greeter", "code": TOOL,
                     "smoke_test": {"function": "greet", "arguments": {"name": "smoke"}}}
        for attempt in range(args.attempts):
            t0 = time.monotonic()
            result = await server.call_tool("create_tool", arguments)
            took = round(time.monotonic() - t0, 3)
            said = text_of(result)
            summary["calls"].append({"tool": "create_tool", "seconds": took,
                                     "is_error": is_error(result), "text": said[:400]})
            if not is_error(result):
                summary["created"] = True
                break
            # The answer may start a sentence with "Call": match either case.
            again = re.search(r"call create_tool again .*?in about (\d+) seconds", said, re.I)
            now = re.search(r"call create_tool again with the same arguments now", said, re.I)
            if not again and not now:
                break
            await asyncio.sleep(int(again.group(1)) if again else 0)
        if summary["created"]:
            tools = await server.list_tools()
            summary["tools_after"] = sorted(t.name for t in tools)
            t0 = time.monotonic()
            result = await server.call_tool("greeter__greet", {"name": "Ada"})
            summary["calls"].append({"tool": "greeter__greet",
                                     "seconds": round(time.monotonic() - t0, 3),
                                     "is_error": is_error(result), "text": text_of(result)})
            summary["answer"] = text_of(result)
    summary["total_s"] = round(time.monotonic() - started, 3)
    return summary


if __name__ == "__main__":
    try:
        out = asyncio.run(main())
    except BaseException as e:  # noqa: BLE001 - the Rust side wants every failure as JSON
        out = {"fatal": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
