"""carryall's own agent loop keeps a model's signed reasoning through a tool round when the
request names the model by its alias and the answer by its dated name.

Both servers here are SCRIPTED stand-ins (`tests.support.judged_api`), not the
real APIs: each answers a fixed two-step script and refuses, with the status
and error shape the real API uses, a tool round the real API refuses. The
Anthropic-shaped one answers 400 when an assistant turn holding a tool call
does not start with its thinking block and signature (the Messages API's
rule for extended thinking with tools); the Gemini-shaped one answers 400
when a function call comes back without its `thoughtSignature` (Gemini 3's
rule). Each first shows its judge refusing a round that lacks them, so a
pass means the loop sent them, not that nothing was checked.
"""

from __future__ import annotations

from typing import Any

import pytest

from carryall.agent import Agent
from carryall.blocks import Message, Origin, Text, Thinking, ToolResult, ToolUse
from carryall.errors import ProviderError
from carryall.providers import Request
from tests.support.judged_api import JudgedServer

ALIAS = "claude-sonnet-4-5"
DATED = "claude-sonnet-4-5-20250929"
SIGNATURE = "EqQBCkYIBxgCKkDsigned-by-the-scripted-server"


def look(at: str) -> str:
    """Look at something.

    Args:
        at: What to look at.
    """
    return f"{at} looks fine"


def _unsigned_round(call_id: str) -> tuple[Message, ...]:
    """A tool round whose call lost its thinking and signature, as a careless client sends it."""
    return (
        Message.user("Is the sky fine?"),
        Message.assistant([ToolUse(call_id, "look", {"at": "the sky"})]),
        Message.tool_results([ToolResult(call_id, "the sky looks fine")]),
    )


def _refusal(answer: Any, open_backend: Any, model: str, call_id: str) -> ProviderError:
    """What the judged server answers the unsigned round with, through the real backend."""
    with JudgedServer(answer) as server:
        backend = open_backend(server.url)
        try:
            with pytest.raises(ProviderError) as refused:
                backend.complete(Request(model=model, messages=_unsigned_round(call_id)))
        finally:
            backend.close()
    return refused.value


def _agent_turn(answer: Any, open_backend: Any) -> tuple[Agent, Any, list[dict[str, Any]]]:
    """One turn of the agent loop against the judged server: the agent, its answer, the bodies."""
    with JudgedServer(answer) as server:
        backend = open_backend(server.url)
        try:
            agent = Agent(backend, tools=[look], max_steps=4)
            reply = agent.send("Is the sky fine?")
        finally:
            backend.close()
        sent = [request["body"] for request in server.requests]
    return agent, reply, sent


def _anthropic_refusal(index: int, found: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": (
                f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{found}`. When `thinking` is enabled, a final `assistant` message "
                "must start with a thinking block."
            ),
        },
    }


def anthropic_api(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """The scripted Messages API: a thinking + tool call, then a text answer, or a 400."""
    assert path.endswith("/v1/messages"), path
    messages = body["messages"]
    for index, message in enumerate(messages):
        content = message["content"]
        if message["role"] != "assistant" or not isinstance(content, list):
            continue
        if any(block.get("type") == "tool_use" for block in content):
            first = content[0]
            if first.get("type") != "thinking" or first.get("signature") != SIGNATURE:
                return 400, _anthropic_refusal(index, str(first.get("type")))
    answered = any(m["role"] == "assistant" for m in messages)
    content: list[dict[str, Any]] = (
        [{"type": "text", "text": "It looks fine."}]
        if answered
        else [
            {"type": "thinking", "thinking": "I should look first.", "signature": SIGNATURE},
            {"type": "tool_use", "id": "toolu_01", "name": "look", "input": {"at": "the sky"}},
        ]
    )
    return 200, {
        "id": f"msg_{len(messages)}",
        "type": "message",
        "role": "assistant",
        "model": DATED,
        "content": content,
        "stop_reason": "end_turn" if answered else "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _anthropic_backend(url: str) -> Any:
    pytest.importorskip("anthropic")
    from carryall.transport.anthropic import AnthropicBackend

    return AnthropicBackend(
        model=ALIAS, api_key="sk-ant-test", base_url=url, stream=False, max_retries=0
    )


def test_the_scripted_anthropic_server_refuses_a_tool_round_without_its_thinking() -> None:
    refused = _refusal(anthropic_api, _anthropic_backend, ALIAS, "toolu_01")
    assert refused.status == 400
    assert "must start with a thinking block" in str(refused)


def test_the_agent_loop_completes_a_thinking_tool_round_asked_for_by_its_alias() -> None:
    agent, answer, sent = _agent_turn(anthropic_api, _anthropic_backend)
    assert answer.message.text() == "It looks fine."
    assert [body["model"] for body in sent] == [ALIAS, ALIAS]
    echoed = sent[1]["messages"][1]["content"][0]
    assert echoed == {
        "type": "thinking",
        "thinking": "I should look first.",
        "signature": SIGNATURE,
    }
    thinking = agent.messages[1].content[0]
    assert isinstance(thinking, Thinking)
    assert thinking.origin == Origin("anthropic", "127.0.0.1", DATED, requested=ALIAS)
    assert agent.turn_downgrades == []


# -- Gemini ---------------------------------------------------------------------------

GEMINI_ALIAS = "gemini-pro-latest"
GEMINI_DATED = "gemini-3-pro-preview"
THOUGHT = "c2lnbmVkLWJ5LWdlbWluaQ=="


def gemini_api(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """The scripted Gemini API: a signed function call, then a text answer, or a 400."""
    assert f"/models/{GEMINI_ALIAS}:generateContent" in path, path
    contents = body["contents"]
    for index, content in enumerate(contents):
        if content.get("role") != "model":
            continue
        for number, part in enumerate(content.get("parts", [])):
            if "functionCall" in part and part.get("thoughtSignature") != THOUGHT:
                message = (
                    f"Function call is missing a thought_signature in functionCall parts. "
                    f"This is required for tools to work correctly, and missing "
                    f"thought_signature may lead to degraded model performance. (contents[{index}]"
                    f".parts[{number}])"
                )
                return 400, {
                    "error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
                }
    answered = any(c.get("role") == "model" for c in contents)
    parts: list[dict[str, Any]] = (
        [{"text": "It looks fine."}]
        if answered
        else [
            {
                "functionCall": {"name": "look", "args": {"at": "the sky"}},
                "thoughtSignature": THOUGHT,
            }
        ]
    )
    return 200, {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "modelVersion": GEMINI_DATED,
    }


def _gemini_backend(url: str) -> Any:
    pytest.importorskip("google.genai")
    from carryall.transport.gemini import GeminiBackend

    return GeminiBackend(
        model=GEMINI_ALIAS, api_key="gemini-test-key", base_url=url, stream=False, max_retries=0
    )


def test_the_scripted_gemini_server_refuses_a_function_call_without_its_signature() -> None:
    refused = _refusal(gemini_api, _gemini_backend, GEMINI_ALIAS, "call_1")
    assert refused.status == 400
    assert "thought_signature" in str(refused)


def test_the_agent_loop_completes_a_signed_gemini_call_asked_for_by_its_alias() -> None:
    agent, answer, sent = _agent_turn(gemini_api, _gemini_backend)
    assert answer.message.text() == "It looks fine."
    assert len(sent) == 2
    call = sent[1]["contents"][1]["parts"][0]
    assert call["thoughtSignature"] == THOUGHT
    use = agent.messages[1].tool_uses()[0]
    assert use.origin == Origin("gemini", "127.0.0.1", GEMINI_DATED, requested=GEMINI_ALIAS)
    assert agent.turn_downgrades == []
    assert isinstance(agent.messages[-1].content[0], Text)
