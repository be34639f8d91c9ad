"""The HTML export renders Markdown and runs nothing, checked in a real browser.

Headless Chromium (Debian's `chromium`, which `.ci/run` installs) loads the
exported page: its DOM after load shows what rendered and whether any
script ran, and its screenshot shows what a person would see. A control
page with the same script unescaped proves the check can see a script run.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from carryall.blocks import Message, Text
from carryall.sessions import Store, render_html
from tests.support.peers import peer_missing

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def _chromium_present() -> None:
    if CHROMIUM is None:
        peer_missing("chromium is not installed", "apt-get install chromium")


needs_chromium = pytest.mark.usefixtures("_chromium_present")

RED = (255, 0, 0)
# If this ran, the page would turn red and say so in its DOM.
ATTACK = (
    "<script>document.body.style.background='rgb(255,0,0)';"
    "document.body.insertAdjacentHTML('beforeend','<p id=pwned>PWNED</p>')</script>"
)


def _page(tmp_path: Path) -> Path:
    session = Store(tmp_path / "sessions").create(backend="fake", model="m", title="colours")
    history = [
        Message.user(f"Make it **red**, please. {ATTACK}"),
        Message.assistant(
            [
                Text(
                    "Done:\n\n- *one*\n- `two`\n\n"
                    "[a link](javascript:alert(1)) <img src=x onerror=alert(1)>"
                )
            ]
        ),
    ]
    session.record([], history)
    page = tmp_path / "session.html"
    page.write_text(render_html(session.meta, session.messages(), session.times()))
    return page


def _chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and RGB pixels of an 8-bit RGB or RGBA PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data, width, height, kind = 8, b"", 0, 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        tag, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if tag == b"IHDR":
            width, height, depth, kind = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and kind in (2, 6)
        elif tag == b"IDAT":
            data += body
        pos += 12 + length
    step = 4 if kind == 6 else 3
    raw, stride = zlib.decompress(data), width * step
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        kind_of = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up = previous[i]
            corner = previous[i - step] if i >= step else 0
            if kind_of == 1:
                line[i] = (line[i] + left) & 255
            elif kind_of == 2:
                line[i] = (line[i] + up) & 255
            elif kind_of == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind_of == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                near = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + near) & 255
        rows.append(line)
        previous = line
    pixels = [tuple(row[x * step : x * step + 3]) for row in rows for x in range(width)]
    return width, height, pixels  # type: ignore[return-value]


@pytest.mark.slow
@needs_chromium
def test_the_dom_after_load_has_markdown_rendered_and_the_script_as_text(tmp_path: Path) -> None:
    dom = _chromium("--dump-dom", _page(tmp_path).as_uri())
    assert "<strong>red</strong>" in dom
    assert "<em>one</em>" in dom and "<code>two</code>" in dom and "<li>" in dom
    assert "&lt;script&gt;document.body.style.background" in dom
    assert 'id="pwned"' not in dom and "rgb(255, 0, 0)" not in dom
    assert "<img src" not in dom.split("<main>")[1]  # the raw tag is text, not an image
    assert 'href="javascript:' not in dom


@pytest.mark.slow
@needs_chromium
def test_the_screenshot_shows_the_page_and_no_script_painted_it(tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    _chromium("--window-size=800,600", f"--screenshot={shot}", _page(tmp_path).as_uri())
    width, height, pixels = _pixels(shot.read_bytes())
    assert (width, height) == (800, 600)
    assert pixels.count(RED) == 0
    background = max(set(pixels), key=pixels.count)
    assert background == (255, 255, 255)
    # Text was drawn: a page of one colour would be a blank render.
    assert sum(1 for p in pixels if p != background) > 2000


@pytest.mark.slow
@needs_chromium
def test_the_control_page_shows_the_checks_see_a_script_that_runs(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(f"<!DOCTYPE html><html><body><p>hi</p>{ATTACK}</body></html>")
    dom = _chromium("--dump-dom", control.as_uri())
    assert 'id="pwned"' in dom
    shot = tmp_path / "control.png"
    _chromium("--window-size=800,600", f"--screenshot={shot}", control.as_uri())
    _, _, pixels = _pixels(shot.read_bytes())
    assert pixels.count(RED) > len(pixels) // 2
