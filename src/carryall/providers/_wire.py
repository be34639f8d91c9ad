"""What several wire codecs read and write alike: one home, so no codec reaches into another.

The defensive readers of a wire's JSON (an object where one must be, a
count that is a non-negative integer, an optional string, an OpenAI-style
`error` object), the OpenAI family's argument text and `image_url` reading,
the OpenAI family's token probabilities, the base64 and `data:` URL patterns,
the thinking budget an Anthropic model
gets on Anthropic's and Bedrock's wires, and the results-first order of a
user turn. Each answers its question once for every codec that asks it.
Pure, like the codecs.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from carryall._json import carryable
from carryall._text import shorten
from carryall.blocks import (
    IMAGE_MEDIA_TYPES,
    Block,
    Image,
    Message,
    Text,
    ToolResult,
    ToolUse,
    image_media_type,
    image_placeholder,
)
from carryall.errors import BlockError, HistoryError, ProviderError, wire_error
from carryall.providers._common import _shown, unmodelled
from carryall.providers._types import Downgrade, Request, TokenLogprob

__all__ = [
    "BASE64",
    "DATA_URL",
    "INVALID_JSON_KEY",
    "MIN_THINKING_BUDGET",
    "arguments",
    "count",
    "import_image",
    "import_user_image",
    "mapping",
    "optional_str",
    "raise_wire_error",
    "results_first",
    "thinking_budget",
    "token_logprobs",
]

DATA_URL: Final = re.compile(r"data:([^;,]*);base64,", re.IGNORECASE)
"""The head of a base64 `data:` URL, its media type in group 1."""

BASE64: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
"""Canonical base64 text (its length a multiple of four is checked beside it)."""

INVALID_JSON_KEY: Final = "INVALID_JSON"
"""The key a non-object tool input is wrapped under on the wires that take objects only."""

MIN_THINKING_BUDGET: Final = 1024
"""The smallest `budget_tokens` an Anthropic model accepts for extended thinking."""

_INPUT: Final = msgspec.json.Encoder()
"""The writer of tool inputs as argument text (`arguments`)."""


# -- reading wire JSON --------------------------------------------------------


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else a `ProviderError` naming `where`."""
    if not isinstance(value, Mapping):
        raise ProviderError(f"{where} must be a JSON object, got {_shown(value)}")
    return value


def optional_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    """`obj[key]` when it is a string or missing or null, else a `ProviderError`."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ProviderError(f"{where}.{key} must be a string or null, got {_shown(value)}")
    return value


def count(obj: Mapping[str, Any], key: str, where: str) -> int:
    """`obj[key]` as a token count: a non-negative integer, 0 when missing or null."""
    value = obj.get(key)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProviderError(f"{where}.{key} must be a non-negative integer, got {_shown(value)}")
    return value


def raise_wire_error(obj: Mapping[str, Any], where: str) -> None:
    """Raise the `ProviderError` an OpenAI-style `{"error": ...}` in `obj` describes, if any."""
    error = obj.get("error")
    if error is None:
        return
    if isinstance(error, str):
        raise ProviderError(f"{where}: the server reported an error: {shorten(error, 300)}")
    if not isinstance(error, Mapping):
        raise ProviderError(f"{where}: the server reported an error: {_shown(error)}")
    message = error.get("message")
    kind = error.get("type")
    code = error.get("code")
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    if not isinstance(kind, str) and isinstance(code, str):
        kind = code
    text = shorten(message, 300) if isinstance(message, str) and message else _shown(error)
    raise wire_error(
        f"{where}: the server reported an error: {text}",
        status=status,
        kind=kind if isinstance(kind, str) else None,
    )


# -- the OpenAI family's token probabilities -------------------------------------

_TOKEN_FIELDS: Final = frozenset({"token", "logprob", "bytes", "id"})
"""A token's fields as Chat Completions and Responses write them, and llama-server's `id`."""


def token_logprobs(raw: Any, where: str, lost: list[Downgrade]) -> list[TokenLogprob]:
    """A list of token probabilities as the OpenAI-family wires write it, as `TokenLogprob`s.

    Chat Completions' `logprobs.content` and `logprobs.refusal`, a Responses
    `output_text`'s `logprobs` and a text delta's: each token its `token`,
    `logprob` and UTF-8 `bytes` (null where it has none), and under
    `top_logprobs` the likeliest tokens at its place in the same form.
    llama-server adds each token's vocabulary id (`id`), kept as
    `token_id`. A field beyond those is named in `lost`; absent or null is
    no tokens. A list that is not one, or a token without its text or
    number, is a `ProviderError` naming where: a probability half read is
    no probability.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ProviderError(f"{where} must be an array, got {_shown(raw)}")
    return [_token(item, f"{where}[{i}]", lost, ranked=True) for i, item in enumerate(raw)]


def _token(raw: Any, where: str, lost: list[Downgrade], *, ranked: bool) -> TokenLogprob:
    """One token; `ranked` when it is a chosen token, which lists its `top_logprobs`."""
    held = mapping(raw, where)
    unmodelled(held, _TOKEN_FIELDS | {"top_logprobs"} if ranked else _TOKEN_FIELDS, where, lost)
    token = held.get("token")
    if not isinstance(token, str):
        raise ProviderError(f"{where}.token must be a string, got {_shown(token)}")
    logprob = held.get("logprob")
    if isinstance(logprob, bool) or not isinstance(logprob, int | float):
        raise ProviderError(f"{where}.logprob must be a number, got {_shown(logprob)}")
    token_id = held.get("id")
    if token_id is not None and (isinstance(token_id, bool) or not isinstance(token_id, int)):
        raise ProviderError(f"{where}.id must be an integer, got {_shown(token_id)}")
    data = held.get("bytes")
    if data is not None and not (
        isinstance(data, list) and all(type(b) is int and 0 <= b <= 255 for b in data)
    ):
        raise ProviderError(f"{where}.bytes must be an array of bytes (0 to 255)")
    top: tuple[TokenLogprob, ...] = ()
    if ranked:
        likeliest = held.get("top_logprobs")
        if likeliest is not None and not isinstance(likeliest, list):
            raise ProviderError(f"{where}.top_logprobs must be an array, got {_shown(likeliest)}")
        top = tuple(
            _token(item, f"{where}.top_logprobs[{j}]", lost, ranked=False)
            for j, item in enumerate(likeliest or ())
        )
    return TokenLogprob(
        token=token,
        logprob=float(logprob),
        token_id=token_id,
        token_bytes=None if data is None else tuple(data),
        top=top,
    )


# -- the OpenAI family's calls and images -----------------------------------------


def arguments(block: ToolUse, index: int, spaced: bool = False) -> str:
    """A call's input as the JSON text the OpenAI-family wires carry (compact unless `spaced`).

    msgspec's encoder, not the stdlib's: this runs once per call in the
    history on every request, where `json.dumps` cost more than the rest of
    the message. The text is compact, as OpenAI itself writes arguments.
    msgspec would write NaN or Infinity as null, a silent change of the
    input, so those are refused (`carryable`), as `json` refused them; the
    walk is needed only when the text holds a null at all.
    """
    try:
        if spaced:
            return json.dumps(block.input, ensure_ascii=False, allow_nan=False)
        text = _INPUT.encode(block.input).decode()
    except (TypeError, ValueError, msgspec.EncodeError, RecursionError) as exc:
        if isinstance(exc, ValueError) and not carryable(block.input):
            exc = ValueError("it holds NaN or Infinity")
        raise HistoryError(
            index, f"tool call {block.id!r} ({block.name}): input is not JSON: {exc}"
        ) from None
    if "null" in text and not carryable(block.input):
        raise HistoryError(
            index,
            f"tool call {block.id!r} ({block.name}): input is not JSON: it holds NaN or Infinity",
        )
    return text


def import_user_image(raw: Any, where: str) -> Text | Image:
    """An `image_url` of a user message: a remote one is held by its URL (`Image.from_url`).

    Never fetched by a codec; it goes back as that URL to the wires that
    take one. Anything else is read as `import_image` reads it.
    """
    if isinstance(raw, Mapping) and isinstance(raw.get("url"), str):
        url: str = raw["url"]
        if url[:5].lower() in ("https", "http:"):
            with contextlib.suppress(BlockError):
                return Image.from_url(url)
    return import_image(raw, where)


def import_image(raw: Any, where: str) -> Text | Image:
    """An `image_url` object: a base64 `data:` URL as its `Image`, a remote one as its line."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("url"), str):
        raise BlockError(f"{where} must be an object with a url string, got {_shown(raw)}")
    url: str = raw["url"]
    if url[:5].lower() != "data:":
        # A remote image is never fetched by a codec; named, not lost.
        media_type = image_media_type(urlsplit(url).path) or "image"
        return Text(image_placeholder(media_type, url))
    match = DATA_URL.match(url)
    if match is None:
        raise BlockError(f"{where}: not a base64 data: URL ({shorten(url, 60)})")
    media_type = match.group(1).lower()
    if media_type not in IMAGE_MEDIA_TYPES:
        return Text(image_placeholder(media_type or "image"))
    data = url[match.end() :]
    if len(data) % 4 or BASE64.fullmatch(data) is None:
        raise BlockError(f"{where}: the data: URL's payload is not canonical base64")
    return Image(media_type, data)


# -- what two encoders decide alike -------------------------------------------------


def thinking_budget(request: Request) -> int:
    """The `budget_tokens` an Anthropic model thinks with: the asked one, else half `max_tokens`.

    At least `MIN_THINKING_BUDGET`; a `max_tokens` too small to hold that
    is refused rather than sent to be refused by the API.
    """
    if request.thinking_budget is not None:
        return request.thinking_budget
    if request.max_tokens <= MIN_THINKING_BUDGET:
        raise ProviderError(
            f"Anthropic request: thinking needs max_tokens above {MIN_THINKING_BUDGET} "
            f"(the smallest budget), got {request.max_tokens}; raise max_tokens or set "
            "thinking_budget"
        )
    return max(MIN_THINKING_BUDGET, request.max_tokens // 2)


def results_first(message: Message) -> Sequence[Block]:
    """A user message's blocks with its tool results leading, the rest in their order after.

    The message's own content when the results lead already, as they
    usually do: nothing is copied then.
    """
    content = message.content
    seen_other = False
    for block in content:
        if type(block) is ToolResult:
            if seen_other:
                break
        else:
            seen_other = True
    else:
        return content  # the common case: the results already lead
    results = [b for b in content if isinstance(b, ToolResult)]
    return [*results, *(b for b in content if not isinstance(b, ToolResult))]
