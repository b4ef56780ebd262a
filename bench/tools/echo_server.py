"""A minimal MCP server over stdio without the SDK: the fixed cost of a tool process.

Reads newline-delimited JSON-RPC from stdin, answers `initialize`, `ping` and `tools/list`
(with no tools), ignores notifications, and exits at end of input. Standard library only, so
the time to its first answer is interpreter start-up plus whatever the sandbox adds.
"""

import json
import sys


def answer(request):
    method = request.get("method")
    if method == "initialize":
        params = request.get("params") or {}
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench_echo", "version": "0.1.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": []}
    return None


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        request = json.loads(line)
        if "id" not in request:
            continue
        result = answer(request)
        if result is None:
            reply = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "error": {"code": -32601, "message": "method not found"},
            }
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


main()
