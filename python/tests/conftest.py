"""What every test of the `autotool` package shares: which `autotool` it runs, the tools'
runtime, a fresh `AUTOTOOL_HOME` per test, and the fakes on loopback.

Environment the suite reads:
- `AUTOTOOL_TEST_WHEEL=1`: the package is installed from the wheel; `autotool` must then be the
  wheel's own binary (no `AUTOTOOL_BIN`, no `AUTOTOOL_LAUNCHER`: the launcher is found beside
  it). Otherwise `AUTOTOOL_BIN` (and usually `AUTOTOOL_LAUNCHER`) name a build to test.
- `AUTOTOOL_TEST_RUNTIME`: the Python runtime tools run on (default `/opt/autotool-test-runtime`),
  kept apart from the environment this suite runs in.
- `AUTOTOOL_TEST_SANDBOX`: `strict` (default) or `off`.
- `AUTOTOOL_TEST_REQUIRE`: comma-separated optional modules (`openai`, `anthropic`, `agents`,
  `langchain_mcp_adapters`) whose absence fails the tests that need them instead of skipping
  them. `CI=true` requires the ones the environment is meant to have (see `.ci/test`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import fakes

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "python.md"
RUNTIME = Path(os.environ.get("AUTOTOOL_TEST_RUNTIME", "/opt/autotool-test-runtime"))


def require(module: str) -> ModuleType:
    """Import `module`, or skip the test saying why (fail instead when it is required)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        required = {m.strip() for m in os.environ.get("AUTOTOOL_TEST_REQUIRE", "").split(",") if m.strip()}
        if module in required:
            pytest.fail(f"{module} is required in this environment (AUTOTOOL_TEST_REQUIRE) but missing: {exc}")
        pytest.skip(f"{module} is not installed here ({exc})")


def mcp_major() -> int:
    from importlib import metadata

    return int(metadata.version("mcp").split(".")[0])


def snippet(name: str) -> str:
    """The code block of docs/python.md that follows `<!-- test: NAME -->`, as it is written."""
    text = DOCS.read_text()
    match = re.search(rf"<!-- test: {re.escape(name)} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"docs/python.md has no python block marked <!-- test: {name} -->"
    return match.group(1)


@pytest.fixture(scope="session", autouse=True)
def _check_setup() -> None:
    """The suite tests what it says it tests: the wheel's binary when told so, a real runtime."""
    from autotool._binary import autotool_binary, wheel_binary

    assert (RUNTIME / "bin" / "python3").exists(), (
        f"the tools' runtime {RUNTIME} does not exist: create it (sudo .ci/test makes "
        "/opt/autotool-test-runtime) or set AUTOTOOL_TEST_RUNTIME"
    )
    assert Path(sys.prefix).resolve() != RUNTIME.resolve(), (
        "the suite runs inside the tools' runtime; the package's environment must be another"
    )
    if os.environ.get("AUTOTOOL_TEST_WHEEL") == "1":
        assert not os.environ.get("AUTOTOOL_BIN"), "AUTOTOOL_TEST_WHEEL=1 tests the wheel's binary: unset AUTOTOOL_BIN"
        assert not os.environ.get("AUTOTOOL_LAUNCHER"), (
            "AUTOTOOL_TEST_WHEEL=1: the launcher must be found beside autotool"
        )
        own = wheel_binary()
        assert own is not None, "the autotool-mcp wheel is not installed in this environment"
        assert Path(autotool_binary()) == own
        assert (own.parent / "autotool-launcher").is_file(), f"no autotool-launcher beside {own}"
    else:
        assert os.environ.get("AUTOTOOL_BIN"), (
            "set AUTOTOOL_BIN to the autotool build to test (or AUTOTOOL_TEST_WHEEL=1 in a venv with the wheel)"
        )


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh AUTOTOOL_HOME (and HOME) for each test; the shared runtime; the sandbox mode."""
    autotool_home = tmp_path / "autotool-home"
    monkeypatch.setenv("AUTOTOOL_HOME", str(autotool_home))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AUTOTOOL_RUNTIME", str(RUNTIME))
    monkeypatch.setenv("AUTOTOOL_SANDBOX", os.environ.get("AUTOTOOL_TEST_SANDBOX", "strict"))
    # create_tool answers with its outcome however long verification takes on a loaded machine
    # (frameworks driven by a scripted model would not call again); the tests of serve's hold
    # remove this.
    monkeypatch.setenv("AUTOTOOL_CREATE_HOLD", "0")
    # The tests name their model explicitly; nothing from the outer environment leaks in.
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_LLM",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_MODEL",
        "AUTOTOOL_PROVIDER",
        "AUTOTOOL_LLM_TIMEOUT",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    # The Agents SDK would export traces to OpenAI's servers.
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    return autotool_home


@pytest.fixture
def hn(monkeypatch: pytest.MonkeyPatch) -> Iterator[fakes.HnApi]:
    """The Hacker-News-like API, its key and base in the environment serve inherits."""
    api = fakes.HnApi(key="hn-key-7f3a9c")
    with fakes.serving(api.route) as base:
        monkeypatch.setenv("HN_API_KEY", api.key)
        monkeypatch.setenv("HN_API_BASE", base)
        yield api


@pytest.fixture
def model() -> Iterator[tuple[fakes.ModelServer, str]]:
    """The scripted model and its root URL (append `/v1` for OpenAI's SDK)."""
    server = fakes.ModelServer()
    with fakes.serving(server.route) as base:
        yield server, base
