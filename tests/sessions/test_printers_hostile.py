"""Hostile content reaching a person's terminal or browser: shown, never obeyed.

Every printer (the session readers, `sessions list`, the `rm` prompt, `run`
and `chat`'s display, the error line, the TUI) is driven with control
characters, escape sequences, lone surrogates, markup and raw HTML; none may
let a control sequence or active HTML out.
"""

from __future__ import annotations

import asyncio
import html.parser
import io
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console
from typer.testing import CliRunner

from carryall._commands import sessions as commands
from carryall._commands._display import Display
from carryall._commands._output import print_error
from carryall.agent import ToolCallFinished, ToolCallStarted
from carryall.blocks import Image, Message, Text, Thinking, ToolResult, ToolUse
from carryall.carrier import Marker, MarkerKind
from carryall.sessions import Store, render_html, render_json, render_markdown, render_text
from carryall.sessions._transcript import SessionMeta

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
TITLE = "\x1b]0;owned\x07"
LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
C1_CSI = "\x9b31m"
# Text that reads backwards from here on (Trojan Source): `txt.exe` shows as `exe.txt`.
RLO = "\u202e"
# Any control character but newline and tab, DEL, C1, a bidirectional-text
# control, or a lone surrogate.
CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)

_hostile_piece = st.sampled_from(
    [
        OSC52,
        TITLE,
        LINK,
        C1_CSI,
        RLO,
        "\u2066",
        "\u2069",
        "\u200f",
        "\u061c",
        "\x1b[2J",
        "\r",
        "\x00",
        "\ud800",
        "\udcff",
        "\n\n",
        "[/]",
        "[bold red]x[/]",
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "x](https://evil.example/phish) [y",
        "`",
        "```",
        "~~~",
        "\n```\n<svg onload=alert(1)>\n",
        "- a\n  ```\n<iframe src=x>",
        "\\`<b>`",
        "&lt;",
        "<!--",
        "[x](javascript:alert(1))",
        "](JaVaScRiPt\\:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "![i](data:text/html,x)",
        "\n[r]: vbscript:msgbox\n\n[r]",
        "javascript",
        ":",
        "](",
        "&#58;",
    ]
)
hostile = st.lists(st.one_of(_hostile_piece, st.text(max_size=8)), min_size=1, max_size=6).map(
    "".join
)

# The tags Markdown itself writes for what a text block may say; anything else
# (a script, an iframe, an svg) or any event attribute is active HTML that came through.
_MARKDOWN_TAGS = {
    "h1", "h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "strong", "em", "code",
    "pre", "blockquote", "hr", "br", "a", "img", "details", "summary",
}  # fmt: skip


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def _tags(page: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags


def _active(page: str, allowed: set[str]) -> list[str]:
    found = []
    for tag, attrs in _tags(page):
        if tag not in allowed:
            found.append(tag)
        found.extend(f"{tag}[{name}]" for name, _ in attrs if name.startswith("on"))
    return found


def _commonmark(markdown: str) -> str:
    """What a CommonMark renderer that allows raw HTML and follows every link makes of the export.

    markdown-it's own link check is turned off: many renderers have none.
    """
    renderer = MarkdownIt("commonmark", {"html": True})
    renderer.validateLink = lambda url: True
    return renderer.render(markdown)


_SCRIPT_SCHEME = re.compile(r"(javascript|vbscript|data):")


def _script_links(page: str) -> list[str]:
    """Link and image targets a browser would run or open as a page of their own.

    Read as a browser reads a URL: leading and trailing controls and spaces
    dropped, tabs and newlines anywhere removed, the scheme in any case.
    """
    found = []
    for tag, attrs in _tags(page):
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                url = re.sub("[\t\n\r]", "", value.strip("\x00- ")).lower()
                if _SCRIPT_SCHEME.match(url):
                    found.append(f"{tag}[{name}]={value}")
    return found


def _hostile_session(s: str) -> tuple[SessionMeta, list[Message]]:
    meta = SessionMeta(
        id="0123abcd",
        created=datetime(2026, 1, 2, tzinfo=UTC),
        backend=s,
        model=s,
        cwd=s,
        title=s,
        system=s,
    )
    messages = [
        Message.user(s, [Image.from_bytes("image/png", PNG, s)]),
        Message.assistant([Thinking(s), Text(s), ToolUse(s or "t", s, {s: s})]),
        Message.tool_results(
            [ToolResult(s or "t", s, attachments=(Marker(MarkerKind.DOCUMENT, s),))]
        ),
    ]
    return meta, messages


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile)
def test_no_reader_lets_a_control_sequence_or_active_html_out(s: str) -> None:
    meta, messages = _hostile_session(s)
    for page in (
        render_text(meta, messages),
        render_markdown(meta, messages),
        render_html(meta, messages),
        render_json(meta, messages),
    ):
        assert CONTROL.search(page) is None, page
        page.encode("utf-8")  # a lone surrogate could not be printed at all
    assert (
        _active(
            render_html(meta, messages),
            {"html", "head", "meta", "title", "style"}
            | {
                "body",
                "header",
                "h1",
                "dl",
                "dt",
                "dd",
                "pre",
                "main",
                "section",
                "h2",
                "div",
                "details",
                "summary",
                "code",
                "p",
                "figure",  # an image the session holds, shown inline under its caption
                "figcaption",
            }
            | _MARKDOWN_TAGS,
        )
        == []
    )  # fmt: skip  (the HTML export renders text blocks' Markdown)
    assert _active(_commonmark(render_markdown(meta, messages)), _MARKDOWN_TAGS) == []
    # The page's own pictures are the one data: target it may hold: an <img>
    # of an image type, which a browser shows and never runs.
    pictures = re.compile(r"img\[src\]=data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=]+")
    assert [
        link for link in _script_links(render_html(meta, messages)) if not pictures.fullmatch(link)
    ] == []
    assert _script_links(_commonmark(render_markdown(meta, messages))) == []


@settings(max_examples=100, deadline=None)
@given(hostile)
def test_no_terminal_printer_lets_a_control_sequence_out(s: str) -> None:
    from carryall._commands._output import snippet_text

    out, err = io.StringIO(), io.StringIO()
    display = Display(
        Console(file=out, force_terminal=True, width=200), Console(file=err, width=200)
    )
    call = ToolUse("c1", s or "t", {"path": s})
    display.on_text(s)
    display.on_event(ToolCallStarted(call))
    display.on_event(ToolCallFinished(call, ToolResult("c1", s), ()))
    display.finish()
    print_error(s, Console(file=err, force_terminal=True, width=200))
    snippet = Console(file=err, force_terminal=True, width=200)
    snippet.print(snippet_text(s, [(0, min(len(s), 3))], "bold"))
    for written in (out.getvalue(), err.getvalue()):
        # Styles are the console's own SGR sequences; nothing else may escape.
        bare = re.sub(r"\x1b\[[0-9;]*m", "", written)
        assert CONTROL.search(bare) is None, written


def test_printable_shows_escapes_and_keeps_newlines_and_tabs() -> None:
    from carryall._text import printable

    assert printable(f"a{OSC52}b\n\tc") == "a\\x1b]52;c;cHduZWQ=\\x07b\n\tc"
    assert printable(C1_CSI) == "\\x9b31m"
    assert printable("\ud800") == "\\ud800"
    assert printable("a\nb\tc", keep="") == "a\\nb\\tc"


@pytest.mark.parametrize(
    "control",
    [chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))],
)
def test_every_bidi_control_is_shown_by_the_one_door_for_terminals_pages_and_json(
    control: str,
) -> None:
    from carryall._text import json_printable, printable

    escape = f"\\u{ord(control):04x}"
    assert printable(f"report{control}fdp.exe") == f"report{escape}fdp.exe"
    assert json_printable(f'"report{control}fdp.exe"') == f'"report{escape}fdp.exe"'


# -- the readers -------------------------------------------------------------------


def _meta(**fields: str) -> SessionMeta:
    return SessionMeta(id="0123abcd", created=datetime(2026, 1, 2, tzinfo=UTC), **fields)


def test_osc52_in_message_text_is_shown_not_sent_by_show_text_and_markdown() -> None:
    messages = [Message.user(f"hi {OSC52}"), Message.assistant([Text(LINK + TITLE)])]
    for page in (render_text(_meta(), messages), render_markdown(_meta(), messages)):
        assert "\x1b" not in page and "\x07" not in page
        assert "\\x1b]52;c;" in page


def test_c1_csi_in_tool_name_and_output_is_shown() -> None:
    messages = [
        Message.assistant([ToolUse("c1", f"read{C1_CSI}", {"p": C1_CSI})]),
        Message.tool_results([ToolResult("c1", f"out{C1_CSI}")]),
    ]
    for page in (render_text(_meta(), messages), render_markdown(_meta(), messages)):
        assert "\x9b" not in page
        assert "\\x9b31m" in page
    assert "\x9b" not in render_json(_meta(), messages)


def test_markdown_blank_line_in_tool_name_cannot_break_out_of_its_code_span() -> None:
    payload = "x\n\n<img src=x onerror=alert(1)>"
    messages = [
        Message.assistant([ToolUse(payload, payload, {})]),
        Message.tool_results([ToolResult(payload, "ok")]),
    ]
    meta = _meta(cwd=payload, backend=payload, model=payload)
    page = _commonmark(render_markdown(meta, messages))
    assert "<img" not in page
    assert _active(page, _MARKDOWN_TAGS) == []


def test_markdown_raw_html_in_text_is_escaped_but_code_is_kept() -> None:
    text = "<script>alert(1)</script>\n\n`a<b`\n\n```\nif a<b:\n```\n\n<!-- x -->"
    page = _commonmark(render_markdown(_meta(), [Message.assistant([Text(text)])]))
    assert "<script>" not in page and "<!--" not in page
    assert "&lt;script&gt;" in page
    assert "<code>a&lt;b</code>" in page  # the code span, shown as written
    assert "if a&lt;b:" in page  # the fenced block, shown as written


def test_markdown_fence_inside_a_list_item_cannot_hide_html() -> None:
    text = "- a\n  ```\n<iframe src=x></iframe>\n```"
    page = _commonmark(render_markdown(_meta(), [Message.assistant([Text(text)])]))
    assert "<iframe" not in page


def test_markdown_unclosed_fence_in_text_does_not_swallow_the_next_block() -> None:
    messages = [Message.assistant([Text("```\nopen"), Text("<b>bold</b>\n```\n<svg onload=x>")])]
    page = _commonmark(render_markdown(_meta(), messages))
    assert "<svg" not in page and "<b>" not in page


def test_markdown_image_source_cannot_make_a_link() -> None:
    name = "x](https://evil.example/phish) [y"
    image = Image.from_bytes("image/png", PNG, name)
    page = _commonmark(render_markdown(_meta(), [Message.user("look", [image])]))
    assert "<a" not in page and "evil.example" in page


def test_markdown_names_non_image_attachments() -> None:
    marker = Marker(MarkerKind.DOCUMENT, "report.pdf")
    messages = [
        Message.assistant([ToolUse("c1", "fetch", {})]),
        Message.tool_results([ToolResult("c1", "here", attachments=(marker,))]),
    ]
    page = render_markdown(_meta(), messages)
    assert "report.pdf" in page and "attachment" in page


@pytest.mark.parametrize(
    "text",
    [
        "[click](javascript:alert(1))",
        "[click](JaVaScRiPt\\:alert(1))",
        "[click](&#106;avascript&#58;alert(1))",
        "[click](vbscript:msgbox(1))",
        "[click](data:text/html;base64,PHNjcmlwdD4=)",
        "![pic](data:image/svg+xml;base64,PHN2Zz4=)",
        "[click][r]\n\n[r]: javascript:alert(1)",
    ],
)
def test_script_link_in_text_is_not_a_link_in_markdown_or_html(text: str) -> None:
    messages = [Message.assistant([Text(f"see {text}\n\nnow")])]
    markdown = render_markdown(_meta(), messages)
    for page in (_commonmark(markdown), render_html(_meta(), messages)):
        assert _script_links(page) == [], page
    assert "see " in markdown and "now" in markdown  # the text itself is kept


def test_prose_with_scheme_words_and_references_reads_the_same() -> None:
    text = "JavaScript: fast. The data: 3 rows & an &copy; sign."
    page = _commonmark(render_markdown(_meta(), [Message.assistant([Text(text)])]))
    shown = re.sub("<[^>]+>", "", page).replace("\u2060", "")
    assert "JavaScript: fast. The data: 3 rows &amp; an &amp;copy; sign." in shown


def test_markdown_title_with_html_is_text() -> None:
    page = _commonmark(render_markdown(_meta(title="<img src=x onerror=alert(1)>"), []))
    assert "<img" not in page


# -- the commands ------------------------------------------------------------------


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    commands.register(app)
    return app


def _hostile_title_session(title: str) -> str:
    session = Store().create(backend="fake", model=f"m{C1_CSI}", title=title)
    session.record([], [Message.user("hello"), Message.assistant([Text(f"a {OSC52}")])])
    return session.id


def test_sessions_list_shows_escapes_in_title_and_model(home: Path, app: typer.Typer) -> None:
    _hostile_title_session(f"t {TITLE} {RLO}txt.exe")
    for args in (["sessions", "list"], ["sessions", "list", "--json"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0
        assert CONTROL.search(result.stdout) is None, result.stdout


def test_sessions_show_every_format_prints_no_control(home: Path, app: typer.Typer) -> None:
    session_id = _hostile_title_session(f"t {TITLE} {RLO}txt.exe")
    for fmt in ("text", "markdown", "json", "html"):
        result = CliRunner().invoke(app, ["sessions", "show", session_id, "-f", fmt])
        assert result.exit_code == 0
        assert CONTROL.search(result.stdout) is None, (fmt, result.stdout)


def test_rm_prompt_shows_escapes_in_title(home: Path, app: typer.Typer) -> None:
    session_id = _hostile_title_session(f"t {OSC52}")
    result = CliRunner().invoke(app, ["sessions", "rm", session_id], input="n\n")
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout + result.stderr
    assert "\\x1b]52" in result.stdout + result.stderr


def test_recall_snippet_shows_escapes(home: Path, app: typer.Typer) -> None:
    _hostile_title_session("t")
    result = CliRunner().invoke(app, ["recall", "a"])
    assert result.exit_code == 0
    assert "\x1b" not in result.stdout and "\\x1b]52" in result.stdout


# -- the TUI -----------------------------------------------------------------------


def test_tui_markup_in_a_query_with_no_hits_neither_crashes_nor_styles(tmp_path: Path) -> None:
    from textual.widgets import Input

    from carryall.tui import SessionsApp

    store = Store(tmp_path / "sessions")
    store.create(backend="fake", model="m").record([], [Message.user("harbour")])

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await pilot.press("slash")
            for query in ("[/]", "[bold red]x[/]"):
                app.query_one("#search", Input).value = query
                await pilot.press("enter")
                await pilot.pause()
            notes = [n.message for n in app._notifications]
            assert notes == ["no matches for '[/]'", "no matches for '[bold red]x[/]'"]
            assert all(not n.markup for n in app._notifications)

    asyncio.run(drive())


def test_tui_event_named_close_tag_opens_and_shows_escapes(tmp_path: Path) -> None:
    from carryall.tui import MessageView, SessionsApp

    store = Store(tmp_path / "sessions")
    session = store.create(backend="fake", model="m", title=f"[/]{TITLE}")
    session.record(
        [],
        [
            Message.user("go"),
            Message.assistant([ToolUse("c1", "[/]", {"x": OSC52})]),
            Message.tool_results([ToolResult("c1", f"[/] {LINK}")]),
        ],
    )

    async def drive() -> None:
        app = SessionsApp(store)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            texts = "\n".join(str(v.render()) for v in app.query(MessageView))
            assert "[/]" in texts
            assert CONTROL.search(texts) is None
            assert CONTROL.search(app.sub_title) is None

    asyncio.run(drive())
