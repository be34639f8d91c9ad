"""What a server asks back of carryall: a person's answer, the model's completion, the roots.

Real servers (the scripted SDK server, the pinned reference server); the
model is a scripted backend where only the loop is under test, and the
real local llama-server where a completion is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

pytest.importorskip("mcp", reason="the MCP tests need the mcp extra: pip install 'carryall[mcp]'")

from carryall import local
from carryall.agent import Agent
from carryall.blocks import Message, ToolResult, ToolUse
from carryall.mcp import McpToolbox
from carryall.mcp._host import NOT_INTERACTIVE, ElicitAnswer, Elicitation, McpNotice, field_value
from carryall.sessions import open_store
from tests.mcp.test_client_sdk import sdk_server
from tests.support.agent import ScriptedBackend, call, say
from tests.support.mcp_peer import everything_server

_LOCAL = local.status()


def _result(box: McpToolbox, name: str, arguments: dict[str, Any]) -> ToolResult:
    return _run(box, name, arguments)[2].content[0]  # type: ignore[return-value]


def _run(box: McpToolbox, name: str, arguments: dict[str, Any], **agent: Any) -> list[Message]:
    backend = ScriptedBackend(call(ToolUse("c1", name, arguments)), say("seen"))
    runner = Agent(backend, tools=box.tools, **agent)
    runner.send("go")
    return runner.messages


def _started(box: McpToolbox) -> McpToolbox:
    results = box.start()
    assert all(r.error is None for r in results), results
    return box


# -- elicitation ----------------------------------------------------------------


def test_without_a_person_a_question_is_declined() -> None:
    with _started(McpToolbox({"sdk": sdk_server()})) as box:
        result = _result(box, "sdk__ask", {})
    assert not result.is_error and result.content == "decline"


def test_the_reference_server_sees_the_decline_and_why() -> None:
    with _started(McpToolbox({"everything": everything_server()})) as box:
        result = _result(box, "everything__trigger-elicitation-request", {})
    assert "decline" in result.content
    assert NOT_INTERACTIVE in result.content


def test_a_persons_answer_reaches_the_server() -> None:
    asked: list[Elicitation] = []

    def person(question: Elicitation) -> ElicitAnswer:
        asked.append(question)
        return ElicitAnswer("accept", {"name": "Ada", "age": 36})

    with _started(McpToolbox({"sdk": sdk_server()}, asker=person)) as box:
        result = _result(box, "sdk__ask", {})
    assert result.content == "accepted: Ada is 36"
    (question,) = asked
    assert (question.server, question.message) == ("sdk", "Who are you?")
    assert set(question.schema["properties"]) == {"name", "age"}


def test_an_answer_that_does_not_fit_the_fields_is_not_sent() -> None:
    def person(question: Elicitation) -> ElicitAnswer:
        return ElicitAnswer("accept", {"name": "Ada", "age": "thirty-six"})

    with _started(McpToolbox({"sdk": sdk_server()}, asker=person)) as box:
        result = _result(box, "sdk__ask", {})
    assert result.content == "decline"


def test_a_typed_field_is_converted_or_refused_with_what_it_takes() -> None:
    age = {"type": "integer", "minimum": 1, "maximum": 120}
    assert field_value("age", age, " 36 ", True) == 36
    with pytest.raises(ValueError, match="age takes a whole number"):
        field_value("age", age, "old", True)
    with pytest.raises(ValueError, match="between 1 and 120"):
        field_value("age", age, "300", True)
    with pytest.raises(ValueError, match="name is required"):
        field_value("name", {"type": "string"}, "", True)
    assert field_value("friend", {"type": "string", "default": "Monica"}, "", False) == "Monica"
    with pytest.raises(ValueError, match="one of Monica, Ross"):
        field_value("friend", {"type": "string", "enum": ["Monica", "Ross"]}, "Joey", True)
    assert field_value("ok", {"type": "boolean"}, "yes", True) is True
    with pytest.raises(ValueError, match="email"):
        field_value("email", {"type": "string", "format": "email"}, "not-an-address", True)


# -- sampling -------------------------------------------------------------------


def test_sampling_is_refused_for_a_server_the_config_does_not_allow() -> None:
    backend = ScriptedBackend(say("never asked"))
    with _started(McpToolbox({"sdk": sdk_server()}, sampler=backend)) as box:
        result = _result(box, "sdk__sample", {"prompt": "Say hi"})
    assert result.is_error
    assert 'set "sampling": true on its entry' in result.content
    assert backend.requests == []


def test_sampling_stops_at_the_servers_token_budget() -> None:
    backend = ScriptedBackend(say("first"), say("second"))
    server = sdk_server(sampling=True, sampling_tokens=3)
    with _started(McpToolbox({"sdk": server}, sampler=backend)) as box:
        first = _result(box, "sdk__sample", {"prompt": "Say hi", "max_tokens": 50})
        second = _result(box, "sdk__sample", {"prompt": "Again", "max_tokens": 50})
    assert first.content.startswith("sampled by")
    assert backend.requests[0].max_tokens == 3  # the budget caps what one request may use
    assert second.is_error and "used its 3-token sampling budget" in second.content


@pytest.mark.skipif(
    not _LOCAL.ready, reason="the local backend is not installed; run `carryall local install`"
)
@pytest.mark.timeout(600)
def test_an_allowed_servers_sampling_is_served_by_the_local_model_and_recorded(
    tmp_path: Path,
) -> None:
    from carryall.backends import open_backend

    model = open_backend("llama-server", base_url=local.get_local_server().base_url)
    store = open_store(tmp_path / "sessions")
    session = store.create(backend="scripted", model="m", cwd=str(tmp_path))
    server = sdk_server(sampling=True, sampling_tokens=64)
    try:
        with _started(McpToolbox({"sdk": server}, sampler=model)) as box:
            history = _run(
                box, "sdk__sample", {"prompt": "Name a colour.", "max_tokens": 8}, session=session
            )
            used = box.sampled["sdk"]
    finally:
        model.close()
    (result,) = store.open(session.id).messages()[2].content
    assert isinstance(result, ToolResult) and not result.is_error
    assert result == history[2].content[0]
    first, note = result.content.rsplit("\n", 1)
    assert first.startswith("sampled by ") and len(first) > len("sampled by x: ")
    assert note == (
        f"[sampling: MCP server 'sdk' had the model ({model.name}/{model.model}) complete a "
        f"request: {used} tokens, {used} of its 64-token budget]"
    )
    assert 0 < used <= 8


# -- roots, progress, log -------------------------------------------------------


def test_the_roots_a_server_is_given_are_the_workspace(tmp_path: Path) -> None:
    with _started(McpToolbox({"sdk": sdk_server()}, roots=[tmp_path])) as box:
        result = _result(box, "sdk__roots", {})
    assert result.content == tmp_path.resolve().as_uri()


def test_the_reference_server_lists_the_workspace_as_its_root(tmp_path: Path) -> None:
    with _started(McpToolbox({"everything": everything_server()}, roots=[tmp_path])) as box:
        result = _result(box, "everything__get-roots-list", {})
    assert tmp_path.resolve().as_uri() in result.content


def _collecting() -> tuple[list[McpNotice], Callable[[McpNotice], None]]:
    seen: list[McpNotice] = []
    return seen, seen.append


def test_progress_and_log_lines_reach_the_caller() -> None:
    seen, on_notice = _collecting()
    with _started(McpToolbox({"sdk": sdk_server()}, on_notice=on_notice)) as box:
        result = _result(box, "sdk__slow", {"steps": 3})
    assert result.content == "done after 3 steps"
    assert [(n.kind, n.text) for n in seen if n.kind == "progress"] == [
        ("progress", "1/3 step 1 of 3"),
        ("progress", "2/3 step 2 of 3"),
        ("progress", "3/3 step 3 of 3"),
    ]
    assert ("log", "info: slow: starting") in [(n.kind, n.text) for n in seen]
    assert {n.server for n in seen} == {"sdk"}


def test_the_reference_servers_long_operation_shows_progress() -> None:
    seen, on_notice = _collecting()
    with _started(McpToolbox({"everything": everything_server()}, on_notice=on_notice)) as box:
        _result(box, "everything__trigger-long-running-operation", {"duration": 1, "steps": 2})
    progress = [n.text for n in seen if n.kind == "progress"]
    assert progress and progress[-1].startswith("2/2"), json.dumps(progress)


def test_the_reference_servers_sampling_is_refused_when_not_allowed() -> None:
    backend = ScriptedBackend(say("never asked"))
    with _started(McpToolbox({"everything": everything_server()}, sampler=backend)) as box:
        result = _result(box, "everything__trigger-sampling-request", {"prompt": "Say hi"})
    assert result.is_error and 'set "sampling": true on its entry' in result.content
    assert backend.requests == []


@pytest.mark.skipif(
    not _LOCAL.ready, reason="the local backend is not installed; run `carryall local install`"
)
@pytest.mark.timeout(600)
def test_the_reference_servers_sampling_is_served_by_the_local_model_when_allowed() -> None:
    from carryall.backends import open_backend

    model = open_backend("llama-server", base_url=local.get_local_server().base_url)
    server = msgspec.structs.replace(everything_server(), sampling=True, sampling_tokens=32)
    allowed = {"everything": server}
    try:
        with _started(McpToolbox(allowed, sampler=model)) as box:
            result = _result(
                box,
                "everything__trigger-sampling-request",
                {"prompt": "Name a fruit.", "maxTokens": 8},
            )
            used = box.sampled["everything"]
    finally:
        model.close()
    assert not result.is_error, result.content
    assert result.content.startswith("LLM sampling result:")
    assert '"role": "assistant"' in result.content and model.model in result.content
    assert result.content.endswith(f"{used} of its 32-token budget]")
    assert 0 < used <= 8
