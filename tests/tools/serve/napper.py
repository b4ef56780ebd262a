"""A slow tool for the pool tests of `autotool serve`: each call says which process ran it and
when it began and ended (wall clock, which every process of the machine shares; a process id
would not do: each confined tool has its own PID namespace).

Nothing here writes to stdout, the JSON-RPC channel.
"""

import json
import time
import uuid

from mcp.server.mcpserver import MCPServer

# Changes with every process.
INSTANCE = uuid.uuid4().hex

mcp = MCPServer("napper")


@mcp.tool()
def nap(seconds: float) -> str:
    """Sleep `seconds`, then answer with this process's id and the call's start and end."""
    start = time.time()
    time.sleep(seconds)
    return json.dumps({"instance": INSTANCE, "start": start, "end": time.time()})


if __name__ == "__main__":
    mcp.run()
