"""The test suite never reads the developer's carryall settings or writes into their store.

The shared `home` fixture clears every `CARRYALL_*` variable and every
provider key variable; a run of the CLI tests with `CARRYALL_STORE` pointing
at a real store passes and leaves that store empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.environment import PROVIDER_VARIABLES, TEST_INPUTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def developer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A shell as a developer's might be: their own store, local server choice and keys."""
    store = tmp_path / "developer-store"
    monkeypatch.setenv("CARRYALL_STORE", str(store))
    monkeypatch.setenv("CARRYALL_LOCAL_SERVER", "gpu")
    monkeypatch.setenv("CARRYALL_CACHE_DIR", str(tmp_path / "cache"))
    for name in PROVIDER_VARIABLES:
        monkeypatch.setenv(name, "developer-own-value")
    yield store


def test_home_clears_every_carryall_and_key_variable(developer: Path, home: Path) -> None:
    left = sorted(
        name
        for name in os.environ
        if (name.startswith("CARRYALL_") and name not in ("CARRYALL_HOME", *TEST_INPUTS))
        or name in PROVIDER_VARIABLES
    )
    assert left == []
    assert os.environ["CARRYALL_HOME"] == str(home) and home.is_dir()


def test_cli_tests_with_a_developer_store_set_pass_and_leave_it_empty(tmp_path: Path) -> None:
    store = tmp_path / "developer-store"
    store.mkdir()
    env = {**os.environ, "CARRYALL_STORE": str(store), "PYTHONDONTWRITEBYTECODE": "1"}
    picked = "json_is_one_object or continues_the_latest or keeps_the_prompt or rm_failed"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", picked]
        + [str(ROOT / "tests" / "cli" / "test_run.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "passed" in result.stdout
    assert list(store.rglob("*")) == []
