"""How every command says it failed: one `error:` line on stderr, then the exit code.

One function, so `run`, `sessions` and `local` word a failure alike and a
message is never read as console markup.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["fail", "print_error"]


def print_error(message: str, console: Console | None = None) -> None:
    """Print `error: <first line>` on stderr, and any further lines (a log tail) dimmed under it."""
    err = console or Console(stderr=True, highlight=False)
    first, _, rest = message.partition("\n")
    err.print(f"[bold red]error:[/] {escape(first)}", soft_wrap=True)
    if rest:
        err.print(rest, style="dim", soft_wrap=True, markup=False)


def fail(message: str, code: int = 1, console: Console | None = None) -> NoReturn:
    """Print the error (`print_error`) and leave with `code`."""
    print_error(message, console)
    raise typer.Exit(code)
