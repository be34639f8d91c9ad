"""The `carryall` command: one entry point, assembled from one module per area.

Start-up is in proportion to the command. `main` registers only the area the
command line names, so `sessions list` or `recall` never import the agent,
the backends, the SDKs or the local-server installer, and of that area keeps
only the command named (`narrow`); with no command, or one it does not know,
every area and command is kept, so `--help` and the usage error list them
all. `app`, for callers such as tests, has every area.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from typer.models import CommandInfo, TyperInfo

if TYPE_CHECKING:
    app: typer.Typer

__all__ = ["app", "build_app", "main", "narrow"]

AREAS: Final = ("agent", "models", "local", "mcp", "sessions", "paths")
"""The command modules under `carryall._commands`, each with a `register(app)`."""

_AREA_OF: Final = {
    "run": "agent",
    "chat": "agent",
    "models": "models",
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


def narrow(app: typer.Typer, argv: Sequence[str]) -> typer.Typer:
    """`app` keeping, at each level, only the command or group `argv` names next.

    typer turns every registered command into a click command, reading its
    signature and type hints, before it parses anything; one command line
    runs one command, so the others are left out first. A level where
    `argv` names nothing registered there (an option, `--help`, a typo) keeps
    everything, so its help and its usage error, suggestions included, are
    the whole app's.
    """
    level, rest = app, list(argv)
    while rest:
        names = [_command_name(info) for info in level.registered_commands]
        groups = [_group_name(info) for info in level.registered_groups]
        if None in names or None in groups or rest[0] not in (*names, *groups):
            break
        name = rest.pop(0)
        level.registered_commands = [
            info for info, n in zip(level.registered_commands, names, strict=True) if n == name
        ]
        level.registered_groups = [
            info for info, n in zip(level.registered_groups, groups, strict=True) if n == name
        ]
        if not level.registered_groups:
            break
        sub = level.registered_groups[0].typer_instance
        if sub is None:
            break
        level = sub
    return app


def _command_name(info: CommandInfo) -> str | None:
    # Every carryall command is registered by name; an unnamed one would
    # take typer's derived name, which this does not guess at.
    return info.name if isinstance(info.name, str) else None


def _group_name(info: TyperInfo) -> str | None:
    # A group is named by `add_typer(..., name=)` or by its own `Typer(name=)`;
    # an unset one is typer's placeholder, not a string.
    own = info.typer_instance.info.name if info.typer_instance is not None else None
    for name in (info.name, own):
        if isinstance(name, str):
            return name
    return None


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
        argv = sys.argv[1:]
        narrow(build_app(areas_for(argv)), argv)()
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
