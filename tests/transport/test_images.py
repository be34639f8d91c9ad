"""Images fitted to the target wire at the transport edge, in the request only.

Against the scripted loopback server of `test_transport_faults`, through the
real SDKs: what is pinned is the body that leaves the machine (decoded back
to pixels), the session that keeps the original, and the downgrade report.
"""

from __future__ import annotations

import base64
import io
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image as Pil

from carryall.agent import Agent
from carryall.blocks import Image, Message
from carryall.imagefit import check_image, image_size
from carryall.providers import Request
from carryall.sessions import SessionStore
from carryall.sessions.redact import Redactor
from carryall.transport._images import WIRE_IMAGE_LIMITS, fit_request_images
from tests.support.scripted import ANTHROPIC, OPENAI, Reply, served


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


def _noise(width: int, height: int, fmt: str) -> bytes:
    out = io.BytesIO()
    Pil.effect_noise((width, height), 60).convert("RGB").save(out, fmt)
    return out.getvalue()


def _garbage_png_body() -> bytes:
    """A PNG's signature and a whole, correct IHDR (so its size reads fine), then junk."""
    png = _noise(64, 48, "PNG")
    return png[:33] + bytes(range(256)) * 4


def _garbage_jpeg_body() -> bytes:
    """A JPEG whose every segment up to its scan header is real, then junk and an end marker."""
    jpeg = _noise(64, 48, "JPEG")
    scan = jpeg.index(b"\xff\xda")
    header_end = scan + 2 + int.from_bytes(jpeg[scan + 2 : scan + 4], "big")
    # Seeded: a JPEG decoder reads much junk as (noisy) pixels, as a provider's would;
    # this junk has the stray markers that break it.
    return jpeg[:header_end] + random.Random(0).randbytes(2048) + b"\xff\xd9"


def _truncated_png() -> bytes:
    png = _noise(64, 48, "PNG")
    return png[: len(png) // 2]


def _with_bad_ancillary_checksum(png: bytes) -> bytes:
    """`png` with a tEXt chunk whose checksum is wrong, as the MCP reference server's logo has."""
    body = b"Comment\x00made by a server"
    chunk = len(body).to_bytes(4, "big") + b"tEXt" + body + b"\x00\x00\x00\x00"
    return png[:33] + chunk + png[33:]


@pytest.mark.parametrize(
    ("media_type", "damaged"),
    [
        pytest.param("image/png", _garbage_png_body, id="png-garbage-body"),
        pytest.param("image/png", _truncated_png, id="png-truncated"),
        pytest.param("image/jpeg", _garbage_jpeg_body, id="jpeg-garbage-body"),
    ],
)
def test_a_damaged_body_behind_a_header_that_reads_fine_goes_as_its_placeholder(
    media_type: str, damaged: Any
) -> None:
    data = damaged()
    assert image_size(data) == (64, 48)  # the header alone would pass it
    image = Image.from_bytes(media_type, data, "shot")
    request = Request(model="m", messages=[Message.user("hi", [image])])
    for wire, limits in WIRE_IMAGE_LIMITS.items():
        fitted, [downgrade] = fit_request_images(request, limits)
        assert fitted.messages[0].images() == [], wire
        [placeholder] = [b for b in fitted.messages[0].content if "shot" in str(b)]
        assert f"[image: shot ({media_type})] (not shown: its bytes do not decode as" in str(
            placeholder
        )
        assert downgrade.reason.startswith(
            f"sent as its placeholder: its bytes do not decode as {media_type}"
        )
    assert request.messages[0].images() == [image]  # the history keeps what it had


def test_a_header_that_reads_fine_and_a_garbage_body_reach_the_wire_as_the_placeholder(
    tmp_path: Path,
) -> None:
    broken = _garbage_png_body()
    store = _store(tmp_path)
    session = store.create(backend="anthropic", model="claude-sonnet-4-6")
    with served([Reply(sse=ANTHROPIC.ok)]) as server:
        agent = Agent(ANTHROPIC.open(server.url, model="claude-sonnet-4-6"), session=session)
        answer = agent.send("Look", [Image.from_bytes("image/png", broken, "chart.png")])
    assert answer.message.text() == ANTHROPIC.text
    body = server.requests[0]["body"]
    assert _sent_images(body) == []
    assert "[image: chart.png (image/png)] (not shown: its bytes do not decode" in json.dumps(body)
    reopened = store.open(session.id)
    assert reopened.messages()[0].images()[0].to_bytes() == broken
    [downgrade] = reopened.downgrades()
    assert downgrade.reason.startswith("sent as its placeholder: its bytes do not decode")


def test_a_bad_checksum_on_an_ancillary_chunk_is_taken_as_every_model_takes_it() -> None:
    png = _with_bad_ancillary_checksum(_noise(64, 48, "PNG"))
    image = Image.from_bytes("image/png", png)
    request = Request(model="m", messages=[Message.user("hi", [image])])
    for limits in WIRE_IMAGE_LIMITS.values():
        assert fit_request_images(request, limits) == (request, [])


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_a_whole_image_within_limits_is_read_once_and_sent_byte_for_byte(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from carryall import imagefit

    checked: list[Image] = []

    def counting(image: Image) -> str | None:
        checked.append(image)
        return check_image(image)

    monkeypatch.setattr(imagefit, "check_image", counting)
    imagefit.fit_to_limits.cache_clear()
    imagefit._damage.cache_clear()
    image = Image.from_bytes(f"image/{fmt.lower()}", _noise(640, 480, fmt))
    request = Request(model="m", messages=[Message.user("hi", [image])])
    for _ in range(3):  # three requests of a turn, on every wire
        for limits in WIRE_IMAGE_LIMITS.values():
            fitted, downgrades = fit_request_images(request, limits)
            assert fitted is request and downgrades == []
    assert checked == [image]


def test_without_pillow_an_image_over_the_limit_goes_as_it_is_with_one_note(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from carryall import imagefit

    wide = Image.from_bytes("image/png", _png(8001, 2))
    # Within limits, and damaged: without Pillow its header is all that can be read.
    damaged = Image.from_bytes("image/png", _garbage_png_body())
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL now fails, as when not installed
    imagefit.fit_to_limits.cache_clear()
    imagefit._damage.cache_clear()
    imagefit._note_no_pillow.cache_clear()
    request = Request(model="m", messages=[Message.user("hi", [wide, damaged])])
    with caplog.at_level("WARNING", logger="carryall.transport"):
        for _ in range(2):
            kept, downgrades = fit_request_images(request, WIRE_IMAGE_LIMITS["anthropic"])
            assert kept is request and downgrades == []
    [note] = caplog.messages
    assert "install carryall[images]" in note
    imagefit.fit_to_limits.cache_clear()
    imagefit._damage.cache_clear()


def test_a_model_that_sees_no_images_has_none_fitted() -> None:
    wide = Image.from_bytes("image/png", _png(9000, 10))
    request = Request(model="m", messages=[Message.user("hi", [wide])])
    assert fit_request_images(request, None) == (request, [])
