"""A call that must not block, run so that a test fails (rather than hangs) when it does."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

LIMIT = 5.0
"""Seconds a call may take before it counts as blocked."""


def bounded(call: Callable[[], object], unblock: Callable[[], None], what: str) -> object:
    """`call()`'s result or exception; fails the test, after `unblock()`, if it runs `LIMIT` s."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call())
        except Exception as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIMIT)
    if thread.is_alive():
        unblock()
        thread.join(LIMIT)
        pytest.fail(f"{what} blocked")
    return box[0]
