"""Fitting an image to what a model accepts: pixel size and bytes, with Pillow.

An edge, not the core: decoding pixels is I/O-shaped work with a heavy
dependency (Pillow, the `carryall[images]` extra), so the codecs never
import it; callers fit images before they are encoded. Without Pillow an
image within the byte limit passes unchanged and one over it is refused
with a line saying how to get it fitted.

The limits are the strictest a provider publishes, so a fitted image goes
anywhere: Anthropic refuses an edge over 8000 px and an image over 5 MB
(and recommends a long edge of at most 1568 px, `RECOMMENDED_EDGE`);
OpenAI takes up to 20 MB.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import importlib.util
import io
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, NamedTuple

from carryall._lazy import lazy_logger
from carryall.attachments import DEFAULT_MAX_IMAGE_BYTES
from carryall.blocks import Image
from carryall.errors import BlockError

if TYPE_CHECKING:
    from PIL.Image import Image as PilImage

__all__ = [
    "IMAGE_FIT_INPUT_BYTES",
    "MAX_EDGE",
    "RECOMMENDED_EDGE",
    "Fitted",
    "ImageLimits",
    "check_image",
    "fit_image",
    "fit_to_limits",
    "image_size",
]

# The transport's logger: the note is about a request a transport is sending. Lazy: the
# backend table imports this module, and a session reader never fits an image.
log = lazy_logger("carryall.transport")

MAX_EDGE: Final = 8000
"""The longest edge any provider accepts (Anthropic's limit)."""

RECOMMENDED_EDGE: Final = 1568
"""Anthropic's recommended long edge: larger images are scaled down by the provider anyway."""

IMAGE_FIT_INPUT_BYTES: Final = 20 * 1024 * 1024
"""The largest image read at all (OpenAI's per-image limit); fitting brings it under 5 MB."""

_MAX_PIXELS: Final = 80_000_000
"""Decoded pixels refused outright: a small file may expand to gigabytes (a decompression bomb)."""

_FORMATS: Final = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
}


_NO_PILLOW: Final = (
    "an image over this wire's limits (or with an unreadable header) is sent as it is: "
    "install carryall[images] (Pillow) to have it fitted"
)
_HEAD_CHARS: Final = 4 * 16384
"""Base64 read for a header: 48 KiB of file, past the metadata most JPEGs carry."""


class ImageLimits(NamedTuple):
    """What one wire accepts per image, and the long edge a fitted copy gets."""

    max_edge: int | None
    """The longest edge the wire takes; None where it publishes no limit (it scales down itself)."""
    fit_edge: int
    """The long edge an image that must be fitted is scaled to: what the provider would keep."""
    max_bytes: int
    """The largest image file the wire takes."""


class Fitted(NamedTuple):
    """An image as it can be sent (None when it cannot), and what was done or why not."""

    image: Image | None
    note: str | None


def fit_image(
    image: Image,
    *,
    max_edge: int = MAX_EDGE,
    max_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    fit_edge: int | None = None,
) -> Fitted:
    """`image` within `max_edge` pixels on its long edge and `max_bytes` bytes.

    An image already within both comes back as it is, untouched. A larger
    one is scaled down (aspect kept) to at most `fit_edge` on its long edge
    (`max_edge` when None: a wire that would scale it further anyway may as
    well get the smaller copy) and written in its own media type where
    that gets it under the byte limit, else as JPEG; the note says what was
    done. An image whose bytes do not decode comes back as None with the reason.
    """
    try:
        data = image.to_bytes()
    except BlockError as exc:
        return Fitted(None, str(exc))
    try:
        from PIL import Image as Pil
    except ImportError:
        if len(data) <= max_bytes:
            return Fitted(image, None)
        return Fitted(
            None,
            f"{len(data)} bytes is over the {max_bytes}-byte limit; "
            "install carryall[images] (Pillow) to have it scaled down",
        )
    try:
        with _reading(image.media_type):
            if image.media_type == "image/png":
                _verified(data)
            with Pil.open(io.BytesIO(data), formats=[_FORMATS[image.media_type]]) as opened:
                width, height = opened.size
                if width * height > _MAX_PIXELS:
                    return Fitted(None, f"{width}x{height} pixels is more than any model takes")
                opened.load()
                if max(width, height) <= max_edge and len(data) <= max_bytes:
                    return Fitted(image, None)
                edge = max_edge if fit_edge is None else min(fit_edge, max_edge)
                return _scaled(image, opened, edge, max_bytes, len(data))
    except _unreadable() as exc:
        return Fitted(None, _undecoded(image.media_type, exc))


def check_image(image: Image) -> str | None:
    """Why `image`'s bytes do not decode as its media type, or None when they do; needs Pillow.

    For an image that goes as it is, so that a valid header in front of a
    garbage body is not sent to a provider that would refuse the whole
    request. As little decoding as that takes: a PNG has every chunk's
    checksum verified through `IEND` without inflating a pixel (what
    `fit_image` accepts, minus the decode); a JPEG is decoded at an eighth
    of its size (every byte of its entropy-coded data is still read, the
    inverse transform shrinks); a GIF or WebP, which Pillow cannot verify
    without decoding, is decoded. What passes is what a decoder reads: junk
    that a JPEG decoder takes as noisy pixels passes, as it would at the
    provider, and so does a PNG forged to carry a broken body under correct
    checksums; this catches damage, not forgery.
    """
    try:
        data = image.to_bytes()
    except BlockError as exc:
        return str(exc)
    from PIL import Image as Pil

    try:
        with _reading(image.media_type):
            if image.media_type == "image/png":
                _verified(data)
                return None
            with Pil.open(io.BytesIO(data), formats=[_FORMATS[image.media_type]]) as opened:
                width, height = opened.size
                if image.media_type == "image/jpeg":
                    opened.draft(None, (max(1, width // 8), max(1, height // 8)))
                elif width * height > _MAX_PIXELS:
                    return f"{width}x{height} pixels is more than any model takes"
                opened.load()
    except _unreadable() as exc:
        return _undecoded(image.media_type, exc)
    return None


def _verified(png: bytes) -> None:
    """Raise unless every chunk of `png` through `IEND` is whole and its checksum right."""
    from PIL import Image as Pil

    with Pil.open(io.BytesIO(png), formats=["PNG"]) as opened:
        opened.verify()


def _unreadable() -> tuple[type[Exception], ...]:
    """What Pillow raises for bytes it cannot read as an image (it is imported by then)."""
    from PIL import Image as Pil

    return (OSError, ValueError, SyntaxError, EOFError, Pil.DecompressionBombError)


def _undecoded(media_type: str, exc: BaseException) -> str:
    from PIL import UnidentifiedImageError

    if isinstance(exc, UnidentifiedImageError | UnicodeDecodeError):
        # The first names an in-memory file object, the second a codec: neither says what broke.
        return f"its bytes do not decode as {media_type}: the file is damaged past its header"
    return f"its bytes do not decode as {media_type}: {exc}"


_LENIENCY = threading.Lock()


@contextlib.contextmanager
def _reading(media_type: str) -> Iterator[None]:
    """Pillow reading a PNG as browsers and providers do: a bad ancillary chunk checksum is skipped.

    Real servers send such images (the MCP reference server's logo has a bad
    `iCCP` checksum) and every model takes them. Pillow's only switch for
    it also pads a truncated image, so a PNG is verified whole first
    (`_verified`: truncation and a bad critical checksum still refuse it)
    and every other format is read strictly. The switch is global, so it
    is held by one reading at a time.
    """
    from PIL import ImageFile

    with _LENIENCY:
        before = ImageFile.LOAD_TRUNCATED_IMAGES
        ImageFile.LOAD_TRUNCATED_IMAGES = media_type == "image/png"
        try:
            yield
        finally:
            ImageFile.LOAD_TRUNCATED_IMAGES = before


def _scaled(image: Image, opened: PilImage, max_edge: int, max_bytes: int, size: int) -> Fitted:
    from PIL import Image as Pil

    width, height = opened.size
    edge = min(max(width, height), max_edge)
    media_type = image.media_type
    while edge >= 16:
        scale = edge / max(width, height)
        target = (max(1, round(width * scale)), max(1, round(height * scale)))
        frame = opened.resize(target, Pil.Resampling.LANCZOS) if target != opened.size else opened
        data = _written(frame, media_type)
        if len(data) > max_bytes and media_type != "image/jpeg":
            data, media_type = _written(frame, "image/jpeg"), "image/jpeg"
        if len(data) <= max_bytes:
            fitted = Image.from_bytes(media_type, data, image.source)
            how = f"resized from {width}x{height} ({size} bytes) to {target[0]}x{target[1]}"
            if media_type != image.media_type:
                how += f" as {media_type}"
            return Fitted(fitted, f"{how} ({len(data)} bytes) to fit the model's limits")
        edge = int(edge * 0.75)
    return Fitted(None, f"{width}x{height} cannot be brought under {max_bytes} bytes")


def _written(frame: PilImage, media_type: str) -> bytes:
    out = io.BytesIO()
    if media_type == "image/jpeg":
        frame.convert("RGB").save(out, "JPEG", quality=85)
    else:
        frame.save(out, _FORMATS[media_type])
    return out.getvalue()


@functools.lru_cache(maxsize=64)
def fit_to_limits(image: Image, limits: ImageLimits) -> Fitted | None:
    """`image` fitted to one wire's `limits`; None when it goes as it is.

    Fast when there is nothing to do: the size is read from the header
    (`image_size`), and an image within limits goes byte for byte once
    Pillow has found its body whole (`check_image`), once per image in the
    process, not per request. Without Pillow the header is all that is
    read, and an image over the limits goes as it is, with one warning.
    Cached: the same history goes out with every request of a turn (and
    of the turns after it), so an image is fitted once, not once per request.
    """
    size, data_bytes = _declared(image)
    pillow = importlib.util.find_spec("PIL") is not None
    if size is not None and _within(size, data_bytes, limits):
        reason = _damage(image) if pillow else None
        return None if reason is None else Fitted(None, reason)
    if not pillow:
        _note_no_pillow()
        return None
    max_edge = limits.max_edge if limits.max_edge is not None else 1 << 30
    fitted = fit_image(
        image, max_edge=max_edge, max_bytes=limits.max_bytes, fit_edge=limits.fit_edge
    )
    return None if fitted.image is image else fitted


@functools.lru_cache(maxsize=256)
def _damage(image: Image) -> str | None:
    """Why an image within limits cannot go as it is (`check_image`); None when it can.

    An image whose header reads fine may still have a garbage body, which a
    provider refuses along with the whole request. Checked once per image
    for every wire (the cache outlives `fit_to_limits`', which is per wire), so
    a history's images are read once, not once per request.
    """
    return check_image(image)


def _declared(image: Image) -> tuple[tuple[int, int] | None, int]:
    """The size `image`'s header declares (None if unreadable) and its length in bytes."""
    data = image.data
    length = len(data) * 3 // 4 - data[-2:].count("=")
    try:
        head = base64.b64decode(data[:_HEAD_CHARS])
        size = image_size(head)
        if size is None and len(data) > _HEAD_CHARS and image.media_type == "image/jpeg":
            size = image_size(base64.b64decode(data))
    except (binascii.Error, ValueError):
        return None, length
    return size, length


def _within(size: tuple[int, int], data_bytes: int, limits: ImageLimits) -> bool:
    width, height = size
    if width <= 0 or height <= 0:
        return False
    edge_ok = limits.max_edge is None or max(width, height) <= limits.max_edge
    return edge_ok and data_bytes <= limits.max_bytes


@functools.cache
def _note_no_pillow() -> None:
    # Once per process: the same history would say it with every request.
    log.warning(_NO_PILLOW)


def image_size(data: bytes) -> tuple[int, int] | None:
    """The width and height a PNG, JPEG, GIF or WebP file's header declares; None if unreadable.

    Read from the first bytes without Pillow, so a request whose images are
    all within a wire's limits is sent without decoding a pixel. A JPEG's
    size sits in its first start-of-frame segment, after any metadata, so
    `data` may have to reach that far; None when it does not.
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        return (
            int.from_bytes(data[26:28], "little") & 0x3FFF,
            int.from_bytes(data[28:30], "little") & 0x3FFF,
        )
    return None


# Start-of-frame markers: every SOFn except DHT (C4), JPG (C8) and DAC (CC).
_SOF: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill bytes before a marker
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        length = int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in _SOF:
            if at + 9 > len(data):
                return None
            return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(
                data[at + 5 : at + 7], "big"
            )
        if length < 2:
            return None
        at += 2 + length
    return None
