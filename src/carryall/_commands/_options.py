"""Command-line options more than one command takes, declared once so their help reads alike."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["BaseUrlOption"]

BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        metavar="URL",
        help="Server URL, for a self-hosted or proxied backend.",
        show_default=False,
    ),
]
"""`--base-url`: where `run`, `chat` and `models` send, for a server of the user's own."""
