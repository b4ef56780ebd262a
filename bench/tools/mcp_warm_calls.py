"""Warm calls: spawn an MCP server over stdio, initialize, call FUNCTION once, then time N more
calls one after another and print their median and 90th percentile in milliseconds.

    python3 mcp_warm_calls.py N FUNCTION ARGUMENTS_JSON -- COMMAND [ARG...]
"""

import json
import statistics
import subprocess
import sys
import time


def main() -> int:
    n, function, arguments = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    command = sys.argv[sys.argv.index("--") + 1 :]
    p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    ids = iter(range(1, 1 << 30))

    def rpc(method, params):
        i = next(ids)
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i:
                return m

    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "warm-call-bench", "version": "1"}})
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    p.stdin.flush()
    rpc("tools/call", {"name": function, "arguments": arguments})
    took = []
    for _ in range(n):
        t = time.perf_counter()
        answer = rpc("tools/call", {"name": function, "arguments": arguments})
        took.append(time.perf_counter() - t)
        if "error" in answer or answer["result"].get("isError"):
            raise SystemExit(f"the call failed: {answer}")
    took.sort()
    print(f"{function}: {n} warm calls, median {statistics.median(took) * 1000:.2f} ms, "
          f"p90 {took[int(n * 0.9)] * 1000:.2f} ms")
    p.stdin.close()
    p.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
