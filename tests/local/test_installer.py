"""Both installs of the local server serve every route carryall uses: real servers only.

The xllamacpp wheel (the default install) and the compiled build
(`install --build`) run under the same supervisor with the same arguments;
each test runs once per install that is present, on the real SmolLM2 model:
`/props`, `/v1/chat/completions` (plain, constrained by a `json_schema`,
streamed), `/v1/messages` (plain and streamed) and `/v1/responses`, then
the supervisor's own duties (a crash restarted once, a clean close).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from carryall import local
from carryall.errors import LocalBackendError
from carryall.local import LocalServer

_STATUS = local.status()
_KINDS = [
    kind
    for kind, there in (("wheel", _STATUS.wheel_installed), ("build", _STATUS.build_installed))
    if there
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _STATUS.model_installed, reason="the model is not installed"),
    pytest.mark.skipif(not _KINDS, reason="no local server is installed"),
    pytest.mark.timeout(300),
]


@pytest.fixture(scope="module", params=_KINDS)
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    with LocalServer(kind=request.param) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: LocalServer) -> Iterator[httpx2.Client]:
    no_reuse = httpx2.Limits(max_keepalive_connections=0)
    with httpx2.Client(
        base_url=server.base_url, timeout=180.0, trust_env=False, limits=no_reuse
    ) as http:
        yield http


def _sse_data(text: str) -> list[dict[str, object]]:
    return [
        json.loads(line[len("data: ") :])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_props_describe_the_model_and_context(server: LocalServer) -> None:
    assert server.props["default_generation_settings"]["n_ctx"] == 4096
    assert server.props["modalities"]["vision"] is False
    assert server.model_id == local.MODEL_FILENAME


def test_chat_completions_answer(client: httpx2.Client) -> None:
    body = client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8},
    ).json()
    choice = body["choices"][0]
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    assert body["usage"]["prompt_tokens"] > 0


def test_json_schema_constrains_the_answer_to_a_choice(client: httpx2.Client) -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"enum": ["notes.txt", "todo.md"]}},
        "required": ["path"],
    }
    body = client.post(
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "Which file holds the notes?"}],
            "max_tokens": 40,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "pick", "schema": schema},
            },
        },
    ).json()
    answer = json.loads(body["choices"][0]["message"]["content"])
    assert answer["path"] in ("notes.txt", "todo.md")


def test_chat_completions_stream(client: httpx2.Client) -> None:
    answer = client.post(
        "/v1/chat/completions",
        json={
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 6,
            "stream": True,
        },
    )
    chunks = _sse_data(answer.text)
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")  # type: ignore[index]


def test_messages_answer_and_stream_in_anthropic_dialect(client: httpx2.Client) -> None:
    request = {
        "model": "local",
        "max_tokens": 6,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    body = client.post("/v1/messages", json=request).json()
    assert body["type"] == "message" and body["content"][0]["type"] == "text"
    assert body["stop_reason"] in ("end_turn", "max_tokens")
    events = _sse_data(client.post("/v1/messages", json={**request, "stream": True}).text)
    assert [event["type"] for event in events][-1] == "message_stop"
    assert any(event["type"] == "content_block_delta" for event in events)


def test_responses_answer(client: httpx2.Client) -> None:
    body = client.post(
        "/v1/responses", json={"model": "local", "input": "Say hello.", "max_output_tokens": 6}
    ).json()
    assert body["object"] == "response"
    assert body["output"][0]["content"][0]["type"] == "output_text"


@pytest.mark.parametrize("kind", _KINDS)
def test_a_crash_is_restarted_once_and_close_stops_the_process(kind: str) -> None:
    own = LocalServer(kind=kind)  # type: ignore[arg-type]
    try:
        url = own.start()
        first = own.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while own.is_running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert own.ensure_running() == url
        assert own.restarts == 1 and own.pid != first
        second = own.pid
    finally:
        own.close()
    assert second is not None
    with pytest.raises(ProcessLookupError):
        os.kill(second, 0)


def test_a_wheel_server_on_a_broken_model_reports_its_output(tmp_path: Path) -> None:
    if "wheel" not in _KINDS:
        pytest.skip("the xllamacpp wheel is not installed")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    own = LocalServer(kind="wheel", model=broken, root=tmp_path)
    with pytest.raises(LocalBackendError, match=r"exited \(exit code 1\) while starting"):
        own.start()
    assert not own.is_running


def test_installing_the_wheel_again_only_verifies_it(tmp_path: Path) -> None:
    if "wheel" not in _KINDS:
        pytest.skip("the xllamacpp wheel is not installed")
    events: list[local.InstallProgress] = []
    version = local.install_wheel(progress=events.append, root=tmp_path)
    assert version == f"llama.cpp build 11549 (xllamacpp {local.WHEEL_VERSION})"
    assert [(e.step, e.state) for e in events] == [
        ("install-wheel", "skipped"),
        ("verify-server", "start"),
        ("verify-server", "done"),
    ]
