//! Tests against real outside parties (the Python MCP SDK, the conformance suite, MCP Inspector,
//! host apps' config formats). They arrive with `autotool serve`.
