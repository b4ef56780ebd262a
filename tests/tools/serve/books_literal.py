"""The catalogue of `books.py` with a literal `lookup`: the ISBN must be written exactly as the
catalogue has it, so padding it with spaces, changing its case or giving it the prefix "ISBN "
finds nothing, and the relations it declares do not hold. Verification refuses it at
`relations`; without the RELATIONS declaration the same tool verifies (its examples hold).

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
    """The title of the book with this ISBN, written exactly as the catalogue has it."""
    title = CATALOGUE.get(isbn)
    if title is None:
        raise ToolError(f"no book with ISBN {isbn!r}")
    return title


@mcp.tool()
def total(prices: list[float]) -> float:
    """The sum of the prices."""
    return sum(prices)


if __name__ == "__main__":
    mcp.run()
