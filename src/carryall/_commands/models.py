"""`carryall models`: the models a backend serves, as its provider lists them.

The list is asked of the backend the way `run` would open it
(`carryall.backends.list_models`), so the same config file, key variables
and base URL apply, and a missing key or an unreachable server reads the
same here as there.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from carryall._commands._options import BaseUrlOption
from carryall._commands._output import echo, fail
from carryall.errors import CarryallError

if TYPE_CHECKING:
    from carryall.transport import ModelInfo

__all__ = ["register"]


def models(
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            "-b",
            metavar="NAME",
            help="Backend to ask (default: the one `run` would use).",
            show_default=False,
        ),
    ] = None,
    base_url: BaseUrlOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON array, one object per model.")
    ] = False,
) -> None:
    """List the models a backend serves: the names --model takes.

    OpenAI-compatible servers answer from /v1/models, Anthropic and Gemini
    from their model lists, Bedrock from its foundation models in the
    region, llama-server and local from /v1/models and /props (local starts
    the embedded server). Each line is the model's name, its context window
    in tokens where the provider says, and its display name or owner.

    Example: carryall models -b local --json
    """
    from carryall.backends import list_models

    try:
        listed = list_models(backend, base_url=base_url)
    except CarryallError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(msgspec.to_builtins(listed), indent=2))
        return
    if not listed:
        echo("(the backend lists no models)", err=True)
        return
    width = shutil.get_terminal_size().columns
    for line in _lines(listed, width):
        echo(line)


def _lines(listed: list[ModelInfo], width: int) -> list[str]:
    """One line per model: its name whole, its context, then as much of its description as fits.

    The name is what a person copies, so only the description gives way to `width`.
    """
    longest = max(len(info.id) for info in listed)
    lines = []
    for info in listed:
        context = f"{info.context_window:,}" if info.context_window else "-"
        line = f"{info.id:<{longest}}  {context:>9}"
        about = info.name or info.owner or ""
        room = width - len(line) - 2
        if about and room > 0:
            line = f"{line}  {about[:room]}"
        lines.append(line.rstrip())
    return lines


def register(app: typer.Typer) -> None:
    """Add `models` to the `carryall` app."""
    app.command("models")(models)
