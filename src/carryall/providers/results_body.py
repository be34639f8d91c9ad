"""The results body: every result of one prompt-mode tool round, in one carrier body.

The results of a round go back to a model without native tool calling in
one prompt carrier (`carryall.carrier`) whose body is `render_results_body`:
one section per result, each headed by a fixed one-line header that carries
the section's length, so the reader (`parse_results_body`) never searches
result text for a boundary and a header-looking line inside a result stays
result text. The calls those results answer are written under the calling
convention (`carryall.providers.calling_convention`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from carryall._json import load_json
from carryall.blocks import ToolResult

__all__ = ["parse_results_body", "render_results_body"]

_BARE = re.compile(r"[A-Za-z0-9_.:\-]+", re.ASCII)
_FIELD = r'(?:[A-Za-z0-9_.:\-]+|"(?:[^"\\\n]|\\.)*")'
_HEADER = re.compile(
    rf"\[Result ([1-9][0-9]*)/([1-9][0-9]*) tool=({_FIELD}) id=({_FIELD}) (ok|error) "
    r"chars=(0|[1-9][0-9]*)\]",
    re.ASCII,
)


def _field(value: str) -> str:
    if _BARE.fullmatch(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _unfield(token: str) -> str | None:
    if not token.startswith('"'):
        return token
    ok, value = load_json(token)
    return value if ok and isinstance(value, str) else None


def render_results_body(results: Sequence[ToolResult], names: Mapping[str, str]) -> str:
    """The body of a prompt carrier: every result of one round, one section each.

    A section is a header line, `[Result 1/2 tool=read_file id=call_1 ok
    chars=8]` (`error` for an error result; a name or id outside
    `[A-Za-z0-9_.:-]` is written as a JSON string), then exactly that many
    characters of verbatim result text. Sections are separated by one blank
    line. `names` maps call ids to tool names; a missing one is "".
    """
    total = len(results)
    sections = []
    for index, result in enumerate(results, start=1):
        status = "error" if result.is_error else "ok"
        name = names.get(result.tool_use_id, "")
        header = (
            f"[Result {index}/{total} tool={_field(name)} id={_field(result.tool_use_id)} "
            f"{status} chars={len(result.content)}]"
        )
        sections.append(f"{header}\n{result.content}")
    return "\n\n".join(sections)


def parse_results_body(body: str) -> list[ToolResult] | None:
    """Read a `render_results_body` body back into results, or None when it is not one.

    Strict: each header must be exactly the next in sequence, each section
    exactly as long as its header says, sections separated by exactly one
    blank line, nothing after the last. Result text is taken by length and
    never searched, so a header-looking line inside a result stays result
    text; anything else (a legacy body, a damaged one) is None and the caller
    keeps the body whole as text. An empty body is an empty round.
    """
    if not body:
        return []
    results: list[ToolResult] = []
    pos = 0
    total: int | None = None
    while True:
        end = body.find("\n", pos)
        if end < 0:
            return None
        match = _HEADER.fullmatch(body, pos, end)
        if match is None:
            return None
        index_s, total_s, name, call, status, length_s = match.groups()
        remaining = len(body) - end - 1
        # Counts come from text: compare by digits before converting, so a
        # hostile count costs nothing (and never trips int()'s digit limit).
        width = len(str(len(body)))
        if max(len(index_s), len(total_s), len(length_s)) > width:
            return None
        if int(length_s) > remaining:
            return None
        if total is None:
            total = int(total_s)
        if int(total_s) != total or int(index_s) != len(results) + 1:
            return None
        call_id_value = _unfield(call)
        if call_id_value is None or _unfield(name) is None:
            return None
        start = end + 1
        stop = start + int(length_s)
        results.append(ToolResult(call_id_value, body[start:stop], status == "error"))
        if len(results) == total:
            return results if stop == len(body) else None
        if body[stop : stop + 2] != "\n\n":
            return None
        pos = stop + 2
