"""The package is clean under `mypy --strict`: its sources, these tests, and the examples of
docs/python.md (each whose imports are installed here), checked in one run with the SDKs they
use, so `openai_tools` and `anthropic_tools` are checked against the SDKs' own parameter types
where the examples pass them on."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from conftest import DOCS, require

PACKAGE = Path(__file__).resolve().parents[1]

# The fragment uses names a loop around it defines; the rest are whole programs.
WHOLE = ["quickstart", "own-loop", "agents-sdk", "langchain-session", "langchain-stateless", "langchain-consent"]


def imports_available(code: str) -> bool:
    modules = re.findall(r"^(?:from|import) ([A-Za-z_][\w.]*)", code, re.M)
    return all(importlib.util.find_spec(m.split(".")[0]) is not None for m in modules)


def test_mypy_strict(tmp_path: Path) -> None:
    api = require("mypy.api")
    text = DOCS.read_text()
    examples = []
    for name in WHOLE:
        match = re.search(rf"<!-- test: {re.escape(name)} -->\s*```python\n(.*?)```", text, re.S)
        assert match, name
        if imports_available(match.group(1)):
            path = tmp_path / f"example_{name.replace('-', '_')}.py"
            path.write_text(match.group(1))
            examples.append(str(path))
    assert "quickstart" in " ".join(examples)
    out, err, status = api.run(
        [
            "--config-file",
            str(PACKAGE / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "mypy-cache"),
            str(PACKAGE / "src" / "autotool"),
            *sorted(str(p) for p in (PACKAGE / "tests").glob("*.py")),
            *examples,
        ]
    )
    assert status == 0, out + err
