"""A host's whole session with `autotool serve`, through the official MCP Python SDK, in one era.

    era_flow.py --era legacy|modern --autotool BIN [--sandbox strict|off] [--timeout SECONDS]

How the SDK (mcp 2.3.0, `mcp.Client`) picks the era, from `mcp/client/client.py` and
`mcp/client/_probe.py`:
- `mode="legacy"`: the `initialize` handshake at `LATEST_HANDSHAKE_VERSION`, 2025-11-25; list
  changes arrive as `notifications/tools/list_changed` through the client's `message_handler`.
- `mode="auto"` (the default, what a 2026 host does): probe `server/discover` at 2026-07-28 and
  adopt it, falling back to `initialize` only when the server is not modern. Every request then
  carries `_meta` (protocol version, client capabilities); list changes arrive only on a
  `subscriptions/listen` stream the client opened (`Client.listen`).

The session: list tools; create `adder` (add two ints) and hear of the change; call
`adder__add` directly and through `run_tool`; create `greeter`, which raises at import (isError
with the stage and traceback), then repair it under the same name and call it; create a new
`adder` whose smoke test raises (isError, stage smoke, traceback; version 1 keeps serving), then
a working version 2 and call it; bad input (an unknown tool, wrong argument types) and a good call
after it.

Prints ONE JSON line on stdout: every step's outcome, for the Rust test to assert on. A step that
raises is recorded as an exception and the session goes on, so one failure shows every other.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from common import (
    ADD_SMOKE_RAISES,
    ADD_V1,
    ADD_V2,
    GREET_FIXED,
    GREET_RAISES_AT_IMPORT,
    emit,
    error_json,
    log,
    result_json,
    serve_params,
    server_info_json,
    tool_source,
)


class Notifications:
    """What reached the client's `message_handler`: tools/list_changed notifications (with
    whether each carried a subscription id) and transport exceptions."""

    def __init__(self) -> None:
        self.list_changed: list[dict[str, Any]] = []
        self.exceptions: list[str] = []
        self.other: list[str] = []
        self._event = anyio.Event()
        self.t0 = time.monotonic()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.exceptions.append(repr(message))
            return
        if isinstance(message, types.ToolListChangedNotification):
            meta = message.params.meta if message.params is not None else None
            meta = meta or {}
            self.list_changed.append(
                {
                    "at_s": round(time.monotonic() - self.t0, 3),
                    "subscription_id": meta.get(SUBSCRIPTION_ID_META_KEY),
                }
            )
            self._event.set()
            return
        self.other.append(type(message).__name__)

    def arm(self) -> None:
        self._event = anyio.Event()

    async def wait(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            await self._event.wait()
            return True
        return False


async def step(summary: dict[str, Any], name: str, coro: Any) -> Any:
    """Run one step; record its result (or its exception) under `name`."""
    started = time.monotonic()
    try:
        value = await coro
    except Exception as exc:  # noqa: BLE001 - every failure is data for the Rust side
        summary[name] = error_json(exc)
        summary[name]["elapsed_s"] = round(time.monotonic() - started, 3)
        log(f"step {name}: {exc!r}")
        return None
    if isinstance(value, types.CallToolResult):
        summary[name] = result_json(value)
    else:
        summary[name] = value
    if isinstance(summary[name], dict):
        summary[name]["elapsed_s"] = round(time.monotonic() - started, 3)
    return value


async def tool_names(client: Client) -> dict[str, Any]:
    listed = await client.list_tools()
    return {
        "names": [t.name for t in listed.tools],
        "ttl_ms": listed.ttl_ms,
        "cache_scope": listed.cache_scope,
        "next_cursor": listed.next_cursor,
    }


async def create(client: Client, name: str, body: str, smoke: dict[str, Any] | None = None):
    args: dict[str, Any] = {"name": name, "code": tool_source(name, body)}
    if smoke is not None:
        args["smoke_test"] = smoke
    return await client.call_tool("create_tool", args)


async def session(summary: dict[str, Any], era: str, autotool: str, sandbox: str) -> None:
    notes = Notifications()
    # The lists fill as notifications arrive, so a session that dies midway still reports them.
    summary["notifications"] = {
        "list_changed": notes.list_changed,
        "exceptions": notes.exceptions,
        "other": notes.other,
    }
    mode = "legacy" if era == "legacy" else "auto"
    client = Client(
        serve_params(autotool, sandbox),
        mode=mode,
        message_handler=notes,
        read_timeout_seconds=90,
    )
    started = time.monotonic()
    async with client:
        summary["connect_s"] = round(time.monotonic() - started, 3)
        summary["protocol_version"] = client.protocol_version
        summary["server_info"] = server_info_json(client.server_info)
        summary["instructions"] = client.instructions
        caps = client.server_capabilities
        summary["tools_capability"] = (
            caps.tools.model_dump(by_alias=True, exclude_none=True) if caps.tools is not None else None
        )
        await step(summary, "list_initial", tool_names(client))

        # Create, and hear of the change in this era's way.
        notes.arm()
        t_create = time.monotonic()
        if era == "legacy":
            await step(summary, "create", create(client, "adder", ADD_V1))
            t_result = time.monotonic()
            heard = await notes.wait(5.0)
            summary["change"] = {
                "via": "notification",
                "received": heard,
                "after_create_sent_s": round((notes.t0 + notes.list_changed[0]["at_s"]) - t_create, 3)
                if notes.list_changed
                else None,
                "before_result": bool(notes.list_changed)
                and notes.t0 + notes.list_changed[0]["at_s"] <= t_result,
            }
        else:
            change: dict[str, Any] = {"via": "subscription", "received": False}
            summary["change"] = change
            try:
                async with client.listen(tools_list_changed=True) as sub:
                    change["honored"] = sub.honored.model_dump(by_alias=True, exclude_none=True)
                    await step(summary, "create", create(client, "adder", ADD_V1))
                    with anyio.move_on_after(5.0):
                        event = await sub.__anext__()
                        change["received"] = True
                        change["event"] = type(event).__name__
                        change["after_create_sent_s"] = round(time.monotonic() - t_create, 3)
            except Exception as exc:  # noqa: BLE001
                change["error"] = error_json(exc)
                log(f"listen: {exc!r}")
        await step(summary, "list_after_create", tool_names(client))

        await step(summary, "call_direct", client.call_tool("adder__add", {"a": 2, "b": 3}))
        await step(
            summary,
            "call_run_tool",
            client.call_tool(
                "run_tool", {"tool": "adder", "function": "add", "arguments": {"a": 20, "b": 22}}
            ),
        )

        # A tool that raises at import: isError with the stage and the traceback; then repaired.
        await step(summary, "create_import_fails", create(client, "greeter", GREET_RAISES_AT_IMPORT))
        await step(summary, "list_after_import_fails", tool_names(client))
        await step(summary, "create_repaired", create(client, "greeter", GREET_FIXED))
        await step(summary, "call_repaired", client.call_tool("greeter__greet", {"name": "ada"}))

        # A new version whose smoke test raises: refused, and version 1 keeps serving.
        await step(
            summary,
            "create_smoke_fails",
            create(client, "adder", ADD_SMOKE_RAISES, {"function": "add", "arguments": {"a": 1, "b": 2}}),
        )
        await step(summary, "call_after_smoke_fails", client.call_tool("adder__add", {"a": 2, "b": 3}))
        await step(
            summary,
            "create_v2",
            create(client, "adder", ADD_V2, {"function": "add", "arguments": {"a": 1, "b": 2}}),
        )
        await step(summary, "call_v2", client.call_tool("adder__add", {"a": 2, "b": 3}))
        await step(
            summary,
            "call_v2_run_tool",
            client.call_tool("run_tool", {"tool": "adder", "function": "add", "arguments": {"a": 2, "b": 3}}),
        )

        # Bad input: the server answers clearly and keeps serving.
        await step(summary, "call_unknown_tool", client.call_tool("nosuch__thing", {}))
        await step(
            summary,
            "call_run_tool_unknown",
            client.call_tool("run_tool", {"tool": "nosuch", "function": "thing", "arguments": {}}),
        )
        await step(summary, "call_wrong_types", client.call_tool("adder__add", {"a": "two", "b": 3}))
        await step(summary, "call_after_bad_input", client.call_tool("adder__add", {"a": 5, "b": 6}))
        await step(summary, "list_final", tool_names(client))

    summary["total_s"] = round(time.monotonic() - started, 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("--autotool", required=True)
    parser.add_argument("--sandbox", default="strict")
    parser.add_argument("--timeout", type=float, default=150.0)
    args = parser.parse_args()

    summary: dict[str, Any] = {"era": args.era, "sdk": importlib.metadata.version("mcp")}

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await session(summary, args.era, args.autotool, args.sandbox)

    try:
        anyio.run(bounded)
    except BaseException as exc:  # noqa: BLE001 - report what happened so far, never a bare traceback
        summary["fatal"] = error_json(exc)
    emit(summary)


if __name__ == "__main__":
    main()
