"""Sessions as a person reads them: text, Markdown, JSON and self-contained HTML.

Every reader here says `image_placeholder` where an image was; none prints
base64 but the HTML page (self-contained: it shows the pictures) and JSON
when the caller asks for images embedded.
Content is hostile until shown: every reader's output passes
`carryall._text.printable` (JSON: `json_printable`), so an escape sequence a
model or tool wrote is shown, never obeyed, and the Markdown export escapes or
fences every field, so it is safe to render with raw HTML allowed.
Pure functions over a session's meta and messages: the CLI and the TUI
decide where the output goes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from carryall._text import json_printable, printable
from carryall.blocks import (
    Block,
    Document,
    Downgrade,
    Image,
    Message,
    Opaque,
    RedactedThinking,
    ServerToolCall,
    ServerToolResult,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    block_to_dict,
    footnoted,
)
from carryall.carrier import Marker, marker_line
from carryall.errors import CarrierError
from carryall.sessions._transcript import SessionMeta, SystemChange, format_time, parse_time

if TYPE_CHECKING:
    from carryall.sessions.protocol import AnySession

if TYPE_CHECKING:
    from carryall.usage import RequestUsage

__all__ = [
    "EXPORT_KIND",
    "REDACTED_THINKING_LINE",
    "USAGE_HEADING",
    "Format",
    "attachment_label",
    "block_line",
    "downgrade_line",
    "export_dict",
    "render",
    "render_html",
    "render_json",
    "render_markdown",
    "render_message_text",
    "render_session",
    "render_text",
    "searchable_text",
    "system_change_line",
    "usage_dict",
    "usage_lines",
]

Format = Literal["text", "markdown", "json", "html"]

EXPORT_KIND = "session-export"
"""The `carryall` field of the JSON export, which `carryall sessions import` recognises."""


def searchable_text(message: Message) -> str:
    """Everything in a message a person might search for, as one text.

    Text, thinking, tool calls (name and input), tool results, and each
    image's placeholder: the recall index is built from this, so a search
    finds a tool call by its arguments and an image by its file name.
    """
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, Text | Thinking):
            parts.append(block.text)
        elif isinstance(block, ToolUse):
            parts.append(f"{block.name} {_json(block.input)}")
        elif isinstance(block, ToolResult):
            parts.append(block.content)
            parts.extend(attachment_label(marker) for marker in block.attachments)
        else:
            parts.append(block_line(block))
    return "\n".join(parts)


REDACTED_THINKING_LINE = "[redacted thinking]"
"""What a reader shows for encrypted reasoning: that it was there, nothing more."""


def block_line(block: RedactedThinking | Image | Document | Opaque) -> str:
    """The one line every reader shows for a block that is not text to a person.

    An image's or document's placeholder, the redacted-thinking line, or a
    provider-native block's own text line (its kind when it has none).
    """
    if isinstance(block, Image | Document):
        return block.placeholder()
    if isinstance(block, RedactedThinking):
        return REDACTED_THINKING_LINE
    return block.text or f"[{block.kind}]"


def render(
    fmt: Format,
    meta: SessionMeta,
    messages: Sequence[Message],
    times: Sequence[datetime] | None = None,
    *,
    embed_images: bool = False,
    downgrades: Sequence[Downgrade] = (),
    usage: Sequence[RequestUsage] = (),
    system_changes: Sequence[SystemChange] = (),
) -> str:
    """A session in one of the reader formats (`embed_images` applies to JSON).

    `downgrades` (what the session's requests could not send as held) close
    every form, one line each in the words of `downgrade_line`, so a loss is
    never silent whichever reader is used; then `usage`, each request's
    figures and cost in the words of `usage_lines` and their total. Every
    form names each image by its placeholder; HTML, being self-contained,
    also shows the picture. `system_changes` (the system prompt changed
    mid-session, chat's `/system`) stand in every form before the message
    they apply from, under the words of `system_change_line`.
    """
    if fmt == "text":
        return (
            render_text(meta, messages, times, system_changes=system_changes)
            + _downgrade_section(downgrades, "")
            + _usage_section(usage, "  ", str)
        )
    if fmt == "markdown":
        return (
            render_markdown(meta, messages, times, system_changes=system_changes)
            + _downgrade_section(downgrades, "- ")
            + _usage_section(usage, "- ", _md_inline)
        )
    if fmt == "json":
        return render_json(
            meta,
            messages,
            times,
            embed_images=embed_images,
            downgrades=downgrades,
            usage=usage,
            system_changes=system_changes,
        )
    if fmt == "html":
        return render_html(
            meta,
            messages,
            times,
            downgrades=downgrades,
            usage=usage,
            system_changes=system_changes,
        )
    raise ValueError(f"unknown session format {fmt!r}")


def render_session(
    fmt: Format, session: AnySession, *, embed_images: bool = False, usage: bool = True
) -> str:
    """A session as `render` gives it, with everything it recorded beside its messages.

    The one reading every reader makes (`sessions show`, `export`, the MCP
    resources and prompts): meta, messages, times, downgrades, system
    prompt changes and each request's usage, so no reader shows a session
    with a part left out. `usage=False` leaves the bill out where a model,
    not a person, reads the conversation (the MCP prompts).
    """
    return render(
        fmt,
        session.meta,
        session.messages(),
        session.times(),
        embed_images=embed_images,
        downgrades=session.downgrades(),
        usage=session.usage() if usage else (),
        system_changes=session.system_changes(),
    )


def system_change_line(change: SystemChange) -> str:
    """A system prompt change as a reader heads it: what changed, from which message, when."""
    what = "system prompt cleared" if change.system is None else "system prompt changed"
    return f"{what} from message #{change.at} on · {_local(parse_time(change.time))}"


def _changes_at(changes: Sequence[SystemChange], index: int, last: bool) -> list[SystemChange]:
    """The changes that stand before message `index` (`last`: after the final message too)."""
    return [c for c in changes if c.at == index or (last and c.at > index)]


def downgrade_line(downgrade: Downgrade) -> str:
    """One downgrade as a reader shows it: where, what, why."""
    # A request-wide downgrade (an option a wire has no field for) is at no message.
    where = "request" if downgrade.index < 0 else f"message {downgrade.index}"
    if downgrade.block is not None:
        where += f", block {downgrade.block}"
    return f"{where}: {downgrade.kind}: {downgrade.reason}"


DOWNGRADES_HEADING = "Not sent as held (downgrades):"
"""The heading every reader puts over a session's downgrades."""


def _downgrade_section(downgrades: Sequence[Downgrade], bullet: str) -> str:
    if not downgrades:
        return ""
    lines = [f"{bullet}{downgrade_line(d)}" for d in downgrades]
    return "\n".join(["", DOWNGRADES_HEADING, *lines]) + "\n"


USAGE_HEADING = "Usage (each request, priced when it was sent):"
"""The heading every reader puts over a session's usage."""


def usage_lines(usage: Sequence[RequestUsage]) -> tuple[list[str], str]:
    """Each recorded request's line (`carryall.usage.request_line`) and the total's line.

    Prices are looked up here, when a reader shows them, so a reader of a
    session without usage never loads the price data.
    """
    from carryall.usage import records_total, request_line

    totals, costs = records_total(usage)
    lines = [request_line(record, cost) for record, cost in zip(usage, costs, strict=True)]
    return lines, "Total: " + totals.summary()


def usage_dict(usage: Sequence[RequestUsage]) -> dict[str, Any]:
    """A session's usage as JSON values: each request as recorded with its cost, and the total."""
    import msgspec

    from carryall.usage import format_cost, records_total

    totals, costs = records_total(usage)
    requests = []
    for record, cost in zip(usage, costs, strict=True):
        item = msgspec.to_builtins(record)
        item["time"] = format_time(record.time)
        item["cost_usd"] = None if cost is None or cost.free else str(cost.usd)
        item["cost"] = format_cost(cost)
        requests.append(item)
    return {"requests": requests, "total": totals.as_dict()}


def _usage_section(usage: Sequence[RequestUsage], bullet: str, shown: Callable[[str], str]) -> str:
    """The usage lines, each made safe for the form (`shown`): a model name comes off the wire."""
    if not usage:
        return ""
    lines, total = usage_lines(usage)
    section = ["", USAGE_HEADING, *(bullet + shown(line) for line in lines), "", shown(total)]
    return printable("\n".join(section) + "\n")


def attachment_label(marker: Marker) -> str:
    """How a reader names a non-image attachment a tool result declared: its marker line."""
    try:
        return marker_line(marker)
    except CarrierError:
        # A target that cannot stand on one marker line is still named, quoted.
        return f"[{marker.kind.name}:{marker.target!r}]"


# -- text ----------------------------------------------------------------------


def render_text(
    meta: SessionMeta,
    messages: Sequence[Message],
    times: Sequence[datetime] | None = None,
    *,
    system_changes: Sequence[SystemChange] = (),
) -> str:
    """A session as plain text, one section per message, each system prompt change in place."""
    out = [f"Session {meta.id}"]
    for label, value in _meta_rows(meta):
        out.append(f"  {label + ':':<9} {value}")
    if meta.system:
        out.append("  system:")
        out.extend(_indent(meta.system, "    "))
    for index in range(len(messages) + 1):
        for change in _changes_at(system_changes, index, index == len(messages)):
            out += ["", f"── {system_change_line(change)} ──"]
            out.extend(_indent(change.system, "  ") if change.system is not None else [])
        if index < len(messages):
            time = times[index] if times is not None and index < len(times) else None
            out.append("")
            out.append(render_message_text(index, messages[index], time))
    return printable("\n".join(out) + "\n")


def render_message_text(index: int, message: Message, time: datetime | None = None) -> str:
    """One message as plain text under a heading naming its index, role and time."""
    lines = [_heading(index, message, [time] if time is not None else None, at=0)]
    for block in footnoted(message.content):
        lines.extend(_text_block(block))
    return printable("\n".join(lines))


def _text_block(block: Block) -> list[str]:
    if isinstance(block, Text):
        return block.text.split("\n")
    if isinstance(block, Thinking):
        return ["(thinking)", *_indent(block.text, "  | ")]
    if isinstance(block, ToolUse):
        return [f"-> tool call {block.name} ({block.id}): {_json(block.input)}"]
    if isinstance(block, ToolResult):
        status = " (error)" if block.is_error else ""
        return [
            f"<- tool result for {block.tool_use_id}{status}:",
            *_indent(block.content, "  "),
            *(f"  attachment: {attachment_label(m)}" for m in block.attachments),
        ]
    return [block_line(block)]


# -- markdown ------------------------------------------------------------------


def render_markdown(
    meta: SessionMeta,
    messages: Sequence[Message],
    times: Sequence[datetime] | None = None,
    *,
    system_changes: Sequence[SystemChange] = (),
) -> str:
    """A session as Markdown: a heading per message, tool traffic in fenced blocks, each
    system prompt change in place."""
    out = [f"# {_md_inline(meta.title or 'Session ' + meta.id)}", ""]
    out.extend(f"- **{label}:** {_md_code(value)}" for label, value in _meta_rows(meta))
    if meta.system:
        out += ["", "**System prompt:**", "", *_fence(meta.system)]
    for index in range(len(messages) + 1):
        for change in _changes_at(system_changes, index, index == len(messages)):
            out += ["", f"## {_md_inline(system_change_line(change))}"]
            out += ["", *_fence(change.system)] if change.system is not None else []
        if index < len(messages):
            message = messages[index]
            out += ["", f"## {_heading(index, message, times, rule=False)}"]
            for block in footnoted(message.content):
                out += ["", *_markdown_block(block)]
    return printable("\n".join(out) + "\n")


def _markdown_block(block: Block) -> list[str]:
    if isinstance(block, Text):
        return [_md_text(block.text)]
    if isinstance(block, Thinking):
        return ["<details><summary>Thinking</summary>", "", *_fence(block.text), "", "</details>"]
    if isinstance(block, ToolUse):
        header = f"**Tool call** {_md_code(block.name)} ({_md_code(block.id)}):"
        return [header, "", *_fence(json.dumps(block.input, indent=2, ensure_ascii=False), "json")]
    if isinstance(block, ToolResult):
        status = " (error)" if block.is_error else ""
        return [
            f"**Tool result** for {_md_code(block.tool_use_id)}{status}:",
            "",
            *_fence(block.content),
            *(f"\nattachment: {_md_code(attachment_label(m))}" for m in block.attachments),
        ]
    if isinstance(block, ServerToolCall | ServerToolResult):
        # Run by the provider: a query, code and its output, results with their URLs.
        return _fence(block_line(block))
    # Code: a source name can hold brackets and parentheses that would make a link.
    return [_md_code(block_line(block))]


def _fence(text: str, lang: str = "") -> list[str]:
    """A fenced code block whose fence is longer than any backtick run inside."""
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return [fence + lang, *text.split("\n"), fence]


def _md_code(text: str) -> str:
    """Inline code that shows `text` literally, whatever backticks or line breaks it holds.

    A code span cannot hold a blank line (the paragraph would end there and
    the rest be read as Markdown), so line breaks are shown as escapes.
    """
    text = printable(text, keep="")
    ticks = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _longest_backtick_run(text: str) -> int:
    runs = re.findall(r"`+", text)
    return max(map(len, runs), default=0)


# A code span on one line, not opened by an escaped backtick and holding no
# `|` (a table would cut it there): only such a span is sure to be code to any
# renderer, so only in one is a `<` left as written.
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)[^|\n]*?(?<!`)\1(?!`)")
_FENCE = re.compile(r"(`{3,}|~{3,})")
# A fence run after indentation or a list or quote marker: inside a container.
_NESTED_FENCE = re.compile(r"([ \t>*+\-0-9.)]+)(?=`{3}|~{3})")


def _md_text(text: str) -> str:
    """A text block as the Markdown it was written in, with raw HTML shown as text.

    Only `<` opens raw HTML (a tag, a comment, an HTML block), so each one
    outside code is written `&lt;`, and no link may run script (`_inert`).
    Code shows it literally and is left as written, but only code no
    renderer could read otherwise: a code span on one line, and a fence at
    the margin, which no list or quote can hold. A fence anywhere else is
    escaped (a container may end it where this reading would not), and a
    fence left open is closed, so nothing after the block is read as code,
    nor a later fence the other way round.
    """
    if _PLAIN_MD.search(text) is None:
        return text
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            out.append(line)
            body = line.lstrip(" ")
            close = _FENCE.match(body)
            if (
                close
                and len(line) - len(body) <= 3
                and close.group(1)[0] == fence[0]
                and len(close.group(1)) >= len(fence)
                and not body[close.end() :].strip()
            ):
                fence = None
            continue
        opener = _FENCE.match(line)
        if opener and not (opener.group(1)[0] == "`" and "`" in line[opener.end() :]):
            fence = opener.group(1)
            out.append(line)
            continue
        nested = _NESTED_FENCE.match(line)
        if nested:
            line = line[: nested.end()] + "\\" + line[nested.end() :]
        out.append(_escape_outside_spans(line))
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


def _escape_outside_spans(line: str) -> str:
    if _PLAIN_MD.search(line) is None:
        return line
    pieces: list[str] = []
    at = 0
    for span in _CODE_SPAN.finditer(line):
        pieces.append(_inert(line[at : span.start()]))
        pieces.append(span.group())
        at = span.end()
    pieces.append(_inert(line[at:]))
    return "".join(pieces)


# What may need rewriting outside code: raw HTML, a fence, a character
# reference, a URL scheme's colon.
_PLAIN_MD = re.compile(r"[<`~&:]")
# A character reference as CommonMark decodes it, in text and link targets alike.
_REFERENCE = re.compile(r"&(?=#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")
# A scheme that makes a link run script or open a page of its own instead of
# going somewhere, before its colon (a renderer reads `\:` as `:` too).
_ACTIVE_SCHEME = re.compile(r"(?i)\b(javascript|vbscript|data)(?=\\?:)")
_WORD_JOINER = "\u2060"


def _inert(text: str) -> str:
    """Text outside code with nothing a renderer would run: no raw HTML, no script link.

    `<` opens raw HTML, so it is written `&lt;`. A `javascript:`,
    `vbscript:` or `data:` target would make `[x](javascript:...)` a link
    that runs when clicked in any renderer that does not check links itself,
    so a word joiner (invisible, and no scheme character) goes before its
    colon: the text reads the same and the target is a harmless relative
    one. A character reference is written with `&amp;` first, so none can
    spell such a scheme (`&#106;avascript:`) once decoded; it shows as written.
    """
    text = _REFERENCE.sub("&amp;", text).replace("<", "&lt;")
    return _ACTIVE_SCHEME.sub(lambda m: m.group(1) + _WORD_JOINER, text)


def _md_inline(text: str) -> str:
    """One line of Markdown that shows `text` literally (no accidental links or emphasis)."""
    return "".join("\\" + ch if ch in "\\`*_[]<>#|" else ch for ch in " ".join(text.split()))


# -- JSON ----------------------------------------------------------------------


def export_dict(
    meta: SessionMeta,
    messages: Sequence[Message],
    times: Sequence[datetime] | None = None,
    *,
    embed_images: bool = False,
    downgrades: Sequence[Downgrade] = (),
    usage: Sequence[RequestUsage] = (),
    system_changes: Sequence[SystemChange] = (),
) -> dict[str, Any]:
    """A session's portable JSON form, which `carryall sessions import` reads back.

    Blocks use carryall's JSON form. An image keeps its media type, source,
    content hash and placeholder; its base64 `data` is there only with
    `embed_images`, so the default export is readable and small. The
    session's `downgrades` follow the messages, each with its reader line,
    and so do its `system_changes` (`session.system` is the prompt it began
    with); then its `usage` (`usage_dict`) when it recorded any.
    """
    session: dict[str, Any] = {
        "id": meta.id,
        "created": format_time(meta.created),
        "backend": meta.backend,
        "model": meta.model,
        "cwd": meta.cwd,
        "title": meta.title,
        "turns": len(messages),
    }
    if meta.system is not None:
        session["system"] = meta.system
    if meta.origin is not None:
        session["origin"] = meta.origin
    if meta.output_schema is not None:
        session["output_schema"] = meta.output_schema
    out_messages = []
    for index, message in enumerate(messages):
        item: dict[str, Any] = {
            "role": message.role,
            "content": [_json_block(b, embed_images) for b in message.content],
        }
        if times is not None and index < len(times):
            item["time"] = format_time(times[index])
        out_messages.append(item)
    data: dict[str, Any] = {
        "carryall": EXPORT_KIND,
        "format": 1,
        "session": session,
        "messages": out_messages,
    }
    if downgrades:
        data["downgrades"] = [
            {"index": d.index, "kind": d.kind, "reason": d.reason, "line": downgrade_line(d)}
            for d in downgrades
        ]
    if usage:
        data["usage"] = usage_dict(usage)
    if system_changes:
        data["system_changes"] = [
            {"at": c.at, "time": c.time, "system": c.system, "line": system_change_line(c)}
            for c in system_changes
        ]
    return data


def render_json(
    meta: SessionMeta,
    messages: Sequence[Message],
    times: Sequence[datetime] | None = None,
    *,
    embed_images: bool = False,
    downgrades: Sequence[Downgrade] = (),
    usage: Sequence[RequestUsage] = (),
    system_changes: Sequence[SystemChange] = (),
) -> str:
    """`export_dict` as indented JSON text."""
    data = export_dict(
        meta,
        messages,
        times,
        embed_images=embed_images,
        downgrades=downgrades,
        usage=usage,
        system_changes=system_changes,
    )
    return json_printable(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


def _json_block(block: Block, embed_images: bool) -> dict[str, Any]:
    if not isinstance(block, Image):
        return block_to_dict(block)
    item: dict[str, Any] = {"type": "image", "media_type": block.media_type}
    if block.source is not None:
        item["source"] = block.source
    if block.data:
        import hashlib  # OpenSSL's library loads with the JSON export only

        item["sha256"] = hashlib.sha256(block.to_bytes()).hexdigest()
    item["placeholder"] = block.placeholder()
    if embed_images:
        item["data"] = block.data
    return item


# -- HTML ----------------------------------------------------------------------

_CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#222}
header{border-bottom:1px solid #ccc;margin-bottom:1rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1rem 1rem}dt{color:#666}dd{margin:0}
section{border-left:4px solid #ccc;padding:.2rem .8rem;margin:1rem 0}
section.user{border-color:#4a7}section.assistant{border-color:#47a}section.system{border-color:#a74}
h2{font-size:.9rem;color:#555;margin:.2rem 0}
.text>:first-child{margin-top:0}.text>:last-child{margin-bottom:0}
pre{background:#f5f5f5;padding:.5rem;overflow-x:auto;white-space:pre-wrap}
.error pre{background:#fbeaea}
details{color:#555}
figure{margin:.5rem 0}img{max-width:100%}figcaption,.image{color:#666;font-style:italic}
""".strip()


def render_html(
    meta: SessionMeta,
    messages: Sequence[Message],
    times: Sequence[datetime] | None = None,
    *,
    embed_images: bool = True,
    downgrades: Sequence[Downgrade] = (),
    usage: Sequence[RequestUsage] = (),
    system_changes: Sequence[SystemChange] = (),
) -> str:
    """A session as one self-contained HTML page (inline style, no scripts, no fetches).

    An image whose bytes the session holds shows inline as a `data:` URI
    under its placeholder caption (only its placeholder with `embed_images`
    off), so the page never reaches outside itself. The `downgrades` close
    the page as they close every reader's form; each system prompt change
    stands before the message it applies from.
    """
    import html  # loads with the HTML export only: the recall index renders text

    e = html.escape
    title = meta.title or f"Session {meta.id}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # A second wall behind the escaping: the page may run no script at all.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src data:; style-src 'unsafe-inline'\">",
        f"<title>{e(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{e(title)}</h1><dl>",
    ]
    out.extend(f"<dt>{e(label)}</dt><dd>{e(value)}</dd>" for label, value in _meta_rows(meta))
    if meta.system:
        out.append(f"<dt>system</dt><dd><pre>{e(meta.system)}</pre></dd>")
    out.append("</dl></header><main>")
    for index in range(len(messages) + 1):
        for change in _changes_at(system_changes, index, index == len(messages)):
            out.append(f'<section class="system"><h2>{e(system_change_line(change))}</h2>')
            if change.system is not None:
                out.append(f"<pre>{e(change.system)}</pre>")
            out.append("</section>")
        if index < len(messages):
            message = messages[index]
            out.append(f'<section class="{message.role}" id="m{index}">')
            out.append(f"<h2>{e(_heading(index, message, times, rule=False))}</h2>")
            out.extend(_html_block(block, embed_images) for block in footnoted(message.content))
            out.append("</section>")
    if downgrades:
        out.append(f'<section class="downgrades"><h2>{e(DOWNGRADES_HEADING)}</h2><ul>')
        out.extend(f"<li>{e(downgrade_line(d))}</li>" for d in downgrades)
        out.append("</ul></section>")
    if usage:
        lines, total = usage_lines(usage)
        out.append(f'<section class="usage"><h2>{e(USAGE_HEADING)}</h2><ul>')
        out.extend(f"<li>{e(line)}</li>" for line in lines)
        out.append(f"</ul><p>{e(total)}</p></section>")
    out.append("</main></body></html>")
    return printable("\n".join(out) + "\n")


def _markdown(text: str) -> str:
    """A text block's Markdown as HTML, with any HTML in the text escaped rather than kept.

    CommonMark through markdown-it-py (already installed with rich) with raw
    HTML off, so `<script>` in a message is shown as text, and a link or
    image whose target would run script or open a page of its own
    (`_followable`) is left as text.
    """
    from markdown_it import MarkdownIt

    global _renderer
    if _renderer is None:
        _renderer = MarkdownIt("commonmark", {"html": False}).enable("table")
        _renderer.validateLink = _followable
    rendered: str = _renderer.render(text)
    return rendered


_renderer: Any = None
# Checked on the target as markdown-it decoded and normalised it.
_UNFOLLOWABLE = re.compile(r"(?i)\s*(javascript|vbscript|data|file):")


def _followable(url: str) -> bool:
    """markdown-it's own link check, stricter: no `data:` target at all, not even an image."""
    return _UNFOLLOWABLE.match(url) is None


def _html_block(block: Block, embed_images: bool) -> str:
    import html

    e = html.escape
    if isinstance(block, Text):
        return f'<div class="text">{_markdown(block.text)}</div>'
    if isinstance(block, Thinking):
        return f"<details><summary>thinking</summary><pre>{e(block.text)}</pre></details>"
    if isinstance(block, ToolUse):
        body = json.dumps(block.input, indent=2, ensure_ascii=False)
        return (
            f'<div class="tool-call">tool call <code>{e(block.name)}</code> '
            f"(<code>{e(block.id)}</code>)<pre>{e(body)}</pre></div>"
        )
    if isinstance(block, ToolResult):
        cls = "tool-result error" if block.is_error else "tool-result"
        status = " (error)" if block.is_error else ""
        attached = "".join(
            f'<p class="attachment">attachment: <code>{e(attachment_label(m))}</code></p>'
            for m in block.attachments
        )
        return (
            f'<div class="{cls}">tool result for <code>{e(block.tool_use_id)}</code>{status}'
            f"<pre>{e(block.content)}</pre>{attached}</div>"
        )
    label = e(block_line(block))
    if isinstance(block, ServerToolCall | ServerToolResult):
        return f'<pre class="server-tool">{label}</pre>'
    if embed_images and isinstance(block, Image) and block.data:
        return (
            f'<figure><img src="{e(block.data_uri())}" alt="{label}">'
            f"<figcaption>{label}</figcaption></figure>"
        )
    return f'<p class="image">{label}</p>'


# -- shared --------------------------------------------------------------------


def _meta_rows(meta: SessionMeta) -> list[tuple[str, str]]:
    rows = [("title", meta.title or "(untitled)"), ("created", _local(meta.created))]
    backend = " / ".join(p for p in (meta.backend, meta.model) if p)
    if backend:
        rows.append(("backend", backend))
    if meta.cwd:
        rows.append(("cwd", meta.cwd))
    if meta.origin:
        rows.append(("imported", meta.origin))
    request = (meta.options or {}).get("request")
    if isinstance(request, dict) and request:
        # As `-o` takes them, so a person can give the same again.
        from carryall.request_options import as_pairs  # loads the codecs' option names

        rows.append(("options", " ".join(as_pairs(request))))
    hosted = (meta.options or {}).get("hosted")
    if isinstance(hosted, list) and hosted:
        # As `--hosted` takes them, so a person can give the same again.
        rows.append(("hosted", " ".join(str(h) for h in hosted)))
    if meta.output_schema is not None:
        rows.append(("schema", _schema_line(meta.output_schema)))
    return rows


def _schema_line(stored: dict[str, Any]) -> str:
    """A recorded output schema in one line: its name, then the schema as compact JSON."""
    name = stored.get("name", "answer")
    strict = "" if stored.get("strict", True) else " (not strict)"
    schema = json.dumps(stored.get("schema"), ensure_ascii=False, separators=(",", ":"))
    return f"{name}{strict} {schema}"


def _heading(
    index: int,
    message: Message,
    times: Sequence[datetime] | None,
    *,
    rule: bool = True,
    at: int | None = None,
) -> str:
    role: str = message.role
    if role == "user" and not message.is_plain_user_text():
        role = "user (tool results)"
    parts = [f"#{index}", role]
    slot = index if at is None else at
    if times is not None and slot < len(times):
        parts.append(_local(times[slot]))
    label = " · ".join(parts)
    return f"── {label} ──" if rule else label


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _indent(text: str, prefix: str) -> list[str]:
    return [prefix + line for line in text.split("\n")]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
