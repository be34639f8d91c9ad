"""Images fitted to the target wire at the transport edge, in the request only.

Against the scripted loopback server of `test_transport_faults`, through the
real SDKs: what is pinned is the body that leaves the machine (decoded back
to pixels), the session that keeps the original, and the downgrade report.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as Pil

from carryall.agent import Agent
from carryall.blocks import Image, Message
from carryall.imagefit import image_size
from carryall.providers import Request
from carryall.sessions.redact import Redactor
from carryall.sessions.store import SessionStore
from carryall.transport._images import WIRE_IMAGE_LIMITS, fit_request_images
from tests.test_transport_faults import ANTHROPIC, OPENAI, Reply, served


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Pil.new("RGB", (width, height), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


def _sent_images(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        part
        for message in body["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image"
    ]


def _store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path, redactor=Redactor((), builtin=False))


def test_a_user_image_over_anthropics_edge_arrives_fitted_and_the_session_keeps_the_original(
    tmp_path: Path,
) -> None:
    original = _png(9000, 100)
    store = _store(tmp_path)
    session = store.create(backend="anthropic", model="claude-sonnet-4-6")
    with served([Reply(sse=ANTHROPIC.ok)]) as server:
        agent = Agent(ANTHROPIC.open(server.url, model="claude-sonnet-4-6"), session=session)
        agent.send("What is this?", [Image.from_bytes("image/png", original, "wide.png")])
    [sent] = _sent_images(server.requests[0]["body"])
    assert sent["source"]["media_type"] == "image/png"
    with Pil.open(io.BytesIO(base64.b64decode(sent["source"]["data"]))) as arrived:
        assert arrived.size == (1568, 17)  # Anthropic's recommended long edge, aspect kept
    # The agent's history and the session hold the bytes as the user gave them.
    assert agent.messages[0].images()[0].to_bytes() == original
    reopened = store.open(session.id)
    assert reopened.messages()[0].images()[0].to_bytes() == original
    [downgrade] = reopened.downgrades()
    assert (downgrade.index, downgrade.kind) == (0, "image")
    assert downgrade.reason.startswith(f"resized from 9000x100 ({len(original)} bytes) to 1568x17")


def test_a_corrupt_image_goes_as_its_placeholder_with_the_reason_and_the_request_succeeds(
    tmp_path: Path,
) -> None:
    broken = _png(40, 40)[:8] + b"not the rest of a PNG at all"
    store = _store(tmp_path)
    session = store.create(backend="anthropic", model="claude-sonnet-4-6")
    with served([Reply(sse=ANTHROPIC.ok)]) as server:
        agent = Agent(ANTHROPIC.open(server.url, model="claude-sonnet-4-6"), session=session)
        answer = agent.send("Look", [Image.from_bytes("image/png", broken, "broken.png")])
    assert answer.message.text() == ANTHROPIC.text
    body = server.requests[0]["body"]
    assert _sent_images(body) == []
    sent = json.dumps(body["messages"][0])
    assert "[image: broken.png (image/png)] (not shown: its bytes do not decode" in sent
    assert store.open(session.id).messages()[0].images()[0].to_bytes() == broken
    [downgrade] = store.open(session.id).downgrades()
    assert (downgrade.index, downgrade.kind) == (0, "image")
    assert downgrade.reason.startswith("sent as its placeholder: its bytes do not decode")


def test_an_image_within_the_wires_limits_is_sent_byte_for_byte() -> None:
    small = Image.from_bytes("image/png", _png(800, 600), "fine.png")
    with served([Reply(sse=OPENAI.ok)]) as server:
        agent = Agent(OPENAI.open(server.url, model="gpt-test"))
        agent.send("What is this?", [small])
    [part] = [
        part
        for part in server.requests[0]["body"]["messages"][-1]["content"]
        if part.get("type") == "image_url"
    ]
    assert part["image_url"]["url"] == f"data:image/png;base64,{small.data}"


def test_the_limits_differ_per_wire() -> None:
    # 9000 px is over Anthropic's edge but within what OpenAI takes (it has no edge limit).
    wide = Image.from_bytes("image/png", _png(9000, 10))
    request = Request(model="m", messages=[Message.user("hi", [wide])])
    kept, none = fit_request_images(request, WIRE_IMAGE_LIMITS["openai"])
    assert kept is request and none == []
    fitted, [downgrade] = fit_request_images(request, WIRE_IMAGE_LIMITS["anthropic"])
    assert fitted.messages[0].images()[0] != wide and request.messages[0].images()[0] is wide
    assert "9000x10" in downgrade.reason


@pytest.mark.parametrize(
    ("fmt", "options"),
    [("PNG", {}), ("JPEG", {}), ("JPEG", {"progressive": True}), ("GIF", {}), ("WEBP", {})]
    + [("WEBP", {"lossless": True})],
)
def test_image_size_reads_the_header_pillow_wrote(fmt: str, options: dict[str, Any]) -> None:
    out = io.BytesIO()
    Pil.new("RGB", (1234, 567), "red").save(out, fmt, **options)
    assert image_size(out.getvalue()) == (1234, 567)
    assert image_size(out.getvalue()[:6]) is None


_FRESH = """
import base64, sys
from carryall.blocks import Image, Message
from carryall.providers import Request
from carryall.transport._images import WIRE_IMAGE_LIMITS, fit_request_images

png = base64.b64decode(sys.argv[1])
request = Request(
    model="m", messages=[Message.user("hi", [Image.from_bytes("image/png", png)])]
)
for limits in WIRE_IMAGE_LIMITS.values():
    fitted, downgrades = fit_request_images(request, limits)
    assert fitted is request and downgrades == [], (limits, downgrades)
print("PIL" in sys.modules)
"""


def test_images_within_limits_import_no_pillow() -> None:
    png = base64.b64encode(_png(640, 480)).decode()
    done = subprocess.run(
        [sys.executable, "-c", _FRESH, png], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_without_pillow_an_image_over_the_limit_goes_as_it_is_with_one_note(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from carryall.transport import _images

    wide = Image.from_bytes("image/png", _png(8001, 2))
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL now fails, as when not installed
    _images._fitted.cache_clear()
    _images._note_no_pillow.cache_clear()
    request = Request(model="m", messages=[Message.user("hi", [wide])])
    with caplog.at_level("WARNING", logger="carryall.transport"):
        for _ in range(2):
            kept, downgrades = fit_request_images(request, WIRE_IMAGE_LIMITS["anthropic"])
            assert kept is request and downgrades == []
    [note] = caplog.messages
    assert "install carryall[images]" in note
    _images._fitted.cache_clear()


def test_a_model_that_sees_no_images_has_none_fitted() -> None:
    wide = Image.from_bytes("image/png", _png(9000, 10))
    request = Request(model="m", messages=[Message.user("hi", [wide])])
    assert fit_request_images(request, None) == (request, [])
