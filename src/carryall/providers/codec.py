"""A wire codec as one value: what a transport needs to speak one dialect.

A transport sends bytes and reads JSON or server-sent events; which dialect
those bytes are in, and what a finished stream looks like on that wire, is the
codec's business. `Codec` bundles those answers so a backend is built from a
codec value instead of choosing one through hooks, and so the transport never
imports a codec module itself. Pure, like the codecs: no network, no files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from carryall._json import KeptItems
from carryall.providers import (
    Capabilities,
    Dialect,
    Downgrade,
    Encoded,
    Request,
    Response,
    Sent,
)
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import openai as openai_wire
from carryall.providers import prompt as prompt_mode
from carryall.providers import responses as responses_wire

__all__ = [
    "Codec",
    "Downgrade",
    "Encoded",
    "Sent",
    "StreamDecoder",
    "anthropic_codec",
    "openai_codec",
    "responses_codec",
]


class StreamDecoder(Protocol):
    """Reads one streamed answer, event by event, into one `Response`."""

    def feed(self, event: Any, /) -> str:
        """Take one event's JSON payload (or `[DONE]`); return the text it made visible."""
        ...

    def response(self) -> Response:
        """The whole answer; a `ProviderError` when the stream never finished it."""
        ...


@dataclass(frozen=True, slots=True)
class Codec:
    """One dialect bound to a model's capabilities: the request body out, the answer back.

    `encode`, `decode` and `stream_decoder` are the codec proper. `encode`
    gives the body as a dict, for inspection; `encode_reported` the same
    body with the downgrades made to write it (`Encoded`), which is what a
    transport encodes, once, so it can hand those downgrades back on the
    answer. `sent_bytes(body, stream)` writes such a body as the bytes a
    transport sends (asking for a stream when `stream` is true), in one
    pass. `sent(request, stream)` is what a transport calls: the bytes and
    the downgrades of one encode, written straight from the blocks by a
    codec that has that entry point (`encode_sent`), else `encode_reported`
    then `sent_bytes`; the bytes are the same either way, and
    `encode_bytes(request, stream)` is `sent`'s bytes alone. `event_payload`
    is what the decoder is fed for an event of a given name. `completes` says
    an event finished the answer (what may follow is bookkeeping, such as a
    usage chunk), and `ends` that nothing follows it, so reading stops there
    instead of waiting for the server to close the connection.

    `endpoint` is the host of the base URL the codec's backend talks to,
    bound when the transport builds the codec: the decoders stamp it on the
    origin of what they read, and the backend puts it on each request
    (`Request.endpoint`) so the encoder knows which origin it writes for.
    """

    encode: Callable[[Request], dict[str, Any]]
    encode_reported: Callable[[Request], Encoded]
    sent_bytes: Callable[[Mapping[str, Any], bool], bytes]
    decode: Callable[[Mapping[str, Any]], Response]
    stream_decoder: Callable[[], StreamDecoder]
    event_payload: Callable[[str | None, Any], Any]
    completes: Callable[[Any], bool]
    ends: Callable[[Any], bool]
    endpoint: str = ""
    encode_sent: Callable[[Request, bool], Sent] | None = None
    plain: Codec | None = None
    """The codec for a request that offers no tools, when it is another one.

    Prompt mode on llama-server constrains an answer to a JSON schema of
    calls or a response; with no tools, the schema only costs the server a
    grammar on every token and holds text back until it is JSON, so such a
    request goes as plain prompt mode and its answer is read as free text.
    (With tools and `tool_choice` "none" the schema stays: it is what holds
    a small model to an answer without calls.) `for_request` chooses.
    """

    def for_request(self, request: Request) -> Codec:
        """The codec that writes `request` and reads its answer (`plain` when it has no tools)."""
        if self.plain is not None and not request.tools:
            return self.plain
        return self

    def sent(self, request: Request, stream: bool) -> Sent:
        """The bytes a transport sends for `request`, and the downgrades made to write them."""
        if self.encode_sent is not None:
            return self.encode_sent(request, stream)
        encoded = self.encode_reported(request)
        return Sent(self.sent_bytes(encoded.body, stream), encoded.downgrades)

    def encode_bytes(self, request: Request, stream: bool) -> bytes:
        """The bytes a transport sends for `request` (`sent`'s, without the report)."""
        return self.sent(request, stream).data


def anthropic_codec(caps: Capabilities, endpoint: str = "") -> Codec:
    """The Messages API codec for a model with `caps`, at `endpoint` (a base URL's host).

    Its `sent` keeps the JSON of the messages it last wrote (`KeptItems`),
    so the next request of the same conversation writes only what is new.
    """
    kept = KeptItems()
    return Codec(
        encode=lambda request: anthropic_wire.encode_request(request, caps),
        encode_reported=lambda request: anthropic_wire.encode(request, caps),
        sent_bytes=lambda body, stream: anthropic_wire.sent_bytes(body, stream=stream),
        decode=lambda data: anthropic_wire.decode_response(data, endpoint=endpoint),
        stream_decoder=lambda: anthropic_wire.StreamDecoder(endpoint),
        event_payload=_as_sent,
        completes=_message_stop,
        ends=_message_stop,
        endpoint=endpoint,
        encode_sent=lambda request, stream: anthropic_wire.encode_sent(
            request, caps, stream=stream, kept=kept
        ),
    )


def openai_codec(caps: Capabilities, dialect: Dialect, endpoint: str = "") -> Codec:
    """The Chat Completions codec: native tool calls if the model has them, else prompt mode.

    Prompt mode is constrained by a JSON schema on llama-server, which
    enforces one, when a request offers tools (`Codec.plain` otherwise); a
    plain OpenAI-compatible server may not, so there the calls are read out
    of free text. Both speak the same wire, so they share
    what a stream looks like. With native tool calls, `sent` keeps the JSON
    of the messages it last wrote (`KeptItems`), so the next request of the
    same conversation writes only what is new.
    """
    if caps.native_tools:
        kept = KeptItems()
        return Codec(
            encode=lambda request: openai_wire.encode_request(request, caps, dialect),
            encode_reported=lambda request: openai_wire.encode(request, caps, dialect),
            sent_bytes=_openai_bytes,
            decode=lambda data: openai_wire.decode_response(
                data, dialect=dialect, endpoint=endpoint
            ),
            stream_decoder=lambda: openai_wire.StreamDecoder(dialect, endpoint),
            event_payload=_bare_error_wrapped,
            completes=_chunk_finishes,
            ends=_done,
            endpoint=endpoint,
            encode_sent=lambda request, stream: openai_wire.encode_sent(
                request, caps, dialect, stream=stream, kept=kept
            ),
        )
    plain = _prompt_codec(caps, dialect, endpoint, constrained=False)
    if dialect != "llama-server":
        return plain
    return dataclasses.replace(
        _prompt_codec(caps, dialect, endpoint, constrained=True), plain=plain
    )


def _prompt_codec(
    caps: Capabilities, dialect: Dialect, endpoint: str, *, constrained: bool
) -> Codec:
    """Prompt mode on the Chat Completions wire, held to the JSON schema when `constrained`."""
    return Codec(
        encode=lambda request: prompt_mode.encode_request(
            request, caps, dialect=dialect, constrained=constrained
        ),
        encode_reported=lambda request: prompt_mode.encode(
            request, caps, dialect=dialect, constrained=constrained
        ),
        sent_bytes=_openai_bytes,
        decode=lambda data: prompt_mode.decode_response(data, constrained=constrained),
        stream_decoder=lambda: prompt_mode.StreamDecoder(constrained),
        event_payload=_bare_error_wrapped,
        completes=_chunk_finishes,
        ends=_done,
        endpoint=endpoint,
    )


def responses_codec(caps: Capabilities, *, llama: bool = False, endpoint: str = "") -> Codec:
    """The OpenAI Responses codec for a model with `caps`; prompt mode without native tools.

    Prompt mode is constrained on llama-server (`llama`), which enforces a
    JSON schema, when a request offers tools (`Codec.plain` otherwise). A
    stream is read to `response.completed` (or `response.incomplete`): that
    event carries the finished answer, and some servers send `[DONE]` after
    it, others nothing. With native tool calls, `sent` keeps the JSON of the
    messages it last wrote (`KeptItems`).
    """
    if caps.native_tools or not llama:
        return _responses_codec(caps, llama, endpoint, constrained=False)
    return dataclasses.replace(
        _responses_codec(caps, llama, endpoint, constrained=True),
        plain=_responses_codec(caps, llama, endpoint, constrained=False),
    )


def _responses_codec(caps: Capabilities, llama: bool, endpoint: str, *, constrained: bool) -> Codec:
    """The Responses wire, prompt mode held to the JSON schema when `constrained`."""
    native = caps.native_tools
    # With native tool calls the messages map to items one by one, so the
    # JSON of those it sent last is kept (`KeptItems`); prompt mode rewrites
    # the history around its tools on every request, so it writes it whole.
    kept = KeptItems() if native else None
    return Codec(
        encode=lambda request: responses_wire.encode_request(
            request, caps, constrained=constrained, llama=llama
        ),
        encode_reported=lambda request: responses_wire.encode(
            request, caps, constrained=constrained, llama=llama
        ),
        sent_bytes=responses_wire.sent_bytes,
        decode=(lambda data: responses_wire.decode_response(data, endpoint=endpoint))
        if native
        else lambda data: responses_wire.decode_prompt_response(
            data, constrained=constrained, endpoint=endpoint
        ),
        stream_decoder=(lambda: responses_wire.StreamDecoder(endpoint))
        if native
        else lambda: responses_wire.PromptStreamDecoder(constrained, endpoint),
        event_payload=_as_sent,
        completes=_response_finished,
        ends=_response_finished,
        endpoint=endpoint,
        encode_sent=lambda request, stream: responses_wire.encode_sent(
            request, caps, constrained=constrained, llama=llama, stream=stream, kept=kept
        ),
    )


def _openai_bytes(body: Mapping[str, Any], stream: bool) -> bytes:
    # Prompt mode speaks the same wire, so its bodies are sent the same way.
    return openai_wire.sent_bytes(body, stream=stream)


def _response_finished(payload: Any) -> bool:
    return isinstance(payload, Mapping) and payload.get("type") in (
        "response.completed",
        "response.incomplete",
    )


def _as_sent(event: str | None, payload: Any) -> Any:
    return payload


def _message_stop(payload: Any) -> bool:
    return isinstance(payload, Mapping) and payload.get("type") == "message_stop"


def _bare_error_wrapped(event: str | None, payload: Any) -> Any:
    # Some servers name an error event and put the error object bare in it.
    if event == "error" and isinstance(payload, Mapping) and "error" not in payload:
        return {"error": dict(payload)}
    return payload


def _chunk_finishes(payload: Any) -> bool:
    if _done(payload):
        return True
    if not isinstance(payload, Mapping):
        return False
    choices = payload.get("choices")
    return isinstance(choices, list) and any(
        isinstance(c, Mapping) and c.get("finish_reason") is not None for c in choices
    )


def _done(payload: Any) -> bool:
    # The usage chunk comes after the finish_reason: read on to `[DONE]`.
    return isinstance(payload, str) and payload == "[DONE]"
