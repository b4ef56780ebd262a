"""A host answering autotool's consent question through the official MCP Python SDK, in one era.

    consent_flow.py --era legacy|modern --autotool BIN [--sandbox strict|off] [--timeout SECONDS]

The Rust test sets `CONSENT_API_KEY` (the key) and `CONSENT_API_BASE` (its fake API on
127.0.0.1); both are passed on to each `autotool serve`, which holds the key from its environment.
Every tool here declares `REQUIRED_ENV = ["CONSENT_API_KEY"]` and has one function, `echo`, that
sends the key to the API and returns what the API echoed.

How the SDK (mcp 2.3.0, `mcp.Client`) answers, from `mcp/client/session.py`, `client.py` and
`_input_required.py`:
- a Client given an `elicitation_callback` declares the elicitation capability (form and url); one
  without it declares none;
- `mode="legacy"` (2025-11-25): the server's `elicitation/create` request goes to the callback
  while `tools/call` waits; the context's `request_id` is that request's JSON-RPC id;
- `mode="auto"` (2026-07-28): `tools/call` answers `input_required`; `Client.call_tool` hands each
  of its `inputRequests` to the same callback (the context's `request_id` is the request's key,
  `consent`) and retries the call with `inputResponses` and the echoed `requestState`, until a
  terminal result. The rounds are observed here by wrapping `ClientSession.call_tool`.

Three hosts in turn, each its own Client and serve on the test's home:
- `yes`: the callback accepts with `allow: true`; create `consent_yes` (created, asked once), then
  call `consent_yes__echo` (not asked again; the API's answer arrives redacted);
- `decline`: the callback declines; create `consent_no` is refused with the command to run;
- `none`: no callback; create `consent_cli` is refused ("consent needed"). The script prints
  `{"event": "approve", "tool": ..., "key": ...}` and waits for one line on stdin while the Rust
  test runs `autotool tools approve`; then the same create succeeds and the tool is called.

Prints ONE JSON summary line on stdout last (the `approve` event before it is the only other
line). A step that raises is recorded as an exception and the session goes on.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import time
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

from common import emit, error_json, log, result_json, serve_params

KEY = "CONSENT_API_KEY"

# The variables the Rust test sets for the serve: the key, and where its fake API listens.
CONSENT_ENV = (KEY, "CONSENT_API_BASE")

# How long the `none` host waits for the Rust test to run `autotool tools approve`.
APPROVAL_WAIT_S = 60.0


def keyed_tool(name: str) -> str:
    """A tool that declares the key and sends it to the API, returning the API's answer as is."""
    return (
        "import os, urllib.parse, urllib.request\n"
        "from mcp.server.mcpserver import MCPServer\n\n"
        f'REQUIRED_ENV = ["{KEY}"]\n'
        f'mcp = MCPServer("{name}")\n\n'
        "@mcp.tool()\n"
        "def echo() -> str:\n"
        '    """Send the key to the API and return what it answered."""\n'
        f'    key = os.environ.get("{KEY}", "")\n'
        '    url = os.environ["CONSENT_API_BASE"] + "/echo?" + urllib.parse.urlencode({"key": key})\n'
        '    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + key})\n'
        "    return urllib.request.urlopen(request, timeout=10).read().decode()\n\n"
        'if __name__ == "__main__":\n'
        "    mcp.run()\n"
    )


class Asker:
    """An elicitation callback standing in for the user: records every question, answers `answer`."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        question: dict[str, Any] = {
            "mode": params.mode,
            "message": params.message,
            "request_id": context.request_id,
        }
        if isinstance(params, types.ElicitRequestFormParams):
            question["requested_schema"] = params.requested_schema
        self.asked.append(question)
        if self.answer == "yes":
            return types.ElicitResult(action="accept", content={"allow": True})
        return types.ElicitResult(action="decline")


class Rounds:
    """Every `tools/call` round trip `Client.call_tool` makes: what it sent beyond the call itself
    (`inputResponses`, `requestState`) and what came back (a result, or `input_required`)."""

    def __init__(self, client: Client) -> None:
        self.log: list[dict[str, Any]] = []
        session = client.session
        inner = session.call_tool

        async def call_tool(
            name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
        ) -> Any:
            responses = kwargs.get("input_responses")
            entry: dict[str, Any] = {
                "tool": name,
                "input_responses": sorted(responses) if responses else None,
                "sent_request_state": kwargs.get("request_state") is not None,
            }
            self.log.append(entry)
            result = await inner(name, arguments, *args, **kwargs)
            entry["got"] = type(result).__name__
            if isinstance(result, types.InputRequiredResult):
                entry["input_requests"] = sorted(result.input_requests or {})
                entry["got_request_state"] = result.request_state is not None
            return result

        session.call_tool = call_tool  # type: ignore[method-assign]

    def since(self, start: int) -> list[dict[str, Any]]:
        return self.log[start:]


async def step(record: dict[str, Any], name: str, coro: Any) -> Any:
    """Run one step; record its result (or its exception) under `name`."""
    started = time.monotonic()
    try:
        value = await coro
    except Exception as exc:  # noqa: BLE001 - every failure is data for the Rust side
        record[name] = error_json(exc)
        log(f"step {name}: {exc!r}")
        value = None
    else:
        record[name] = result_json(value) if isinstance(value, types.CallToolResult) else value
    if isinstance(record[name], dict):
        record[name]["elapsed_s"] = round(time.monotonic() - started, 3)
    return value


async def tool_names(client: Client) -> dict[str, Any]:
    listed = await client.list_tools(cache_mode="bypass")
    return {"names": [t.name for t in listed.tools]}


def client_for(args: argparse.Namespace, asker: Asker | None) -> Client:
    params = serve_params(args.autotool, args.sandbox)
    env = dict(params.env or {})
    env.update({k: os.environ[k] for k in CONSENT_ENV if k in os.environ})
    return Client(
        params.model_copy(update={"env": env}),
        mode="legacy" if args.era == "legacy" else "auto",
        elicitation_callback=asker,
        read_timeout_seconds=90,
    )


async def create(client: Client, rounds: Rounds, record: dict[str, Any], name: str, tool: str) -> None:
    """create_tool `tool`, recorded under `name` with the round trips it took."""
    start = len(rounds.log)
    await step(record, name, client.call_tool("create_tool", {"name": tool, "code": keyed_tool(tool)}))
    record[name + "_rounds"] = rounds.since(start)


async def call_echo(client: Client, rounds: Rounds, record: dict[str, Any], name: str, tool: str) -> None:
    start = len(rounds.log)
    await step(record, name, client.call_tool(f"{tool}__echo", {}))
    record[name + "_rounds"] = rounds.since(start)


async def host_says_yes(summary: dict[str, Any], args: argparse.Namespace) -> None:
    record: dict[str, Any] = {}
    summary["yes"] = record
    asker = Asker("yes")
    record["asked"] = asker.asked
    async with client_for(args, asker) as client:
        record["protocol_version"] = client.protocol_version
        rounds = Rounds(client)
        await create(client, rounds, record, "create", "consent_yes")
        record["asked_after_create"] = len(asker.asked)
        await call_echo(client, rounds, record, "call", "consent_yes")
        record["asked_after_call"] = len(asker.asked)


async def host_declines(summary: dict[str, Any], args: argparse.Namespace) -> None:
    record: dict[str, Any] = {}
    summary["decline"] = record
    asker = Asker("decline")
    record["asked"] = asker.asked
    async with client_for(args, asker) as client:
        record["protocol_version"] = client.protocol_version
        rounds = Rounds(client)
        await create(client, rounds, record, "create", "consent_no")
        await step(record, "list", tool_names(client))


async def wait_for_approval(tool: str) -> str | None:
    """Ask the Rust test to run `autotool tools approve`; its one-line answer, or None on timeout."""
    emit({"event": "approve", "tool": tool, "key": KEY})
    with anyio.move_on_after(APPROVAL_WAIT_S):
        line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return line.strip()
    return None


async def host_cannot_ask(summary: dict[str, Any], args: argparse.Namespace) -> None:
    record: dict[str, Any] = {}
    summary["none"] = record
    async with client_for(args, None) as client:
        record["protocol_version"] = client.protocol_version
        rounds = Rounds(client)
        await create(client, rounds, record, "create_refused", "consent_cli")
        record["approval"] = await wait_for_approval("consent_cli")
        await create(client, rounds, record, "create", "consent_cli")
        await call_echo(client, rounds, record, "call", "consent_cli")


async def session(summary: dict[str, Any], args: argparse.Namespace) -> None:
    for name, host in (("yes", host_says_yes), ("decline", host_declines), ("none", host_cannot_ask)):
        started = time.monotonic()
        try:
            await host(summary, args)
        except Exception as exc:  # noqa: BLE001 - the other hosts still run
            summary.setdefault(name, {})["fatal"] = error_json(exc)
            log(f"host {name}: {exc!r}")
        summary.setdefault(name, {})["total_s"] = round(time.monotonic() - started, 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["legacy", "modern"], required=True)
    parser.add_argument("--autotool", required=True)
    parser.add_argument("--sandbox", default="strict")
    parser.add_argument("--timeout", type=float, default=200.0)
    args = parser.parse_args()

    summary: dict[str, Any] = {"era": args.era, "sdk": importlib.metadata.version("mcp")}

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await session(summary, args)

    try:
        anyio.run(bounded)
    except BaseException as exc:  # noqa: BLE001 - report what happened so far, never a bare traceback
        summary["fatal"] = error_json(exc)
    emit(summary)


if __name__ == "__main__":
    main()
