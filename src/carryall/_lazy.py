"""Names a package re-exports but loads on first use (PEP 562), in one way for every package.

A package that re-exports a heavy module's names (the agent loop, the
installer) would otherwise load that module with itself; `lazy_names` gives
it a module `__getattr__` that imports the name's home the first time it is
asked for and keeps it as an ordinary attribute from then on (so
`monkeypatch` and `mock.patch` see a plain attribute).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name of `homes` loaded from its module."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    return load
