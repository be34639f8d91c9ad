"""Every reader shows a session's downgrades and images the same way: text, Markdown, HTML, JSON."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from carryall.blocks import Downgrade, Image, Message, Text
from carryall.sessions import SessionMeta, Store
from carryall.sessions.render import (
    DOWNGRADES_HEADING,
    downgrade_line,
    render,
    render_session,
    system_change_line,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
META = SessionMeta(id="20261205-000000-abcdef", created=datetime(2026, 12, 5, tzinfo=UTC))
SHOT = Image.from_bytes("image/png", PNG, source="shot.png")
MESSAGES = [Message.user("look", [SHOT]), Message.assistant([Text("a red dot")])]
DOWNGRADES = [Downgrade(0, "image", "the model cannot see: sent as its placeholder line")]


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_every_reader_shows_the_downgrades_with_the_same_line(fmt: str) -> None:
    page = render(fmt, META, MESSAGES, downgrades=DOWNGRADES)  # type: ignore[arg-type]
    line = downgrade_line(DOWNGRADES[0])
    if fmt == "json":
        [shown] = json.loads(page)["downgrades"]
        assert shown["line"] == line and shown["index"] == 0
    else:
        assert DOWNGRADES_HEADING in page and line in page


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_every_reader_names_an_image_by_its_placeholder(fmt: str) -> None:
    page = render(fmt, META, MESSAGES)  # type: ignore[arg-type]
    placeholder = SHOT.placeholder()
    assert (json.dumps(placeholder)[1:-1] if fmt == "json" else placeholder) in page


def test_the_html_page_shows_the_picture_itself_by_default() -> None:
    page = render("html", META, MESSAGES)
    assert f'<img src="{SHOT.data_uri()}"' in page


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_every_reading_of_a_session_shows_its_downgrades_and_system_changes(
    fmt: str, tmp_path: Path
) -> None:
    # `render_session` is what `sessions show`, `export` and the MCP resources
    # read a session with: nothing recorded beside the messages is left out.
    session = Store(tmp_path / "s").create(system="Be brief.")
    session.record([], MESSAGES[:1])
    session.change_system("Answer in French.")
    session.record(MESSAGES[:1], MESSAGES, DOWNGRADES)
    [change] = session.system_changes()
    page = render_session(fmt, session)  # type: ignore[arg-type]
    if fmt == "json":
        data = json.loads(page)
        assert data["downgrades"][0]["line"] == downgrade_line(DOWNGRADES[0])
        assert data["system_changes"][0]["line"] == system_change_line(change)
        assert data["session"]["system"] == "Be brief."
    else:
        assert downgrade_line(DOWNGRADES[0]) in page
        assert "Answer in French." in page and "Be brief." in page
        # Between the message before the change and the one after it.
        assert page.index("look") < page.index("Answer in French.") < page.index("a red dot")
