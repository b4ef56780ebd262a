"""Times a first created tool with the `autotool` an installed wheel carries: `connect()`,
then `create_tool` for a small keyless tool (`call_tool` waits while serve says the runtime is
still being prepared, as the answer's `_meta` asks), then a call of it. Run by `.ci/test` (phase
python) right after `pip install`, on a fresh `AUTOTOOL_HOME`; with no `AUTOTOOL_RUNTIME` set,
the tools' runtime is made on the way (the first-use cost a new user pays).

    python first_tool.py PIP_STARTED_EPOCH PIP_SECONDS

Prints one line: how long from `pip install` to the tool's first answer, and its parts.
Exits non-zero if the tool was not created or did not answer.
"""

from __future__ import annotations

import asyncio
import sys
import time

import autotool

ADDER = '''from mcp.server.mcpserver import MCPServer

REQUIRED_ENV = []
mcp = MCPServer("adder")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    mcp.run()
'''


async def main(pip_started: float, pip_seconds: float) -> int:
    started = time.monotonic()
    async with autotool.connect(quiet=False) as client:
        connected = time.monotonic()
        # While serve prepares the runtime, `call_tool` waits (the package calls again when the
        # answer's `_meta` says to), printing each step of the build.
        created = await client.call_tool("create_tool", {"name": "adder", "code": ADDER})
        done = time.monotonic()
        total = time.time() - pip_started
        if autotool.is_error(created):
            print(f"first tool: create_tool failed: {autotool.result_text(created)}", file=sys.stderr)
            return 1
        answer = autotool.result_text(await client.call_tool("adder__add", {"a": 2, "b": 3}))
        called = time.monotonic()
    if answer != "5":
        print(f"first tool: adder__add answered {answer!r}, not 5", file=sys.stderr)
        return 1
    print(
        f"pip install to a first created tool: {total:.1f} s (pip install {pip_seconds:.1f} s, "
        f"serve started {connected - started:.1f} s, create_tool {done - connected:.1f} s; "
        f"its first call {1000 * (called - done):.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(float(sys.argv[1]), float(sys.argv[2]))))
