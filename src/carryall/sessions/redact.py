"""Redaction: secrets cut out of what a session store writes.

Agents read files, environments and command output, so live credentials end
up in transcripts. A `Redactor` replaces every match of its patterns with
`REDACTED` in the text a person or a model wrote or a tool returned: `Text`,
unsigned `Thinking`, every string (and key) of a `ToolUse` input, a
`ToolResult`'s content, and a session's title and system prompt. It never
looks inside what is opaque or binary: a thinking block's signature, and
image data (held by hash in the store anyway). A signed thinking block is
left whole when events are written, because its signature certifies its
text and a provider refuses a thinking block whose text was changed; an
explicit `carryall sessions redact` cuts the string out of it anyway and
drops the signature, which makes it ordinary unsigned thinking that stays in
the transcript and off the wire that checks signatures.

The built-in patterns match the shapes of common API keys and tokens, each
anchored so that a longer identifier that merely contains one is left
alone; the config file adds the user's own (`[redact] patterns`). This
module is pure: it turns values into values.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import msgspec

from carryall.blocks import Message, Opaque, Text, Thinking, ToolResult, ToolUse
from carryall.errors import CarryallError

__all__ = ["BUILTIN_PATTERNS", "REDACTED", "Redactor", "compile_pattern"]

REDACTED: Final = "[redacted]"
"""What a redacted string becomes: one wording, so a reader can search for it."""

# Each key shape after a boundary no key character crosses, so `ghp_...`
# inside a longer word, or a hash that merely starts like a key, stays text.
_EDGE = r"(?<![A-Za-z0-9_-])"
BUILTIN_PATTERNS: Final[Mapping[str, str]] = {
    "anthropic": _EDGE + r"sk-ant-[A-Za-z0-9_-]{20,}",
    "openai": _EDGE + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    "github": _EDGE + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "aws-access-key": _EDGE + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
    "slack": _EDGE + r"xox[abprs]-[A-Za-z0-9-]{10,}",
    "google": _EDGE + r"AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])",
    "stripe": _EDGE + r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
    "huggingface": _EDGE + r"hf_[A-Za-z0-9]{30,}",
    "private-key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        r"[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    ),
}
"""The shapes of common API keys and tokens, by the name of who issues them."""


def compile_pattern(pattern: str, where: str) -> re.Pattern[str]:
    """A user's regular expression, or a `CarryallError` naming where it came from and why."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise CarryallError(f"{where}: {pattern!r} is not a regular expression: {exc}") from None
    if compiled.search(""):
        raise CarryallError(
            f"{where}: {pattern!r} matches the empty string, so it would match everywhere"
        )
    return compiled


class Redactor:
    """Replaces every match of a set of patterns with `REDACTED` in a message's readable text.

    `Redactor()` has the built-in patterns; `patterns` adds compiled user
    patterns; `builtin=False` leaves only those. With no pattern at all it
    changes nothing (and costs nothing). A message with nothing to redact
    comes back as the very same object, so a caller can tell by identity.
    """

    def __init__(self, patterns: Iterable[re.Pattern[str]] = (), *, builtin: bool = True) -> None:
        self._sources = [
            *(BUILTIN_PATTERNS.values() if builtin else ()),
            *(p.pattern for p in patterns),
        ]

    @functools.cached_property
    def _pattern(self) -> re.Pattern[str] | None:
        # One alternation, so a message is scanned once however many patterns
        # there are; compiled with the first thing redacted, since every store
        # has a redactor and a reader (`sessions list`, `recall`) writes nothing.
        sources = self._sources
        return re.compile("|".join(f"(?:{s})" for s in sources)) if sources else None

    @property
    def active(self) -> bool:
        """Whether any pattern is set."""
        return bool(self._sources)

    def text(self, text: str) -> str:
        """`text` with every match replaced."""
        if self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def optional(self, text: str | None) -> str | None:
        """`text` redacted, `None` kept."""
        return None if text is None else self.text(text)

    def value(self, value: Any) -> Any:
        """A JSON value with every string in it (object keys included) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self.value(v) for k, v in value.items()}
        return value

    def block(self, block: Any, *, unsign: bool = False) -> Any:
        """One block redacted; anything opaque or binary (images, signatures) kept as it is.

        A signed `Thinking` is kept whole unless `unsign`, in which case its
        text is redacted and, if that changed it, its signature dropped. A
        provider-native `Opaque` block is kept whole the same way; with
        `unsign`, one whose JSON or text matches becomes its redacted text line.
        """
        if isinstance(block, Text):
            new = self.text(block.text)
            return block if new == block.text else Text(new)
        if isinstance(block, ToolResult):
            new = self.text(block.content)
            structured = self.value(block.structured)
            if new == block.content and structured == block.structured:
                return block
            return msgspec.structs.replace(block, content=new, structured=structured)
        if isinstance(block, ToolUse):
            new_input = self.value(block.input)
            return (
                block
                if new_input == block.input
                else msgspec.structs.replace(block, input=new_input)
            )
        if isinstance(block, Thinking):
            if block.signature is not None and not unsign:
                return block
            new = self.text(block.text)
            if new == block.text:
                return block
            return msgspec.structs.replace(block, text=new, signature=None, origin=None)
        if isinstance(block, Opaque) and unsign and self._pattern is not None:
            # Its raw JSON is echoed byte for byte or not at all: a native
            # block holding the pattern becomes its redacted text line.
            new = self.text(block.text)
            return block if new == block.text and not self._pattern.search(block.raw) else Text(new)
        return block

    def message(self, message: Any, *, unsign: bool = False) -> Any:
        """A `Message` (or the store's form of one, with images by hash) redacted block by block."""
        if self._pattern is None:
            return message
        content = tuple(self.block(b, unsign=unsign) for b in message.content)
        if all(new is old for new, old in zip(content, message.content, strict=True)):
            return message
        return msgspec.structs.replace(message, content=content)

    def history(self, messages: Iterable[Message]) -> list[Message]:
        """Every message of a history redacted."""
        return [self.message(m) for m in messages]
