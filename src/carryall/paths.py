"""Where carryall keeps things: the config, data and cache folders, read in one place.

`$CARRYALL_HOME` moves the config file and the sessions; `$CARRYALL_CACHE_DIR`
moves the local backend's cache, which `$CARRYALL_HOME` does not: one build
serves every profile on the machine; `$CARRYALL_STORE` names another session
store (a folder or a URL, `carryall.sessions.open_store`). Every variable is read here, with `~`
expanded the same way, so two modules can never disagree on a folder.
Without them the platform's own folders are used (`platformdirs`, loaded only
then: with `$CARRYALL_HOME` set, `sessions list` never asks for them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = [
    "APP_NAME",
    "cache_dir",
    "chat_history_file",
    "config_dir",
    "home",
    "sessions_dir",
    "store_location",
]

APP_NAME: Final = "carryall"


def _variable(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def home() -> Path | None:
    """`$CARRYALL_HOME`, with `~` expanded, or None when it is not set (or empty)."""
    return _variable("CARRYALL_HOME")


def config_dir() -> Path:
    """The folder of `config.toml`: `$CARRYALL_HOME`, else the platform config folder."""
    root = home()
    if root is not None:
        return root
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def sessions_dir() -> Path:
    """Where sessions live: `$CARRYALL_HOME/sessions`, else the platform data folder's."""
    root = home()
    if root is not None:
        return root / "sessions"
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME)) / "sessions"


def chat_history_file() -> Path:
    """The lines typed at `carryall chat` (for Up and Ctrl-R): beside the sessions' folder."""
    return sessions_dir().parent / "chat_history"


def store_location() -> str | None:
    """`$CARRYALL_STORE` as given (a folder path or a store URL), or None when unset or empty."""
    return os.environ.get("CARRYALL_STORE") or None


def cache_dir() -> Path:
    """The local backend's build, model and logs.

    `$CARRYALL_CACHE_DIR` wins, else the platform's user cache folder,
    whatever `$CARRYALL_HOME` says: the cache holds a 20 MB to 1 GB build of
    the machine, not data of one profile, so a fresh `$CARRYALL_HOME` must
    find the backend an earlier one installed rather than ask for another.
    """
    explicit = _variable("CARRYALL_CACHE_DIR")
    if explicit is not None:
        return explicit
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME))
