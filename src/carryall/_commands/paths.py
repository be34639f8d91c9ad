"""`carryall paths`: where the config file, the sessions and the local backend's cache live.

Every folder comes from `carryall.paths` (and the store from
`carryall.sessions.open_store`'s own order), so what this prints is what
every other command uses, not a second answer.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from carryall._commands._output import fail, warn_damage
from carryall._commands.sessions import StoreOption
from carryall.errors import CarryallError

__all__ = ["register"]


def show_paths(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
    location: StoreOption = None,
) -> None:
    """Print where the config file, the sessions and the local backend's cache live.

    $CARRYALL_HOME moves the config file and the sessions, $CARRYALL_STORE
    (or --store, or the config file's `store`) the sessions alone, and
    $CARRYALL_CACHE_DIR the cache.

    Example: carryall paths --json
    """
    from carryall import paths
    from carryall.config import config_path, reading_past_a_broken_config
    from carryall.sessions import open_store

    try:
        # Where the config file is must be askable while it is broken.
        with reading_past_a_broken_config(lambda message: warn_damage([message])):
            store = open_store(location)
    except CarryallError as exc:
        fail(str(exc))
    found = {
        "config": str(config_path()),
        "sessions": store.location,
        "cache": str(paths.cache_dir()),
    }
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    for name, where in found.items():
        typer.echo(f"{name + ':':<10} {where}")


def register(app: typer.Typer) -> None:
    """Add `paths` to the `carryall` app."""
    app.command("paths")(show_paths)
