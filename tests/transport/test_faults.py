"""Transport faults against a scripted local HTTP server replaying recorded SSE streams.

Each test starts a `ThreadingHTTPServer` on 127.0.0.1:0 that answers the
requests it gets, in order, from a script: a recorded stream (from
`tests/fixtures/sse/`), an error status, a stream cut off by a connection
reset, a stream that stalls, a server that dies. The backends talk to it
through the real SDKs, so what is pinned is the whole path a request takes.
Retry pauses are kept tiny: `retry-after-ms` on error statuses (which the
SDKs honour) and a small `retry_delay` for whole-request retries.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from carryall import local
from carryall.agent import Agent
from carryall.backends import Backend, open_backend
from carryall.blocks import Message, Origin, RedactedThinking, Text, Thinking, ToolUse
from carryall.config import Config
from carryall.errors import ProviderError
from carryall.providers import Request
from carryall.providers.codec import Codec, anthropic_codec, openai_codec
from tests.support.goldens import GOLDENS, TOOLS
from tests.support.scripted import (
    ANTHROPIC,
    FLAVORS,
    OPENAI,
    Flavor,
    Reply,
    hello,
    retry_soon,
    served,
    sse_events,
)

# -- the scripted server --------------------------------------------------------------


# -- the two SDK transports, one table each ---------------------------------------------


@pytest.fixture
def texts() -> Iterator[list[str]]:
    yield []


# -- a whole answer ----------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_whole_stream_is_one_response_and_its_text_streams(
    flavor: Flavor, texts: list[str]
) -> None:
    with served([Reply(sse=flavor.ok)]) as server:
        backend = flavor.open(server.url, model="the-model")
        response = backend.complete(hello(), on_text=texts.append)
        backend.close()
    assert response.message == Message("assistant", (Text(flavor.text),))
    assert response.stop_reason == "end_turn"
    assert response.usage.input_tokens == 25
    assert "".join(texts) == flavor.text and len(texts) == 2
    (sent,) = server.requests
    assert sent["body"]["model"] == "the-model"  # an empty request model is the backend's
    assert sent["body"]["stream"] is True


def test_anthropic_stream_keeps_signatures_redacted_thinking_and_skips_unknown_events() -> None:
    with served([Reply(sse="anthropic_tool_thinking.sse")]) as server:
        response = ANTHROPIC.open(server.url).complete(hello())
    thinking, redacted, text, call = response.message.content
    # The transport names the endpoint, the stream the model: the origin.
    origin = Origin("anthropic", "127.0.0.1", "claude-sonnet-4-6")
    assert thinking == Thinking(
        "The user wants the weather, so I call the tool.",
        "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        origin,
    )
    assert isinstance(redacted, RedactedThinking) and redacted.origin == origin
    assert redacted.data.endswith("L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pabc")
    assert text == Text("Let me check.")
    assert call == ToolUse(
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"location": "San Francisco, CA"}
    )
    assert response.stop_reason == "tool_use"


def test_openai_stream_assembles_tool_call_fragments() -> None:
    with served([Reply(sse="openai_tool_calls.sse")]) as server:
        response = OPENAI.open(server.url).complete(hello())
    # The call as the model wrote it: its argument text (a space after the colon) rides
    # in its spelling, for its own model (tests/providers/test_spelling.py).
    (call,) = response.message.tool_uses()
    assert (call.id, call.name, call.input) == (
        "call_DdmO9pD3xa9XTPNJ32zg2hcA",
        "get_weather",
        {"location": "Paris, France"},
    )
    assert response.usage.output_tokens == 17
    assert server.requests[0]["body"]["stream_options"] == {"include_usage": True}


# -- a passing fault: retried, and the answer comes whole -----------------------------------

# Before the answer starts the SDKs retry (statuses); after, the backend
# sends the whole request again (everything mid-stream).
PASSING_FAULTS = {
    "rate-limit-429": lambda f: retry_soon(429, f.rate_limit_body),
    "overload-status": lambda f: retry_soon(f.overload_status, f.overload_body),
    "reset-mid-stream": lambda f: Reply(sse=f.ok, events=3, cut="reset"),
    "ended-early": lambda f: Reply(sse=f.ok, events=2, cut="end"),
    "error-event-mid-stream": lambda f: Reply(sse=f.midstream_error),
}


@pytest.mark.parametrize("fault", sorted(PASSING_FAULTS))
@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_passing_fault_is_retried_into_one_whole_response(
    flavor: Flavor, fault: str, texts: list[str]
) -> None:
    script = [PASSING_FAULTS[fault](flavor), Reply(sse=flavor.ok)]
    with served(script) as server:
        response = flavor.open(server.url).complete(hello(), on_text=texts.append)
    assert response.message == Message("assistant", (Text(flavor.text),))
    assert len(server.requests) == 2
    assert server.requests[0]["body"] == server.requests[1]["body"]
    # What a broken attempt showed is shown again: the answer is whole, not spliced.
    assert "".join(texts).endswith(flavor.text)


def test_openai_mid_stream_server_error_without_a_code_is_retried() -> None:
    error = {
        "error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}
    }
    broken = "".join(sse_events(OPENAI.ok)[:2]) + f"data: {json.dumps(error)}\n\n"
    with served([Reply(sse=broken), Reply(sse=OPENAI.ok)]) as server:
        response = OPENAI.open(server.url).complete(hello())
    assert response.message.text() == OPENAI.text
    assert len(server.requests) == 2


def test_stalled_stream_times_out_and_is_retried() -> None:
    script = [Reply(sse=OPENAI.ok, events=2, cut="stall", stall=1.0), Reply(sse=OPENAI.ok)]
    with served(script) as server:
        response = OPENAI.open(server.url, timeout=0.3).complete(hello())
    assert response.message.text() == OPENAI.text
    assert len(server.requests) == 2


# -- a fault that persists, or one of the request's own ---------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_overload_that_persists_is_a_clear_error_after_the_bound(flavor: Flavor) -> None:
    script = [retry_soon(flavor.overload_status, flavor.overload_body)] * 3
    with served(script) as server:
        backend = flavor.open(server.url, max_retries=2)
        with pytest.raises(ProviderError) as caught:
            backend.complete(hello())
    error = caught.value
    assert len(server.requests) == 3
    assert error.status == flavor.overload_status
    assert error.kind == flavor.overload_kind
    assert error.retryable
    assert "after 2 retries" in str(error)
    assert server.url in str(error)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_bad_request_is_not_retried_and_names_status_type_and_message(flavor: Flavor) -> None:
    with (
        served([Reply(status=400, body=flavor.bad_request_body)]) as server,
        pytest.raises(ProviderError) as caught,
    ):
        flavor.open(server.url).complete(hello())
    error = caught.value
    assert len(server.requests) == 1
    assert error.status == 400
    assert error.kind == "invalid_request_error"
    assert not error.retryable
    assert flavor.bad_request_message in str(error)
    assert str(error).startswith("[400 invalid_request_error]")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_connection_reset_every_time_is_a_clear_error(flavor: Flavor) -> None:
    script = [Reply(sse=flavor.ok, events=3, cut="reset")] * 3
    with served(script) as server, pytest.raises(ProviderError) as caught:
        flavor.open(server.url, max_retries=2).complete(hello())
    error = caught.value
    assert len(server.requests) == 3
    assert error.kind == "connection_error"
    assert "connection dropped mid-answer" in str(error)
    assert "gave up after 3 attempts" in str(error)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_mid_stream_error_event_that_persists_names_its_type(flavor: Flavor) -> None:
    script = [Reply(sse=flavor.midstream_error)] * 2
    with served(script) as server, pytest.raises(ProviderError) as caught:
        flavor.open(server.url, max_retries=1).complete(hello())
    error = caught.value
    assert len(server.requests) == 2
    assert error.kind == flavor.midstream_kind
    assert flavor.midstream_kind in str(error)
    assert "gave up after 2 attempts" in str(error)


def test_mid_stream_invalid_request_error_is_not_retried() -> None:
    with (
        served([Reply(sse="anthropic_invalid_midstream.sse")]) as server,
        pytest.raises(ProviderError) as caught,
    ):
        ANTHROPIC.open(server.url).complete(hello())
    assert len(server.requests) == 1
    assert caught.value.kind == "invalid_request_error"
    assert "tool_use_id: unknown id" in str(caught.value)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_server_killed_mid_stream_is_a_clear_error(flavor: Flavor) -> None:
    with (
        served([Reply(sse=flavor.ok, events=3, cut="kill")]) as server,
        pytest.raises(ProviderError) as caught,
    ):
        flavor.open(server.url, max_retries=1).complete(hello())
    error = caught.value
    assert len(server.requests) == 1
    assert error.kind == "connection_error"
    assert "cannot connect" in str(error)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_server_killed_mid_stream_leaves_the_agent_history_intact(flavor: Flavor) -> None:
    earlier = [Message.user("Hi"), Message.assistant([Text("Hello.")])]
    with served([Reply(sse=flavor.ok, events=3, cut="kill")]) as server:
        agent = Agent(flavor.open(server.url, max_retries=1), messages=earlier)
        with pytest.raises(ProviderError):
            agent.send("Say hello")
    assert agent.messages == earlier


# -- what is not the transport's to retry ------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_callback_error_propagates_unwrapped_and_is_not_retried(flavor: Flavor) -> None:
    def refuse(text: str) -> None:
        raise KeyError("the caller's own failure")

    with (
        served([Reply(sse=flavor.ok)]) as server,
        pytest.raises(KeyError, match="the caller's own failure"),
    ):
        flavor.open(server.url).complete(hello(), on_text=refuse)
    assert len(server.requests) == 1


@pytest.mark.parametrize("flavor", FLAVORS)
def test_event_that_is_not_json_is_a_clear_error_not_retried(flavor: Flavor) -> None:
    broken = "data: {not json\n\n"
    if flavor.name == "anthropic":
        broken = "event: message_start\n" + broken
    with (
        served([Reply(sse=broken)]) as server,
        pytest.raises(ProviderError, match="stream event 1 is not JSON") as caught,
    ):
        flavor.open(server.url).complete(hello())
    assert len(server.requests) == 1
    assert str(caught.value).count(server.url) == 1


@pytest.mark.parametrize("flavor", FLAVORS)
def test_event_nested_deeper_than_python_holds_is_a_clear_error(flavor: Flavor) -> None:
    deep = "data: " + "[" * 100_000 + "\n\n"
    if flavor.name == "anthropic":
        deep = "event: message_start\n" + deep
    with (
        served([Reply(sse=deep)]) as server,
        pytest.raises(ProviderError, match="stream event 1 is not JSON"),
    ):
        flavor.open(server.url).complete(hello())


@pytest.mark.parametrize("flavor", FLAVORS)
def test_json_answer_to_a_stream_request_is_decoded_whole(flavor: Flavor) -> None:
    with served([Reply(body=flavor.ok_json)]) as server:
        response = flavor.open(server.url).complete(hello())
    assert response.message.text() == flavor.text


# -- the byte path -------------------------------------------------------------------------


def _codec_for(flavor: Flavor, backend: Backend) -> Codec:
    if flavor.name == "anthropic":
        return anthropic_codec(backend.capabilities)
    return openai_codec(backend.capabilities, "openai")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_codecs_bytes_go_out_unchanged_with_the_sdks_headers(
    flavor: Flavor, stream: bool
) -> None:
    request = Request(
        model="the-model",
        system="Be brief.",
        messages=tuple(GOLDENS["parallel_round_with_image"]),
        tools=TOOLS,
        max_tokens=64,
    )
    reply = Reply(sse=flavor.ok) if stream else Reply(body=flavor.ok_json)
    with served([reply]) as server:
        backend = flavor.open(server.url, stream=stream)
        response = backend.complete(request)
        backend.close()
    assert response.message.text() == flavor.text
    (sent,) = server.requests
    codec = _codec_for(flavor, backend)
    assert sent["raw"] == codec.encode_bytes(request, stream)
    asks_for_stream: dict[str, Any] = {}
    if stream:
        asks_for_stream["stream"] = True
        if flavor.name == "openai":
            asks_for_stream["stream_options"] = {"include_usage": True}
    assert sent["body"] == json.loads(json.dumps(codec.encode(request))) | asks_for_stream
    headers = sent["headers"]
    assert sent["path"] == (
        "/v1/messages" if flavor.name == "anthropic" else "/v1/chat/completions"
    )
    assert headers["content-type"] == "application/json"
    assert headers["x-stainless-retry-count"] == "0"
    assert "test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    sdk = {"anthropic": "Anthropic/Python", "openai": "OpenAI/Python"}[flavor.name]
    assert headers["user-agent"].startswith(sdk)
    assert ("anthropic-version" in headers) == (flavor.name == "anthropic")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_retried_request_sends_the_same_bytes_again(flavor: Flavor) -> None:
    script = [
        retry_soon(flavor.overload_status, flavor.overload_body),
        Reply(sse=flavor.midstream_error),
        Reply(sse=flavor.ok),
    ]
    with served(script) as server:
        response = flavor.open(server.url).complete(hello("m"))
    assert response.message.text() == flavor.text
    first, *again = server.requests
    assert len(again) == 2 and all(sent["raw"] == first["raw"] for sent in again)
    # The SDK's own retry counted; the whole-request retry is a fresh request.
    assert [sent["headers"]["x-stainless-retry-count"] for sent in server.requests] == [
        "0",
        "1",
        "0",
    ]


# -- without streaming ---------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_unstreamed_request_retries_a_rate_limit_and_decodes_the_answer(flavor: Flavor) -> None:
    script = [retry_soon(429, flavor.rate_limit_body), Reply(body=flavor.ok_json)]
    with served(script) as server:
        response = flavor.open(server.url, stream=False).complete(hello())
    assert response.message.text() == flavor.text
    assert len(server.requests) == 2
    assert "stream" not in server.requests[1]["body"]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_unstreamed_bad_request_is_a_clear_error(flavor: Flavor) -> None:
    with (
        served([Reply(status=400, body=flavor.bad_request_body)]) as server,
        pytest.raises(ProviderError) as caught,
    ):
        flavor.open(server.url, stream=False).complete(hello())
    assert caught.value.status == 400
    assert flavor.bad_request_message in str(caught.value)


# -- against a real llama-server (the embedded backend) -----------------------------------


real_server = pytest.mark.skipif(
    not local.status().ready,
    reason="the local backend is not installed: run `carryall local install`",
)

COUNT = "Count from one to fifty in words, one number per line."
# Enough tokens that the server is still generating when the first of them
# is read, so the kill lands mid-answer: with 40, a loaded machine could
# starve the client while the server wrote the whole answer, the kill then
# changed nothing and no restart came (seen once in CI). Still few enough
# that the retried request stays quick.
COUNT_TOKENS = 400


def _kill_on_first_text(pid: int | None) -> Callable[[str], None]:
    """An `on_text` that SIGKILLs the server the moment the answer starts arriving."""

    def on_text(text: str) -> None:
        nonlocal pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            pid = None

    return on_text


@pytest.mark.slow
@real_server
@pytest.mark.timeout(300)
def test_real_llama_server_killed_mid_stream_is_a_clear_error_and_history_stays() -> None:
    earlier = [Message.user("Hi"), Message.assistant([Text("Hello.")])]
    with local.LocalServer() as server:
        url = server.base_url
        backend = open_backend("llama-server", base_url=url, config=Config(), max_retries=1)
        agent = Agent(
            backend,
            messages=earlier,
            max_tokens=COUNT_TOKENS,
            on_text=_kill_on_first_text(server.pid),
        )
        with pytest.raises(ProviderError) as caught:
            agent.send(COUNT)
    assert caught.value.kind == "connection_error"
    assert url in str(caught.value)
    assert agent.messages == earlier


@pytest.mark.slow
@real_server
@pytest.mark.timeout(300)
def test_real_local_server_killed_mid_stream_is_restarted_and_the_answer_is_whole() -> None:
    try:
        backend = open_backend("local", config=Config(), max_retries=1)
        server = local.get_local_server()
        agent = Agent(backend, max_tokens=COUNT_TOKENS, on_text=_kill_on_first_text(server.pid))
        response = agent.send(COUNT)
        assert server.restarts == 1
        # The restarted server's answer, whole, is the history's last message.
        assert agent.messages[0] == Message.user(COUNT)
        assert agent.messages[1:] == ([response.message] if response.message.content else [])
        assert response.stop_reason in ("end_turn", "max_tokens")
    finally:
        local.shutdown_local_server()


def test_a_foreign_signature_stays_off_the_wire_and_the_session_records_the_downgrade(
    tmp_path: Path,
) -> None:
    from carryall._commands.sessions import ShowFormat, _render
    from carryall.sessions import SessionStore
    from carryall.sessions.redact import Redactor

    store = SessionStore(tmp_path, redactor=Redactor((), builtin=False))
    session = store.create(backend="anthropic", model="claude-sonnet-4-6")
    # Thought on another model at another endpoint: its signature is not valid here.
    other = Origin("anthropic", "api.anthropic.com", "claude-opus-4-1")
    session.append(
        [Message.user("Hi"), Message.assistant([Thinking("old", "SIG-OTHER", other), Text("Hi!")])]
    )
    with served([Reply(sse=ANTHROPIC.ok), Reply(sse=ANTHROPIC.ok)]) as server:
        agent = Agent(ANTHROPIC.open(server.url, model="claude-sonnet-4-6"), session=session)
        agent.send("Again?")
        agent.send("Once more?")
    for sent in server.requests:
        assert "SIG-OTHER" not in json.dumps(sent["body"])
    # Recorded once, though both requests left it off.
    [downgrade] = store.open(session.id).downgrades()
    assert (downgrade.index, downgrade.block, downgrade.kind) == (1, 0, "thinking")
    assert "claude-opus-4-1 at api.anthropic.com" in downgrade.reason
    _, shown = _render(str(tmp_path), session.id, ShowFormat.text, False)
    assert "Not sent as held (downgrades):" in shown
    assert f"message 1, block 0: thinking: {downgrade.reason}" in shown


def test_each_request_is_encoded_once_and_its_answer_carries_the_downgrades() -> None:
    import dataclasses

    other = Origin("anthropic", "api.anthropic.com", "claude-opus-4-1")
    history = [
        Message.user("Hi"),
        Message.assistant([Thinking("old", "SIG-OTHER", other), Text("Hi!")]),
    ]
    with served([Reply(sse=ANTHROPIC.ok), Reply(sse=ANTHROPIC.ok)]) as server:
        backend = ANTHROPIC.open(server.url, model="claude-sonnet-4-6")
        encodes: list[Request] = []
        codec: Codec = backend._codec  # type: ignore[attr-defined]

        def counted(request: Request, stream: bool) -> Any:
            encodes.append(request)
            return codec.sent(request, stream)

        def inspected(request: Request) -> Any:
            # Any other encode (the agent's own, say) counts too.
            encodes.append(request)
            return codec.encode_reported(request)

        backend._codec = dataclasses.replace(  # type: ignore[attr-defined]
            codec, encode_sent=counted, encode_reported=inspected
        )
        response = backend.complete(hello("claude-sonnet-4-6"))
        assert response.downgrades == ()  # nothing lost, nothing reported
        agent = Agent(backend, messages=list(history))
        agent.send("Again?")
    # One encode per request sent: the agent learns the downgrades from the answer.
    assert len(encodes) == len(server.requests) == 2
    [downgrade] = agent.turn_downgrades
    assert (downgrade.index, downgrade.kind) == (1, "thinking")
    # What was reported is what was sent: the bytes on the wire are that encode's.
    assert server.requests[1]["raw"] == codec.sent(encodes[1], True).data
    assert server.requests[1]["raw"] == codec.sent_bytes(codec.encode(encodes[1]), True)
    assert "SIG-OTHER" not in server.requests[1]["raw"].decode()
