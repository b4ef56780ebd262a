"""A stdio MCP server that speaks last: it answers `initialize` (and refuses `server/discover`,
so a 2026 client falls back to it), and when its stdin closes, it sends one more notification
before it exits, as a serve finishing a list change does while its host hangs up."""

from __future__ import annotations

import json
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    if request.get("method") == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "late", "version": "0"},
                },
            }
        )
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "method not found"}})
send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
