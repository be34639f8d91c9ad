"""The `carryall` command: one entry point, assembled from one module per area."""

from __future__ import annotations

import signal
from types import FrameType

import typer

from carryall._commands import agent, local, sessions

app = typer.Typer(
    name="carryall",
    help=(
        "Run tool-using LLM agents on any backend and keep every conversation whole.\n\n"
        "With no API key configured, the default backend is a local llama-server "
        "(install it once with `carryall local install`)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

agent.register(app)
local.register(app)
sessions.register(app)


def main() -> None:
    """Console-script entry point.

    SIGTERM and SIGHUP are turned into the same interruption as Ctrl-C, so a
    killed `carryall run` unwinds like an interrupted one: the turn stops,
    the session keeps its whole messages and the managed llama-server is
    stopped on the way out instead of being left behind as an orphan. The
    exit code is the shell's for that signal (143 for SIGTERM, 129 for SIGHUP).
    """
    received: list[int] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    for signum in _EXIT_SIGNALS:
        signal.signal(signum, interrupt)
    try:
        app()
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
