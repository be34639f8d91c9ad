"""Transport failures as `ProviderError`s, and the loop that sends a broken stream again whole.

The one place that says what an SDK or HTTP failure means: its status, its
kind, whether it is worth retrying, how many retries the SDK already took,
and the words a person reads. Both SDK transports and every stage of an
attempt (opening, streaming, reading a whole answer) go through it, so the
same failure reads the same on every wire.

Retries happen in two places, each where it can be done right. Before an
answer starts, the prepared POST (`_http.Poster`, with the SDKs' policy)
retries the statuses of `carryall.errors.RETRYABLE_STATUSES` (timeouts,
conflicts, rate limits, overload and other 5xx), timeouts and refused
connections with backoff, honouring `retry-after`; a status outlasting
them is mapped by `carryall.errors.wire_error`, as on every wire.
Once a stream has started they no longer can, so a stream that breaks off
(a dropped connection, a read timeout, an `overloaded_error` or
`rate_limit_error` event, an end before the answer finished) is retried by
`send_whole` as a whole new request, bounded by the same `max_retries`;
that is safe because nothing from the broken attempt was kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from carryall._secrets import masked as secrets_masked
from carryall._text import shorten
from carryall.errors import RETRYABLE_KINDS, ProviderError, wire_error
from carryall.providers import Response

__all__ = [
    "MAX_RETRY_DELAY",
    "RETRYABLE_KINDS",
    "Broken",
    "SdkErrors",
    "anthropic_status",
    "dropped",
    "masked",
    "openai_status",
    "opening_errors",
    "placed",
    "sdk_failure",
    "send_whole",
    "sending",
    "shown",
]

MAX_RETRY_DELAY: Final = 8.0
"""The longest pause between two whole-request retries."""

_SHOWN: Final = 300


@dataclass(frozen=True, slots=True)
class SdkErrors:
    """How one official SDK's exceptions read.

    `module` is the SDK itself, for the exception classes both SDKs share by
    name (`APIStatusError`, `APITimeoutError`, `APIConnectionError`); `base` is
    the root of its exceptions; `status` reads an `APIStatusError`'s error
    type and message (`anthropic_status`, `openai_status`).
    """

    module: ModuleType
    base: type[Exception]
    status: Callable[[Any], tuple[str | None, str]]


class Broken(Exception):
    """An attempt that failed after its answer began: worth sending again whole."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


def send_whole(
    attempt: Callable[[], Response], *, max_retries: int, retry_delay: float
) -> Response:
    """`attempt()`'s answer, calling it again while it raises `Broken`, at most `max_retries` times.

    The pauses double from `retry_delay` up to `MAX_RETRY_DELAY`. When the
    bound is reached, the last attempt's error is raised with the count.
    Text a broken attempt already showed is shown again by the next one.
    """
    failures = 0
    while True:
        try:
            return attempt()
        except Broken as broken:
            failures += 1
            if failures > max_retries:
                error = broken.error
                raise ProviderError(
                    f"{error.message} (gave up after {failures} attempts)",
                    status=error.status,
                    kind=error.kind,
                    retryable=error.retryable,
                ) from broken.__cause__
            time.sleep(min(retry_delay * 2 ** (failures - 1), MAX_RETRY_DELAY))


def masked(error: ProviderError, keys: tuple[str | None, ...]) -> ProviderError:
    """`error` with every credential in its message masked (`carryall._secrets.masked`).

    A server's error text may quote the key it was sent, so every failure a
    transport raises passes through here on its way out (`sending`); `keys`
    are the client's own, on top of every configured one.
    """
    message = secrets_masked(error.message, keys)
    if message == error.message:
        return error
    return ProviderError(message, status=error.status, kind=error.kind, retryable=error.retryable)


def sending(send: Callable[[], Response], keys: tuple[str | None, ...]) -> Response:
    """`send()`'s answer; a `ProviderError` it raises comes out `masked`, every transport alike."""
    try:
        return send()
    except ProviderError as error:
        safe = masked(error, keys)
        if safe is error:
            raise
        raise safe from error.__cause__


def opening_errors(sdk: SdkErrors) -> tuple[type[Exception], ...]:
    """What sending a request may raise that is the transport's to explain, not a bug."""
    import httpx2

    return (sdk.base, httpx2.HTTPError, httpx2.StreamError)


def placed(where: str, error: ProviderError) -> ProviderError:
    """A codec's error with the backend, URL and model (`where`) in front of its message."""
    return ProviderError(
        f"{where}: {error.message}",
        status=error.status,
        kind=error.kind,
        retryable=error.retryable,
    )


def dropped(where: str, exc: BaseException, timeout: float) -> ProviderError:
    """The error for an answer that broke off: a stall past `timeout`, or a lost connection."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return ProviderError(
            f"{where}: the stream stalled for over {timeout:g} s",
            kind="timeout",
            retryable=True,
        )
    return ProviderError(
        f"{where}: the connection dropped mid-answer: {_reason(exc)}",
        kind="connection_error",
        retryable=True,
    )


def sdk_failure(where: str, exc: Exception, sdk: SdkErrors, timeout: float) -> ProviderError:
    """The error for an exception the SDK raised after its own retries."""
    errors = sdk.module
    kind: str | None = None
    retryable = False
    if isinstance(exc, errors.APIStatusError):
        kind, message = sdk.status(exc)
        return wire_error(
            f"{where}: {_with_retries(message, exc)}", status=exc.status_code, kind=kind
        )
    if isinstance(exc, errors.APITimeoutError):
        kind, retryable = "timeout", True
        message = f"no answer within {timeout:g} s"
    elif isinstance(exc, errors.APIConnectionError):
        kind, retryable = "connection_error", True
        message = f"cannot connect: {_reason(exc)}"
    else:
        message = _reason(exc)
    return ProviderError(f"{where}: {_with_retries(message, exc)}", kind=kind, retryable=retryable)


def _with_retries(message: str, exc: BaseException) -> str:
    """`message` saying how many retries the SDK took first, when it took any."""
    retries = _retries_taken(exc)
    if retries:
        return f"{message} (after {retries} {'retry' if retries == 1 else 'retries'})"
    return message


def anthropic_status(exc: Any) -> tuple[str | None, str]:
    """The error type and message of an `anthropic.APIStatusError`."""
    kind = exc.type if isinstance(exc.type, str) else None
    message = exc.api_message if isinstance(exc.api_message, str) else exc.message
    return kind, shown(message)


def openai_status(exc: Any) -> tuple[str | None, str]:
    """The error type (else code) and message of an `openai.APIStatusError`."""
    body = exc.body
    kind = exc.type if isinstance(exc.type, str) else exc.code
    message = body.get("message") if isinstance(body, Mapping) else None
    if not isinstance(message, str) or not message:
        message = exc.message
    return (kind if isinstance(kind, str) else None), shown(message)


def shown(value: Any) -> str:
    """`value` as an error message quotes it: its text (or repr), shortened."""
    return shorten(value if isinstance(value, str) else repr(value), _SHOWN)


def _retries_taken(exc: BaseException) -> int:
    """How many times the SDK retried before giving up (it stamps each attempt's headers)."""
    request = getattr(exc, "request", None)
    headers = getattr(request, "headers", None)
    try:
        return int(headers.get("x-stainless-retry-count", 0)) if headers is not None else 0
    except (TypeError, ValueError):
        return 0


def _reason(exc: BaseException) -> str:
    """The innermost useful description of a transport failure."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    for candidate in reversed(seen):
        text = str(candidate)
        if text and text != "Connection error.":
            return shown(text)
    return type(exc).__name__
