"""autotool for agents written in Python.

`pip install autotool-mcp` brings the `autotool` program (and `autotool-launcher`, which
confines every tool it runs) and this package:

- `connect(**options)`: an async context manager that starts `autotool serve` over stdio through
  the official MCP SDK and yields a `Client` (`list_tools`, `call_tool`); consent questions go to
  `on_consent(question) -> bool`;
- `openai_tools(listed)` (Responses API; `api="chat"` or `openai_chat_tools` for Chat
  Completions) and `anthropic_tools(listed)`: the listed tools as each API's tool definitions;
  `result_text(result)`: what a call returned, for the model;
- `run_agent(task, provider, on_consent=None, max_steps=24)`: the whole loop, the model
  writing the tools it lacks; `autotool.core.llm.default_provider()` picks the model from the
  environment by the same rules as autotool's own (`pip install autotool-mcp[models]`).

The guide: docs/python.md in the repository.
"""

from importlib import metadata as _metadata

from ._binary import AutotoolNotFound, autotool_binary
from .agent import SYSTEM_PROMPT, AgentError, Answer, Call, Result, Step, Thought, run_agent
from .client import (
    MODEL_VARIABLES,
    Client,
    ConnectOptions,
    ConsentCallback,
    ServeOptions,
    connect,
    elicitation_callback,
    serve_env,
)
from .tools import ToolDef, anthropic_tools, is_error, openai_chat_tools, openai_tools, result_text, tool_defs

try:
    __version__ = _metadata.version("autotool-mcp")
except _metadata.PackageNotFoundError:  # a source checkout, not installed
    __version__ = "0+unknown"

__all__ = [
    "MODEL_VARIABLES",
    "SYSTEM_PROMPT",
    "AgentError",
    "Answer",
    "AutotoolNotFound",
    "Call",
    "Client",
    "ConnectOptions",
    "ConsentCallback",
    "Result",
    "ServeOptions",
    "Step",
    "Thought",
    "ToolDef",
    "__version__",
    "anthropic_tools",
    "autotool_binary",
    "connect",
    "elicitation_callback",
    "is_error",
    "openai_chat_tools",
    "openai_tools",
    "result_text",
    "run_agent",
    "serve_env",
    "tool_defs",
]
