"""A small catalogue that keeps the relations it declares: `lookup(isbn)` finds a title by its
ISBN however the ISBN is written (padded with spaces, in either case, with the prefix "ISBN "),
and `total(prices)` adds prices up in any order.

The serve suite's `relations` tests create it as it is (every relation kept), and with the
line that normalises the ISBN made literal (`key = isbn`), which breaks them: an ISBN must then
be written exactly as the catalogue has it.

Nothing here writes to stdout, the JSON-RPC channel.
"""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

EXAMPLES = [
    {"function": "lookup", "arguments": {"isbn": "0306406152"}, "expect": "Dune"},
    {
        "function": "lookup",
        "arguments": {"isbn": "097522980X"},
        "expect": "The Odyssey",
    },
    {"function": "total", "arguments": {"prices": [3, 4.5, 10]}, "expect": 17.5},
]

RELATIONS = [
    {"function": "lookup", "argument": "isbn", "transform": "surrounding_whitespace"},
    {"function": "lookup", "argument": "isbn", "transform": "prefix", "value": "ISBN "},
    {"function": "lookup", "argument": "isbn", "transform": "lower"},
    {"function": "total", "argument": "prices", "transform": "reverse"},
]

CATALOGUE = {"0306406152": "Dune", "097522980X": "The Odyssey"}

mcp = MCPServer("books")


@mcp.tool()
def lookup(isbn: str) -> str:
    """The title of the book with this ISBN."""
    key = isbn.strip().upper().removeprefix("ISBN ")
    title = CATALOGUE.get(key)
    if title is None:
        raise ToolError(f"no book with ISBN {isbn!r}")
    return title


@mcp.tool()
def total(prices: list[float]) -> float:
    """The sum of the prices."""
    return sum(prices)


if __name__ == "__main__":
    mcp.run()
