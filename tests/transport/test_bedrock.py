"""The Bedrock backend (issue 13): boto3 against a loopback server speaking Converse, no mocks.

The real `boto3` client signs and sends each request to `tests.support.bedrock_peer`,
which answers with Converse JSON or with the AWS event-stream encoding of
ConverseStream (checked by botocore's own decoder): whole answers and
streams, the SDK's retries, a mid-stream exception event sent again whole,
a stream cut short, a 4xx not retried, missing credentials and a missing
extra as one line each, and an agent whose request failed keeping its
history as it was.
"""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from carryall.agent import Agent
from carryall.backends import open_backend
from carryall.blocks import Image, Message, Origin, Text, Thinking, ToolResult, ToolUse
from carryall.config import BACKEND_NAMES, Config
from carryall.errors import ProviderError
from carryall.providers import Request
from carryall.transport.bedrock import BedrockBackend
from tests.support.bedrock_peer import (
    CREDENTIALS,
    Reply,
    converse_server,
    eventstream,
    exception_message,
)
from tests.support.cli import invoke
from tests.support.goldens import SHOT

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


@pytest.fixture(autouse=True)
def _aws(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # After `home`, which clears every credential variable the shell had.
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def answer(*content: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": list(content)}},
        "stopReason": stop,
        "usage": {"inputTokens": 12, "outputTokens": 4, "totalTokens": 16},
        "metrics": {"latencyMs": 5},
    }


CALL = {"toolUse": {"toolUseId": "tooluse_1", "name": "read_file", "input": {"path": "a.txt"}}}
EVENTS = [
    {"messageStart": {"role": "assistant"}},
    {
        "contentBlockDelta": {
            "contentBlockIndex": 0,
            "delta": {"reasoningContent": {"text": "Look first."}},
        }
    },
    {
        "contentBlockDelta": {
            "contentBlockIndex": 0,
            "delta": {"reasoningContent": {"signature": "c2lnbmVk"}},
        }
    },
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"text": "Hel"}}},
    {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"text": "lo."}}},
    {"contentBlockStop": {"contentBlockIndex": 1}},
    {"messageStop": {"stopReason": "end_turn"}},
    {
        "metadata": {
            "usage": {"inputTokens": 9, "outputTokens": 3, "totalTokens": 12},
            "metrics": {"latencyMs": 5},
        }
    },
]


def backend(url: str, *, stream: bool = True, max_retries: int = 2) -> BedrockBackend:
    return BedrockBackend(
        model=MODEL, base_url=url, stream=stream, max_retries=max_retries, retry_delay=0.01
    )


def hello() -> Request:
    return Request(model="", messages=(Message.user("Hello"),), max_tokens=64)


def test_a_whole_answer_comes_back_through_the_sdk() -> None:
    with converse_server([Reply(body=answer({"text": "Sure."}, CALL, stop="tool_use"))]) as s:
        response = backend(s.url, stream=False).complete(hello())
    assert response.message.content == (
        Text("Sure."),
        ToolUse("tooluse_1", "read_file", {"path": "a.txt"}),
    )
    assert response.stop_reason == "tool_use"
    assert response.usage.input_tokens == 12 and response.model == MODEL
    (sent,) = s.requests
    assert sent["path"] == f"/model/{MODEL.replace(':', '%3A')}/converse"
    assert sent["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert sent["body"]["messages"] == [{"role": "user", "content": [{"text": "Hello"}]}]


def test_a_stream_comes_back_whole_its_text_streams_and_its_signature_has_this_origin() -> None:
    shown: list[str] = []
    with converse_server([Reply(stream=eventstream(EVENTS))]) as s:
        response = backend(s.url).complete(hello(), on_text=shown.append)
    assert shown == ["Hel", "lo."]
    origin = Origin("bedrock", "127.0.0.1", MODEL)
    assert response.message.content == (Thinking("Look first.", "c2lnbmVk", origin), Text("Hello."))
    assert s.requests[0]["path"].endswith("/converse-stream")


def test_image_bytes_go_out_as_the_base64_botocore_writes() -> None:
    request = Request(model="", messages=(Message.user("What is it?", [SHOT]),))
    with converse_server([Reply(body=answer({"text": "A dot."}))]) as s:
        backend(s.url, stream=False).complete(request)
    image = s.requests[0]["body"]["messages"][0]["content"][1]["image"]
    assert image == {"format": "png", "source": {"bytes": SHOT.data}}


def test_a_throttled_request_is_retried_by_the_sdk_into_one_answer() -> None:
    throttled = Reply(429, {"__type": "ThrottlingException", "message": "Rate exceeded"})
    with converse_server([throttled, Reply(body=answer({"text": "ok"}))]) as s:
        response = backend(s.url, stream=False).complete(hello())
    assert response.message.text() == "ok" and len(s.requests) == 2


def test_a_bad_request_is_not_retried_and_names_status_type_and_message() -> None:
    bad = Reply(400, {"__type": "ValidationException", "message": "messages: too few"})
    with (
        converse_server([bad, Reply(body=answer({"text": "never"}))]) as s,
        pytest.raises(ProviderError, match="ValidationException: messages: too few") as caught,
    ):
        backend(s.url).complete(hello())
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert len(s.requests) == 1


def test_a_mid_stream_throttling_event_is_sent_again_whole() -> None:
    broken = eventstream(EVENTS[:5]) + exception_message("throttlingException", "slow down")
    shown: list[str] = []
    with converse_server([Reply(stream=broken), Reply(stream=eventstream(EVENTS))]) as s:
        response = backend(s.url).complete(hello(), on_text=shown.append)
    assert response.message.text() == "Hello."
    assert len(s.requests) == 2 and shown == ["Hel", "Hel", "lo."]


def test_a_mid_stream_validation_event_is_a_clear_error_not_retried() -> None:
    broken = eventstream(EVENTS[:2]) + exception_message("validationException", "bad turn")
    with (
        converse_server([Reply(stream=broken)]) as s,
        pytest.raises(ProviderError, match="bad turn") as caught,
    ):
        backend(s.url).complete(hello())
    assert not caught.value.retryable and len(s.requests) == 1


def test_a_stream_cut_short_every_time_is_a_clear_error_after_the_bound() -> None:
    whole = eventstream(EVENTS)
    cut = [Reply(stream=whole, cut=len(whole) // 2) for _ in range(3)]
    with (
        converse_server(cut) as s,
        pytest.raises(ProviderError, match=r"gave up after 2 attempts") as caught,
    ):
        backend(s.url, max_retries=1).complete(hello())
    assert caught.value.retryable and len(s.requests) == 2


def test_a_stream_that_ends_before_message_stop_is_retried() -> None:
    short = eventstream(EVENTS[:6])  # whole messages, but no messageStop
    with converse_server([Reply(stream=short), Reply(stream=eventstream(EVENTS))]) as s:
        response = backend(s.url).complete(hello())
    assert response.message.text() == "Hello." and len(s.requests) == 2


def test_a_failed_request_leaves_the_agent_history_as_it_was() -> None:
    bad = Reply(400, {"__type": "ValidationException", "message": "no"})
    history = [
        Message.user("Read a.txt"),
        Message.assistant([ToolUse("tooluse_1", "read_file", {"path": "a.txt"})]),
        Message.tool_results([ToolResult("tooluse_1", "alpha")]),
    ]
    with converse_server([bad]) as s:
        agent = Agent(backend(s.url), tools=[], messages=list(history), max_steps=1)
        with pytest.raises(ProviderError):
            agent.send("And then?")
    assert agent.messages[: len(history)] == history
    assert all(m.role != "assistant" for m in agent.messages[len(history) :])


def test_a_url_image_is_fetched_for_this_wire_never_sent_as_a_url() -> None:
    with converse_server([]) as s:
        client = backend(s.url)
        image = Image("image/png", "", url="https://example.com/a.png")
        assert not client.takes_url(image)
        encoded = client.encode(Request(model="", messages=(Message.user("x", [image]),)))
    assert encoded.body["messages"][0]["content"][1] == {"text": image.placeholder()}
    assert [d.kind for d in encoded.downgrades] == ["image"]


def test_the_answer_carries_the_downgrades_of_the_one_encode_that_was_sent() -> None:
    image = Image("image/png", "", url="https://example.com/a.png")
    request = Request(model="", messages=(Message.user("x", [image]),))
    with converse_server([Reply(body=answer({"text": "No image here."}))]) as s:
        client = backend(s.url, stream=False)
        response = client.complete(request)
    assert response.downgrades == client.encode(request).downgrades
    assert [d.kind for d in response.downgrades] == ["image"]
    (sent,) = s.requests
    assert sent["body"]["messages"][0]["content"][1] == {"text": image.placeholder()}


def test_no_credentials_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with (
        converse_server([]) as s,
        pytest.raises(ProviderError, match="no AWS credentials: set AWS_ACCESS_KEY_ID") as caught,
    ):
        backend(s.url).complete(hello())
    assert "\n" not in caught.value.message and caught.value.kind == "authentication_error"


def test_the_region_comes_from_a_bedrock_host_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert BedrockBackend(model=MODEL).region == "eu-west-3"
    assert BedrockBackend(model=MODEL).endpoint == "bedrock-runtime.eu-west-3.amazonaws.com"
    host = "https://bedrock-runtime.ap-northeast-1.amazonaws.com"
    assert BedrockBackend(model=MODEL, base_url=host).region == "ap-northeast-1"


def test_open_backend_knows_bedrock_and_its_config_table(tmp_path: Path) -> None:
    assert "bedrock" in BACKEND_NAMES
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        'backend = "bedrock"\n[backends.bedrock]\nmodel = "amazon.nova-micro-v1:0"\n'
        'base_url = "http://127.0.0.1:9"\n'
    )
    from carryall.config import load_config

    opened = open_backend(config=load_config(config_file))
    assert isinstance(opened, BedrockBackend)
    assert (opened.name, opened.model, opened.endpoint) == (
        "bedrock",
        "amazon.nova-micro-v1:0",
        "127.0.0.1",
    )
    default = open_backend("bedrock", config=Config())
    assert default.model == MODEL


def test_an_api_key_argument_is_refused_with_where_credentials_come_from() -> None:
    with pytest.raises(ProviderError, match="AWS_BEARER_TOKEN_BEDROCK"):
        open_backend("bedrock", api_key="sk-not-aws", config=Config())


def test_a_missing_extra_says_which_pip_install_fixes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_boto(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in ("boto3", "botocore"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_boto)
    with pytest.raises(ProviderError, match=r"pip install 'carryall\[bedrock\]'") as caught:
        open_backend("bedrock", config=Config())
    assert "\n" not in caught.value.message


def test_run_on_bedrock_answers_and_its_help_names_the_backend() -> None:
    assert "bedrock" in invoke("run", "--help").stdout
    with converse_server([Reply(stream=eventstream(EVENTS))]) as s:
        result = invoke("run", "-b", "bedrock", "--base-url", s.url, "--json", "Say hello")
    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["answer"] == "Hello."
    # The prompt, then the moving cache point `run` asks for by default (`--cache auto`).
    point = {"cachePoint": {"type": "default"}}
    assert s.requests[0]["body"]["messages"][-1]["content"] == [{"text": "Say hello"}, point]
    tools = s.requests[0]["body"]["toolConfig"]["tools"]
    names = [t["toolSpec"]["name"] for t in tools[:-1]]
    assert "read_file" in names and tools[-1] == point  # the built-in tools, then a cache point
