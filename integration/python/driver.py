"""A long-lived MCP host, driven line by line by a Rust test: for tests that interleave several
`autotool serve` processes (two sharing a home, one killed in the middle of a create).

    driver.py --era legacy|modern --autotool BIN [--sandbox strict|off]
    driver.py --era legacy|modern --url http://127.0.0.1:PORT/mcp [--token-file PATH]

It starts `autotool serve` through the official Python SDK's stdio client (`mcp.Client`; era as in
era_flow.py: `mode="legacy"` → initialize at 2025-11-25, `mode="auto"` → server/discover at
2026-07-28, with a `subscriptions/listen` stream for tool-list changes), then prints
`{"event": "ready", ...}` with the negotiated version and the server's pid.

With `--url` it connects instead to a running `autotool serve --transport http` through the SDK's
streamable HTTP client (`streamable_http_client`, given an `httpx2.AsyncClient` that carries
`Authorization: Bearer <token>` when `--token-file` names the service token).

Commands, one JSON object per line on stdin, each with an `id`; each runs as its own task, so a
slow one (a create) does not hold up the others. Its reply carries the same `id`:
- `{"op": "list"}` → `{"names": [...]}` (straight from the server, bypassing the client cache)
- `{"op": "call", "name": N, "arguments": {...}}` → `{"result": ...}`
- `{"op": "create", "name": N, "source": "ADD_V1", "preamble": "...", "smoke_test": {...}}`
  → `{"result": ...}`; `source` and `preamble` name constants of common.py
- `{"op": "close"}` → replies, closes the session and exits

Unprompted lines: `{"event": "notification", "method": ..., "subscription_id": ...}` for every
tools/list_changed reaching the message handler, `{"event": "subscription", "type": ...}` for every
event of the listen stream (2026-07-28), `{"event": "listen_ended", ...}`,
`{"event": "transport_error", ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

import common
from common import emit, error_json, result_json, serve_params, server_info_json, tool_source


def child_pids() -> list[int]:
    """This process's children: the `autotool serve` the stdio client started."""
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return sorted(set(pids))


async def on_message(message: Any) -> None:
    if isinstance(message, Exception):
        emit({"event": "transport_error", "error": error_json(message)})
        return
    if isinstance(message, types.ToolListChangedNotification):
        meta = (message.params.meta if message.params is not None else None) or {}
        emit(
            {
                "event": "notification",
                "method": message.method,
                "subscription_id": meta.get(SUBSCRIPTION_ID_META_KEY),
            }
        )


async def run_command(client: Client, cmd: dict[str, Any]) -> None:
    reply: dict[str, Any] = {"id": cmd.get("id")}
    try:
        op = cmd["op"]
        if op == "list":
            listed = await client.list_tools(cache_mode="bypass")
            reply["names"] = [t.name for t in listed.tools]
        elif op == "call":
            reply["result"] = result_json(await client.call_tool(cmd["name"], cmd.get("arguments") or {}))
        elif op == "create":
            body = getattr(common, cmd["source"])
            preamble = getattr(common, cmd["preamble"]) if cmd.get("preamble") else ""
            arguments: dict[str, Any] = {
                "name": cmd["name"],
                "code": tool_source(cmd["name"], body, preamble=preamble),
            }
            if cmd.get("smoke_test") is not None:
                arguments["smoke_test"] = cmd["smoke_test"]
            reply["result"] = result_json(await client.call_tool("create_tool", arguments))
        else:
            reply["result"] = {"kind": "exception", "type": "ValueError", "message": f"unknown op {op!r}"}
    except Exception as exc:  # noqa: BLE001 - every failure is data for the Rust side
        reply["result"] = error_json(exc)
    emit(reply)


async def listen_loop(client: Client, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    started = False
    try:
        async with client.listen(tools_list_changed=True) as sub:
            task_status.started(sub.honored.model_dump(by_alias=True, exclude_none=True))
            started = True
            async for event in sub:
                emit({"event": "subscription", "type": type(event).__name__})
        emit({"event": "listen_ended", "graceful": True})
    except Exception as exc:  # noqa: BLE001
        if not started:
            task_status.started({"error": error_json(exc)})
        else:
            emit({"event": "listen_ended", "graceful": False, "error": error_json(exc)})


async def drive(args: argparse.Namespace, headers: dict[str, str]) -> None:
    if args.url:
        # The SDK's defaults: 30 s to connect and write, 300 s to read (a stream may stay open).
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
        async with http:
            await session(args.era, streamable_http_client(args.url, http_client=http))
    else:
        await session(args.era, serve_params(args.autotool, args.sandbox))


async def session(era: str, server: Any) -> None:
    client = Client(
        server,
        mode="legacy" if era == "legacy" else "auto",
        message_handler=on_message,
        read_timeout_seconds=90,
    )
    async with client, anyio.create_task_group() as tg:
        ready: dict[str, Any] = {
            "event": "ready",
            "protocol_version": client.protocol_version,
            "server_info": server_info_json(client.server_info),
            "server_pids": child_pids(),
        }
        if era == "modern":
            ready["listen"] = await tg.start(listen_loop, client)
        emit(ready)
        stdin = anyio.wrap_file(sys.stdin)
        while True:
            line = await stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            cmd = json.loads(line)
            if cmd.get("op") == "close":
                emit({"id": cmd.get("id"), "closed": True})
                break
            tg.start_soon(run_command, client, cmd)
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("--autotool")
    parser.add_argument("--sandbox", default="strict")
    parser.add_argument("--url", help="a running `serve --transport http` to connect to")
    parser.add_argument("--token-file", help="the service token to send as a bearer token")
    args = parser.parse_args()
    if not args.url and not args.autotool:
        parser.error("--autotool (stdio) or --url (HTTP) is required")
    headers: dict[str, str] = {}
    if args.token_file:
        with open(args.token_file) as f:
            headers["Authorization"] = f"Bearer {f.read().strip()}"
    try:
        anyio.run(drive, args, headers)
    except BaseException as exc:  # noqa: BLE001 - report, never a bare traceback
        emit({"event": "fatal", "error": error_json(exc)})
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
