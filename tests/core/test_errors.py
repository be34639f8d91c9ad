"""The one status mapping: which statuses are retried, and that every wire maps a status alike.

The retryable set is checked against the official SDKs' own retry rules,
read from the installed SDKs, so a change on either side shows here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from carryall.errors import (
    RETRYABLE_KINDS,
    RETRYABLE_STATUSES,
    STATUS_KINDS,
    ProviderError,
    wire_error,
)

STATUSES = range(400, 600)


def _stainless_retries(module: Any) -> set[int]:
    """The statuses an `anthropic` or `openai` client's own policy retries."""
    import httpx2

    client = module.Client(api_key="k", base_url="http://127.0.0.1:9")
    request = httpx2.Request("POST", "http://127.0.0.1:9/x")
    return {
        status
        for status in STATUSES
        if client._should_retry(httpx2.Response(status, request=request))
    }


def test_the_set_is_the_stainless_sdks_rule_exactly() -> None:
    import anthropic
    import openai

    ours = {status for status in STATUSES if status in RETRYABLE_STATUSES}
    assert _stainless_retries(anthropic) == ours
    assert _stainless_retries(openai) == ours


def test_the_set_holds_every_status_google_genai_and_botocore_retry() -> None:
    genai_client = pytest.importorskip("google.genai._api_client")
    standard = pytest.importorskip("botocore.retries.standard")
    genai = set(genai_client._RETRY_HTTP_STATUS_CODES)
    botocore = set(standard.TransientRetryableChecker._TRANSIENT_STATUS_CODES) | set(
        standard.ThrottlingStatusCodeChecker._THROTTLING_STATUS_CODES
    )
    assert genai and botocore
    assert genai <= RETRYABLE_STATUSES
    assert botocore <= RETRYABLE_STATUSES
    assert 400 not in RETRYABLE_STATUSES and 401 not in RETRYABLE_STATUSES


def test_status_error_takes_the_answers_kind_else_the_tables() -> None:
    assert wire_error("m", status=429).kind == "rate_limit_error"
    assert wire_error("m", status=429, kind="RESOURCE_EXHAUSTED").kind == "RESOURCE_EXHAUSTED"
    assert wire_error("m", status=599).kind is None
    bare = wire_error("m", status=None, kind="x")
    assert (bare.status, bare.kind, bare.retryable) == (None, "x", False)
    assert all(400 <= status < 600 for status in STATUS_KINDS)


# -- every mapper on every wire gives the same answer -------------------------------------


def _openai_body(status: int) -> ProviderError:
    from carryall.providers import openai as wire

    with pytest.raises(ProviderError) as caught:
        wire.decode_response({"error": {"message": "no", "code": status}})
    return caught.value


def _gemini_body(status: int) -> ProviderError:
    from carryall.providers import gemini as wire

    with pytest.raises(ProviderError) as caught:
        wire.decode_response({"error": {"message": "no", "code": status}})
    return caught.value


def _bedrock_body(status: int) -> ProviderError:
    from carryall.providers import bedrock as wire

    with pytest.raises(ProviderError) as caught:
        wire.decode_response({"message": "no"}, status=status)
    return caught.value


def _sdk_status(status: int) -> ProviderError:
    import httpx2
    import openai

    from carryall.transport._errors import SdkErrors, openai_status, sdk_failure

    request = httpx2.Request("POST", "http://127.0.0.1:9/x")
    exc = openai.APIStatusError(
        "no", response=httpx2.Response(status, request=request), body={"message": "no"}
    )
    return sdk_failure("here", exc, SdkErrors(openai, openai.OpenAIError, openai_status), 1.0)


def _gemini_sdk(status: int) -> ProviderError:
    pytest.importorskip("google.genai")
    from google.genai import errors

    from carryall.transport.gemini import _api_error

    return _api_error("here", errors.APIError(status, {"error": {"message": "no"}}))


def _bedrock_sdk(status: int) -> ProviderError:
    pytest.importorskip("boto3")
    from botocore.exceptions import ClientError

    from carryall.transport.bedrock import _client_error

    answer: Any = {"Error": {"Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return _client_error("here", ClientError(answer, "Converse"))


MAPPERS: dict[str, Callable[[int], ProviderError]] = {
    "openai body": _openai_body,
    "gemini body": _gemini_body,
    "bedrock body": _bedrock_body,
    "stainless SDK status": _sdk_status,
    "google-genai APIError": _gemini_sdk,
    "botocore ClientError": _bedrock_sdk,
}


@pytest.mark.parametrize("mapper", MAPPERS, ids=str)
@pytest.mark.parametrize("status", [400, 401, 404, 408, 409, 422, 429, 500, 503, 529])
def test_every_wire_maps_a_status_to_the_same_error(mapper: str, status: int) -> None:
    error = MAPPERS[mapper](status)
    expected = wire_error("", status=status)
    assert (error.status, error.retryable) == (status, expected.retryable)
    assert error.kind == expected.kind


def test_the_prepared_post_retries_the_same_set() -> None:
    import httpx2

    from carryall.transport._http import should_retry

    request = httpx2.Request("POST", "http://127.0.0.1:9/x")
    retried = {s for s in STATUSES if should_retry(httpx2.Response(s, request=request))}
    assert retried == {s for s in STATUSES if s in RETRYABLE_STATUSES}


# -- a failure with a kind and no status (an error event mid-stream) ------------------------


def _anthropic_event(kind: str) -> ProviderError:
    from carryall.providers import anthropic as wire

    decoder = wire.StreamDecoder()
    with pytest.raises(ProviderError) as caught:
        decoder.feed({"type": "error", "error": {"type": kind, "message": "busy"}})
    return caught.value


def _bedrock_event(kind: str) -> ProviderError:
    from carryall.providers import bedrock as wire

    decoder = wire.StreamDecoder()
    with pytest.raises(ProviderError) as caught:
        decoder.feed({kind: {"message": "busy"}})
    return caught.value


def _responses_event(kind: str) -> ProviderError:
    from carryall.providers import responses as wire

    decoder = wire.StreamDecoder()
    with pytest.raises(ProviderError) as caught:
        decoder.feed({"type": "error", "code": kind, "message": "busy"})
    return caught.value


@pytest.mark.parametrize(
    ("event", "busy", "refused"),
    [
        (_anthropic_event, "overloaded_error", "invalid_request_error"),
        (_bedrock_event, "throttlingException", "validationException"),
        (_responses_event, "server_error", "invalid_prompt"),
    ],
    ids=["anthropic", "bedrock", "responses"],
)
def test_an_error_event_is_retryable_by_the_one_kind_set(
    event: Callable[[str], ProviderError], busy: str, refused: str
) -> None:
    assert busy in RETRYABLE_KINDS and refused not in RETRYABLE_KINDS
    transient, final = event(busy), event(refused)
    assert (transient.kind, transient.retryable) == (busy, True)
    assert (final.kind, final.retryable) == (refused, False)
