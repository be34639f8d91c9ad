"""How every command says it failed: one `error:` line on stderr, then the exit code.

One function, so `run`, `sessions` and `local` word a failure alike, a
message is never read as console markup, and no credential reaches the
terminal: the line is masked (`carryall._secrets.mask`) by key shape, URL
userinfo and the keys in the environment, whatever raised it.
"""

from __future__ import annotations

import os
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from carryall._secrets import mask

__all__ = ["fail", "masked", "print_error"]

_KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def masked(message: str) -> str:
    """`message` with every credential masked: key shapes, URL userinfo, the keys in use."""
    return mask(message, [os.environ.get(name) for name in _KEY_VARIABLES])


def print_error(message: str, console: Console | None = None) -> None:
    """Print `error: <first line>` on stderr, and any further lines (a log tail) dimmed under it."""
    err = console or Console(stderr=True, highlight=False)
    message = masked(message)
    first, _, rest = message.partition("\n")
    err.print(f"[bold red]error:[/] {escape(first)}", soft_wrap=True)
    if rest:
        err.print(rest, style="dim", soft_wrap=True, markup=False)


def fail(message: str, code: int = 1, console: Console | None = None) -> NoReturn:
    """Print the error (`print_error`) and leave with `code`."""
    print_error(message, console)
    raise typer.Exit(code)
