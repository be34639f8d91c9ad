"""Structured output on Bedrock through the real `boto3` client: the forced call comes back as text.

The loopback Converse peer (`tests.support.bedrock_peer`) answers the
forced answer tool's call, whole and streamed; what the agent gets is the
answer's JSON text ending its turn, checked and parsed, never a tool round.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from carryall.agent import Agent
from carryall.transport.bedrock import BedrockBackend
from tests.support.bedrock_peer import CREDENTIALS, Reply, converse_server, eventstream

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


class City(msgspec.Struct):
    name: str
    sights: list[str]


@pytest.fixture(autouse=True)
def _aws(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def _backend(url: str, *, stream: bool) -> BedrockBackend:
    return BedrockBackend(model=MODEL, base_url=url, stream=stream, max_retries=0)


def _whole(value: dict[str, Any]) -> dict[str, Any]:
    call = {"toolUse": {"toolUseId": "tooluse_a", "name": "City", "input": value}}
    return {
        "output": {"message": {"role": "assistant", "content": [call]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 20, "outputTokens": 9, "totalTokens": 29},
        "metrics": {"latencyMs": 5},
    }


def _streamed(value: dict[str, Any]) -> list[dict[str, Any]]:
    text = json.dumps(value)
    start = {"toolUse": {"toolUseId": "tooluse_b", "name": "City"}}
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"contentBlockIndex": 0, "start": start}},
        *(
            {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": part}}}}
            for part in (text[:10], text[10:])
        ),
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "tool_use"}},
        {
            "metadata": {
                "usage": {"inputTokens": 20, "outputTokens": 9, "totalTokens": 29},
                "metrics": {"latencyMs": 5},
            }
        },
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_the_forced_answer_call_is_the_checked_answer(stream: bool) -> None:
    value = {"name": "Paris", "sights": ["Louvre"]}
    reply = Reply(stream=eventstream(_streamed(value))) if stream else Reply(body=_whole(value))
    with converse_server([reply]) as peer:
        agent = Agent(_backend(peer.url, stream=stream))
        city = agent.ask("Paris?", City)
    assert city == City("Paris", ["Louvre"])
    # One request: the call was the answer, not a round to run.
    [sent] = peer.requests
    config = sent["body"]["toolConfig"]
    assert config["toolChoice"] == {"tool": {"name": "City"}}
    assert config["tools"][0]["toolSpec"]["name"] == "City"
    assert json.loads(agent.messages[-1].text()) == value
    assert not agent.messages[-1].tool_uses()
