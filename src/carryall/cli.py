"""The `carryall` command: one entry point, assembled from one module per area."""

from __future__ import annotations

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
    """Console-script entry point."""
    app()
