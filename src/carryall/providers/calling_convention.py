"""The one calling convention for models without native tool calling.

Prompt mode describes the tools in the system prompt and asks the model to
call one by writing a block in its reply::

    <tool_call>
    {"name": "read_file", "arguments": {"path": "notes.txt"}}
    </tool_call>

One convention, written and read here only, so the prompt codec
(`carryall.providers.prompt`), the flat histories of `carryall.rounds` and
every transcript agree on what a call looked like. The tags are the ones
Hermes- and Qwen-style chat templates already train models on.

Reading is forgiving about where a call sits (inside a code fence, several
in one turn, a fenced ```json object instead of tags) but never about what
it says: a call that does not parse is not dropped, it becomes a `ToolUse`
whose `input` is the raw text, counted as malformed, so the agent loop
answers it with an error result the model can read and correct.

The results of a round go back by the other prompt-mode grammar, the
results body (`carryall.providers.results_body`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from carryall._json import load_json
from carryall.blocks import ToolUse
from carryall.providers._types import ToolSpec

__all__ = [
    "CALL_CLOSE",
    "CALL_FENCE_LABELS",
    "CALL_OPEN",
    "ParsedCalls",
    "call_id",
    "describe_tools",
    "is_call_fence",
    "offered_schema",
    "parse_tool_calls",
    "read_name",
    "render_assistant",
    "render_call_json",
    "render_tool_calls",
    "reply_digest",
]

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"

# Fenced blocks whose content is read as a call when it is a call-shaped JSON
# object. `tool_call` says so outright, so there a body that does not parse is
# a malformed call; under the other labels it is ordinary text.
_CALL_FENCE = "tool_call"
_JSON_FENCES = frozenset({"json", ""})
CALL_FENCE_LABELS = frozenset({_CALL_FENCE, *_JSON_FENCES})
"""Code-fence labels (lower case; "" for none) whose block may be read as a call."""

# One linear tokenizer for everything the reader cares about. The fence
# alternative takes the rest of the line possessively and decides about the
# info string in Python: a backtracking pattern there would go quadratic on
# a long run of backticks or spaces followed by the wrong character. A line
# with a `<` in it is never a fence, so a tag on a fence line is still a tag.
_TOKENS = re.compile(
    r"(?P<open><tool_call>)|(?P<close></tool_call>)|^(?P<fence>[ \t]{0,3}(`{3,}+)[^\n<]*+)$",
    re.MULTILINE,
)
_NAME_RE = re.compile(r'"name"\s*:\s*"((?:[^"\\\n]|\\.){1,200})"')
_ESCAPED_TAGS = ((CALL_OPEN, "\\u003ctool_call>"), (CALL_CLOSE, "\\u003c/tool_call>"))


class ParsedCalls(msgspec.Struct, frozen=True):
    """An assistant reply read under the convention.

    `text` is the prose with the call blocks taken out, `calls` every call in
    the order written (malformed ones included, their `input` the raw text
    and their `name` whatever could be read, else ""), `malformed` how many
    of them did not parse.
    """

    text: str
    calls: tuple[ToolUse, ...]
    malformed: int


# -- writing -------------------------------------------------------------------


def render_call_json(name: str, arguments: Any) -> str:
    """One call as the single JSON line the convention puts between the tags.

    Compact, key order as given, non-ASCII kept. A string value that spells
    a tag is escaped (`\\u003c`, still the same JSON) so the block cannot be
    cut short by its own arguments.
    """
    line = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    for tag, escaped in _ESCAPED_TAGS:
        line = line.replace(tag, escaped)
    return line


def render_tool_calls(calls: Sequence[ToolUse]) -> str:
    """The calls of one assistant turn in the calling convention, one block per call.

    A call whose input is raw text (a malformed call read back by
    `parse_tool_calls`) is written as that text, so the model sees what it
    wrote next to the error that answered it. Raw text that would not read
    back under the same name (a native backend's unparseable arguments,
    which lack the name, or text that itself spells a tag) is written as a
    JSON string under `arguments` instead: it reads back malformed, under
    the call's name.
    """
    blocks: list[str] = []
    for call in calls:
        raw = call.input
        if (
            isinstance(raw, str)
            and CALL_OPEN not in raw
            and CALL_CLOSE not in raw
            and read_name(raw) == call.name
        ):
            inner = raw
        else:
            inner = render_call_json(call.name, raw)
        blocks.append(f"{CALL_OPEN}\n{inner}\n{CALL_CLOSE}")
    return "\n".join(blocks)


def render_assistant(text: str, calls: Sequence[ToolUse]) -> str:
    """A prompt-mode assistant turn as one string: the prose, then the call blocks.

    One answer to "how does a turn with calls read as text", shared by the
    provider codec and the flat histories.
    """
    if not calls:
        return text
    rendered = render_tool_calls(calls)
    if not text:
        return rendered
    return f"{text.rstrip()}\n\n{rendered}"


def offered_schema(tool: ToolSpec) -> dict[str, Any]:
    """A tool's input schema with each chosen string argument narrowed to an `enum` of its
    `choices`.

    The one answer to "what may this tool be called with": constrained
    prompt mode enforces it and `describe_tools` shows it, so a model is
    never held to a choice it was not told of. Only a top-level property
    that is a plain string schema is narrowed, and only with at least one
    choice: an empty `enum` would forbid every call.
    """
    schema = tool.input_schema
    properties = schema.get("properties")
    if not tool.choices or not isinstance(properties, dict):
        return schema
    narrowed = dict(properties)
    for name, values in tool.choices.items():
        prop = properties.get(name)
        if values and isinstance(prop, dict) and prop.get("type") == "string":
            narrowed[name] = {**prop, "enum": list(values)}
    return {**schema, "properties": narrowed}


def describe_tools(
    tools: Sequence[ToolSpec], *, constrained: bool = False, tool_choice: str | None = None
) -> str:
    """The system-prompt text that teaches a model the tools and the calling convention.

    `constrained` describes the JSON answer shape the server enforces instead
    of the tags (`carryall.providers.prompt`). `required` adds one sentence
    saying so. With `tool_choice` `none` no tool may be called, so none is
    described: only how the results read and how to answer, leaving a small
    model no call syntax or tool description to copy into its answer. Empty
    when there are no tools.
    """
    if not tools:
        return ""
    lines = ["# Tools", ""]
    if tool_choice == "none":
        lines += ["Do not call any tool in this turn: answer with what the results say."]
        if constrained:
            lines += [
                'Answer with exactly one JSON object whose only key is "response" and whose '
                "value is your whole answer to the user, as a string."
            ]
    elif constrained:
        lines += [
            "You can call the tools listed below. Answer with exactly one JSON object.",
            "To call tools, answer:",
            '{"tool_calls": [{"name": "<tool name>", "arguments": {<arguments>}}]}',
            "with one entry per call: you may call several tools at once. "
            "The arguments must match the tool's JSON schema.",
            # No placeholder to fill in here: the grammar lets any string
            # through, and a small model copies a placeholder word for word.
            'To answer without a tool, answer with a JSON object whose only key is "response" '
            "and whose value is your whole answer to the user, as a string.",
        ]
    else:
        lines += [
            "You can call the tools listed below. To call one, write a block like this "
            "in your reply, with the tool's name and a JSON object of arguments that "
            "matches its JSON schema:",
            "",
            CALL_OPEN,
            '{"name": "<tool name>", "arguments": {<arguments>}}',
            CALL_CLOSE,
            "",
            "You may call several tools in one turn: write one block per call. "
            "After your calls, stop and wait for the results. "
            "If you need no tool, answer normally without any block.",
        ]
    lines += [
        "",
        # Said in words, not by an example header: a small model copies an
        # example line (and its placeholders) into its answer word for word.
        "The results come back in a user message whose first line is [Tool results], "
        "with one section per call, in the order you made them. Each section starts "
        "with one line in square brackets naming the tool and the call and saying ok, "
        "or error when the call failed; the result text follows it. "
        "Pictures a tool made follow the results, each named by an [IMAGE:name] line.",
    ]
    if tool_choice == "none":
        return "\n".join(lines)
    if tool_choice == "required":
        lines += ["", "You must call at least one tool in this turn."]
    lines += ["", "## Available tools"]
    for tool in tools:
        lines += [
            "",
            f"### {tool.name}",
            tool.description.strip() or "(no description)",
            "Arguments JSON schema: " + json.dumps(offered_schema(tool), ensure_ascii=False),
        ]
    return "\n".join(lines)


# -- reading -------------------------------------------------------------------


def reply_digest(text: str, salt: str = "") -> bytes:
    """The hash of one reply that its call ids derive from (see `call_id`)."""
    h = hashlib.sha256()
    h.update(salt.encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    # surrogatepass: a reply with a lone surrogate must still hash, not crash.
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.digest()


def call_id(digest: bytes, position: int) -> str:
    """The id of the call written at `position` in a reply whose `reply_digest` is `digest`.

    Pure: the same reply always yields the same ids, so re-reading a stored
    reply pairs its calls with the results already given; distinct positions
    keep ids distinct within a turn.
    """
    seed = digest + position.to_bytes(8, "big")
    return "call_" + hashlib.sha256(seed).hexdigest()[:16]


def _strip_fence(body: str) -> str:
    """A call body the model also wrapped in a code fence, unwrapped."""
    body = body.strip()
    if body.startswith("```"):
        newline = body.find("\n")
        body = "" if newline < 0 else body[newline + 1 :].rstrip()
    last = body.rfind("\n")
    tail = body[last + 1 :].strip(" \t")
    if len(tail) >= 3 and tail.strip("`") == "":
        body = body[: max(last, 0)]
    return body.strip()


def _arguments(obj: Mapping[str, Any]) -> tuple[bool, Any]:
    """The arguments of a call object: (parsed, value)."""
    if "arguments" in obj:
        value = obj["arguments"]
    elif "parameters" in obj:
        # Llama-style models write "parameters"; the intent is the same.
        value = obj["parameters"]
    else:
        return True, {}
    if isinstance(value, str):
        # OpenAI-style models write arguments as a JSON string.
        ok, decoded = load_json(value)
        if ok and isinstance(decoded, dict):
            return True, decoded
        return False, None
    return isinstance(value, dict), value


def read_name(raw: str) -> str:
    """The tool name a broken call's raw text spells (`"name": "..."`), else ""."""
    match = _NAME_RE.search(raw)
    if match is None:
        return ""
    ok, name = load_json(f'"{match.group(1)}"')
    return name if ok and isinstance(name, str) else ""


def _call_objects(raw: str) -> list[tuple[str, Any] | str] | None:
    """The calls a JSON call body holds: (name, arguments) for each good one, the
    raw text for each bad one; None when the body is not JSON at all."""
    ok, value = load_json(raw)
    if not ok:
        return None
    items = value if isinstance(value, list) and value else [value]
    out: list[tuple[str, Any] | str] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            good, arguments = _arguments(item)
            if good:
                out.append((item["name"], arguments))
                continue
        out.append(raw if len(items) == 1 else _dump(item, raw))
    return out


def _dump(value: Any, fallback: str) -> str:
    """A parsed JSON value written back as text (the raw text if it cannot be)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):
        return fallback


def _is_call_object(raw: str) -> bool:
    """Whether a fenced ```json block is a call rather than JSON the model is showing."""
    ok, value = load_json(raw)
    return (
        ok
        and isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and ("arguments" in value or "parameters" in value)
    )


def is_call_fence(label: str, body: str) -> bool:
    """Whether a code fence with this label (lower case, "" for none) and body reads as a call.

    A ```tool_call fence always does (a body that does not parse is a
    malformed call); a ```json or unlabelled one when its body is a call
    object, `name` and `arguments`; any other fence is the model showing code.
    """
    if label == _CALL_FENCE:
        return True
    return label in _JSON_FENCES and _is_call_object(body.strip())


class _Reader:
    """Collects the calls of one reply and the spans of text they occupied."""

    def __init__(self, text: str, salt: str) -> None:
        self.text = text
        self.digest = reply_digest(text, salt)
        self.calls: list[ToolUse] = []
        self.spans: list[tuple[int, int]] = []
        self.malformed = 0
        self.ids: set[str] = set()

    def _id(self, position: int) -> str:
        candidate = call_id(self.digest, position)
        bump = 0
        while candidate in self.ids:
            # Unreachable in practice (distinct positions, 64-bit ids); kept so
            # uniqueness within a turn never rests on hash luck.
            bump += 1
            candidate = call_id(self.digest, position + (bump << 40))
        self.ids.add(candidate)
        return candidate

    def add(self, body: str, start: int, end: int, *, strict: bool = True) -> None:
        """Read a call body at text[start:end]; strict: a body that is not JSON is a
        malformed call (tags, ```tool_call fences), else the caller checked it."""
        raw = _strip_fence(body)
        objects = _call_objects(raw)
        if objects is None:
            objects = [raw] if strict else []
        for index, item in enumerate(objects):
            position = start + index
            if isinstance(item, tuple):
                self.calls.append(ToolUse(self._id(position), item[0], item[1]))
            else:
                self.malformed += 1
                self.calls.append(ToolUse(self._id(position), read_name(item), item))
        self.spans.append((start, end))

    def unclosed(self, start: int, end: int) -> None:
        """A tag that never closed: a call if what follows it parses whole, else malformed."""
        self.add(self.text[start + len(CALL_OPEN) : end], start, end)


def parse_tool_calls(text: str, *, salt: str = "") -> ParsedCalls:
    """Read the calls out of an assistant reply written under the convention.

    Every `<tool_call>...</tool_call>` block, inside code fences too, several
    per turn, in order; a fenced ```json or ```tool_call block holding a
    call object (`name` and `arguments`); and a reply that is nothing but one
    call object. A block holding a JSON array of call objects is one call per
    item. A call that does not parse (not JSON, no name, arguments not an
    object, a tag that never closes and whose rest is not a whole call)
    becomes a `ToolUse` with the name that could be read, else "", and the
    raw text as `input`, counted in `malformed`.

    Ids are `call_` and a hash of (`salt`, the reply, the call's position):
    pure, so reading the same reply twice gives the same ids; the codec
    passes the response id as `salt` so identical replies in two turns do not
    share ids. Linear in the length of the reply, hostile input included.
    """
    reader = _Reader(text, salt)
    open_at: int | None = None
    # Fence state: (start of the opening line, end of it, fence length, label),
    # and how many calls stood before the fence opened.
    fence: tuple[int, int, int, str] | None = None
    calls_before_fence = 0
    for match in _TOKENS.finditer(text):
        kind = match.lastgroup
        if kind == "open":
            if open_at is not None:
                reader.unclosed(open_at, match.start())
            open_at = match.start()
        elif kind == "close":
            if open_at is not None:
                reader.add(text[open_at + len(CALL_OPEN) : match.start()], open_at, match.end())
                open_at = None
        elif open_at is None:
            line = match.group("fence")
            ticks = len(match.group(4))
            info = line.strip(" \t")[ticks:].strip()
            if fence is None:
                if "`" in info:
                    continue  # not a fence: an info string may not hold a backtick
                fence = (match.start(), match.end(), ticks, info.split(" ")[0].lower())
                calls_before_fence = len(reader.spans)
            elif not info and ticks >= fence[2]:
                _close_fence(reader, fence, calls_before_fence, match.start(), match.end())
                fence = None
    if open_at is not None:
        reader.unclosed(open_at, len(text))
    if fence is not None:
        _close_fence(reader, fence, calls_before_fence, len(text), len(text))
    if not reader.calls:
        stripped = text.strip()
        if stripped.startswith("{") and stripped.endswith("}") and _is_call_object(stripped):
            reader.add(stripped, 0, len(text))
    return ParsedCalls(_prose(text, reader.spans), tuple(reader.calls), reader.malformed)


def _close_fence(
    reader: _Reader, fence: tuple[int, int, int, str], before: int, close_start: int, close_end: int
) -> None:
    """Settle a fence: a call fence becomes a call, a fence that held only
    tagged calls is taken out whole, any other fence stays prose."""
    line_start, open_end, _, label = fence
    content_start = min(open_end + 1, close_start)
    if len(reader.spans) > before:
        inner = reader.spans[before:]
        gaps = [reader.text[a:b] for a, b in _gaps(content_start, close_start, inner)]
        if all(not gap.strip() for gap in gaps):
            del reader.spans[before:]
            reader.spans.append((line_start, close_end))
        return
    body = reader.text[content_start:close_start]
    if is_call_fence(label, body):
        reader.add(body, line_start, close_end, strict=label == _CALL_FENCE)


def _gaps(start: int, end: int, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = start
    for a, b in spans:
        out.append((pos, a))
        pos = max(pos, b)
    out.append((pos, end))
    return out


def _prose(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The reply with the call spans taken out: each piece trimmed where it was
    cut, empty pieces dropped, the rest joined by a blank line."""
    if not spans:
        return text.strip()
    pieces = [text[a:b].strip() for a, b in _gaps(0, len(text), spans)]
    return "\n\n".join(p for p in pieces if p)
