"""Every reader shows a session's downgrades and images the same way: text, Markdown, HTML, JSON."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from carryall.blocks import Downgrade, Image, Message, Text
from carryall.sessions import SessionMeta
from carryall.sessions.render import DOWNGRADES_HEADING, downgrade_line, render

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
