"""End to end against the real local llama-server (SmolLM2-135M): no mocks anywhere.

The model is tiny, so nothing here asserts on its wording: each test gives
it a prompt that makes a tool call very likely and then checks the shape of
the history the loop left behind, and what actually went over the wire.
Skipped only when the local backend is not installed (`carryall local
install`); CI installs it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from carryall import local
from carryall.agent import Agent
from carryall.backends import open_backend
from carryall.blocks import Image, Message, Text, ToolResult, ToolUse, validate_history
from carryall.errors import ProviderError
from carryall.sessions import Store
from carryall.tools.builtin import builtin_tools
from tests.support.local import (
    ATTEMPTS,
    LOCAL_STATUS,
    MAX_STEPS,
    MAX_TOKENS,
    PNG_1X1,
    local_env,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not LOCAL_STATUS.ready,
        reason=(
            "the local backend is not installed (server: "
            f"{LOCAL_STATUS.server_installed}, model: {LOCAL_STATUS.model_installed}); "
            "run `carryall local install`"
        ),
    ),
    pytest.mark.timeout(600),
]


def _assert_complete_rounds(messages: list[Message], tool: str) -> None:
    """A valid history: rounds of `tool` only, every call answered, then the model's answer."""
    validate_history(messages)
    assert messages[0].is_plain_user_text()
    assert messages[1].role == "assistant" and messages[1].tool_uses(), messages[1]
    for asked, answer in zip(messages[1::2], messages[2::2], strict=False):
        calls = asked.tool_uses()
        assert calls and {c.name for c in calls} <= {tool}, asked
        assert [r.tool_use_id for r in answer.tool_results_in()] == [c.id for c in calls]
    assert messages[-1].role == "assistant" and not messages[-1].tool_uses()


def _used_tool(messages: list[Message]) -> bool:
    return len(messages) > 1 and bool(messages[1].tool_uses())


# -- carryall run ------------------------------------------------------------------------


def test_carryall_run_with_builtin_tools_completes_a_tool_round(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("The secret word is PINEAPPLE.\n")
    env = local_env(tmp_path)
    store = Store(tmp_path / "home" / "sessions")
    seen: set[str] = set()
    for _ in range(ATTEMPTS):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "carryall",
                "run",
                "Use the read_file tool to read notes.txt",
                "--backend",
                "local",
                "--tools",
                "read_file",
                "--max-steps",
                str(MAX_STEPS),
                "--max-tokens",
                str(MAX_TOKENS),
                "--workspace",
                str(workspace),
            ],
            capture_output=True,
            stdin=subprocess.DEVNULL,  # not piped: nothing joins the prompt
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        [newest] = [info for info in store.list() if info.meta.id not in seen]
        seen.add(newest.meta.id)
        messages = store.open(newest.meta.id).messages()
        if _used_tool(messages):
            break
    assert "→ read_file(" in done.stderr
    assert newest.meta.backend == "local"
    assert messages[0] == Message.user("Use the read_file tool to read notes.txt")
    _assert_complete_rounds(messages, "read_file")


_REPEAT_STOP = re.compile(r"failed the same way (\d+) times; the turn ends here")


def test_a_repeated_failing_call_stops_the_turn_before_the_step_limit(tmp_path: Path) -> None:
    # The workspace holds one file, and it is binary: every read fails the
    # same way. Being the only file, it is the only path the constrained
    # schema offers, so every call the model makes is the same call; with a
    # missing file instead the model was free to vary the path (so no call
    # repeated and the turn ran to the step limit), which made this flaky.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "blob.bin").write_bytes(bytes(range(256)) * 4)
    max_steps = 12
    # 96 tokens was too few: the model's call was sometimes cut at the limit
    # (a `max_tokens` stop, never run), so the repeat was never seen. 256
    # leaves room to spare and stays under the local default of 512.
    max_tokens = 256
    # Whether the model calls at all is its choice (see ATTEMPTS).
    for _ in range(2 * ATTEMPTS):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "carryall",
                "run",
                'Use the read_file tool to read the file "blob.bin". Keep trying.',
                "--backend",
                "local",
                "--tools",
                "read_file",
                "--max-steps",
                str(max_steps),
                "--max-tokens",
                str(max_tokens),
                "--workspace",
                str(workspace),
            ],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            text=True,
            env=local_env(tmp_path),
            timeout=400,
        )
        assert done.returncode == 0, done.stderr
        if _REPEAT_STOP.search(done.stderr):
            break
    assert "stopped: read_file(" in done.stderr, done.stderr
    # Three in a row stop the turn; a round of two identical calls can make
    # the count the stop names four.
    stop = _REPEAT_STOP.search(done.stderr)
    assert stop is not None and int(stop.group(1)) >= 3, done.stderr
    assert "step limit" not in done.stderr
    assert done.stderr.count("→ read_file(") < max_steps


def test_a_max_tokens_cut_is_reported_and_never_handed_to_a_tool(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")
    store = Store(tmp_path / "home" / "sessions")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "carryall",
            "run",
            "Use the list_dir tool to list the files in the workspace.",
            "--backend",
            "local",
            "--max-tokens",
            "6",
            "--workspace",
            str(workspace),
        ],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        env=local_env(tmp_path),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "max_tokens:" in done.stderr and "cut at the output limit" in done.stderr
    # Six tokens hold no whole call: nothing was run, nothing reached a tool.
    assert "→" not in done.stderr
    [info] = store.list()
    messages = store.open(info.meta.id).messages()
    assert not any(m.tool_uses() for m in messages)
    assert not any(m.tool_results_in() for m in messages)


# -- a tool's image on a model without vision ------------------------------------------------


def test_tool_image_reaches_a_model_without_vision_as_its_placeholder(
    tmp_path: Path, recording_proxy: tuple[str, list[bytes]]
) -> None:
    url, bodies = recording_proxy
    (tmp_path / "dot.png").write_bytes(PNG_1X1)
    backend = open_backend("llama-server", base_url=url, max_retries=0)
    try:
        assert backend.capabilities.vision is False
        for _ in range(ATTEMPTS):
            bodies.clear()
            agent = Agent(
                backend,
                tools=builtin_tools(tmp_path, names=["view_image"]),
                max_steps=MAX_STEPS,
                max_tokens=MAX_TOKENS,
            )
            agent.send('Call the view_image tool with path "dot.png".')
            if any(m.images() for m in agent.messages):
                break
    finally:
        backend.close()
    _assert_complete_rounds(agent.messages, "view_image")
    [carrying] = [m for m in agent.messages if m.images()][:1]
    n = len(carrying.tool_results_in())
    assert n and all(isinstance(b, ToolResult) for b in carrying.content[:n])
    images = carrying.content[n:]
    assert all(isinstance(b, Image) for b in images), carrying.content
    assert Image.from_bytes("image/png", PNG_1X1, "dot.png") in images

    # The request that carried the round: the placeholder line went out, the
    # pixels did not (a server without a projector answers an image with a
    # 500, so the final answer existing says the same from the other side).
    sent = [json.dumps(json.loads(b)) for b in bodies]
    assert len(sent) == (len(agent.messages) + 1) // 2
    assert any("[image: dot.png (image/png)]" in wire for wire in sent)
    for wire in sent:
        assert "image_url" not in wire and base64.b64encode(PNG_1X1).decode() not in wire


# -- a server killed mid-stream --------------------------------------------------------------


def test_server_killed_mid_stream_is_a_clear_error_and_the_history_is_intact() -> None:
    with local.LocalServer() as server:
        url = server.base_url
        backend = open_backend("llama-server", base_url=url, max_retries=1, retry_delay=0.1)
        try:
            agent = Agent(backend, max_tokens=128)
            agent.send("Say hello.")
            before = list(agent.messages)
            # The answer must still be generating when the first chunk is read:
            # a short one (128 tokens) could be whole in the socket buffer by
            # then on a loaded machine, and the kill would then change nothing.
            agent.max_tokens = 2048
            streamed: list[str] = []

            def kill_on_first_text(chunk: str) -> None:
                if not streamed and server.pid is not None:
                    os.kill(server.pid, signal.SIGKILL)
                streamed.append(chunk)

            agent.on_text = kill_on_first_text
            with pytest.raises(ProviderError) as info:
                agent.send("Count from 1 to 2000, one number per line, with nothing else.")
        finally:
            backend.close()
        assert streamed, "the answer never started streaming, so nothing was killed mid-stream"
        assert not server.is_running
    assert agent.messages == before
    validate_history(agent.messages)
    # One line that says which server failed, not a traceback.
    message = str(info.value)
    assert "\n" not in message
    assert url in message


def test_a_history_larger_than_the_context_is_fitted_and_answered(tmp_path: Path) -> None:
    # A server with a small context keeps the prompt (and the test) short;
    # the context the loop fits into is the one the server's /props reports.
    from carryall.agent import ContextFitted
    from carryall.context import FIT_MARK, estimate_tokens
    from carryall.transport.openai import OpenAIBackend

    output = "Entry: the lighthouse keeper logged a passing ship at night. " * 60
    history = [
        Message.user("Read log.txt and tell me what it says."),
        Message.assistant([ToolUse("call_1", "read_file", {"path": "log.txt"})]),
        Message.tool_results([ToolResult("call_1", output)]),
        Message.assistant([Text("It is a log of ships passing the lighthouse.")]),
    ]
    with local.LocalServer(context=768) as server:
        backend = OpenAIBackend(
            name="local",
            dialect="llama-server",
            model=server.model_id,
            base_url=f"{server.base_url}/v1",
            capabilities=server.capabilities,
            server=server,
        )
        assert backend.context_window == 768
        assert estimate_tokens(history) > 768  # it would not fit as it stands
        session = Store(tmp_path / "sessions").create(backend="local")
        session.record([], history)
        events: list[object] = []
        agent = Agent(backend, session=session, max_tokens=16, on_event=events.append)
        response = agent.send("Say hello.")
    assert response.stop_reason in ("end_turn", "max_tokens")
    [fitted] = [event for event in events if isinstance(event, ContextFitted)]
    assert fitted.context_window == 768
    assert fitted.fitted.shortened_outputs + fitted.fitted.dropped_messages >= 1
    sent = json.dumps([m.to_dict() for m in fitted.fitted.messages])
    assert output not in sent and FIT_MARK in sent
    validate_history(fitted.fitted.messages)
    # The cut shapes the request only: the session goes on from the whole
    # history, with no rewrite, and nothing marked as cut is stored.
    assert len(session.versions()) == 1
    kept = session.messages()
    assert kept[: len(history)] == history and kept[-1].role == "assistant"
    # The model's own answer may quote the mark it was shown; what was recorded
    # of the history and the prompt holds none.
    assert FIT_MARK not in json.dumps([m.to_dict() for m in kept[:-1]])
