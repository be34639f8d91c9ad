"""What a test does when a real peer it needs (a server, a browser) is not on the machine.

A developer who ran only the README's two commands has no pinned MCP
reference server, and may have no PostgreSQL or Chromium: those tests skip,
each naming the one command that installs what it lacks. CI must not pass
by skipping, so `.ci/run` (which installs every peer) sets
`CARRYALL_REQUIRE_PEERS=1`, and there a missing peer fails the test instead.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE = "CARRYALL_REQUIRE_PEERS"
"""The variable that turns a missing peer from a skip into a failure."""


def required() -> bool:
    """Whether a missing peer fails the test (CI) rather than skipping it."""
    return os.environ.get(REQUIRE, "") not in ("", "0")


def peer_missing(what: str, install: str) -> NoReturn:
    """Skip (under `CARRYALL_REQUIRE_PEERS`, fail) saying what is missing and what installs it."""
    message = f"{what}: `{install}` installs it"
    if required():
        pytest.fail(f"{message} ({REQUIRE} is set, so a missing peer fails)", pytrace=False)
    pytest.skip(message)
