"""`--cache` on run and chat, and the config's `cache`: the policy the agent's requests carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent import say
from tests.support.cli import invoke, script


@pytest.mark.parametrize(
    ("config", "argv", "policy"),
    [
        ("", [], "auto"),
        ("", ["--cache", "off"], "off"),
        ('cache = "off"\n', [], "off"),
        ('cache = "off"\n', ["--cache", "auto"], "auto"),
    ],
)
def test_run_asks_for_the_cache_policy_the_flag_then_the_config_names(
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    tmp_path: Path,
    config: str,
    argv: list[str],
    policy: str,
) -> None:
    (home / "config.toml").write_text(config)
    opened = script(monkeypatch, say("hi"))
    result = invoke("run", "hello", "-w", str(tmp_path), "--no-record", *argv)
    assert result.exit_code == 0, result.stderr
    assert opened.backend is not None
    [sent] = opened.backend.requests
    assert sent.cache == policy


def test_a_continued_session_keeps_its_cache_key_and_another_session_gets_its_own(
    monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path
) -> None:
    opened = script(monkeypatch, say("one"))
    keys = []
    for argv in (["hello"], ["-c", "again"], ["elsewhere"]):
        assert invoke("run", *argv, "-w", str(tmp_path)).exit_code == 0
        assert opened.backend is not None
        [sent] = opened.backend.requests
        keys.append(sent.cache_key)
    first, continued, other = keys
    assert first.startswith("carryall-")
    assert continued == first != other


def test_an_unknown_cache_policy_is_refused() -> None:
    result = invoke("run", "hello", "--cache", "sometimes")
    assert result.exit_code != 0
    assert "sometimes" in result.stderr
