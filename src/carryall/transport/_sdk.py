"""What both SDK transports do alike: one attempt, read as a stream or whole, through a codec.

Both official SDKs are made by the same generator, so sending a body and
reading the raw answer is the same code for both: the codec's bytes posted
through the SDK's own httpx2 client with the SDK's headers, retry policy and
typed status errors (`_http.Poster`, prepared once per client), and the bare
HTTP response read by carryall's decoders. That keeps what the SDK is for
(its retries with backoff and `retry-after`, timeouts, headers and API key,
typed status errors, its proxies from the environment) and skips what it
would otherwise do to every request: walk the whole history to transform
it, copy it, encode it again with the stdlib `json`, and rebuild the same
request options, headers and URL. What differs between the wires is the
`Codec` value a backend is built with and the path it posts to; what
differs between the SDKs is its `SdkErrors` value and how its client is
made, which is the subclass's constructor.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from carryall._secrets import mask
from carryall.blocks import Document, Downgrade, Image, Message
from carryall.errors import ProviderError
from carryall.providers import Capabilities, Encoded, Request, Response
from carryall.providers.codec import Codec
from carryall.transport import ModelInfo
from carryall.transport._errors import (
    RETRYABLE_KINDS,
    Broken,
    SdkErrors,
    dropped,
    masked,
    opening_errors,
    placed,
    sdk_failure,
    send_whole,
    sending,
    shown,
)
from carryall.transport._http import Poster
from carryall.transport._images import ImageLimits, fit_request_images
from carryall.transport.sse import iter_sse

__all__ = [
    "SdkBackend",
    "WireBackend",
    "addressed",
    "answered",
    "endpoint_of",
    "key_fingerprint",
    "reported",
    "with_fitting",
]

_END: Final = object()


def endpoint_of(base_url: str) -> str:
    """The host a base URL names, lowercased: the `endpoint` of every origin made there.

    The host alone, not the port: a local server that comes back on another
    port is the same server.
    """
    return (urlsplit(base_url).hostname or "").lower()


def key_fingerprint(key: str | None) -> str:
    """A short fingerprint of an API key, for an origin's `account`: never the key itself.

    Twelve hex digits of its SHA-256: enough to tell one account's
    encrypted content from another's, too few to say anything of the key.
    Empty for no key.
    """
    if not key:
        return ""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def addressed(request: Request, model: str, endpoint: str, account: str = "") -> Request:
    """`request` with a backend's model, endpoint and account where it names none.

    Every SDK backend fills them in before encoding, so the encoder knows
    which origin it writes for.
    """
    if request.model and request.endpoint and (request.account or not account):
        return request
    return msgspec.structs.replace(
        request,
        model=request.model or model,
        endpoint=request.endpoint or endpoint,
        account=request.account or account,
    )


def with_fitting(encoded: Encoded, downgrades: Sequence[Downgrade]) -> Encoded:
    """A codec's report with the transport's own image fittings after it."""
    if not downgrades:
        return encoded
    return Encoded(encoded.body, (*encoded.downgrades, *downgrades))


def answered(response: Response, request: Request) -> Response:
    """The decoded answer with its origins naming the model `request` asked for, and its account."""
    return response.as_requested(request.model, request.account)


def reported(response: Response, downgrades: tuple[Downgrade, ...]) -> Response:
    """The answer with the downgrades of the one encode that was sent: no caller encodes again.

    They go ahead of what the decoder could not keep of the answer (its own report).
    """
    if not downgrades:
        return response
    return msgspec.structs.replace(response, downgrades=(*downgrades, *response.downgrades))


class WireBackend:
    """What every SDK backend shares, whichever way its SDK takes the body.

    `SdkBackend` posts a codec's bytes; the Gemini and Bedrock backends hand
    the body to their SDK's own call as values. Each makes its client and
    its one attempt; the settings every backend has, the model and endpoint
    a request is addressed to, the one encode (the codec's, then the
    transport's image fitting) and closing are here. A subclass sets
    `endpoint`, `_client` and (unless it reads it off the client)
    `_base_url` once its client is made.
    """

    endpoint: str
    account: str = ""
    """The fingerprint of the key, on wires whose encrypted content it binds (`key_fingerprint`)."""
    _client: Any
    _base_url: str

    def __init__(
        self,
        *,
        name: str,
        model: str,
        capabilities: Capabilities,
        wire_encode: Callable[[Request, Capabilities], Encoded],
        image_limits: ImageLimits,
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
        self._wire_encode = wire_encode
        self.image_limits = image_limits if capabilities.vision else None
        """What this wire takes per image, a larger one going fitted (`transport._images`).

        None for a model that sees no images: they go as placeholders anyway.
        """

    @property
    def base_url(self) -> str:
        """The URL the SDK sends to."""
        return self._base_url

    @property
    def context_window(self) -> int | None:
        """None: a hosted wire does not say; the agent reads carryall's table or the config."""
        return None

    def addressed(self, request: Request) -> Request:
        """`request` with this backend's model, endpoint and account where it names none."""
        return addressed(request, self.model, self.endpoint, self.account)

    def encode(self, request: Request) -> Encoded:
        """The body `complete` would send for `request`, and the downgrades made to write it."""
        fitted, downgrades = fit_request_images(self.addressed(request), self.image_limits)
        return with_fitting(self._wire_encode(fitted, self.capabilities), downgrades)

    def takes_url(self, block: Image | Document) -> bool:
        """Whether this backend sends `block` as its URL, asked of its own codec (`Wire`).

        The codec is the one answer: a request holding the block is encoded
        (nothing is sent, nothing fetched) and a wire that cannot take it
        reports the downgrade. A model that cannot see gets an image as its
        placeholder line anyway, so nothing needs fetching for it.
        """
        if isinstance(block, Image) and not self.capabilities.vision:
            return True
        request = Request(model=self.model, messages=(Message.user("probe", [block]),))
        return not self.encode(request).downgrades

    def close(self) -> None:
        """Close the SDK client's connections."""
        with contextlib.suppress(Exception):
            self._client.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model!r} at {mask(self.base_url)}>"


class SdkBackend(WireBackend):
    """A backend that posts one codec's bytes to one path through one SDK client.

    `complete` returns a whole `Response` or raises `ProviderError`, never
    something in between: the caller appends the answer only once it has
    it, so a failed request leaves the history exactly as it was.
    `client(base_url, http)` makes the SDK client for a base URL (None: the
    SDK's own, from its environment variable or default) around the httpx2
    client `http`, which the backend then posts through (`_http.Poster`).
    """

    def __init__(
        self,
        *,
        name: str,
        model: str,
        capabilities: Capabilities,
        codec: Callable[[str], Codec],
        errors: SdkErrors,
        client: Callable[[str | None, Any], Any],
        base_url: str | None,
        path: str,
        timeout: float,
        max_retries: int,
        retry_delay: float,
        stream: bool,
        image_limits: ImageLimits,
        model_info: Callable[[Any], ModelInfo | None],
        binds_key: bool = False,
        request_headers: Callable[[Request], Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__(
            name=name,
            model=model,
            capabilities=capabilities,
            wire_encode=lambda request, _: self._codec.for_request(request).encode_reported(
                request
            ),
            image_limits=image_limits,
            timeout=timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            stream=stream,
        )
        self._errors = errors
        self._model_info = model_info
        # Headers one request needs beyond the SDK's own: a beta its body opts into.
        self._request_headers = request_headers
        self._make_client = client
        self._path = path
        self._connect(base_url)
        self.endpoint = endpoint_of(self.base_url)
        """The base URL's host: what this backend's origins name (`carryall.blocks.Origin`)."""
        if binds_key:
            self.account = key_fingerprint(getattr(self._client, "api_key", None))
        self._codec = codec(self.endpoint)

    @property
    def base_url(self) -> str:
        """The URL the SDK sends to."""
        return str(self._client.base_url).rstrip("/")

    def _connect(self, base_url: str | None) -> None:
        """Make the SDK client for `base_url` (None: the SDK's own choice) and the POST it prepares.

        Both share one httpx2 client, the SDK's `DefaultHttpxClient`, so
        the SDK's own calls (`served_model`) and every completion use one pool.
        """
        http = self._errors.module.DefaultHttpxClient()
        self._client = self._make_client(base_url, http)
        self._poster = Poster(
            self._client,
            http,
            self._path,
            self._errors,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def complete(self, request: Request, on_text: Callable[[str], None] | None = None) -> Response:
        """Send `request` and return the whole answer, or raise `ProviderError`.

        An empty `request.model` is filled with this backend's model, and an
        empty `request.endpoint` with this backend's, so the encoder knows
        which origin it writes for. A broken
        history is refused by the codec (`HistoryError`) before anything is
        sent. A stream that breaks off is sent again whole, at most
        `max_retries` times, with doubling pauses from `retry_delay`.
        An image over `image_limits` goes fitted, in this request only.
        The answer's `downgrades` are those of the one encode that was sent
        (what `encode` would report), so no caller has to encode it again.
        """
        fitted, fittings = fit_request_images(self.addressed(request), self.image_limits)
        # The codec that writes this request reads its answer too (`Codec.for_request`).
        codec = self._codec.for_request(fitted)
        sent = codec.sent(fitted, self.stream)
        downgrades = (*sent.downgrades, *fittings) if fittings else sent.downgrades
        body = sent.data
        extra = self._request_headers(fitted) if self._request_headers is not None else None
        response = sending(
            lambda: send_whole(
                lambda: self._attempt(codec, body, on_text, extra),
                max_retries=self.max_retries,
                retry_delay=self.retry_delay,
            ),
            (getattr(self._client, "api_key", None),),
        )
        return reported(answered(response, fitted), downgrades)

    def list_models(self) -> list[ModelInfo]:
        """Every model the server lists at `GET /models`, every page, through the SDK's client.

        A failure reads as a completion's would (`sdk_failure`): the status,
        the server's message, and the key masked.
        """
        where = f"{self.name} at {mask(self.base_url)}: listing models"
        try:
            entries = list(self._client.models.list())
        except opening_errors(self._errors) as exc:
            error = sdk_failure(where, exc, self._errors, self.timeout)
            raise masked(error, (getattr(self._client, "api_key", None),)) from exc
        return [info for info in map(self._model_info, entries) if info is not None]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.model!r} at {mask(self.base_url)}>"

    # One attempt ----------------------------------------------------------------

    def _attempt(
        self,
        codec: Codec,
        body: bytes,
        on_text: Callable[[str], None] | None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send `body` once; `Broken` when the answer broke off after it began."""
        try:
            # Unread when streaming, after the SDK's retry policy and its typed
            # errors for a status (`_http.Poster`).
            raw = self._poster.send(body, stream=self.stream, headers=headers)
        except opening_errors(self._errors) as exc:
            raise sdk_failure(self._where, exc, self._errors, self.timeout) from exc
        with contextlib.closing(raw):
            if not self.stream or "text/event-stream" not in raw.headers.get("content-type", ""):
                # Unstreamed, or a server that ignored `stream` and answered in one piece.
                return self._decode_whole(codec, raw)
            return self._read_stream(codec, raw, on_text)

    def _read_stream(
        self, codec: Codec, raw: Any, on_text: Callable[[str], None] | None
    ) -> Response:
        import httpx2

        decoder = codec.stream_decoder()
        events = self._payloads(codec, raw)
        finished = False
        while True:
            try:
                payload = next(events, _END)
                if payload is _END:
                    break
                text = decoder.feed(payload)
            except ProviderError as exc:
                error = placed(self._where, exc)
                if error.retryable or error.kind in RETRYABLE_KINDS:
                    raise Broken(error) from exc
                raise error from exc
            except (httpx2.HTTPError, httpx2.StreamError, self._errors.base) as exc:
                if finished:
                    break  # only trailing bookkeeping (a usage chunk) was lost
                raise Broken(dropped(self._where, exc, self.timeout)) from exc
            finished = finished or codec.completes(payload)
            # Outside the try: an error raised by the caller's callback is the
            # caller's, not a transport failure to retry.
            if text and on_text is not None:
                on_text(text)
            if codec.ends(payload):
                break
        if not finished:
            raise Broken(
                ProviderError(
                    f"{self._where}: the stream ended before the answer was complete",
                    kind="truncated",
                    retryable=True,
                )
            )
        try:
            return decoder.response()
        except ProviderError as exc:
            raise placed(self._where, exc) from exc

    def _payloads(self, codec: Codec, raw: Any) -> Iterator[Any]:
        """The JSON payload of each event (or the `[DONE]` marker, as a string)."""
        for count, sse in enumerate(iter_sse(raw.iter_lines()), 1):
            if sse.data.strip() == "[DONE]":
                yield "[DONE]"
                continue
            try:
                payload = json.loads(sse.data)
            except (ValueError, RecursionError) as exc:
                raise ProviderError(f"stream event {count} is not JSON: {shown(sse.data)}") from exc
            yield codec.event_payload(sse.event, payload)

    def _decode_whole(self, codec: Codec, raw: Any) -> Response:
        import httpx2

        try:
            data = json.loads(raw.read())
        except (httpx2.HTTPError, httpx2.StreamError) as exc:
            raise dropped(self._where, exc, self.timeout) from exc
        except (ValueError, RecursionError) as exc:
            # RecursionError: JSON nested deeper than Python can hold.
            raise ProviderError(f"{self._where}: the answer is not JSON") from exc
        if not isinstance(data, Mapping):
            raise ProviderError(f"{self._where}: the answer is not a JSON object: {shown(data)}")
        try:
            return codec.decode(data)
        except ProviderError as exc:
            raise placed(self._where, exc) from exc

    @property
    def _where(self) -> str:
        # Masked: `user:password@` in a base URL is for the request, not the error line.
        return f"{self.name} at {mask(self.base_url)} (model {self.model})"
