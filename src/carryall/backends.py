"""Backends: the codecs' JSON sent through the official SDKs, answered whole or not at all.

A backend pairs a wire codec (`carryall.providers.*`) with a transport: the
official `anthropic` or `openai` SDK, imported only when that backend is
opened. Four backends share two transports:

- `anthropic`: the Messages API; key from `ANTHROPIC_API_KEY`.
- `openai`: Chat Completions at any base URL (any OpenAI-compatible server);
  key from `OPENAI_API_KEY`.
- `llama-server`: a llama.cpp server at a base URL; what its model can do is
  read from its `/props`, never guessed from a name.
- `local`: the embedded llama-server (`carryall.local`), started on demand.

`complete` returns a whole `Response` or raises `ProviderError`, never
something in between: the caller appends the answer only once it has it, so
a failed request leaves the history exactly as it was.

Retries happen in two places, each where it can be done right. Before an
answer starts, the SDKs retry rate limits (429), overload (529), other 5xx,
timeouts and refused connections with backoff, honouring `retry-after`.
Once a stream has started they no longer can, so a stream that breaks off
(a dropped connection, a read timeout, an `overloaded_error` or
`rate_limit_error` event, an end before the answer finished) is retried
here as a whole new request, bounded by the same `max_retries`; that is safe
because nothing from the broken attempt was kept. Text already shown through
`on_text` by a broken attempt is shown again by the retry.

Streams are read as raw server-sent events, not as the SDKs' typed event
objects, so every field the codecs read (signatures, redacted thinking,
`reasoning_content`, events newer than the SDK) reaches them unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple, Protocol

import msgspec

from carryall.config import BACKEND_NAMES, BackendSettings, Config, load_config
from carryall.errors import LocalBackendError, ProviderError
from carryall.local import capabilities_from_props, model_from_props
from carryall.providers import Capabilities, Request, Response

if TYPE_CHECKING:
    from carryall.local import LocalServer

__all__ = [
    "ANTHROPIC_CAPABILITIES",
    "BACKEND_NAMES",
    "DEFAULT_MODELS",
    "LLAMA_SERVER_URL",
    "OPENAI_CAPABILITIES",
    "RETRY_DELAY",
    "AnthropicBackend",
    "Backend",
    "OpenAIBackend",
    "ServerSentEvent",
    "capabilities_from_props",
    "default_backend_name",
    "iter_sse",
    "model_from_props",
    "open_backend",
    "read_props",
]

DEFAULT_MODELS: Final = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1-mini"}
"""The model a hosted backend uses when neither the command line nor the config names one."""

LLAMA_SERVER_URL: Final = "http://127.0.0.1:8080"
"""Where `llama-server` listens when started with its defaults."""

ANTHROPIC_CAPABILITIES: Final = Capabilities(vision=True, native_tools=True, thinking=True)
"""What carryall assumes of an Anthropic model: current Claude models see, call tools and think."""

OPENAI_CAPABILITIES: Final = Capabilities(vision=True, native_tools=True, thinking=False)
"""What carryall assumes of an OpenAI-compatible model (thinking stays off that wire).

A server that cannot see or call tools is told so in the config file
(`vision = false`, `native_tools = false` under `[backends.openai]`).
"""

RETRY_DELAY: Final = 0.5
"""First pause before retrying a broken stream, doubled each time up to `_MAX_RETRY_DELAY`."""

_MAX_RETRY_DELAY: Final = 8.0
# Servers that need no key still make the OpenAI SDK refuse to start without one.
_NO_KEY: Final = "no-key-needed"
# Arguments of the SDKs' `create` that are not body fields.
_NOT_BODY: Final = frozenset(
    {"self", "extra_headers", "extra_query", "extra_body", "timeout", "stream"}
    | {"user_profile_id", "workspace_id"}  # Anthropic sends these two as headers
)
_CLIP: Final = 300
# Error types a stream may end on that mean "busy or broken for a moment, not
# your request": Anthropic's, and OpenAI's, whose error events often carry a
# type but no status code to judge by.
_RETRYABLE_KINDS: Final = frozenset(
    {"overloaded_error", "rate_limit_error", "api_error", "server_error", "rate_limit_exceeded"}
)


class Backend(Protocol):
    """A model behind a wire: what the agent loop talks to.

    `complete` returns a whole `Response` or raises `ProviderError`: never a
    partial answer, so a failed call leaves the caller's history untouched.
    `on_text` receives visible text as it streams in.
    """

    name: str
    model: str
    capabilities: Capabilities

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        """Send `request` (an empty `model` means this backend's) and return the whole answer."""
        ...

    def close(self) -> None:
        """Release the connection pool; the backend is not used afterwards."""
        ...


# -- server-sent events ------------------------------------------------------------


class ServerSentEvent(NamedTuple):
    """One dispatched server-sent event: its `event:` name (None when unnamed) and its data."""

    event: str | None
    data: str


def iter_sse(lines: Iterable[str]) -> Iterator[ServerSentEvent]:
    """The events in a stream of SSE lines (line endings already removed).

    Follows the WHATWG rules carryall's servers rely on: `data:` lines join
    with newlines, one leading space after the colon is dropped, `:` lines
    are comments, a blank line dispatches, an event whose data is empty is
    not dispatched, and an event cut off by the end of the stream (no blank line
    after it) is dropped, since its data may be a torn JSON document.
    """
    name: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            joined = "\n".join(data)
            if joined:
                yield ServerSentEvent(name, joined)
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value


# -- llama-server's /props ---------------------------------------------------------


def read_props(root: str, *, timeout: float = 10.0) -> dict[str, Any]:
    """The `/props` object of the llama-server at `root` (its URL without `/v1`).

    A server that cannot be reached, answers an error or answers something
    that is not a JSON object is a `ProviderError` naming the URL.
    """
    import httpx2

    url = f"{root}/props"
    try:
        answer = httpx2.get(url, timeout=timeout)
        answer.raise_for_status()
        props = answer.json()
    except httpx2.HTTPStatusError as exc:
        raise ProviderError(
            f"llama-server at {root}: {url} answered HTTP {exc.response.status_code}; "
            "is this a llama-server?",
            status=exc.response.status_code,
        ) from exc
    except httpx2.HTTPError as exc:
        raise ProviderError(
            f"llama-server at {root}: cannot read {url}: {exc or type(exc).__name__}",
            kind="connection_error",
            retryable=True,
        ) from exc
    except ValueError as exc:
        raise ProviderError(f"llama-server at {root}: {url} did not answer JSON") from exc
    if not isinstance(props, dict):
        raise ProviderError(f"llama-server at {root}: {url} did not answer a JSON object")
    return props


# -- codecs ------------------------------------------------------------------------


class _StreamDecoder(Protocol):
    def feed(self, event: Any, /) -> str: ...

    def response(self) -> Response: ...


@dataclass(frozen=True)
class _Wire:
    """One dialect's codec bound to a backend's capabilities and options."""

    encode: Callable[[Request], dict[str, Any]]
    decode: Callable[[Mapping[str, Any]], Response]
    decoder: Callable[[], _StreamDecoder]


def _anthropic_wire(caps: Capabilities) -> _Wire:
    from carryall.providers import anthropic as codec

    return _Wire(
        encode=functools.partial(_encode_anthropic, caps=caps),
        decode=codec.decode_response,
        decoder=codec.StreamDecoder,
    )


def _encode_anthropic(request: Request, caps: Capabilities) -> dict[str, Any]:
    from carryall.providers import anthropic as codec

    return codec.encode_request(request, caps)


def _openai_wire(caps: Capabilities, dialect: Literal["openai", "llama-server"]) -> _Wire:
    """The OpenAI-wire codec for `caps`: native tool calls if the model has them, else prompt mode.

    Prompt mode is constrained by a JSON schema on llama-server, which
    enforces one; a plain OpenAI-compatible server may not, so there the
    calls are read out of free text.
    """
    if caps.native_tools:
        from carryall.providers import openai as codec

        return _Wire(
            encode=functools.partial(_encode_openai, caps=caps, dialect=dialect),
            decode=codec.decode_response,
            decoder=codec.StreamDecoder,
        )
    from carryall.providers import prompt

    constrained = dialect == "llama-server"
    return _Wire(
        encode=functools.partial(
            _encode_prompt, caps=caps, dialect=dialect, constrained=constrained
        ),
        decode=functools.partial(prompt.decode_response, constrained=constrained),
        decoder=functools.partial(prompt.StreamDecoder, constrained),
    )


def _encode_openai(
    request: Request, caps: Capabilities, dialect: Literal["openai", "llama-server"]
) -> dict[str, Any]:
    from carryall.providers import openai as codec

    return codec.encode_request(request, caps, dialect)


def _encode_prompt(
    request: Request,
    caps: Capabilities,
    dialect: Literal["openai", "llama-server"],
    constrained: bool,
) -> dict[str, Any]:
    from carryall.providers import prompt

    return prompt.encode_request(request, caps, dialect=dialect, constrained=constrained)


# -- the transport both SDKs share -------------------------------------------------


class _Broken(Exception):
    """An attempt that failed after its answer began: worth sending again whole."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


_END: Final = object()


class _SdkBackend:
    """What both SDK transports do alike: the attempt loop, stream reading and error mapping.

    A subclass names its SDK module and its `create` method and says what a
    finished stream looks like on its wire.
    """

    name: str
    model: str
    capabilities: Capabilities

    def __init__(
        self,
        *,
        name: str,
        model: str,
        capabilities: Capabilities,
        wire: _Wire,
        sdk: ModuleType,
        timeout: float,
        max_retries: int,
        retry_delay: float,
        stream: bool,
    ) -> None:
        self.name = name
        self.model = model
        self.capabilities = capabilities
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.stream = stream
        self._wire = wire
        self._sdk = sdk
        self._client: Any = None
        self._body_fields: frozenset[str] = frozenset()

    # The public surface -------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The URL the SDK sends to."""
        return str(self._client.base_url).rstrip("/")

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        """Send `request` and return the whole answer, or raise `ProviderError`.

        An empty `request.model` is filled with this backend's model. A broken
        history is refused by the codec (`HistoryError`) before anything is
        sent. A stream that breaks off is sent again whole, at most
        `max_retries` times, with doubling pauses from `retry_delay`.
        """
        if not request.model:
            request = msgspec.structs.replace(request, model=self.model)
        body = self._wire.encode(request)
        failures = 0
        while True:
            try:
                return self._attempt(body, on_text)
            except _Broken as broken:
                failures += 1
                if failures > self.max_retries:
                    error = broken.error
                    raise ProviderError(
                        f"{error.message} (gave up after {failures} attempts)",
                        status=error.status,
                        kind=error.kind,
                        retryable=error.retryable,
                    ) from broken.__cause__
                time.sleep(min(self.retry_delay * 2 ** (failures - 1), _MAX_RETRY_DELAY))

    def close(self) -> None:
        """Close the SDK client's connection pool."""
        with contextlib.suppress(Exception):
            self._client.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.model!r} at {self.base_url}>"

    # One attempt ----------------------------------------------------------------

    def _attempt(self, body: dict[str, Any], on_text: Callable[[str], None] | None) -> Response:
        self._prepare()
        if not self.stream:
            try:
                raw = self._create_raw(body)
            except self._opening_errors() as exc:
                raise self._sdk_error(exc) from exc
            return self._decode_whole(raw)
        stack = contextlib.ExitStack()
        try:
            raw = stack.enter_context(self._create_streaming(body))
        except self._opening_errors() as exc:
            raise self._sdk_error(exc) from exc
        with stack:
            if "text/event-stream" not in raw.http_response.headers.get("content-type", ""):
                # A server that ignored `stream` and answered in one piece.
                return self._decode_whole(raw)
            return self._read_stream(raw, on_text)

    def _read_stream(self, raw: Any, on_text: Callable[[str], None] | None) -> Response:
        import httpx2

        decoder = self._wire.decoder()
        events = self._payloads(raw)
        finished = False
        while True:
            try:
                payload = next(events, _END)
                if payload is _END:
                    break
                text = decoder.feed(payload)
            except ProviderError as exc:
                error = self._placed(exc)
                if error.retryable or error.kind in _RETRYABLE_KINDS:
                    raise _Broken(error) from exc
                raise error from exc
            except (httpx2.HTTPError, httpx2.StreamError, self._sdk_base_error()) as exc:
                if finished:
                    break  # only trailing bookkeeping (a usage chunk) was lost
                raise _Broken(self._dropped(exc)) from exc
            finished = finished or self._finishes(payload)
            # Outside the try: an error raised by the caller's callback is the
            # caller's, not a transport failure to retry.
            if text and on_text is not None:
                on_text(text)
            if self._is_last(payload):
                break
        if not finished:
            raise _Broken(
                ProviderError(
                    f"{self._where}: the stream ended before the answer was complete",
                    kind="truncated",
                    retryable=True,
                )
            )
        try:
            return decoder.response()
        except ProviderError as exc:
            raise self._placed(exc) from exc

    def _payloads(self, raw: Any) -> Iterator[Any]:
        """The JSON payload of each event (or the `[DONE]` marker, as a string)."""
        for count, sse in enumerate(iter_sse(raw.iter_lines()), 1):
            if sse.data.strip() == "[DONE]":
                yield "[DONE]"
                continue
            try:
                payload = json.loads(sse.data)
            except (ValueError, RecursionError) as exc:
                raise ProviderError(f"stream event {count} is not JSON: {_clip(sse.data)}") from exc
            yield self._event_payload(sse.event, payload)

    def _decode_whole(self, raw: Any) -> Response:
        import httpx2

        try:
            data = json.loads(raw.http_response.read())
        except (httpx2.HTTPError, httpx2.StreamError) as exc:
            raise self._dropped(exc) from exc
        except (ValueError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than Python can hold.
            raise ProviderError(f"{self._where}: the answer is not JSON") from exc
        if not isinstance(data, Mapping):
            raise ProviderError(f"{self._where}: the answer is not a JSON object: {_clip(data)}")
        try:
            return self._wire.decode(data)
        except ProviderError as exc:
            raise self._placed(exc) from exc

    # Errors ---------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"{self.name} at {self.base_url} (model {self.model})"

    def _placed(self, error: ProviderError) -> ProviderError:
        """The codec's error with the backend, URL and model in front of its message."""
        return ProviderError(
            f"{self._where}: {error.message}",
            status=error.status,
            kind=error.kind,
            retryable=error.retryable,
        )

    def _dropped(self, exc: BaseException) -> ProviderError:
        import httpx2

        if isinstance(exc, httpx2.TimeoutException):
            return ProviderError(
                f"{self._where}: the stream stalled for over {self.timeout:g} s",
                kind="timeout",
                retryable=True,
            )
        return ProviderError(
            f"{self._where}: the connection dropped mid-answer: {_reason(exc)}",
            kind="connection_error",
            retryable=True,
        )

    def _sdk_error(self, exc: Exception) -> ProviderError:
        """The `ProviderError` for an exception the SDK raised after its own retries."""
        sdk = self._sdk
        status: int | None = None
        kind: str | None = None
        retryable = False
        if isinstance(exc, sdk.APIStatusError):
            status = exc.status_code
            kind, message = self._status_details(exc)
            retryable = status in (408, 409, 429) or status >= 500
        elif isinstance(exc, sdk.APITimeoutError):
            kind, retryable = "timeout", True
            message = f"no answer within {self.timeout:g} s"
        elif isinstance(exc, sdk.APIConnectionError):
            kind, retryable = "connection_error", True
            message = f"cannot connect: {_reason(exc)}"
        else:
            message = _reason(exc)
        retries = _retries_taken(exc)
        if retries:
            message = f"{message} (after {retries} {'retry' if retries == 1 else 'retries'})"
        return ProviderError(
            f"{self._where}: {message}", status=status, kind=kind, retryable=retryable
        )

    def _opening_errors(self) -> tuple[type[Exception], ...]:
        import httpx2

        return (self._sdk_base_error(), httpx2.HTTPError, httpx2.StreamError)

    # What each SDK does its own way ---------------------------------------------------

    def _sdk_base_error(self) -> type[Exception]:
        raise NotImplementedError

    def _status_details(self, exc: Any) -> tuple[str | None, str]:
        raise NotImplementedError

    def _create_streaming(self, body: dict[str, Any]) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _create_raw(self, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _event_payload(self, event: str | None, payload: Any) -> Any:
        return payload

    def _finishes(self, payload: Any) -> bool:
        """The payload completes the answer: what follows, if anything, is bookkeeping."""
        raise NotImplementedError

    def _is_last(self, payload: Any) -> bool:
        """Nothing follows this payload; stop reading instead of waiting for the close."""
        return self._finishes(payload)

    def _prepare(self) -> None:
        """Run before every attempt (the local backend makes sure its server is up)."""

    def _split(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`create` keyword arguments for `body`: typed fields by name, the rest in `extra_body`.

        The SDKs' `create` takes only the fields they know; a field the wire
        takes but the SDK does not (llama-server's `chat_template_kwargs`, a
        field newer than the SDK) still goes out verbatim this way.
        """
        known = {k: v for k, v in body.items() if k in self._body_fields}
        extra = {k: v for k, v in body.items() if k not in self._body_fields and k != "stream"}
        if extra:
            known["extra_body"] = extra
        return known


def _body_fields(create: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(create).parameters) - _NOT_BODY


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
            return _clip(text)
    return type(exc).__name__


def _clip(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _CLIP else text[: _CLIP - 3] + "..."


class AnthropicBackend(_SdkBackend):
    """The Anthropic Messages API through the `anthropic` SDK (or a server speaking it)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None = None,
        capabilities: Capabilities = ANTHROPIC_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
    ) -> None:
        import anthropic

        super().__init__(
            name="anthropic",
            model=model,
            capabilities=capabilities,
            wire=_anthropic_wire(capabilities),
            sdk=anthropic,
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
        )
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self._body_fields = _body_fields(self._client.messages.create)

    def _sdk_base_error(self) -> type[Exception]:
        error: type[Exception] = self._sdk.AnthropicError
        return error

    def _status_details(self, exc: Any) -> tuple[str | None, str]:
        kind = exc.type if isinstance(exc.type, str) else None
        message = exc.api_message if isinstance(exc.api_message, str) else exc.message
        return kind, _clip(message)

    def _create_streaming(self, body: dict[str, Any]) -> AbstractContextManager[Any]:
        create: Callable[..., AbstractContextManager[Any]] = (
            self._client.messages.with_streaming_response.create
        )
        return create(**self._split(body), stream=True)

    def _create_raw(self, body: dict[str, Any]) -> Any:
        create: Callable[..., Any] = self._client.messages.with_raw_response.create
        return create(**self._split(body))

    def _finishes(self, payload: Any) -> bool:
        return isinstance(payload, Mapping) and payload.get("type") == "message_stop"


class OpenAIBackend(_SdkBackend):
    """Chat Completions through the `openai` SDK: OpenAI, any compatible server, llama-server.

    `dialect` picks the OpenAI or the llama-server flavour of the codec;
    without native tool calls (`capabilities.native_tools`) the prompt-mode
    codec is used instead. `server`, for the `local` backend, is a
    `carryall.local.LocalServer` made sure to be running before each attempt.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        name: str = "openai",
        dialect: Literal["openai", "llama-server"] = "openai",
        capabilities: Capabilities = OPENAI_CAPABILITIES,
        timeout: float = 600.0,
        max_retries: int = 3,
        retry_delay: float = RETRY_DELAY,
        stream: bool = True,
        server: LocalServer | None = None,
    ) -> None:
        import openai

        super().__init__(
            name=name,
            model=model,
            capabilities=capabilities,
            wire=_openai_wire(capabilities, dialect),
            sdk=openai,
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
        )
        self._api_key = api_key or _NO_KEY
        self._server = server
        self._client = self._new_client(base_url)
        self._body_fields = _body_fields(self._client.chat.completions.create)

    def _new_client(self, base_url: str | None) -> Any:
        import openai

        return openai.OpenAI(
            api_key=self._api_key,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def served_model(self) -> str | None:
        """The one model the server lists at `/models`; None when it lists several, or none.

        A self-hosted OpenAI-compatible server (vLLM, LM Studio, llama-server)
        usually serves one model and refuses any other name, so its own answer
        beats a default that names a hosted model.
        """
        import httpx2

        try:
            page = self._client.with_options(max_retries=0, timeout=10.0).models.list()
            ids = [getattr(entry, "id", None) for entry in page.data]
        except (self._sdk_base_error(), httpx2.HTTPError, TypeError, AttributeError):
            return None
        return ids[0] if len(ids) == 1 and isinstance(ids[0], str) and ids[0] else None

    def _prepare(self) -> None:
        if self._server is None:
            return
        try:
            root = self._server.ensure_running()
        except LocalBackendError as exc:
            raise ProviderError(f"local backend: {exc}", kind="local_backend") from exc
        url = f"{root.rstrip('/')}/v1"
        if url != self.base_url:
            # Restarted on another port: a new client, the old pool points nowhere.
            self.close()
            self._client = self._new_client(url)

    def _sdk_base_error(self) -> type[Exception]:
        error: type[Exception] = self._sdk.OpenAIError
        return error

    def _status_details(self, exc: Any) -> tuple[str | None, str]:
        body = exc.body
        kind = exc.type if isinstance(exc.type, str) else exc.code
        message = body.get("message") if isinstance(body, Mapping) else None
        if not isinstance(message, str) or not message:
            message = exc.message
        return (kind if isinstance(kind, str) else None), _clip(message)

    def _create_streaming(self, body: dict[str, Any]) -> AbstractContextManager[Any]:
        from carryall.providers.openai import stream_body

        create: Callable[..., AbstractContextManager[Any]] = (
            self._client.chat.completions.with_streaming_response.create
        )
        return create(**self._split(stream_body(body)), stream=True)

    def _create_raw(self, body: dict[str, Any]) -> Any:
        create: Callable[..., Any] = self._client.chat.completions.with_raw_response.create
        return create(**self._split(body))

    def _event_payload(self, event: str | None, payload: Any) -> Any:
        # Some servers name an error event and put the error object bare in it.
        if event == "error" and isinstance(payload, Mapping) and "error" not in payload:
            return {"error": dict(payload)}
        return payload

    def _finishes(self, payload: Any) -> bool:
        if payload == "[DONE]":
            return True
        if not isinstance(payload, Mapping):
            return False
        choices = payload.get("choices")
        return isinstance(choices, list) and any(
            isinstance(c, Mapping) and c.get("finish_reason") is not None for c in choices
        )

    def _is_last(self, payload: Any) -> bool:
        # The usage chunk comes after the finish_reason: read on to `[DONE]`.
        return isinstance(payload, str) and payload == "[DONE]"


# -- choosing and opening ------------------------------------------------------------


def default_backend_name(config: Config | None = None) -> str:
    """The backend `run` uses when none is named.

    The config file's `backend` when it names one (an explicit choice beats
    a key that happens to be set), else `anthropic` when `ANTHROPIC_API_KEY`
    is set, else `openai` when `OPENAI_API_KEY` is, else `local`: with
    nothing configured carryall still runs, on the embedded model.
    """
    config = load_config() if config is None else config
    if config.backend:
        return config.backend
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    return "local"


def open_backend(
    name: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    no_vision: bool = False,
    timeout: float = 600.0,
    max_retries: int = 3,
    retry_delay: float = RETRY_DELAY,
    stream: bool = True,
    config: Config | None = None,
) -> Backend:
    """Open backend `name` (default `default_backend_name()`), ready for `complete`.

    Each argument left out comes from the config file's `[backends.NAME]`
    table, then the environment, then the backend's default (for `openai`
    at a base URL, the one model that server lists, if it lists one).
    `llama-server`
    reads its `/props` here and `local` starts the embedded server here, so
    a backend that cannot serve fails now with a clear error, not at the
    first request. `no_vision` makes every image a text line.

    Raises `ProviderError` for an unknown name, a missing API key or an
    unreachable llama-server, `LocalBackendError` when the local backend is
    not installed (run `carryall local install`), and `CarryallError` for a
    broken config file.
    """
    config = load_config() if config is None else config
    name = name or default_backend_name(config)
    if name not in BACKEND_NAMES:
        raise ProviderError(f"unknown backend {name!r}: expected one of {', '.join(BACKEND_NAMES)}")
    settings = config.settings(name)
    model = model or settings.model
    base_url = base_url or settings.base_url
    options: dict[str, Any] = {
        "timeout": timeout,
        "max_retries": max_retries,
        "retry_delay": retry_delay,
        "stream": stream,
    }
    if name == "anthropic":
        key = _api_key(api_key, "ANTHROPIC_API_KEY", name, base_url)
        caps = _capabilities(ANTHROPIC_CAPABILITIES, settings, no_vision)
        if not caps.native_tools:
            raise ProviderError(
                "the anthropic backend has no prompt mode: it always sends native tool calls; "
                "remove native_tools = false from its config"
            )
        return AnthropicBackend(
            model=model or DEFAULT_MODELS["anthropic"],
            api_key=key,
            base_url=base_url,
            capabilities=caps,
            **options,
        )
    if name == "openai":
        key = _api_key(api_key, "OPENAI_API_KEY", name, base_url)
        caps = _capabilities(OPENAI_CAPABILITIES, settings, no_vision)
        backend = OpenAIBackend(
            model=model or DEFAULT_MODELS["openai"],
            base_url=base_url,
            api_key=key,
            capabilities=caps,
            **options,
        )
        if model is None and base_url is not None:
            backend.model = backend.served_model() or backend.model
        return backend
    if name == "llama-server":
        root = _server_root(base_url or os.environ.get("LLAMA_SERVER_URL") or LLAMA_SERVER_URL)
        props = read_props(root, timeout=min(timeout, 30.0))
        return OpenAIBackend(
            name="llama-server",
            dialect="llama-server",
            model=model or model_from_props(props) or "llama-server",
            base_url=f"{root}/v1",
            api_key=api_key,
            capabilities=_capabilities(capabilities_from_props(props), settings, no_vision),
            **options,
        )
    return _open_local(model, api_key, settings, no_vision, options)


def _open_local(
    model: str | None,
    api_key: str | None,
    settings: BackendSettings,
    no_vision: bool,
    options: dict[str, Any],
) -> Backend:
    from carryall import local

    server = local.get_local_server()
    return OpenAIBackend(
        name="local",
        dialect="llama-server",
        model=model or server.model_id,
        base_url=f"{server.base_url.rstrip('/')}/v1",
        api_key=api_key,
        capabilities=_capabilities(server.capabilities, settings, no_vision),
        server=server,
        **options,
    )


def _api_key(given: str | None, variable: str, name: str, base_url: str | None) -> str:
    key = given or os.environ.get(variable)
    if key:
        return key
    if base_url:
        # A self-hosted server speaking the same wire often wants no key at all.
        return _NO_KEY
    raise ProviderError(
        f"the {name} backend needs an API key: set {variable} (or pass a base URL "
        "for a server that needs none)",
        kind="authentication_error",
    )


def _capabilities(caps: Capabilities, settings: BackendSettings, no_vision: bool) -> Capabilities:
    if settings.vision is not None:
        caps = msgspec.structs.replace(caps, vision=settings.vision)
    if settings.native_tools is not None:
        caps = msgspec.structs.replace(caps, native_tools=settings.native_tools)
    if no_vision:
        caps = msgspec.structs.replace(caps, vision=False)
    return caps


def _server_root(url: str) -> str:
    """A llama-server URL without the `/v1` a user may have copied from an OpenAI setup."""
    root = url.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root
