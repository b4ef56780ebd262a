"""`autotool.connect()` against a real `autotool serve`: both protocol eras, every kind of
consent answer, the binary it starts, and the environment serve gets."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import mcp.types as types
import pytest

import autotool
import fakes
from autotool._binary import autotool_binary, wheel_binary
from conftest import mcp_major

# With mcp 1.x both modes speak 2025-11-25 (the only era that SDK knows).
MODES = ["auto", "legacy"]


def expected_version(mode: str) -> str:
    return "2026-07-28" if mode == "auto" and mcp_major() >= 2 else "2025-11-25"


async def create_hn(client: autotool.Client) -> types.CallToolResult:
    return await client.call_tool("create_tool", {"name": "hn", "code": fakes.HN_TOOL})


@pytest.mark.parametrize("mode", MODES)
async def test_consent_yes_grants_the_key(mode: str, hn: fakes.HnApi) -> None:
    async with autotool.connect(on_consent=lambda question: True, mode=mode, quiet=True) as client:  # type: ignore[arg-type]
        assert client.protocol_version == expected_version(mode)
        created = await create_hn(client)
        assert not autotool.is_error(created), autotool.result_text(created)
        [question] = client.consent_questions
        assert "`hn`" in question and "HN_API_KEY" in question and hn.key not in question
        assert "hn__top_stories" in [t.name for t in await client.list_tools()]
        called = await client.call_tool("hn__top_stories", '{"limit": 3}')
        assert autotool.result_text(called).splitlines() == [
            f"{title} ({score} points)" for _, title, score in fakes.STORIES[:3]
        ]
        assert f"Bearer {hn.key}" in hn.seen
        # Asked once per tool version and key: the call did not ask again.
        assert len(client.consent_questions) == 1


async def async_yes(question: str) -> bool:
    return "HN_API_KEY" in question


def raises(question: str) -> bool:
    raise EOFError("no terminal to ask on")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("on_consent", "granted"),
    [
        (async_yes, True),
        (lambda question: False, False),
        (lambda question: "y", False),  # only True is a yes
        (raises, False),
        (None, False),
    ],
    ids=["async-yes", "no", "truthy-not-true", "raises", "no-callback"],
)
async def test_consent_answers(
    mode: str, on_consent: autotool.ConsentCallback | None, granted: bool, hn: fakes.HnApi
) -> None:
    async with autotool.connect(on_consent=on_consent, mode=mode, quiet=True) as client:  # type: ignore[arg-type]
        created = await create_hn(client)
        text = autotool.result_text(created)
        assert len(client.consent_questions) == (0 if on_consent is None else 1)
        if granted:
            assert not autotool.is_error(created), text
            called = await client.call_tool("hn__top_stories", {"limit": 1})
            assert fakes.STORIES[0][1] in autotool.result_text(called)
        else:
            assert autotool.is_error(created)
            assert "consent needed" in text and "autotool tools approve hn HN_API_KEY" in text, text
            assert "hn__top_stories" not in [t.name for t in await client.list_tools()]
            assert hn.seen == []


async def test_arguments_as_json_text() -> None:
    async with autotool.connect(quiet=True) as client:
        created = await client.call_tool("create_tool", json.dumps({"name": "adder", "code": fakes.ADDER_TOOL}))
        assert not autotool.is_error(created), autotool.result_text(created)
        assert autotool.result_text(await client.call_tool("adder__add", '{"a": 2, "b": 40}')) == "42"
        with pytest.raises(ValueError, match="not JSON"):
            await client.call_tool("adder__add", "{a: 2")
        with pytest.raises(ValueError, match="JSON object"):
            await client.call_tool("adder__add", "[2, 40]")


async def test_serve_env_keeps_the_model_key_from_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the model's key in this process's environment, serve offers it to tools when it
    inherits everything (the control), and not when started with serve_env()."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-model-key-5d1e")

    async def create_tool_description(**options: object) -> str:
        async with autotool.connect(quiet=True, **options) as client:  # type: ignore[arg-type]
            [create] = [t for t in await client.list_tools() if t.name == "create_tool"]
            return create.description or ""

    assert "OPENAI_API_KEY" in await create_tool_description()
    assert "OPENAI_API_KEY" not in await create_tool_description(env=autotool.serve_env(), inherit_env=False)
    assert "OPENAI_API_KEY" not in autotool.serve_env()
    assert autotool.serve_env({"AUTOTOOL_LOG": "debug"})["AUTOTOOL_LOG"] == "debug"


def test_the_binary_is_the_wheels_own_when_installed() -> None:
    if os.environ.get("AUTOTOOL_TEST_WHEEL") != "1":
        pytest.skip("not installed from the wheel here (AUTOTOOL_TEST_WHEEL unset): AUTOTOOL_BIN names the build")
    own = wheel_binary()
    assert own is not None
    # Installed as a script of this environment, the launcher beside it.
    assert Path(sys.prefix).resolve() in own.parents, (own, sys.prefix)
    assert autotool_binary() == str(own)
    assert (own.parent / "autotool-launcher").is_file()


def test_autotool_bin_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-autotool"
    monkeypatch.setenv("AUTOTOOL_BIN", str(fake))
    assert autotool_binary() == str(fake)


async def test_a_missing_binary_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUTOTOOL_BIN", str(tmp_path / "nothing-here"))
    with pytest.raises(autotool.AutotoolNotFound, match="AUTOTOOL_BIN"):
        async with autotool.connect(quiet=True):
            pass


LATE_SERVER = str(Path(__file__).with_name("late_server.py"))


async def test_a_message_after_the_session_closed_is_dropped() -> None:
    """serve may still send (a list-change notification) while the host hangs up; mcp 1.x's
    stdio transport then fails the whole exit (the control, with the SDK used directly), and
    connect() must not."""
    if mcp_major() < 2:
        from mcp import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=sys.executable, args=[LATE_SERVER])
        with pytest.raises(BaseException) as failed:  # noqa: PT011 - an ExceptionGroup of the SDK's
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
        assert "BrokenResourceError" in repr(failed.value)
    async with autotool.connect(binary=sys.executable, args=[LATE_SERVER], mode="legacy", quiet=True) as client:
        assert client.protocol_version == "2025-11-25"


SLOW_UV = Path(__file__).resolve().parents[2] / "tests" / "tools" / "runtime" / "slow-uv"


@pytest.mark.parametrize("mode", MODES)
async def test_a_first_create_on_a_fresh_home_waits_for_the_runtime(
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """No runtime yet: serve builds it in the background (a uv that takes 12 s to install,
    offline; the build is a detached process that outlives the serve that started it) and holds
    the first `create_tool` 3.5 s, then answers "not yet, call again in N ms" with that hint in
    `_meta`. A second serve finds the same build still running: `call_tool` waits as told,
    showing its progress, and returns the created tool; with `wait=0` the refusal itself comes
    back, with its hint."""
    uv = Path(os.environ.get("AUTOTOOL_TEST_UV", "/opt/autotool-test-uv/bin/uv"))
    if not os.path.isfile(uv):  # noqa: ASYNC240 - one stat before anything starts
        pytest.fail(f"no test uv at {uv}: set AUTOTOOL_TEST_UV (sudo .ci/test installs it)")
    monkeypatch.delenv("AUTOTOOL_RUNTIME")
    # The Python the test runtime was made from, whose packages slow-uv copies.
    runtime = Path(os.environ.get("AUTOTOOL_TEST_RUNTIME", "/opt/autotool-test-runtime"))
    # autotool runs uv with an environment of its own: slow-uv's settings go in a wrapper.
    wrapper = tmp_path / "uv"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"export AUTOTOOL_TEST_UV='{uv}' AUTOTOOL_TEST_RUNTIME='{runtime}' SLOW_UV_SECONDS=12\n"
        f"exec '{SLOW_UV}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("AUTOTOOL_UV", str(wrapper))
    monkeypatch.setenv("AUTOTOOL_PYTHON", str((runtime / "bin" / "python3").resolve()))
    async with autotool.connect(mode=mode, wait=0, quiet=True) as client:  # type: ignore[arg-type]
        refused = await client.call_tool("create_tool", {"name": "adder", "code": fakes.ADDER_TOOL})
        assert autotool.is_error(refused), autotool.result_text(refused)
        assert "call create_tool again" in autotool.result_text(refused)
        assert autotool.client.reason(refused) == "runtime-building"
        after = autotool.client.retry_after(refused)
        assert after is not None and 0 < after <= 5, refused
    async with autotool.connect(mode=mode) as client:  # type: ignore[arg-type]
        created = await client.call_tool("create_tool", {"name": "adder", "code": fakes.ADDER_TOOL})
        assert not autotool.is_error(created), autotool.result_text(created)
        assert autotool.result_text(await client.call_tool("adder__add", {"a": 2, "b": 40})) == "42"
    said = capfd.readouterr().err
    assert "create_tool did not run yet (runtime-building); calling again in" in said, said
    assert "preparing the tool runtime: step" in said, said
    assert os.path.isfile(home / "runtime" / "autotool-runtime.txt")  # noqa: ASYNC240


SLOW_ADDER = "import time\n\ntime.sleep(6)  # longer than serve holds a call\n" + fakes.ADDER_TOOL


@pytest.mark.parametrize("mode", MODES)
async def test_a_slow_verification_is_answered_within_the_hold_and_joined_again(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that takes 6 s to start: the first `create_tool` is answered within serve's 3.5 s
    hold (plus a margin) saying verification continues, with `_meta` for programs; the same
    call again joins that verification (not a second one) and returns the mounted tool."""
    monkeypatch.delenv("AUTOTOOL_CREATE_HOLD")
    async with autotool.connect(mode=mode, wait=0, quiet=True) as client:  # type: ignore[arg-type]
        arguments = {"name": "adder", "code": SLOW_ADDER, "verify": "quick"}
        started = anyio.current_time()
        first = await client.call_tool("create_tool", arguments)
        answered = anyio.current_time() - started
        assert answered < 3.5 + 1.5, answered
        said = autotool.result_text(first)
        assert autotool.is_error(first), said
        assert "still being verified" in said and "Nothing has failed" in said, said
        assert "the tool list changes" in said, said
        assert autotool.client.reason(first) == "verification-continues"
        assert autotool.client.retry_after(first) == 2.0
        # Called again (as a program that reads `_meta` does): each answer is the same
        # verification, its time so far counted from the first call, until its outcome.
        again = await client.call_tool("create_tool", arguments)
        for _ in range(10):
            if autotool.client.reason(again) != "verification-continues":
                break
            so_far = float(autotool.result_text(again).split("(")[1].split(" s so far")[0])
            assert so_far >= anyio.current_time() - started - 1.0, autotool.result_text(again)
            again = await client.call_tool("create_tool", arguments)
        assert not autotool.is_error(again), autotool.result_text(again)
        assert autotool.result_text(again).startswith("Created adder v1"), autotool.result_text(again)
        assert autotool.result_text(await client.call_tool("adder__add", {"a": 2, "b": 40})) == "42"
        # The package on its own: called again as `_meta` says, it just waits.
    async with autotool.connect(mode=mode, quiet=True) as client:  # type: ignore[arg-type]
        arguments = {"name": "slow_adder", "code": SLOW_ADDER.replace('"adder"', '"slow_adder"')}
        created = await client.call_tool("create_tool", arguments)
        assert not autotool.is_error(created), autotool.result_text(created)
