"""Which `autotool` program the package starts: `$AUTOTOOL_BIN`, else the one the
`autotool-mcp` wheel installed beside this package, else `autotool` on `PATH`.

The wheel carries `autotool` and `autotool-launcher` as scripts, so an installer puts both in
one `bin` directory (a venv's, `~/.local/bin`'s target with `pip install --user`, a pipx or
`uv tool` environment's); `autotool` finds the launcher beside itself.
"""

from __future__ import annotations

import os
import shutil
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "autotool-mcp"
"""The package's name on PyPI."""


class AutotoolNotFound(FileNotFoundError):
    """No `autotool` program could be found."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def wheel_binary() -> Path | None:
    """The `autotool` this distribution installed, if it is installed from the wheel."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        # Scripts are recorded relative to site-packages, e.g. `../../../bin/autotool`.
        if entry.name == "autotool" and len(entry.parts) > 1 and entry.parts[-2] in ("bin", "Scripts"):
            path = Path(str(dist.locate_file(entry))).resolve()
            if _executable(path):
                return path
    return None


def autotool_binary() -> str:
    """The program `connect()` starts: `$AUTOTOOL_BIN`, the wheel's own, or `autotool` on PATH."""
    chosen = os.environ.get("AUTOTOOL_BIN", "").strip()
    if chosen:
        return chosen
    own = wheel_binary()
    if own is not None:
        return str(own)
    on_path = shutil.which("autotool")
    if on_path is not None:
        return on_path
    raise AutotoolNotFound(
        "the autotool program was not found: install the package with `pip install autotool-mcp` "
        "(it carries the binary), put autotool on PATH, or set AUTOTOOL_BIN to its path"
    )
