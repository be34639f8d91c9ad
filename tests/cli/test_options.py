"""`-o KEY=VALUE` and `[backends.NAME.options]`: sent, reported, recorded, continued and shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from carryall.sessions import Store
from tests.support.cli import invoke
from tests.support.scripted import Reply, served


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _run(url: str, workspace: Path, *args: str) -> object:
    return invoke(
        "run", "-b", "openai", "--base-url", url, "-m", "gpt-4.1-mini", "--tools", "none",
        "-w", str(workspace), *args,
    )  # fmt: skip


def test_options_are_sent_named_when_left_off_recorded_and_continued(
    home: Path, workspace: Path
) -> None:
    with served([Reply(sse="openai_text.sse"), Reply(sse="openai_text.sse")]) as server:
        url = f"{server.url}/v1"
        first = _run(
            url, workspace, "hello",
            "-o", "temperature=0.2", "-o", 'stop=["END", "STOP"]', "-o", "top_k=40",
            "-o", "extra.openai.user=abc", "-o", "service_tier=flex",
        )  # fmt: skip
        assert first.exit_code == 0, first.stderr
        assert "request (option): top_k: the openai wire takes no top_k; left off" in first.stderr
        again = invoke("run", "-c", "and then?", "-w", str(workspace))
        assert again.exit_code == 0, again.stderr
    for request in server.requests:
        body = request["body"]
        assert body["temperature"] == 0.2
        assert body["stop"] == ["END", "STOP"]
        assert body["user"] == "abc"
        assert body["service_tier"] == "flex"
        assert "top_k" not in body
    [info] = Store(home / "sessions").list()
    assert info.meta.options is not None
    assert info.meta.options["request"] == {
        "temperature": 0.2,
        "stop": ["END", "STOP"],
        "top_k": 40,
        "extra": {"openai": {"user": "abc"}},
        "service_tier": "flex",
    }
    shown = invoke("sessions", "show", "last")
    assert shown.exit_code == 0, shown.stderr
    assert (
        'options:  temperature=0.2 stop=["END", "STOP"] top_k=40 extra.openai.user=abc '
        "service_tier=flex" in shown.stdout
    )
    # Recorded once for the session, however many requests left it off.
    assert shown.stdout.count("request: option: top_k: the openai wire takes no top_k") == 1


def test_the_command_line_goes_over_the_config_files_options_table(
    home: Path, workspace: Path
) -> None:
    (home / "config.toml").write_text(
        "[backends.openai.options]\ntemperature = 0.9\nseed = 7\n"
        '[backends.openai.options.extra.openai]\nuser = "from-config"\n'
    )
    with served([Reply(sse="openai_text.sse")]) as server:
        result = _run(f"{server.url}/v1", workspace, "hi", "-o", "temperature=0.1")
        assert result.exit_code == 0, result.stderr
    body = server.requests[0]["body"]
    assert (body["temperature"], body["seed"], body["user"]) == (0.1, 7, "from-config")


@pytest.mark.parametrize(
    ("pair", "said"),
    [
        ("temprature=0.2", "-o temprature: no such option; known options: temperature, top_p,"),
        ("temperature=hot", "-o: Expected `float | null`, got `str` - at `$.temperature`"),
        ("extra.mistral.safe_prompt=true", "'mistral' is not a wire; expected one of anthropic"),
        ("seed", "-o 'seed': expected KEY=VALUE"),
    ],
)
def test_a_bad_option_is_an_error_naming_it_before_anything_is_sent(
    home: Path, workspace: Path, pair: str, said: str
) -> None:
    with served([]) as server:
        result = _run(f"{server.url}/v1", workspace, "hi", "-o", pair)
    assert result.exit_code == 1
    assert said in " ".join(result.stderr.split())
    assert server.requests == []


def test_a_bad_options_table_in_the_config_file_names_the_file_and_table(
    home: Path, workspace: Path
) -> None:
    (home / "config.toml").write_text("[backends.openai.options]\ntop_q = 0.5\n")
    result = _run("http://127.0.0.1:9/v1", workspace, "hi")
    assert result.exit_code == 1
    said = " ".join(result.stderr.split())
    assert "[backends.openai.options]" in said and "top_q" in said
    assert "known options: temperature" in said


# A scripted server in vLLM's manner: the choice's `stop_reason` names the stop string.
STOPPED_SSE = (
    'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
    '"delta":{"content":"one two"},"finish_reason":null}]}\n\n'
    'data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
    '"delta":{},"finish_reason":"stop","stop_reason":"END"}]}\n\n'
    "data: [DONE]\n\n"
)


def test_run_json_says_which_stop_sequence_ended_the_answer(home: Path, workspace: Path) -> None:
    with served([Reply(sse=STOPPED_SSE)]) as server:
        result = _run(f"{server.url}/v1", workspace, "count", "-o", "stop=END", "--json")
        assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    assert (printed["stop_reason"], printed["stop_sequence"]) == ("end_turn", "END")
    assert server.requests[0]["body"]["stop"] == ["END"]


def test_chat_sends_its_options_with_every_turn(home: Path, workspace: Path) -> None:
    with served([Reply(sse="openai_text.sse"), Reply(sse="openai_text.sse")]) as server:
        result = invoke(
            "chat", "-b", "openai", "--base-url", f"{server.url}/v1", "-m", "gpt-4.1-mini",
            "--tools", "none", "-w", str(workspace), "-o", "temperature=0.3", "-o", "seed=11",
            input="hello\nand again\n",
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
    assert len(server.requests) == 2
    for request in server.requests:
        assert (request["body"]["temperature"], request["body"]["seed"]) == (0.3, 11)
