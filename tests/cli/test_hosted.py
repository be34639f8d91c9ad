"""`--hosted KIND` on `run` and `chat`: a provider-run tool declared with every request.

Against scripted servers of the wires: the kind is in the body sent, and a
backend without it refuses by name before anything is sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import invoke
from tests.support.scripted import Reply, served


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")


def _argv(url: str, workspace: Path, *more: str) -> list[str]:
    base = ["run", "What happened today?", "-b", "openai", "--base-url", f"{url}/v1"]
    return [*base, "-m", "gpt-t", "-w", str(workspace), "--json", "--no-record", *more]


def test_hosted_web_search_goes_out_as_web_search_options(
    home: Path, tmp_path: Path, keys: None
) -> None:
    with served([Reply(sse="openai_text.sse")]) as server:
        result = invoke(*_argv(server.url, tmp_path, "--hosted", "web_search"))
    assert result.exit_code == 0, result.stderr
    [sent] = server.requests
    assert sent["body"]["web_search_options"] == {}


def test_hosted_settings_ride_as_json_after_the_kind(
    home: Path, tmp_path: Path, keys: None
) -> None:
    settings = json.dumps({"search_context_size": "low"})
    with served([Reply(sse="openai_text.sse")]) as server:
        result = invoke(*_argv(server.url, tmp_path, "--hosted", f"web_search={settings}"))
    assert result.exit_code == 0, result.stderr
    [sent] = server.requests
    assert sent["body"]["web_search_options"] == {"search_context_size": "low"}


def test_a_kind_the_backend_lacks_is_refused_by_name_and_nothing_is_sent(
    home: Path, tmp_path: Path, keys: None
) -> None:
    with served([Reply(sse="openai_text.sse")]) as server:
        result = invoke(*_argv(server.url, tmp_path, "--hosted", "code_execution"))
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert "hosted tool 'code_execution' on the openai wire" in said
    assert server.requests == []


def test_an_unknown_kind_is_refused_with_the_known_ones(
    home: Path, tmp_path: Path, keys: None
) -> None:
    result = invoke(*_argv("http://127.0.0.1:9", tmp_path, "--hosted", "telepathy"))
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert "--hosted 'telepathy': not a hosted tool" in said and "url_context" in said


def test_a_continued_session_declares_its_hosted_tools_again_and_show_lists_them(
    home: Path, tmp_path: Path, keys: None
) -> None:
    settings = json.dumps({"search_context_size": "low"})
    first = [a for a in _argv("URL", tmp_path) if a != "--no-record"]
    with served([Reply(sse="openai_text.sse"), Reply(sse="openai_text.sse")]) as server:
        argv = [server.url if a == "URL" else a for a in first]
        argv = [f"{server.url}/v1" if a == "URL/v1" else a for a in argv]
        result = invoke(*argv, "--hosted", f"web_search={settings}")
        assert result.exit_code == 0, result.stderr
        again = invoke("run", "-c", "And tomorrow?", "--json")
        assert again.exit_code == 0, again.stderr
    assert [r["body"]["web_search_options"] for r in server.requests] == [
        {"search_context_size": "low"}
    ] * 2
    shown = invoke("sessions", "show", "last")
    assert shown.exit_code == 0, shown.stderr
    assert f"web_search={settings}" in shown.stdout
