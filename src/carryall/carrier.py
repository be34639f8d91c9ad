"""Tool-result carrier grammar: the fixed position where a tool round's attachments live.

A tool result becomes flat history in one of two carrier shapes:

- native: a `role = "tool"` message whose content is a JSON object with the
  call id, the verbatim result text under `content`, and an `attachments`
  array sibling, always present when written by carryall (`[]` for none);
- prompt: a `role = "user"` message whose line 1 is `[Tool results]`, line 2
  `[Tool attachments: N]`, then exactly N marker lines, then the joined
  verbatim tool text.

The position is fixed so a parser never has to search, and therefore never
has to trust, carrier body text: a marker-looking line inside the body is
body, because the attachments were already counted at the position only the
runtime writes. A carrier without the array key or the count line is legacy:
it parses as zero attachments and its body stays untouched text.

Which declared images get loaded, and how a refusal is named in the body, is
decided here too (`load_declared_images`, `load_failure_note`), with the
loader handed in: the grammar stays pure, and the one edge that reads files
(`carryall.attachments`) and the flat histories (`carryall.rounds`) lift
through the same function.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

import msgspec

from carryall._text import shorten
from carryall.errors import AttachmentError, CarrierError, CarryallError

__all__ = [
    "TOOL_RESULTS_PREFIX",
    "CarrierKind",
    "CarrierParts",
    "LoadedImages",
    "Marker",
    "MarkerKind",
    "classify",
    "image_refs",
    "is_prompt_tool_carrier",
    "is_tool_result_carrier",
    "load_declared_images",
    "load_failure_note",
    "marker_line",
    "native_attachments",
    "native_envelope",
    "parse_marker_line",
    "parse_native_tool_carrier",
    "parse_prompt_tool_carrier",
    "rebuild_carrier",
    "render_native_attachments",
    "render_prompt_tool_carrier",
]

TOOL_RESULTS_PREFIX = "[Tool results]"
"""Line 1 of a prompt-mode carrier, kept identical to the pre-attachment format
so every span selector that keys on this prefix keeps working."""

_COUNT_PREFIX = "[Tool attachments: "
_COUNT_RE = re.compile(r"\[Tool attachments: ([0-9]+)\]", re.ASCII)
_PROMPT_DETECT = re.compile(r"\s*" + re.escape(TOOL_RESULTS_PREFIX))
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOTE_TARGET_CHARS = 120

_ImageT = TypeVar("_ImageT")


class MarkerKind(enum.Enum):
    """The attachment kinds the grammar writes; the value is the native JSON spelling."""

    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    DOCUMENT = "document"


_KINDS_BY_NAME = {kind.name: kind for kind in MarkerKind}
_KINDS_BY_VALUE = {kind.value: kind for kind in MarkerKind}


class CarrierKind(enum.Enum):
    """Which carrier shape a tool-result carrier uses."""

    NATIVE = "native"
    PROMPT = "prompt"


class Marker(msgspec.Struct, frozen=True):
    """One declared attachment: its kind and where it is (a path, a `data:` URI, a URL)."""

    kind: MarkerKind
    target: str


class CarrierParts(msgspec.Struct, frozen=True):
    """A carrier opened at its fixed position.

    `text` is the verbatim body, `attachments` the declared attachments,
    `declared` whether the position carried a declaration at all (a legacy
    carrier's body is untrusted text), and `kind` which shape it takes.
    """

    text: str
    attachments: tuple[Marker, ...]
    declared: bool
    kind: CarrierKind


# -- markers -------------------------------------------------------------------


def _target_problem(target: str) -> str | None:
    # The target is everything between the first `:` and the final `]`, as
    # the upstream runtime reads it: brackets inside (`shot]1.png`) are the
    # target's own, so only what cannot stand on one line is refused.
    if not target:
        return "its target is empty"
    if "\n" in target:
        return "its target contains a line break"
    return None


def marker_line(marker: Marker) -> str:
    """The marker line for one attachment, `[KIND:target]`.

    A target that cannot stand on one line and read back the same (empty, a
    line break) is refused with a `CarrierError`; brackets are the target's
    own (`[IMAGE:shot]1.png]` names `shot]1.png`).
    """
    problem = _target_problem(marker.target)
    if problem is not None:
        raise CarrierError(
            f"cannot write {marker.kind.name} attachment {marker.target!r} as a marker line: "
            f"{problem}"
        )
    return f"[{marker.kind.name}:{marker.target}]"


def parse_marker_line(line: str) -> Marker | None:
    """Parse one marker line; only the kinds this grammar writes are accepted.

    The target is everything between the first `:` and the final `]`.
    Foreign kinds (`PHOTO`, `FILE`), lower-case kinds and empty targets are
    not marker lines: the answer is None.
    """
    if len(line) < 4 or line[0] != "[" or line[-1] != "]":
        return None
    name, sep, target = line[1:-1].partition(":")
    if not sep:
        return None
    kind = _KINDS_BY_NAME.get(name)
    if kind is None or _target_problem(target) is not None:
        return None
    return Marker(kind, target)


# -- native carriers -----------------------------------------------------------


def native_attachments(value: Any) -> tuple[Marker, ...] | None:
    """The markers of a native envelope's `attachments` value.

    None when the value is absent or not an array. Items that are not a valid
    marker object are skipped: one bad item never demotes a declared carrier.
    """
    if not isinstance(value, list):
        return None
    markers: list[Marker] = []
    for item in value:
        if not isinstance(item, dict):
            continue
        kind_name, target = item.get("kind"), item.get("target")
        kind = _KINDS_BY_VALUE.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None or not isinstance(target, str) or not target:
            continue
        markers.append(Marker(kind, target))
    return tuple(markers)


def render_native_attachments(markers: Iterable[Marker]) -> list[dict[str, str]]:
    """The `attachments` array value for a native envelope; the inverse of `native_attachments`."""
    return [{"kind": m.kind.value, "target": m.target} for m in markers]


def native_envelope(content: str) -> dict[str, Any] | None:
    """The JSON object a `tool` message's content holds, or None when it holds none.

    The one reading of a native envelope's JSON, for the grammar and for the
    readers of its other fields (the call id, the error flag). Strict JSON
    only, as the upstream runtime reads it: `NaN`, `Infinity` and lone
    surrogates make the content legacy text, never a declared carrier.
    """
    try:
        value = _strict.decode(content)
    except (msgspec.DecodeError, UnicodeError, ValueError, RecursionError):
        # Deeply nested hostile JSON must read as "not an envelope", never
        # as a crash.
        return None
    return value if isinstance(value, dict) else None


_strict = msgspec.json.Decoder()


def _load_envelope(content: str) -> dict[str, Any] | None:
    envelope = native_envelope(content)
    if envelope is not None and isinstance(envelope.get("content"), str):
        return envelope
    return None


def parse_native_tool_carrier(content: str) -> CarrierParts | None:
    """Parse a native (`role = "tool"`) carrier envelope.

    None unless the content is a JSON object with a string `content`. Only an
    `attachments` array declares; any other value is a malformed envelope and
    reads as legacy (no attachments, body kept).
    """
    envelope = _load_envelope(content)
    if envelope is None:
        return None
    markers = native_attachments(envelope.get("attachments"))
    return CarrierParts(
        text=envelope["content"],
        attachments=markers or (),
        declared=markers is not None,
        kind=CarrierKind.NATIVE,
    )


def render_native_tool_carrier(
    tool_call_id: str, body: str, markers: Iterable[Marker] = (), *, is_error: bool = False
) -> str:
    """Render a native carrier envelope: call id, verbatim body, attachments array (always)."""
    envelope: dict[str, Any] = {"tool_call_id": tool_call_id, "content": body}
    if is_error:
        envelope["is_error"] = True
    envelope["attachments"] = render_native_attachments(markers)
    return json.dumps(envelope, ensure_ascii=False)


# -- prompt carriers -----------------------------------------------------------


def is_prompt_tool_carrier(content: str) -> bool:
    """Whether user-role content is a prompt-mode carrier: after leading whitespace,
    it starts with the prefix. Detection only; it parses nothing."""
    return _PROMPT_DETECT.match(content) is not None


def is_tool_result_carrier(role: str, content: str) -> bool:
    """Whether a message is a carrier in either shape, legacy included.

    Every `tool` message is; a `user` message is exactly when it is a prompt
    carrier. It never parses the body: it runs over whole histories.
    """
    if role == "tool":
        return True
    return role == "user" and is_prompt_tool_carrier(content)


def parse_prompt_tool_carrier(content: str) -> CarrierParts | None:
    """Parse a prompt-mode carrier at its fixed position.

    None when line 1 is not exactly the prefix. A line 2 that is not exactly
    a count header, or a count whose marker lines are missing or malformed,
    reads as legacy: zero attachments and the whole content as body, so
    damage degrades to text, never to a wrong attachment list. The count
    comes from message content, so it is never trusted beyond the lines that
    exist.
    """
    first_end = content.find("\n")
    if first_end < 0 or content[:first_end] != TOOL_RESULTS_PREFIX:
        if content == TOOL_RESULTS_PREFIX:
            return _legacy_prompt(content)
        return None
    second_start = first_end + 1
    second_end = content.find("\n", second_start)
    header = content[second_start:] if second_end < 0 else content[second_start:second_end]
    match = _COUNT_RE.fullmatch(header)
    if match is None:
        return _legacy_prompt(content)
    digits = match.group(1).lstrip("0") or "0"
    if second_end < 0:
        # The header is the last line: only a zero count is complete.
        return _prompt_parts("", ()) if digits == "0" else _legacy_prompt(content)
    pos = second_end + 1
    # Never convert or loop on a count beyond the lines that exist: a hostile
    # "[Tool attachments: 99999999999999999999]" must cost nothing.
    available = content.count("\n", pos) + 1
    if len(digits) > len(str(available)) or int(digits) > available:
        return _legacy_prompt(content)
    markers: list[Marker] = []
    for _ in range(int(digits)):
        end = content.find("\n", pos)
        line = content[pos:] if end < 0 else content[pos:end]
        marker = parse_marker_line(line)
        if marker is None:
            return _legacy_prompt(content)
        markers.append(marker)
        pos = len(content) if end < 0 else end + 1
    return _prompt_parts(content[pos:], tuple(markers))


def _prompt_parts(body: str, markers: tuple[Marker, ...]) -> CarrierParts:
    return CarrierParts(text=body, attachments=markers, declared=True, kind=CarrierKind.PROMPT)


def _legacy_prompt(content: str) -> CarrierParts:
    return CarrierParts(text=content, attachments=(), declared=False, kind=CarrierKind.PROMPT)


def render_prompt_tool_carrier(body: str, markers: Sequence[Marker]) -> str:
    """Render a prompt-mode carrier: prefix, count header, marker lines, body.

    Zero attachments still write `[Tool attachments: 0]`, so a body whose own
    first line fakes a count header stays body. A marker that cannot be
    written as one line is refused with a `CarrierError`.
    """
    lines = [TOOL_RESULTS_PREFIX, f"{_COUNT_PREFIX}{len(markers)}]"]
    lines.extend(marker_line(m) for m in markers)
    lines.append(body)
    return "\n".join(lines)


# -- the one door --------------------------------------------------------------


def classify(role: str, content: str) -> CarrierParts | None:
    """Classify a message as a tool-result carrier, whichever shape it takes.

    None for ordinary user, assistant or system text. A `tool` message that
    is not a JSON envelope is a legacy native carrier with the raw content as
    body; a `user` message that only starts with the prefix is a legacy prompt
    carrier with the whole content as body.
    """
    if role == "tool":
        parts = parse_native_tool_carrier(content)
        if parts is None:
            return CarrierParts(content, (), False, CarrierKind.NATIVE)
        return parts
    if role == "user" and is_prompt_tool_carrier(content):
        return parse_prompt_tool_carrier(content) or _legacy_prompt(content)
    return None


def image_refs(parts: CarrierParts) -> list[str]:
    """The targets of the declared `IMAGE` markers, in declaration order.

    Other kinds are carried but never resolved into image parts.
    """
    if not parts.declared:
        return []
    return [m.target for m in parts.attachments if m.kind is MarkerKind.IMAGE]


def rebuild_carrier(role: str, content: str, parts: CarrierParts, markers: Sequence[Marker]) -> str:
    """The carrier's content with a new attachment list.

    The body comes from `parts.text` (the only text a caller may have
    rewritten, for instance to append a load-failure note) and every other
    envelope field of `content` is kept. A native envelope that no longer
    parses, a parts/role mismatch, or a legacy prompt carrier returns the
    original content unchanged: rebuilding a shape the message never had
    would invent content.
    """
    if parts.kind is CarrierKind.NATIVE:
        if role != "tool":
            return content
        envelope = _load_envelope(content)
        if envelope is None:
            return content
        envelope["content"] = parts.text
        envelope["attachments"] = render_native_attachments(markers)
        return json.dumps(envelope, ensure_ascii=False)
    if role != "user":
        return content
    current = parse_prompt_tool_carrier(content)
    if current is None or not current.declared:
        return content
    return render_prompt_tool_carrier(parts.text, markers)


# -- lifting declared images -----------------------------------------------------


class LoadedImages(NamedTuple, Generic[_ImageT]):
    """What lifting one carrier's declaration gave: `load_declared_images`.

    `kept` is the declaration left (the other kinds, and the images that
    loaded, in order), `images` the loaded images in declaration order,
    `notes` one `load_failure_note` line per image that was not loaded.
    """

    kept: list[Marker]
    images: list[_ImageT]
    notes: list[str]


def load_failure_note(target: str, reason: str) -> str:
    """The one line appended to a carrier body for a declared image that was not loaded.

    `[attachment not loaded: <target>: <reason>]`, kept to one line (control
    characters become spaces, a long target is shortened) so it can neither
    break the body's lines nor be mistaken for anything but a note.
    """
    shown = shorten(target, _NOTE_TARGET_CHARS)
    return _CONTROL.sub(" ", f"[attachment not loaded: {shown}: {reason}]")


def load_declared_images(
    markers: Sequence[Marker], load: Callable[[str], _ImageT], max_images: int | None = None
) -> LoadedImages[_ImageT]:
    """Load the declared `IMAGE` markers of one carrier, in order, each target once.

    The one lifting: `load` is the caller's loader (the attachments loader
    and its policy, or a flat-history reader's own) and raises a
    `CarryallError`, `OSError` or `ValueError` to refuse; a refused image is
    named, with the reason, in a note and left out of `kept`. Other kinds
    are kept and never loaded. With `max_images`, at most that many are
    loaded, the last declared (the newest, as `apply_image_limit` keeps
    them); earlier ones are noted as over the limit. Only markers are ever
    looked at: a carrier's body is never read for targets.
    """
    image_indexes = [i for i, m in enumerate(markers) if m.kind is MarkerKind.IMAGE]
    excess = 0 if max_images is None else max(len(image_indexes) - max_images, 0)
    over_limit = set(image_indexes[:excess])
    kept: list[Marker] = []
    images: list[_ImageT] = []
    notes: list[str] = []
    # A target declared twice is loaded once: the same bytes, and the same refusal.
    loaded: dict[str, tuple[_ImageT | None, str]] = {}
    for index, marker in enumerate(markers):
        if marker.kind is not MarkerKind.IMAGE:
            kept.append(marker)
            continue
        if index in over_limit:
            reason = f"over the limit of {max_images} images per request"
            notes.append(load_failure_note(marker.target, reason))
            continue
        outcome = loaded.get(marker.target)
        if outcome is None:
            outcome = loaded[marker.target] = _load_one(marker.target, load)
        image, reason = outcome
        if image is None:
            notes.append(load_failure_note(marker.target, reason))
            continue
        kept.append(marker)
        images.append(image)
    return LoadedImages(kept, images, notes)


def _load_one(target: str, load: Callable[[str], _ImageT]) -> tuple[_ImageT | None, str]:
    try:
        return load(target), ""
    except (CarryallError, OSError, ValueError) as exc:
        return None, exc.reason if isinstance(exc, AttachmentError) else str(exc)
