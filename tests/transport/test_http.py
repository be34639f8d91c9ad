"""The prepared POST (`carryall.transport._http`): the SDK's headers, retry policy and proxies.

The backends send through one prepared `Poster` instead of the SDK's raw
`post`; these tests pin that what goes out is what the SDK would send, and
that the SDK's retry policy and the environment's proxies still hold, against
the same scripted local server as the fault tests.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx2
import pytest

from carryall.errors import ProviderError
from carryall.transport._http import INITIAL_RETRY_DELAY, retry_pause, should_retry
from tests.support.scripted import ANTHROPIC, FLAVORS, OPENAI, Flavor, Reply, hello, served

# Headers the SDK's raw post sends that the prepared POST leaves out on purpose:
# Anthropic's `x-stainless-timeout` reads "NOT_GIVEN" for a raw post (an unset
# option printed as text), which tells a server nothing.
_SDK_ONLY = {"x-stainless-timeout"}
# Per connection or per body, not per client.
_PER_REQUEST = {"host", "content-length"}


def _response(status: int, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, headers=headers)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_the_prepared_headers_are_the_ones_the_sdk_sends(flavor: Flavor) -> None:
    with served([Reply(body=flavor.ok_json), Reply(body=flavor.ok_json)]) as server:
        backend: Any = flavor.open(server.url, stream=False)
        backend.complete(hello())
        path = "/v1/messages" if flavor is ANTHROPIC else "/chat/completions"
        backend._client.post(path, cast_to=httpx2.Response, content=b"{}")
        backend.close()
    ours, sdk = (sent["headers"] for sent in server.requests)
    assert {k: v for k, v in sdk.items() if k not in _SDK_ONLY | _PER_REQUEST} == {
        k: v for k, v in ours.items() if k not in _PER_REQUEST
    }
    assert server.requests[0]["path"] == server.requests[1]["path"]


@pytest.mark.parametrize(
    ("status", "headers", "retried"),
    [
        (408, {}, True),
        (409, {}, True),
        (429, {}, True),
        (500, {}, True),
        (529, {}, True),
        (400, {}, False),
        (401, {}, False),
        (404, {}, False),
        (400, {"x-should-retry": "true"}, True),
        (503, {"x-should-retry": "false"}, False),
    ],
)
def test_a_failed_status_is_retried_as_the_sdks_retry_it(
    status: int, headers: dict[str, str], retried: bool
) -> None:
    assert should_retry(_response(status, headers)) is retried


def test_the_pause_is_what_the_server_asks_for_first() -> None:
    assert retry_pause(0, httpx2.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_pause(0, httpx2.Headers({"retry-after-ms": "250", "retry-after": "3"})) == 0.25
    assert retry_pause(2, httpx2.Headers({"retry-after": "3"})) == 3.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < retry_pause(0, httpx2.Headers({"retry-after": later})) <= 30


@pytest.mark.parametrize(
    "headers", [None, {}, {"retry-after": "soon"}, {"retry-after": "0"}, {"retry-after-ms": "-5"}]
)
def test_without_a_usable_retry_after_the_pause_doubles_with_jitter(
    headers: dict[str, str] | None,
) -> None:
    given = None if headers is None else httpx2.Headers(headers)
    for taken, full in ((0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)):
        assert full == min(INITIAL_RETRY_DELAY * 2**taken, 8.0)
        pauses = [retry_pause(taken, given) for _ in range(50)]
        assert all(0.75 * full <= pause <= full for pause in pauses)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_retry_after_in_seconds_is_waited_for(flavor: Flavor) -> None:
    busy = Reply(status=429, body=flavor.rate_limit_body, headers={"retry-after": "0.4"})
    with served([busy, Reply(body=flavor.ok_json)]) as server:
        backend = flavor.open(server.url, stream=False)
        started = time.monotonic()
        response = backend.complete(hello())
        waited = time.monotonic() - started
        backend.close()
    assert response.message.text() == flavor.text
    assert waited >= 0.4
    assert [sent["headers"]["x-stainless-retry-count"] for sent in server.requests] == ["0", "1"]


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_status_the_server_says_not_to_retry_is_not_retried(flavor: Flavor) -> None:
    busy = Reply(status=503, body=flavor.overload_body, headers={"x-should-retry": "false"})
    with served([busy, Reply(body=flavor.ok_json)]) as server:
        backend = flavor.open(server.url, stream=False)
        with pytest.raises(ProviderError) as caught:
            backend.complete(hello())
        backend.close()
    assert len(server.requests) == 1
    assert caught.value.status == 503
    assert "(after" not in str(caught.value)


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_the_environments_proxy_carries_the_request(
    flavor: Flavor, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    reply = Reply(sse=flavor.ok) if stream else Reply(body=flavor.ok_json)
    with served([reply]) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("http_proxy", proxy.url)
        # A host that does not resolve: only the proxy can answer for it.
        backend = flavor.open("http://api.carryall-test.invalid", stream=stream)
        response = backend.complete(hello())
        backend.close()
    assert response.message.text() == flavor.text
    (sent,) = proxy.requests
    wire = "/v1/messages" if flavor is ANTHROPIC else "/v1/chat/completions"
    assert sent["path"] == f"http://api.carryall-test.invalid{wire}"


def test_a_base_url_with_a_path_keeps_it() -> None:
    with served([Reply(body=OPENAI.ok_json)]) as server:
        backend = OPENAI.open(f"{server.url}/gateway/openai", stream=False)
        backend.complete(hello())
        backend.close()
    # Flavor.open adds /v1 for OpenAI: the gateway's path and the SDK's join.
    assert server.requests[0]["path"] == "/gateway/openai/v1/chat/completions"


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_whole_answer_that_never_comes_is_a_timeout_after_the_sdks_retries(
    flavor: Flavor,
) -> None:
    stall = Reply(sse=flavor.ok, events=0, cut="stall", stall=1.0)
    with served([stall, stall]) as server:
        backend = flavor.open(server.url, stream=False, timeout=0.2, max_retries=1)
        with pytest.raises(ProviderError) as caught:
            backend.complete(hello())
        backend.close()
    assert len(server.requests) == 2
    assert caught.value.kind == "timeout"
    assert "no answer within 0.2 s (after 1 retry)" in str(caught.value)


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_failed_status_keeps_the_sdks_typed_error_as_its_cause(flavor: Flavor) -> None:
    import anthropic
    import openai

    busy = Reply(status=429, body=flavor.rate_limit_body, headers={"retry-after-ms": "5"})
    with served([busy, busy]) as server:
        backend = flavor.open(server.url, stream=False, max_retries=1)
        with pytest.raises(ProviderError) as caught:
            backend.complete(hello())
        backend.close()
    sdk = anthropic if flavor is ANTHROPIC else openai
    assert isinstance(caught.value.__cause__, sdk.RateLimitError)
    assert caught.value.status == 429
    assert "(after 1 retry)" in str(caught.value)
