"""`run_agent()`: a small agent loop on autotool, the same loop as the Rust library's
`autotool::agent::run_agent` (docs/agent.md).

It starts `autotool serve` (`connect()`), offers the model every tool listed (`create_tool`,
`run_tool`, `search_tools` and what has been created), runs the calls it asks for, feeds the
results back, and returns its final answer. The tool list is read again every turn, so a tool
the model just created is offered next; a later run finds it already there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from typing_extensions import Unpack

from .client import ConsentCallback, ServeOptions, connect, serve_env
from .core.llm import Assistant, Item, Provider, ToolResult, User
from .tools import is_error, result_text, tool_defs

SYSTEM_PROMPT = (
    "You are an agent that can grow its own tools with autotool. When you need something you "
    "have no tool for (a web API, live data, a local service), write a small Python MCP server "
    "with create_tool (its description shows the template); read any verification failure and "
    "fix the code; then call the new tool (as <tool>__<function>, or with run_tool). Answer the "
    "user when you have what they asked for."
)
"""What the loop tells the model it is."""

DEFAULT_MAX_STEPS = 24
"""Model turns before the loop gives up."""


class AgentError(RuntimeError):
    """The loop ended without an answer."""


@dataclass(frozen=True)
class Thought:
    """The model's text alongside its calls."""

    text: str


@dataclass(frozen=True)
class Call:
    """A call about to run."""

    name: str
    arguments: object


@dataclass(frozen=True)
class Result:
    """A call's result (redacted by autotool before it got here)."""

    name: str
    text: str
    is_error: bool


@dataclass(frozen=True)
class Answer:
    """The final answer."""

    text: str


Step = Thought | Call | Result | Answer
"""One thing the loop did, for a caller that shows progress (`on_step`)."""


def _call_arguments(arguments: object) -> dict[str, object]:
    if isinstance(arguments, Mapping):
        return {str(k): v for k, v in arguments.items()}
    if arguments is None:
        return {}
    return {"value": arguments}


async def run_agent(
    task: str,
    provider: Provider,
    on_consent: ConsentCallback | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    *,
    system: str = SYSTEM_PROMPT,
    on_step: Callable[[Step], None] | None = None,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    **options: Unpack[ServeOptions],
) -> str:
    """Run `task` with `provider` (`autotool.core.llm.default_provider()`, say) to its answer.

    `on_consent(question) -> bool` answers autotool's consent questions, asked before a tool
    gets a key; without it no key is granted and the model is told the command that would
    (`autotool tools approve TOOL KEY`). `max_steps` bounds the model's turns; `on_step` sees
    each `Thought`, `Call`, `Result` and `Answer` as it happens. serve's environment is this
    process's without the model's own variables, logging only warnings unless `AUTOTOOL_LOG`
    says otherwise (`serve_env()`), with `env` on top; `inherit_env=False` gives it `env`
    alone. The other keyword arguments go to `connect()` as they are.
    """
    environment = serve_env(env) if inherit_env else dict(env or {})
    observe = on_step or (lambda _step: None)
    async with connect(env=environment, inherit_env=False, on_consent=on_consent, **options) as client:
        history: list[Item] = [User(task)]
        for _ in range(max_steps):
            tools = tool_defs(await client.list_tools())
            turn = await provider.complete(system, history, tools)
            if not turn.calls:
                answer = turn.text or ""
                observe(Answer(answer))
                return answer
            if turn.text and turn.text.strip():
                observe(Thought(turn.text))
            history.append(Assistant(turn.text, turn.calls))
            for call in turn.calls:
                observe(Call(call.name, call.arguments))
                try:
                    result = await client.call_tool(call.name, _call_arguments(call.arguments))
                    text, failed = result_text(result), is_error(result)
                except Exception as exc:  # noqa: BLE001 - the model learns the call failed
                    text, failed = f"the call failed: {exc}", True
                observe(Result(call.name, text, failed))
                history.append(ToolResult(call.id, call.name, text, failed))
    raise AgentError(f"no answer after {max_steps} model turns; the task may need more (max_steps={max_steps})")
