"""`connect()`: `autotool serve` started over stdio and spoken to through the official MCP
Python SDK, with autotool's consent questions handed to a callback.

Both generations of the SDK are supported, each in the era it speaks:

- `mcp` 2.x (`mcp.Client`): the 2026-07-28 revision when `mode="auto"` (the default), where a
  call that needs consent comes back as `input_required` and the SDK asks the callback, then
  retries the call with the answer; `mode="legacy"` keeps the 2025-11-25 handshake;
- `mcp` 1.x (`ClientSession`, pulled in by frameworks that have not moved yet): the 2025-11-25
  revision, where consent is a form elicitation the server sends while the call waits.

Either way the callback sees the question (which tool, which key, where the key may go; never
a value) and answers `True` to allow. Anything else, an error raised by the callback, or no
callback at all means no: the call is refused with the `autotool tools approve` command the
user can run instead.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from importlib import metadata
from typing import Any, Literal, TextIO, TypedDict, cast

import anyio
import mcp
import mcp.types as types
from mcp.client.stdio import StdioServerParameters, stdio_client

from ._binary import DISTRIBUTION, AutotoolNotFound, autotool_binary

logger = logging.getLogger("autotool")

ConsentCallback = Callable[[str], bool | Awaitable[bool]]
"""Answers one consent question: `True` allows the tool to use the key. A plain function runs
in a worker thread (so `input()` works and the connection stays served); an `async` one runs
on the event loop."""

Mode = Literal["auto", "legacy"]

DEFAULT_TIMEOUT = 900.0
"""Seconds one request may wait for its answer: above serve's own bounds (a call's 60 s, a
consent question's 600 s, a create's verification), so serve times out first and says why."""

DEFAULT_WAIT = 300.0
"""Seconds `call_tool` keeps calling again while serve says "not yet, call again" (the tools'
runtime being built the first time, about 5-30 s; a verification still running): well above a
first build with pip on a loaded machine, so a program on a fresh home simply waits."""

RETRY_AFTER_MS = "io.autotool/retryAfterMs"
"""The `_meta` key of an answer that says the call did not run yet and when to make it again
(milliseconds); serve's refusals while the runtime is prepared carry it (docs/serve.md)."""

REASON = "io.autotool/reason"
"""The `_meta` key naming why a call did not run yet (`runtime-building`, `runtime-ready`,
`runtime-failed`, `verification-continues`)."""

MAX_LIST_PAGES = 100
"""Pages of `tools/list` read at most: a server that never ends its list cannot hang a caller."""

_SDK_V2 = hasattr(mcp, "Client")

MODEL_VARIABLES = (
    "AUTOTOOL_PROVIDER",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_LLM",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "AUTOTOOL_LLM_TIMEOUT",
)
"""The model's own variables (`autotool.core.llm`): `serve_env()` leaves them out, so no tool
the model writes is offered the model's key (as `autotool run` does)."""


def serve_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment for `autotool serve` started by a framework (the MCP SDK's stdio client
    passes a server only `PATH`, `HOME` and a few others unless it is given one): this
    process's environment without the model's variables (`MODEL_VARIABLES`), serve's log at
    `warn` unless `AUTOTOOL_LOG` says otherwise, and `extra` on top. serve then sees
    `AUTOTOOL_HOME`, `AUTOTOOL_RUNTIME`, the keys tools may be granted and `*_API_BASE`."""
    env = {k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES}
    env.setdefault("AUTOTOOL_LOG", "warn")
    env.update(extra or {})
    return env


class ServeOptions(TypedDict, total=False):
    """The keyword arguments of `connect()` that `run_agent()` passes on as they are."""

    binary: str | os.PathLike[str]
    args: Sequence[str]
    quiet: bool
    mode: Mode
    timeout: float | None
    wait: float


class ConnectOptions(ServeOptions, total=False):
    """The keyword arguments of `connect()`."""

    env: Mapping[str, str]
    inherit_env: bool
    on_consent: ConsentCallback | None


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _wire(model: object) -> dict[str, Any]:
    """An SDK object as the JSON the protocol carries (camelCase keys in every SDK version)."""
    if isinstance(model, Mapping):
        return dict(cast(Mapping[str, Any], model))
    dump = getattr(model, "model_dump", None)
    if dump is None:
        raise TypeError(f"expected an MCP protocol object or a mapping, not {type(model).__name__}")
    return cast(dict[str, Any], dump(by_alias=True, mode="json", exclude_none=True))


async def ask(on_consent: ConsentCallback, question: str) -> bool:
    """Put `question` to `on_consent`; only `True` is a yes. An error raised by it is a no."""
    try:
        if inspect.iscoroutinefunction(on_consent):
            answer: object = await on_consent(question)
        else:
            answer = await anyio.to_thread.run_sync(on_consent, question, abandon_on_cancel=True)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:  # noqa: BLE001 - a callback that fails has not said yes
        logger.warning("the consent callback raised %s; answering no", type(exc).__name__)
        return False
    return answer is True


def _is_consent_form(params: dict[str, Any]) -> bool:
    """autotool's consent question: a form whose schema holds the boolean `allow`."""
    if params.get("mode", "form") != "form":
        return False
    schema = params.get("requestedSchema") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(properties, dict) and isinstance(properties.get("allow"), dict)


def elicitation_callback(
    on_consent: ConsentCallback, asked: list[str] | None = None
) -> Callable[[Any, Any], Awaitable[types.ElicitResult]]:
    """An MCP SDK `elicitation_callback` that answers autotool's consent questions with
    `on_consent`, for MCP clients built by hand or by a framework (the SDK calls it with the
    request context and the `ElicitRequestParams`). Other elicitations are declined. Each
    question asked is appended to `asked` when given."""

    async def callback(context: Any, params: Any) -> types.ElicitResult:
        del context
        wire = _wire(params)
        if not _is_consent_form(wire):
            return types.ElicitResult(action="decline")
        question = str(wire.get("message", ""))
        if asked is not None:
            asked.append(question)
        if await ask(on_consent, question):
            return types.ElicitResult(action="accept", content={"allow": True})
        return types.ElicitResult(action="decline")

    return callback


def _arguments(arguments: Mapping[str, object] | str | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ValueError(f"the arguments are not JSON ({exc}): {arguments[:200]!r}") from exc
        if not isinstance(parsed, dict):
            raise ValueError(f"the arguments must be a JSON object, not {type(parsed).__name__}")
        return cast(dict[str, Any], parsed)
    return dict(arguments)


async def _pump(source: Any, sink: Any) -> None:
    """Forward what serve sends to the session while it listens; after that, drain to the end."""
    listening = True
    try:
        async for message in source:
            if not listening:
                continue
            try:
                await sink.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                listening = False
    except anyio.ClosedResourceError:
        pass  # the transport closed its end on the way out: nothing more can come
    finally:
        await sink.aclose()


class Client:
    """A running `autotool serve`, from `connect()`."""

    def __init__(
        self,
        sdk: Any,
        protocol_version: str,
        asked: list[str],
        *,
        wait: float = DEFAULT_WAIT,
        progress: TextIO | None = None,
    ) -> None:
        # `mcp.Client` (SDK 2.x) or `mcp.ClientSession` (1.x); their methods differ.
        self._sdk = sdk
        self._asked = asked
        self._wait = wait
        self._progress = progress
        self.protocol_version = protocol_version
        """The protocol revision agreed on (`2026-07-28`, `2025-11-25`, ...)."""

    @property
    def consent_questions(self) -> list[str]:
        """Every consent question serve has put to this client so far, in order."""
        return list(self._asked)

    async def list_tools(self) -> list[types.Tool]:
        """Every tool serve lists now: `create_tool`, `run_tool`, `search_tools` and each
        function of every tool created so far (`<tool>__<function>`), all pages, never cached."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            if _SDK_V2:
                page = await self._sdk.list_tools(cursor=cursor, cache_mode="bypass")
            else:
                page = await self._sdk.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            tools.extend(page.tools)
            cursor = _wire(page).get("nextCursor")
            if not cursor:
                break
        return tools

    async def call_tool(self, name: str, arguments: Mapping[str, object] | str | None = None) -> types.CallToolResult:
        """Call `name` with `arguments` (a mapping, or the JSON object text a model wrote). A
        tool's own failure is a result whose `isError` is set, with the reason in its text; a
        consent question on the way goes to `on_consent` first.

        When serve answers that the call did not run yet and says when to make it again (the
        tools' runtime is still being built on a fresh home: `_meta` carries
        `io.autotool/retryAfterMs`), the call is made again after that long, for at most
        `wait` seconds in all (`connect(wait=...)`); serve's progress (each step of the build)
        goes to stderr meanwhile unless `quiet`. The last answer is returned as it is."""
        args = _arguments(arguments)
        deadline = anyio.current_time() + self._wait
        while True:
            result = cast(
                types.CallToolResult,
                await self._sdk.call_tool(name, args, progress_callback=self._on_progress),
            )
            after = retry_after(result)
            if after is None or anyio.current_time() + after > deadline:
                return result
            self._say(f"{name} did not run yet ({reason(result)}); calling again in {after:.1f} s")
            await anyio.sleep(after)

    async def _on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        del progress, total
        if message:
            self._say(message)

    def _say(self, line: str) -> None:
        logger.info("%s", line)
        if self._progress is not None:
            print(f"autotool: {line}", file=self._progress, flush=True)


def _meta(result: object) -> dict[str, Any]:
    meta = _wire(result).get("_meta")
    return cast(dict[str, Any], meta) if isinstance(meta, dict) else {}


def retry_after(result: object) -> float | None:
    """Seconds to wait before calling again, when `result` is serve's "did not run yet, call
    again" (`_meta["io.autotool/retryAfterMs"]`, on an `isError` result); `None` otherwise."""
    wire = _wire(result)
    ms = _meta(wire).get(RETRY_AFTER_MS)
    if not wire.get("isError") or isinstance(ms, bool) or not isinstance(ms, int | float) or ms < 0:
        return None
    return min(float(ms), 60_000.0) / 1000.0


def reason(result: object) -> str:
    """Why serve did not run a call yet (`_meta["io.autotool/reason"]`), or `""`."""
    said = _meta(result).get(REASON)
    return said if isinstance(said, str) else ""


@asynccontextmanager
async def connect(
    *,
    binary: str | os.PathLike[str] | None = None,
    args: Sequence[str] = ("serve",),
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    on_consent: ConsentCallback | None = None,
    quiet: bool = False,
    mode: Mode = "auto",
    timeout: float | None = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - bounds each request, as the SDK's option does
    wait: float = DEFAULT_WAIT,
) -> AsyncIterator[Client]:
    """Start `autotool serve` over stdio and yield a `Client` for it; it stops on exit.

    - `binary`: the program (default `$AUTOTOOL_BIN`, else the wheel's own, else `autotool` on
      PATH); `args`: its arguments (`["serve"]`).
    - `env`: variables added to serve's environment (`AUTOTOOL_HOME`, keys, `*_API_BASE`);
      serve also gets this process's environment unless `inherit_env=False`.
    - `on_consent`: answers consent questions (see `ConsentCallback`); without it none is
      asked, and a tool that wants a key is refused with the command that approves it.
    - `quiet`: serve's log (stderr) goes nowhere instead of to this process's stderr (it is
      also in `$AUTOTOOL_HOME/logs/serve.log`).
    - `mode`: `"auto"` speaks the newest revision both sides know (SDK 2.x: 2026-07-28);
      `"legacy"` the 2025-11-25 handshake. SDK 1.x speaks 2025-11-25 whatever the mode.
    - `timeout`: seconds a request may wait for its answer (`None`: no bound).
    - `wait`: seconds `Client.call_tool` keeps calling again while serve answers "not yet, call
      again in N ms" (the tools' runtime built on a fresh home); `0` returns that answer as it is.
    """
    program = os.fspath(binary) if binary is not None else autotool_binary()
    if shutil.which(program) is None:
        raise AutotoolNotFound(
            f"cannot start {program}: there is no such executable; install autotool-mcp, or point "
            "AUTOTOOL_BIN (or connect(binary=...)) at the autotool program"
        )
    environment = dict(os.environ) if inherit_env else {}
    environment.update(env or {})
    params = StdioServerParameters(command=program, args=list(args), env=environment)
    asked: list[str] = []
    callback = elicitation_callback(on_consent, asked) if on_consent is not None else None
    info = types.Implementation(name="autotool-python", version=_version())
    async with AsyncExitStack() as stack:
        # Opening /dev/null does not block.
        errlog: TextIO = stack.enter_context(open(os.devnull, "w")) if quiet else sys.stderr  # noqa: ASYNC230, SIM115
        transport = stdio_client(params, errlog=errlog)
        if _SDK_V2:
            # `mcp.Client` is 2.x's (mypy checks this module against either major version).
            client_class: Any = getattr(mcp, "Client")  # noqa: B009
            sdk: Any = client_class(
                transport,  # pyright: ignore[reportArgumentType]
                mode=mode,
                elicitation_callback=cast(Any, callback),
                read_timeout_seconds=timeout,
                client_info=info,
            )
            await stack.enter_async_context(sdk)
            version = str(sdk.protocol_version)
        else:
            # mcp 1.x's stdio reader fails the whole transport when serve sends a message
            # (a list-change notification, say) after the session has closed its end; a pump
            # between them, living until serve has exited, takes what comes late and drops it.
            pumps = await stack.enter_async_context(anyio.create_task_group())
            read, write = await stack.enter_async_context(transport)
            to_session, from_pump = anyio.create_memory_object_stream[Any](0)
            pumps.start_soon(_pump, read, to_session)
            session_class: Any = mcp.ClientSession
            sdk = await stack.enter_async_context(
                session_class(
                    from_pump,
                    write,
                    read_timeout_seconds=timedelta(seconds=timeout) if timeout is not None else None,
                    elicitation_callback=callback,
                    client_info=info,
                )
            )
            initialized = await sdk.initialize()
            version = str(_wire(initialized).get("protocolVersion", ""))
        yield Client(sdk, version, asked, wait=wait, progress=None if quiet else sys.stderr)
