"""The `carryall` command: one entry point, assembled from one module per area.

Start-up is in proportion to the command. `main` registers only the area the
command line names, so `sessions list` or `recall` never import the agent,
the backends, the SDKs or the local-server installer; with no command, or
one it does not know, every area is registered, so `--help` and the usage
error list them all. `app`, for callers such as tests, has every area.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

if TYPE_CHECKING:
    app: typer.Typer

__all__ = ["app", "build_app", "main"]

AREAS: Final = ("agent", "local", "mcp", "sessions", "paths")
"""The command modules under `carryall._commands`, each with a `register(app)`."""

_AREA_OF: Final = {
    "run": "agent",
    "chat": "agent",
    "local": "local",
    "mcp": "mcp",
    "sessions": "sessions",
    "recall": "sessions",
    "tui": "sessions",
    "paths": "paths",
}


def build_app(areas: Sequence[str] = AREAS) -> typer.Typer:
    """The `carryall` app with the commands of `areas` (by default every one)."""
    built = typer.Typer(
        name="carryall",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Inherited by every command's context, so `carryall run -h` works too.
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    built.callback()(_top_level)
    for area in areas:
        importlib.import_module(f"carryall._commands.{area}").register(built)
    return built


def _version(value: bool) -> None:
    if value:
        # Read only when asked: `importlib.metadata` is not free at start-up.
        from importlib.metadata import version

        typer.echo(f"carryall {version('carryall')}")
        raise typer.Exit()


def _top_level(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version,
            is_eager=True,
            help="Print carryall's version and exit.",
        ),
    ] = False,
) -> None:
    """Run tool-using LLM agents on any backend and keep every conversation whole.

    With no API key configured, the default backend is a local llama-server
    (install it once with `carryall local install`).

    Example: carryall run "Use the list_dir tool to list the files in the workspace."
    """


def areas_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The areas a command line needs: the one its command belongs to, else all of them."""
    area = _AREA_OF.get(argv[0]) if argv else None
    return (area,) if area is not None else AREAS


_whole: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    # `app` is built on first use: the console script never needs every area.
    global _whole
    if name == "app":
        if _whole is None:
            _whole = build_app()
        return _whole
    raise AttributeError(f"module 'carryall.cli' has no attribute {name!r}")


def main() -> None:
    """Console-script entry point.

    SIGTERM and SIGHUP are turned into the same interruption as Ctrl-C, so a
    killed `carryall run` unwinds like an interrupted one: the turn stops,
    the session keeps its whole messages and the managed llama-server is
    stopped on the way out instead of being left behind as an orphan. The
    exit code is the shell's for that signal (143 for SIGTERM, 129 for SIGHUP).
    """
    from carryall._commands._output import Terminated

    received: list[int] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise Terminated

    for signum in _EXIT_SIGNALS:
        signal.signal(signum, interrupt)
    try:
        build_app(areas_for(sys.argv[1:]))()
    except SystemExit as exit_:
        if received and exit_.code not in (0, None):
            raise SystemExit(128 + received[0]) from None
        raise
    except KeyboardInterrupt:
        raise SystemExit(128 + (received[0] if received else signal.SIGINT)) from None


# Ctrl-C already arrives as KeyboardInterrupt; these two join it (POSIX only).
_EXIT_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
