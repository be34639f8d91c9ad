"""A wire codec as one value: what a transport needs to speak one dialect.

A transport sends bytes (or hands a body to its SDK) and reads JSON or
server-sent events; which dialect those are in, and what a finished stream
looks like on that wire, is the codec's business. `Codec` bundles those
answers so a backend is built from a codec value instead of choosing one
through hooks, and so no transport imports a codec module itself. Every
wire's codec is made from one table (`WIRES`) by `codec`, through the
contract each wire module keeps (`encode_body`, `encode_bytes`, `decode`,
`StreamDecoder`). Pure, like the codecs: no network, no files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, NamedTuple, Protocol

import msgspec

from carryall._json import KeptItems, body_bytes
from carryall.errors import ProviderError
from carryall.providers import (
    Capabilities,
    Dialect,
    Downgrade,
    Encoded,
    Request,
    Response,
    Sent,
    Target,
)
from carryall.providers import anthropic as anthropic_wire
from carryall.providers import bedrock as bedrock_wire
from carryall.providers import gemini as gemini_wire
from carryall.providers import openai as openai_wire
from carryall.providers import prompt as prompt_mode
from carryall.providers import responses as responses_wire

__all__ = [
    "WIRES",
    "Codec",
    "Downgrade",
    "Encoded",
    "Sent",
    "StreamDecoder",
    "anthropic_codec",
    "codec_for",
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
    """One dialect bound to a `Target`: the request body out, the answer back.

    `encode_reported`, `decode` and `stream_decoder` are the codec proper.
    `encode_reported` gives the body with the downgrades made to write it
    (`Encoded`), which is what a transport that hands its SDK a body
    encodes, once, so it can hand those downgrades back on the answer;
    `encode` is that body alone, for inspection. `sent_bytes(body, stream)`
    writes such a body as the bytes a transport sends (asking for a stream
    when `stream` is true), in one pass. `sent(request, stream)` is what a
    transport that posts bytes calls: the bytes and the downgrades of one
    encode, written straight from the blocks where the wire has that entry
    point (`encode_sent`), else `encode_reported` then `sent_bytes`; the
    bytes are the same either way, and `encode_bytes(request, stream)` is
    `sent`'s bytes alone. `event_payload` is what the decoder is fed for an
    event of a given name. `completes` says an event finished the answer
    (what may follow is bookkeeping, such as a usage chunk), and `ends`
    that nothing follows it, so reading stops there instead of waiting for
    the server to close the connection.

    `target.endpoint` is the host of the base URL the codec's backend talks
    to, bound when the transport builds the codec: the decoders stamp it on
    the origin of what they read, and the backend puts it on each request
    (`Request.endpoint`) so the encoder knows which origin it writes for.
    """

    wire: str
    """The wire this codec speaks: a key of `WIRES`."""
    target: Target
    encode_reported: Callable[[Request], Encoded]
    sent_bytes: Callable[[Mapping[str, Any], bool], bytes]
    decode: Callable[[Mapping[str, Any]], Response]
    stream_decoder: Callable[[], StreamDecoder]
    event_payload: Callable[[str | None, Any], Any]
    completes: Callable[[Any], bool]
    ends: Callable[[Any], bool]
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

    @property
    def endpoint(self) -> str:
        """The host the codec's backend talks to (`Target.endpoint`)."""
        return self.target.endpoint

    def encode(self, request: Request) -> dict[str, Any]:
        """The body for `request` (`encode_reported`'s, without the report)."""
        return self.encode_reported(request).body

    def for_request(self, request: Request) -> Codec:
        """The codec that writes `request` and reads its answer (`plain` when it has no tools)."""
        if self.plain is not None and not request.tools:
            return self.plain
        return self

    def for_model(self, model: str) -> Codec:
        """This codec with `model` as its target's (`Target.model`), for a wire whose answer
        names none; itself when it is that already."""
        if model == self.target.model:
            return self
        return codec_for(self.wire, msgspec.structs.replace(self.target, model=model))

    def sent(self, request: Request, stream: bool) -> Sent:
        """The bytes a transport sends for `request`, and the downgrades made to write them."""
        if self.encode_sent is not None:
            return self.encode_sent(request, stream)
        encoded = self.encode_reported(request)
        return Sent(self.sent_bytes(encoded.body, stream), encoded.downgrades)

    def encode_bytes(self, request: Request, stream: bool) -> bytes:
        """The bytes a transport sends for `request` (`sent`'s, without the report)."""
        return self.sent(request, stream).data


# -- what a stream looks like on each wire ----------------------------------------


def _as_sent(event: str | None, payload: Any) -> Any:
    return payload


def _bare_error_wrapped(event: str | None, payload: Any) -> Any:
    # Some servers name an error event and put the error object bare in it.
    if event == "error" and isinstance(payload, Mapping) and "error" not in payload:
        return {"error": dict(payload)}
    return payload


def _message_stop(payload: Any) -> bool:
    return isinstance(payload, Mapping) and payload.get("type") == "message_stop"


def _finishes(payload: Any, entries: str, reason: str) -> bool:
    """Whether one of the answers listed under `entries` says why it finished (`reason`)."""
    if not isinstance(payload, Mapping):
        return False
    listed = payload.get(entries)
    return isinstance(listed, list) and any(
        isinstance(c, Mapping) and c.get(reason) is not None for c in listed
    )


def _chunk_finishes(payload: Any) -> bool:
    return _done(payload) or _finishes(payload, "choices", "finish_reason")


def _done(payload: Any) -> bool:
    # The usage chunk comes after the finish_reason: read on to `[DONE]`.
    return isinstance(payload, str) and payload == "[DONE]"


def _response_finished(payload: Any) -> bool:
    return isinstance(payload, Mapping) and payload.get("type") in (
        "response.completed",
        "response.incomplete",
    )


def _candidate_finishes(payload: Any) -> bool:
    # The chunk that carries a finishReason carries the usage too: nothing follows it.
    return _finishes(payload, "candidates", "finishReason")


def _converse_stops(payload: Any) -> bool:
    return isinstance(payload, Mapping) and "messageStop" in payload


def _converse_metadata(payload: Any) -> bool:
    # The usage (`metadata`) comes after `messageStop`: read on to it.
    return isinstance(payload, Mapping) and "metadata" in payload


def _anthropic_bytes(body: Mapping[str, Any], stream: bool) -> bytes:
    return anthropic_wire.sent_bytes(body, stream=stream)


def _openai_bytes(body: Mapping[str, Any], stream: bool) -> bytes:
    # Prompt mode speaks the same wire, so its bodies are sent the same way.
    return openai_wire.sent_bytes(body, stream=stream)


def _same_body(body: Mapping[str, Any], stream: bool) -> bytes:
    # A wire whose stream endpoint takes the very body of its plain one.
    return body_bytes(body)


# -- the table --------------------------------------------------------------------


class _Row(NamedTuple):
    """One wire: its module (the codec contract) and what its bodies and streams look like."""

    module: ModuleType
    sent_bytes: Callable[[Mapping[str, Any], bool], bytes]
    event_payload: Callable[[str | None, Any], Any]
    completes: Callable[[Any], bool]
    ends: Callable[[Any], bool]
    keeps: bool
    """Whether `sent` keeps the JSON of the messages it last wrote (`KeptItems`), so the next
    request of the same conversation writes only what is new (native tool calls only)."""


WIRES: Final[dict[str, _Row]] = {
    "anthropic": _Row(
        anthropic_wire, _anthropic_bytes, _as_sent, _message_stop, _message_stop, keeps=True
    ),
    # llama-server speaks this wire too: `Target.dialect` says which server it is.
    "openai": _Row(
        openai_wire, _openai_bytes, _bare_error_wrapped, _chunk_finishes, _done, keeps=True
    ),
    "responses": _Row(
        responses_wire,
        responses_wire.sent_bytes,
        _as_sent,
        _response_finished,
        _response_finished,
        keeps=True,
    ),
    "gemini": _Row(
        gemini_wire, _same_body, _as_sent, _candidate_finishes, _candidate_finishes, keeps=False
    ),
    "bedrock": _Row(
        bedrock_wire, _same_body, _as_sent, _converse_stops, _converse_metadata, keeps=False
    ),
}
"""Every wire carryall speaks, by the name of its module under `carryall.providers`."""


def codec_for(wire: str, target: Target) -> Codec:
    """The codec of `wire` (a key of `WIRES`) for `target`.

    A model without native tool calls (`target.caps.native_tools` false)
    gets prompt mode on the two OpenAI wires: constrained by a JSON schema
    on llama-server (`target.dialect`), which enforces one, when a request
    offers tools (`Codec.plain` otherwise); a plain OpenAI-compatible server
    may not, so there the calls are read out of free text.
    """
    row = WIRES.get(wire)
    if row is None:
        raise ProviderError(f"no codec for wire {wire!r}: expected one of {', '.join(WIRES)}")
    if target.caps.native_tools or wire not in ("openai", "responses"):
        return _native(wire, row, target)
    make = _prompt if wire == "openai" else _responses_prompt
    plain = make(wire, row, msgspec.structs.replace(target, constrained=False))
    if target.dialect != "llama-server":
        return plain
    constrained = make(wire, row, msgspec.structs.replace(target, constrained=True))
    return dataclasses.replace(constrained, plain=plain)


def _native(wire: str, row: _Row, target: Target) -> Codec:
    """A wire's codec through its module's contract."""
    module = row.module
    kept = KeptItems() if row.keeps else None
    return Codec(
        wire=wire,
        target=target,
        encode_reported=lambda request: module.encode_body(request, target),
        sent_bytes=row.sent_bytes,
        decode=lambda data: module.decode(data, target),
        stream_decoder=lambda: module.StreamDecoder(target),
        event_payload=row.event_payload,
        completes=row.completes,
        ends=row.ends,
        encode_sent=lambda request, stream: module.encode_bytes(
            request, target, stream=stream, kept=kept
        ),
    )


def _prompt(wire: str, row: _Row, target: Target) -> Codec:
    """Prompt mode on the Chat Completions wire, held to the JSON schema when constrained."""
    caps, dialect, constrained = target.caps, target.dialect, target.constrained
    return Codec(
        wire=wire,
        target=target,
        encode_reported=lambda request: prompt_mode.encode(
            request, caps, dialect=dialect, constrained=constrained
        ),
        sent_bytes=row.sent_bytes,
        decode=lambda data: prompt_mode.decode_response(data, constrained=constrained),
        stream_decoder=lambda: prompt_mode.StreamDecoder(constrained),
        event_payload=row.event_payload,
        completes=row.completes,
        ends=row.ends,
    )


def _responses_prompt(wire: str, row: _Row, target: Target) -> Codec:
    """Prompt mode on the Responses wire: its encoder rewrites the history itself.

    It rewrites the history around its tools on every request, so nothing
    is kept between requests.
    """
    constrained, endpoint = target.constrained, target.endpoint
    return dataclasses.replace(
        _native(wire, row._replace(keeps=False), target),
        decode=lambda data: responses_wire.decode_prompt_response(
            data, constrained=constrained, endpoint=endpoint
        ),
        stream_decoder=lambda: responses_wire.PromptStreamDecoder(target),
    )


# -- by capabilities and endpoint, for callers that hold no Target ------------------


def anthropic_codec(caps: Capabilities, endpoint: str = "") -> Codec:
    """The Messages API codec for a model with `caps`, at `endpoint` (`codec_for`'s)."""
    return codec_for("anthropic", Target(caps=caps, endpoint=endpoint))


def openai_codec(caps: Capabilities, dialect: Dialect, endpoint: str = "") -> Codec:
    """The Chat Completions codec in `dialect` (`codec_for`'s)."""
    return codec_for("openai", Target(caps=caps, dialect=dialect, endpoint=endpoint))


def responses_codec(caps: Capabilities, *, llama: bool = False, endpoint: str = "") -> Codec:
    """The Responses codec, on llama-server when `llama` (`codec_for`'s)."""
    dialect: Dialect = "llama-server" if llama else "openai"
    return codec_for("responses", Target(caps=caps, dialect=dialect, endpoint=endpoint))
