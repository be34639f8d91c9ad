"""Choosing a backend is cheap to import: no SDK, no HTTP client, no local server until one opens.

Each import runs in a fresh interpreter, so what an earlier test loaded
cannot hide what the module itself pulls in.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What a program that only names a backend must not pay for: the local
# server's build and supervisor, the session index, and the SDKs and HTTP
# client that are loaded when a backend is opened.
EDGES = (
    "carryall.local",
    "subprocess",
    "tarfile",
    "zipfile",
    "filelock",
    "sqlite3",
    "anthropic",
    "openai",
    "httpx2",
)


def _loaded_after(module: str) -> list[str]:
    code = (
        f"import json, sys, {module}; print(json.dumps([n for n in {EDGES!r} if n in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(done.stdout)
    return loaded


@pytest.mark.parametrize(
    "module",
    [
        "carryall.backends",
        "carryall.transport",
        "carryall.transport.sse",
        "carryall.transport.anthropic",
        "carryall.transport.openai",
        "carryall.providers.codec",
    ],
)
def test_importing_loads_no_sdk_http_client_or_local_server(module: str) -> None:
    assert _loaded_after(module) == []
