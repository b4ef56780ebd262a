"""A host app's first call, as `farm-bench` times it: spawn an MCP server over stdio,
`initialize`, `tools/list`, one `tools/call`, close. Exits 1 unless the call answered without an
error, so a pair of commands that fails cannot pass for a fast one.

    python3 mcp_first_call.py FUNCTION ARGUMENTS_JSON -- COMMAND [ARG...]
"""

import json
import subprocess
import sys


def main() -> int:
    function, arguments = sys.argv[1], json.loads(sys.argv[2])
    command = sys.argv[sys.argv.index("--") + 1 :]
    p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ids = iter(range(1, 1 << 30))

    def rpc(method, params):
        i = next(ids)
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed its output before answering {method}")
            m = json.loads(line)
            if m.get("id") == i:
                return m

    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "first-call-bench", "version": "1"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    p.stdin.flush()
    names = [t["name"] for t in rpc("tools/list", {})["result"]["tools"]]
    if function not in names:
        raise SystemExit(f"{function} is not listed: {names}")
    answer = rpc("tools/call", {"name": function, "arguments": arguments})
    p.stdin.close()
    p.wait(timeout=30)
    return 1 if "error" in answer or answer["result"].get("isError") else 0


if __name__ == "__main__":
    sys.exit(main())
