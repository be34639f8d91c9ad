"""What a test must take away from the developer's environment before carryall reads it."""

from __future__ import annotations

from carryall._secrets import KEY_VARIABLES

PROVIDER_VARIABLES = (*KEY_VARIABLES, "AWS_PROFILE", "LLAMA_SERVER_URL")
"""What picks a backend or a key from the environment: a developer's own must not steer a test."""

TEST_INPUTS = (
    "CARRYALL_FAULT_SEED",
    "CARRYALL_LOCAL_THREADS",
    "CARRYALL_MCP_EVERYTHING",
    "CARRYALL_REQUIRE_PEERS",
)
"""`CARRYALL_*` variables that steer the test run itself, not what carryall answers: kept.

`CARRYALL_LOCAL_THREADS` is the local server's thread count, which the
suite sets (tests/conftest.py): a speed, never a result.
"""


def foreign(name: str, keep: tuple[str, ...] = ()) -> bool:
    """Whether variable `name` is the developer's carryall setting or key, to be cleared
    (`keep` names the ones the caller sets itself)."""
    if name in keep or name in TEST_INPUTS:
        return False
    return name.startswith("CARRYALL_") or name in PROVIDER_VARIABLES
