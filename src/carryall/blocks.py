"""The content-block model: what a conversation is made of, on every backend.

A message is a role and a list of blocks. The system prompt belongs to the
request, not the history, so a message is only ever `user` or `assistant`.
Blocks are immutable values that compare by value: session recording decides
between "append the new tail" and "the transcript was rewritten in place" by
comparing the messages a run started from with what it left behind.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple, TypeAlias

import msgspec

from carryall.carrier import Marker
from carryall.errors import BlockError, HistoryError

__all__ = [
    "IMAGE_MEDIA_TYPES",
    "Block",
    "HistorySurvey",
    "Image",
    "Message",
    "Role",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolUse",
    "apply_image_limit",
    "block_from_dict",
    "block_to_dict",
    "image_media_type",
    "image_placeholder",
    "messages_from_dicts",
    "messages_to_dicts",
    "survey_history",
    "validate_history",
]

Role: TypeAlias = Literal["user", "assistant"]

IMAGE_MEDIA_TYPES: frozenset[str] = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp"}
)
"""The media types every backend takes. An allowlist, not a guess at what is an image."""

_EXTENSION_MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class Text(msgspec.Struct, frozen=True, gc=False, tag="text", tag_field="type", omit_defaults=True):
    """Plain text."""

    text: str


class Thinking(
    msgspec.Struct, frozen=True, gc=False, tag="thinking", tag_field="type", omit_defaults=True
):
    """Reasoning.

    `signature` is opaque and is echoed back unchanged when continuing on the
    provider that made it; unsigned thinking (another backend's) stays in the
    transcript but never goes back on a wire that checks signatures.
    """

    text: str
    signature: str | None = None


class ToolUse(
    msgspec.Struct, frozen=True, gc=False, tag="tool_use", tag_field="type", omit_defaults=True
):
    """A tool call the assistant made. `input` is any JSON value."""

    # gc=False although `input` is usually a dict: the collector only has to
    # see the objects a reference cycle can run through, and none runs
    # through a tool call. Its input is a JSON value (dicts, lists and
    # scalars, decoded or built by a tool's caller) that never points back at
    # a block or a message; a cycle inside the input itself stays wholly
    # among tracked containers, so the collector still frees it once the
    # call lets go. Only an input edited to hold its own `ToolUse` would leak
    # (never crash), and no JSON value can.

    id: str
    name: str
    input: Any


class ToolResult(
    msgspec.Struct, frozen=True, gc=False, tag="tool_result", tag_field="type", omit_defaults=True
):
    """The answer to one `ToolUse`, always text: images a tool made ride after it.

    `attachments` holds the non-image attachments a flat history declared for
    this result (audio, video, documents): no wire carries them, but writing
    the history out again must give them back at the carrier's fixed
    position rather than lose them. Empty for almost every result.
    """

    tool_use_id: str
    content: str
    is_error: bool = False
    attachments: tuple[Marker, ...] = ()


class Image(
    msgspec.Struct, frozen=True, gc=False, tag="image", tag_field="type", omit_defaults=True
):
    """An image put in front of the model. User turns only.

    That is a portability decision rather than a simplification: Anthropic
    accepts an image inside a `tool_result`, but the OpenAI dialect's
    `role: "tool"` messages carry a string and nothing else (llama-server is
    the same), so a tool that returned pixels would work on one backend and
    silently lose them on the other. A tool's image therefore enters the
    conversation the way a person hands one over: in the user message that
    carries the round's results, after them.

    `data` is bare base64. The `data:` prefix is a rendering detail of the
    OpenAI dialect, so it belongs to the encoder that needs it, not to the
    type every backend shares. `source` is what the file was called where it
    came from: never sent to a provider, used by every human-facing reader
    and by the text-only rendering.
    """

    media_type: str
    data: str
    source: str | None = None

    def __post_init__(self) -> None:
        if self.media_type not in IMAGE_MEDIA_TYPES:
            raise BlockError(
                f"image media type {self.media_type!r} is not one of "
                f"{', '.join(sorted(IMAGE_MEDIA_TYPES))}"
            )
        if self.data[:5].lower() == "data:":
            raise BlockError("image data must be bare base64, not a data: URI")

    @classmethod
    def from_bytes(cls, media_type: str, data: bytes, source: str | None = None) -> Image:
        """An image block from raw file bytes.

        One encoder, so the `data:` prefix question is answered once: what
        goes in is bare base64, and the one dialect that wants a prefix adds
        it at the wire.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise BlockError(f"image bytes must be bytes, got {type(data).__name__}")
        return cls(media_type, base64.b64encode(data).decode("ascii"), source)

    def to_bytes(self) -> bytes:
        """The raw image bytes; a `BlockError` when `data` is not valid base64."""
        try:
            return base64.b64decode(self.data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BlockError(f"image data is not valid base64: {exc}") from None

    def data_uri(self) -> str:
        """The `data:` URI form, for the dialects and carriers that want one."""
        return f"data:{self.media_type};base64,{self.data}"

    def placeholder(self) -> str:
        """This image's `image_placeholder` line."""
        return image_placeholder(self.media_type, self.source)


Block: TypeAlias = Text | Thinking | ToolUse | ToolResult | Image


_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def image_placeholder(media_type: str, source: str | None = None) -> str:
    """How a person, or a model with no eyes, is told an image was here.

    Shared so the text-only provider rendering and every transcript reader
    say the same thing: a reader that invented its own wording would be a
    second answer to "what was in this turn". Control characters in a name
    become spaces so the placeholder stays one line.
    """
    if source:
        name = _CONTROL.sub(" ", source)
        return f"[image: {name} ({media_type})]"
    return f"[image: {media_type}]"


def image_media_type(path: str | os.PathLike[str]) -> str | None:
    """The media type for a file name by its extension (any case), or None.

    An allowlist of what every backend takes, not a guess at what is an image.
    """
    _, ext = os.path.splitext(os.fspath(path))
    return _EXTENSION_MEDIA_TYPES.get(ext.lower())


class Message(msgspec.Struct, frozen=True, gc=False):
    """A role and its blocks. The system prompt is the request's, not the history's."""

    # gc=False like every block: a message holds a tuple of blocks and
    # nothing holds a message back, so no cycle runs through one, and a long
    # history of them costs the collector nothing to walk (loading one
    # needs no pause). A message keeps no state beyond its two fields;
    # what checking it needs, `survey_history` reads from the blocks.
    role: Role
    content: tuple[Block, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            # Accept any sequence at construction but store a tuple, so a
            # message can never be changed behind a recorded history's back.
            msgspec.structs.force_setattr(self, "content", tuple(self.content))
        if self.role not in ("user", "assistant"):
            raise BlockError(f"message role must be 'user' or 'assistant', not {self.role!r}")

    # -- builders -----------------------------------------------------------

    @classmethod
    def user(cls, text: str, images: Iterable[Image] = ()) -> Message:
        """A user turn: the text, then any images the person handed over."""
        return cls("user", (Text(text), *images))

    @classmethod
    def assistant(cls, blocks: Iterable[Block]) -> Message:
        """An assistant turn: thinking, text and tool calls, in the order given."""
        return cls("assistant", tuple(blocks))

    @classmethod
    def tool_results(cls, results: Iterable[ToolResult], images: Iterable[Image] = ()) -> Message:
        """One user message carrying every result of a round, then the round's images.

        All results of a round go back together: splitting them teaches the
        model to stop calling tools in parallel.
        """
        return cls("user", (*results, *images))

    # -- readers ------------------------------------------------------------

    def text(self) -> str:
        """The text blocks joined; never thinking."""
        return "".join(b.text for b in self.content if isinstance(b, Text))

    def thinking(self) -> str:
        """The thinking blocks joined."""
        return "".join(b.text for b in self.content if isinstance(b, Thinking))

    def tool_uses(self) -> list[ToolUse]:
        """The tool calls in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolUse)]

    def tool_results_in(self) -> list[ToolResult]:
        """The tool results in this message, in order."""
        return [b for b in self.content if isinstance(b, ToolResult)]

    def images(self) -> list[Image]:
        """The images in this message, in order."""
        return [b for b in self.content if isinstance(b, Image)]

    def is_plain_user_text(self) -> bool:
        """A user message with no tool result in it: something a person said."""
        return self.role == "user" and not any(isinstance(b, ToolResult) for b in self.content)

    # -- JSON form ----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: `{"role": ..., "content": [tagged blocks]}`."""
        return {"role": self.role, "content": [block_to_dict(b) for b in self.content]}

    @classmethod
    def from_dict(cls, data: Any) -> Message:
        """Decode the JSON form; a `BlockError` names the position of what is wrong."""
        message: Message = _convert(data, Message, "message")
        return message


def block_to_dict(block: Block) -> dict[str, Any]:
    """One block's JSON form, tagged by `"type"`."""
    out: dict[str, Any] = msgspec.to_builtins(block)
    if "attachments" in out:
        out["attachments"] = list(out["attachments"])
    return out


def block_from_dict(data: Any) -> Block:
    """Decode one block; unknown types and missing fields are a `BlockError`."""
    block: Block = _convert(data, Block, "block")
    return block


def messages_to_dicts(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A history's JSON form."""
    return [m.to_dict() for m in messages]


def messages_from_dicts(data: Any) -> list[Message]:
    """Decode a history; the error names the message index and field (`$[3].content[0]`)."""
    messages: list[Message] = _convert(data, list[Message], "history")
    return messages


def _convert(data: Any, typ: Any, what: str) -> Any:
    try:
        return msgspec.convert(data, typ)
    except msgspec.ValidationError as exc:
        raise BlockError(f"invalid {what} JSON: {exc}") from None
    except BlockError as exc:
        raise BlockError(f"invalid {what} JSON: {exc}") from None


def validate_history(messages: Sequence[Message]) -> None:
    """Check a history before it is encoded; a `HistoryError` names the message index.

    Every `ToolUse` is answered by exactly one `ToolResult` in the next user
    message, no result answers a call that was not made, no image sits
    outside a user message, and no message is empty. One validator, so every
    encoder refuses the same histories before any request is sent.
    """
    survey_history(messages)


class HistorySurvey(NamedTuple):
    """What `survey_history` noticed on its way through a history it passed."""

    images: int
    """How many images the history holds."""
    irregular: list[int]
    """The indices of the messages whose JSON form is not canonical, in order."""


def survey_history(messages: Sequence[Message]) -> HistorySurvey:
    """`validate_history`, plus what every encoder asks of the history next.

    It notes on its way what the encoders would otherwise walk the whole
    history again to learn: how many images there are (the image limit and a
    model with no eyes), and which messages are *irregular*. A message is
    canonical when its JSON form (`Message.to_dict`) has nothing a wire would
    drop, reorder or rename: no blank text, tool results ahead of everything
    else and never empty, no non-image attachments, tool inputs that are
    objects, no thinking and no image. That is the form the Anthropic
    Messages API takes as it is, so its encoder converts canonical messages
    in one step and rewrites only the irregular ones.

    One walk, block by block, that both words every error and takes the
    survey: this runs before every request on the whole history, so blocks
    are told apart by exact type, and a subclass of a block type counts as
    no block at all, as the encoders would treat it.
    """
    calls: dict[str, ToolUse] = {}  # by id: what the next user message must answer
    images = 0
    irregular: list[int] = []
    for index, message in enumerate(messages):
        if type(message) is not Message:
            raise HistoryError(index, f"expected a Message, got {type(message).__name__}")
        # Any: blocks are told apart through `kind`, which mypy cannot follow.
        content: tuple[Any, ...] = message.content
        if len(content) == 1:
            # The commonest messages, a text or a round's one result, take a short way.
            block = content[0]
            kind = type(block)
            if kind is Text and not calls:
                text = block.text
                if not text or text.isspace():
                    irregular.append(index)
                continue
            if (
                kind is ToolResult
                and len(calls) == 1
                and block.tool_use_id in calls
                and message.role == "user"
            ):
                calls.clear()
                if not block.content or block.attachments:
                    irregular.append(index)
                continue
        elif not content:
            raise HistoryError(index, "message has no content blocks")
        canonical = True
        stranger = False  # worded after the checks that name the known blocks
        if message.role == "assistant":
            if calls:
                raise HistoryError(
                    index - 1,
                    f"tool call(s) {_names(calls)} not answered in the next user message",
                )
            for block in content:
                kind = type(block)
                if kind is Text:
                    text = block.text
                    if not text or text.isspace():
                        canonical = False
                elif kind is ToolUse:
                    call_id = block.id
                    if not call_id:
                        raise HistoryError(index, "a tool call has an empty id")
                    if call_id in calls:
                        raise HistoryError(index, f"tool call id {call_id!r} is used twice")
                    calls[call_id] = block
                    if type(block.input) is not dict:
                        canonical = False
                elif kind is Thinking:
                    canonical = False
                elif kind is Image:
                    raise HistoryError(index, "an image may only ride a user message")
                elif kind is ToolResult:
                    raise HistoryError(index, "a tool result may only ride a user message")
                else:
                    stranger = True
        else:
            ahead = True  # nothing but results so far
            for block in content:
                kind = type(block)
                if kind is ToolResult:
                    if calls.pop(block.tool_use_id, None) is None:
                        raise HistoryError(
                            index, _unexpected_result(messages, index, block.tool_use_id)
                        )
                    if not ahead or not block.content or block.attachments:
                        canonical = False
                elif kind is Text:
                    ahead = False
                    text = block.text
                    if not text or text.isspace():
                        canonical = False
                elif kind is Image:
                    images += 1
                    ahead = canonical = False
                elif kind is ToolUse:
                    raise HistoryError(index, "a tool call may only ride an assistant message")
                elif kind is Thinking:
                    raise HistoryError(index, "thinking may only ride an assistant message")
                else:
                    stranger = True
            if calls:
                raise HistoryError(index, f"tool call(s) {_names(calls)} are not answered here")
        if stranger:
            raise HistoryError(index, f"a content block is not a block: {_stranger(content)}")
        if not canonical:
            irregular.append(index)
    if calls:
        raise HistoryError(len(messages) - 1, f"tool call(s) {_names(calls)} are never answered")
    return HistorySurvey(images, irregular)


def _stranger(content: tuple[Any, ...]) -> str:
    known = (Text, Thinking, ToolUse, ToolResult, Image)
    return next(type(b).__name__ for b in content if type(b) not in known)


def _unexpected_result(messages: Sequence[Message], index: int, call_id: str) -> str:
    # The error path may be slow: find out why this result was not expected.
    previous = messages[index - 1] if index > 0 else None
    if (
        previous is not None
        and previous.role == "assistant"
        and any(use.id == call_id for use in previous.tool_uses())
    ):
        return f"tool call {call_id!r} is answered twice"
    return f"tool result for {call_id!r} answers no call in the previous assistant message"


def _names(calls: dict[str, ToolUse]) -> str:
    return ", ".join(f"{use.name} ({call_id})" for call_id, use in calls.items())


def apply_image_limit(messages: Sequence[Message], max_images: int) -> list[Message]:
    """Keep the newest `max_images` images of a history; older ones become placeholder text.

    One function, used by every encoder, so every backend drops the same
    images and says the same thing where they were (`image_placeholder`).
    A negative limit counts as zero. Messages without a replaced image are
    returned as the same objects.
    """
    # Counted by exact type over user turns only (images ride nowhere else):
    # this runs before every request on the whole history.
    total = 0
    for m in messages:
        if m.role == "user":
            for b in m.content:
                if type(b) is Image:
                    total += 1
    excess = total - max(max_images, 0)
    if excess <= 0:
        return list(messages)
    out: list[Message] = []
    for message in messages:
        if excess <= 0 or not any(isinstance(b, Image) for b in message.content):
            out.append(message)
            continue
        blocks: list[Block] = []
        for block in message.content:
            if isinstance(block, Image) and excess > 0:
                blocks.append(Text(block.placeholder()))
                excess -= 1
            else:
                blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return out
