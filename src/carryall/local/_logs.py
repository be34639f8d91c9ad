"""Reading back the last lines of a log, for the errors of the install and the server.

A failed step or a crashed server is reported with its log's path and its
last lines under the message; both halves of the package quote a log the
same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = ["TAIL_LINES", "indent", "log_tail"]

# Enough to show a compiler's or a loader's error, short enough to read in a terminal.
TAIL_LINES: Final = 15


def log_tail(path: Path, lines: int = TAIL_LINES, start: int = 0) -> list[str]:
    """The last non-blank `lines` of the file at `path` from byte `start`; [] if unreadable."""
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def indent(lines: Sequence[str]) -> str:
    """`lines` joined, each indented two spaces, as they sit under an error's first line."""
    return "\n".join(f"  {line}" for line in lines)
