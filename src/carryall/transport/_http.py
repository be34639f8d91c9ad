"""The request path below the body bytes: one prepared POST per backend, sent by httpx2 itself.

The SDKs' raw `post` rebuilds every request from nothing: an options model
copied and validated, headers merged in three layers, the URL parsed and
joined, middleware and tracing hooks consulted, then the request handed to
httpx2. For a carryall backend none of that changes between requests (the
API key is a static string, the path is one), and it cost more CPU than
sending the bytes. So it is worked out once, from the SDK's own client, and
each request is one `httpx2.Request` sent through httpx2's `Client.send`:

- the httpx2 client is the SDK's `DefaultHttpxClient`, handed to the SDK
  too, so its pool, keep-alive options, redirects and the proxies named in
  the environment (`HTTPS_PROXY`, `NO_PROXY`) are the SDK's;
- the URL is the SDK's base URL (its `base_url` argument, else
  `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, else its default) with the
  path joined as the SDK joins it;
- the headers are the SDK's own (`auth_headers` and `default_headers`:
  API key, version, user agent, platform) over httpx2's client defaults,
  plus the per-attempt `x-stainless-retry-count` and read timeout;
- the retry policy is the SDK's (`should_retry`, `retry_pause`): 408, 409,
  429 and 5xx (`carryall.errors.RETRYABLE_STATUSES`), the server's
  `x-should-retry`, `retry-after-ms` and `retry-after`, else backoff from
  0.5 s doubling to 8 s with jitter; and refused or dropped connections and
  timeouts are retried alike;
- a failure is raised as the SDK's own typed exception (its status error
  for the status, `APITimeoutError`, `APIConnectionError`), so
  `_errors.sdk_failure` reads exactly what it read when the SDK sent.

The SDK stays for what it is good at once: reading its environment and
defaults into a client, and the typed error of a failed status. Its
per-request machinery (middleware, OpenTelemetry spans, refreshable
credentials) is what a carryall backend never uses: it is built with a
static API key (`custom_auth` is still passed on when the SDK has one).
httpx2 is imported when a `Poster` is made, as the SDKs are when a backend
is, so importing a transport module loads no HTTP client.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from carryall.errors import RETRYABLE_STATUSES
from carryall.transport._errors import MAX_RETRY_DELAY, SdkErrors

if TYPE_CHECKING:
    import httpx2

__all__ = ["INITIAL_RETRY_DELAY", "Poster", "retry_pause", "should_retry"]

INITIAL_RETRY_DELAY: Final = 0.5
"""The SDKs' first pause before retrying a failed status or connection, doubled each time."""

_LONGEST_WAIT: Final = 4_294_967.0
"""The longest `retry-after` honoured: `time.sleep` refuses more on some platforms."""


def should_retry(response: httpx2.Response) -> bool:
    """Whether a failed status is worth sending again, as the SDKs judge it.

    The server's own `x-should-retry` wins; else the statuses every wire
    retries (`carryall.errors.RETRYABLE_STATUSES`).
    """
    told = response.headers.get("x-should-retry")
    if told == "true":
        return True
    if told == "false":
        return False
    return response.status_code in RETRYABLE_STATUSES


def retry_pause(retries_taken: int, headers: httpx2.Headers | None) -> float:
    """Seconds to wait before retry number `retries_taken + 1`, as the SDKs wait.

    What the server asks for first (`retry-after-ms`, then `retry-after` as
    seconds or as an HTTP date), else `INITIAL_RETRY_DELAY` doubled per retry
    taken, at most `MAX_RETRY_DELAY`, less up to a quarter of jitter.
    """
    asked = _retry_after(headers)
    if asked is not None and asked > 0:
        return min(asked, _LONGEST_WAIT)
    pause = min(INITIAL_RETRY_DELAY * 2.0 ** min(retries_taken, 1000), MAX_RETRY_DELAY)
    return pause * (1 - 0.25 * random.random())


def _retry_after(headers: httpx2.Headers | None) -> float | None:
    if headers is None:
        return None
    try:
        return float(headers.get("retry-after-ms", "")) / 1000
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    date = email.utils.parsedate_tz(value)
    return None if date is None else float(email.utils.mktime_tz(date) - time.time())


class Poster:
    """One backend's POST to one path, prepared once from its SDK client; `send` sends bytes.

    `sdk` is an `anthropic.Anthropic` or `openai.OpenAI` made with
    `http_client=http`; `path` is joined to its base URL as the SDK would.
    """

    def __init__(
        self,
        sdk: Any,
        http: httpx2.Client,
        path: str,
        errors: SdkErrors,
        *,
        timeout: float,
        max_retries: int,
    ) -> None:
        import httpx2

        self._sdk = sdk
        self._http = http
        self._errors = errors
        self.max_retries = max_retries
        base: httpx2.URL = sdk.base_url
        self.url = base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode())
        """Where every request goes: the SDK's base URL with `path` joined."""
        own = {
            name: value
            for name, value in {**sdk.auth_headers, **sdk.default_headers}.items()
            if isinstance(value, str)  # the SDK's `Omit` marks a header it leaves out
        }
        headers = httpx2.Headers(http.headers)
        headers.update(own)
        headers["x-stainless-read-timeout"] = str(float(timeout))
        self._headers = headers
        self._extensions = {"timeout": httpx2.Timeout(timeout).as_dict()}
        self._auth = sdk.custom_auth

    @property
    def headers(self) -> httpx2.Headers:
        """The headers of every attempt but its retry count (a copy)."""
        return self._headers.copy()

    def send(
        self, body: bytes, *, stream: bool, headers: Mapping[str, str] | None = None
    ) -> httpx2.Response:
        """POST `body`; the answer of the first attempt with a 2xx status, unread when `stream`.

        A failed status the SDK would retry, a timeout or a failed connection
        is sent again, at most `max_retries` times, after `retry_pause`.
        When retries run out, the SDK's own exception is raised: its typed
        status error (the answer read, so its message is the server's),
        `APITimeoutError` or `APIConnectionError` from the httpx2 error.
        """
        import httpx2

        sdk = self._errors.module
        send_options: dict[str, Any] = {} if self._auth is None else {"auth": self._auth}
        retries = 0
        while True:
            sent = self._headers.copy()
            if headers:
                sent.update(headers)  # this request's own (a beta it opts into)
            sent["x-stainless-retry-count"] = str(retries)
            request = httpx2.Request(
                "POST", self.url, headers=sent, content=body, extensions=self._extensions
            )
            asked: httpx2.Headers | None = None
            try:
                response = self._http.send(request, stream=stream, **send_options)
            except httpx2.TimeoutException as exc:
                if retries >= self.max_retries:
                    raise sdk.APITimeoutError(request=request) from exc
            except httpx2.HTTPError as exc:
                if retries >= self.max_retries:
                    raise sdk.APIConnectionError(request=request) from exc
            else:
                if response.is_success:
                    return response
                if retries >= self.max_retries or not should_retry(response):
                    with contextlib.closing(response):
                        response.read()
                    raise self._sdk._make_status_error_from_response(response) from None
                asked = response.headers
                response.close()
            time.sleep(retry_pause(retries, asked))
            retries += 1
