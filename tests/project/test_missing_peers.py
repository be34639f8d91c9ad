"""A test whose real peer is missing skips, naming the one command that installs it.

A developer who ran only the README's two commands has Node.js, perhaps,
but not the pinned MCP reference server: those tests skip and say how to
get it. Under `.ci/run` (`CARRYALL_REQUIRE_PEERS=1`) the same tests fail,
so CI cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mcp_peer import install_command, pinned_version

ROOT = Path(__file__).resolve().parents[2]


def _run_mcp_tests(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CARRYALL_REQUIRE_PEERS"}
    env |= {"CARRYALL_MCP_EVERYTHING": str(tmp_path / "not-installed/index.js"), **extra}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-rs",
         "-q", "tests/mcp/test_client.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _needs_node_and_mcp() -> None:
    pytest.importorskip("mcp", reason="the MCP tests need the mcp extra")
    if shutil.which("node") is None:
        pytest.skip("this checks the case where Node.js is installed and the server is not")


def test_mcp_tests_skip_naming_the_npm_command_when_node_is_there_but_the_server_is_not(
    tmp_path: Path,
) -> None:
    done = _run_mcp_tests(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " skipped" in done.stdout and " failed" not in done.stdout, done.stdout
    assert install_command() in done.stdout
    assert f"@modelcontextprotocol/server-everything@{pinned_version()}" in install_command()


def test_under_ci_a_missing_peer_fails_instead_of_skipping(tmp_path: Path) -> None:
    done = _run_mcp_tests(tmp_path, CARRYALL_REQUIRE_PEERS="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (" failed" in done.stdout or " error" in done.stdout) and " skipped" not in done.stdout
    assert install_command() in done.stdout
