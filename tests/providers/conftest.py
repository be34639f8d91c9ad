"""Fixtures of the codec tests that talk to a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from carryall import local


@pytest.fixture(scope="module")
def server() -> Iterator[local.LocalServer]:
    """The embedded llama-server, shared by a test module and stopped after it."""
    if not local.status().ready:
        pytest.skip("the local backend is not installed: run `carryall local install`")
    shared = local.get_local_server()
    shared.ensure_running()
    yield shared
    local.shutdown_local_server()
