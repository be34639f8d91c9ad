"""Attachments: loading declared images (and documents) safely and lifting them into the user turn.

The loader is a security boundary. A tool's output, a legacy carrier body or
an imported history is text someone else wrote; none of it may make carryall
read a file or a URL that was not declared at a carrier's fixed position and
allowed by the caller's `AttachmentPolicy`. So:

- only declared `IMAGE` attachments are ever loaded (`lift` opens the message
  through `classify` and never scans a body);
- a `data:` URI must name an allowlisted media type and carry canonical
  base64 no larger than the cap, checked before it is decoded;
- a local path is resolved (symlinks followed) and the real path must lie
  inside a real root; it is then opened one component at a time with
  `O_NOFOLLOW` from `/`, so a symlink swapped in after the check cannot
  redirect the open; it must be a non-empty regular file under the cap by
  `lstat` before it is opened and by `fstat` after (`O_NONBLOCK`, so a FIFO
  never blocks), and its magic bytes must agree with its extension, sniffed
  from the first 12 bytes before the rest is read;
- a remote `http(s)` URL is fetched only when its host is on the policy's
  allowlist (the host as the HTTP client itself parses it), without
  redirects or compression, under a timeout and a total deadline, with the
  cap enforced while streaming. The deadline bounds the whole fetch
  (connect, headers, body): when it passes, the connection's socket is shut
  down from a timer, so a server that drips a byte at a time cannot hold
  the fetch past it. The HTTP client is imported on that path
  only: loading a file or a `data:` URI never loads it.

Documents (`load_document`: PDF and plain text) pass the same boundary by
the same code: a `data:` URI, an allowed host's URL through the one fetch,
or a path inside the roots, their bytes checked against what the name or
type says (`%PDF-`, UTF-8).

Out of scope: hard links (a hard link inside a root is the file it names;
making one needs write access to the root and, on Linux, ownership of the
target), and what an allowed host's DNS answers.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import socket
import stat
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from carryall._beneath import (
    CAN_WALK,
    READ_FLAGS,
    file_kind,
    length_problem,
    os_reason,
    read_upto,
    walk_to_parent,
)
from carryall.blocks import (
    DOCUMENT_MEDIA_TYPES,
    IMAGE_MEDIA_TYPES,
    Document,
    Image,
    apply_image_limit,
    document_media_type,
    image_media_type,
)
from carryall.carrier import classify, load_declared_images, rebuild_carrier
from carryall.errors import AttachmentError

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "DEFAULT_FETCH_TIMEOUT",
    "DEFAULT_MAX_IMAGES",
    "DEFAULT_MAX_IMAGE_BYTES",
    "AttachmentPolicy",
    "apply_image_limit",
    "lift",
    "load_document",
    "load_image",
]

DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""Bytes per image: 5 MiB, the smallest per-image limit among the hosted backends."""

DEFAULT_MAX_IMAGES = 20
"""Images per request; the oldest beyond it become placeholders."""

DEFAULT_FETCH_TIMEOUT = 10.0
"""Seconds a remote fetch may take in total (and per network operation)."""

_SNIFF_BYTES = 12
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


@dataclass(frozen=True, init=False)
class AttachmentPolicy:
    """What the loader may read: roots, hosts and size limits, all chosen by the caller.

    `roots` are the directories local paths must resolve into (default: the
    current working directory only; an empty list allows no local path).
    Each root is resolved once, here, symlinks followed: a root given as a
    symlink means the directory it pointed to when the policy was made, and
    if the link is later pointed elsewhere, paths through it resolve outside
    the real root and are refused. `max_image_bytes` caps each image (default
    5 MiB), `max_images` the images per request (default 20), `allow_hosts`
    the remote hosts that may be fetched from (default none; compared case
    insensitively, without port), `fetch_timeout` a remote fetch in seconds.
    """

    roots: tuple[str, ...]
    max_image_bytes: int
    max_images: int
    allow_hosts: frozenset[str]
    fetch_timeout: float

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]] | None = None,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
        max_images: int = DEFAULT_MAX_IMAGES,
        allow_hosts: Iterable[str] = (),
        *,
        fetch_timeout: float = DEFAULT_FETCH_TIMEOUT,
    ) -> None:
        if isinstance(roots, str | os.PathLike):
            # A lone path is a common slip; iterating it would allow one root
            # per character.
            raise TypeError("AttachmentPolicy roots must be a list of paths, not one path")
        if isinstance(allow_hosts, str):
            raise TypeError("AttachmentPolicy allow_hosts must be a list of host names")
        if not isinstance(max_image_bytes, int) or max_image_bytes <= 0:
            raise ValueError(f"max_image_bytes must be a positive int, not {max_image_bytes!r}")
        if not isinstance(max_images, int) or max_images < 0:
            raise ValueError(f"max_images must be a non-negative int, not {max_images!r}")
        if not fetch_timeout > 0:
            raise ValueError(f"fetch_timeout must be positive, not {fetch_timeout!r}")
        given = [os.getcwd()] if roots is None else [os.fspath(r) for r in roots]
        real = tuple(dict.fromkeys(os.path.realpath(r) for r in given))
        object.__setattr__(self, "roots", real)
        object.__setattr__(self, "max_image_bytes", max_image_bytes)
        object.__setattr__(self, "max_images", max_images)
        object.__setattr__(self, "allow_hosts", frozenset(h.lower() for h in allow_hosts))
        object.__setattr__(self, "fetch_timeout", float(fetch_timeout))

    def contains(self, real_path: str) -> bool:
        """Whether a resolved path lies inside one of the real roots (a root itself does not)."""
        for root in self.roots:
            prefix = root if root.endswith(os.sep) else root + os.sep
            if real_path.startswith(prefix) and len(real_path) > len(prefix):
                return True
        return False


# -- loading -------------------------------------------------------------------


def load_image(target: str, policy: AttachmentPolicy | None = None) -> Image:
    """Load one declared image target into an `Image`, or refuse with an `AttachmentError`.

    A target is a `data:` URI, an `http(s)` URL (only to an allowed host), or
    a local path (relative paths resolve against the working directory). The
    error names the target and the reason. `source` is the file name for a
    path and the last URL path segment for a URL; a `data:` URI carries no
    name unless it has an RFC 2397 `name=` parameter (percent-encoded), so
    `load_image(img.data_uri())` gives back `Image(img.media_type, img.data)`.
    """
    policy = policy if policy is not None else AttachmentPolicy()
    kind = _target_kind(target)
    if kind == "data":
        return _load_data_uri(target, policy)
    if kind == "url":
        return _load_remote(target, policy)
    return _load_path(target, policy)


def _target_kind(target: str) -> Literal["data", "url", "path"]:
    """Which of the three kinds of target `target` is, for both loaders; an `AttachmentError`
    for an empty one, one holding a NUL, or a URL of another scheme."""
    if not target:
        raise AttachmentError(target, "the target is empty")
    if "\x00" in target:
        raise AttachmentError(target, "the target contains a NUL character")
    head = target[:8].lower()
    if head.startswith("data:"):
        return "data"
    if head.startswith(("http://", "https://")):
        return "url"
    if _URL_SCHEME.match(target):
        raise AttachmentError(
            target, "unsupported URL scheme: only data: URIs, local paths and http(s) are loaded"
        )
    return "path"


def _sniff(head: bytes) -> str | None:
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= _SNIFF_BYTES and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _check_magic(target: str, head: bytes, expected: str, said_by: str) -> None:
    found = _sniff(head)
    if found is None:
        raise AttachmentError(
            target, f"its bytes are not a PNG, JPEG, GIF or WebP image ({said_by} {expected})"
        )
    if found != expected:
        raise AttachmentError(target, f"its bytes are {found} but {said_by} {expected}")


def _too_big(cap: int) -> str:
    return f"larger than the {cap}-byte image limit"


def _load_data_uri(target: str, policy: AttachmentPolicy) -> Image:
    media_type, payload, data, source = _data_uri(target, policy, IMAGE_MEDIA_TYPES)
    _check_magic(target, data[:_SNIFF_BYTES], media_type, "the URI says")
    return Image(media_type, payload, source)


def _data_uri(
    target: str, policy: AttachmentPolicy, allowed: frozenset[str]
) -> tuple[str, str, bytes, str | None]:
    """A `data:` URI's media type (one of `allowed`), base64 payload, bytes and `name=`.

    One reading for images and documents: canonical base64 under the cap,
    checked before it is decoded.
    """
    # Only a short header is searched for the comma: the payload may be
    # megabytes and is never scanned for anything but base64.
    comma = target.find(",", 5, 5 + 512)
    if comma < 0:
        raise AttachmentError(target, "malformed data: URI (no ',' after a short header)")
    params = target[5:comma].split(";")
    media_type = params[0].lower()
    if len(params) < 2 or params[-1].lower() != "base64":
        raise AttachmentError(target, "only base64 data: URIs are loaded")
    source: str | None = None
    for param in params[1:-1]:
        key, sep, value = param.partition("=")
        if key.lower() != "name" or not sep or source is not None:
            raise AttachmentError(target, f"unsupported data: URI parameter {param!r}")
        source = urllib.parse.unquote(value) or None
    if media_type not in allowed:
        raise AttachmentError(
            target,
            f"media type {media_type!r} is not one of {', '.join(sorted(allowed))}",
        )
    cap = policy.max_image_bytes
    payload = target[comma + 1 :]
    # Canonical base64 of `cap` bytes is at most this long: refuse before decoding.
    if len(payload) > 4 * ((cap + 2) // 3):
        raise AttachmentError(target, _too_big(cap))
    try:
        raw = payload.encode("ascii")
        data = base64.b64decode(raw, validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise AttachmentError(target, "the payload is not canonical base64") from None
    # validate=True still takes some non-canonical spellings (non-zero pad
    # bits); re-encoding is the one test that leaves a single spelling.
    if base64.b64encode(data) != raw:
        raise AttachmentError(target, "the payload is not canonical base64")
    if len(data) > cap:
        raise AttachmentError(target, _too_big(cap))
    return media_type, payload, data, source


# -- local paths ---------------------------------------------------------------


def _load_path(target: str, policy: AttachmentPolicy) -> Image:
    too_long = length_problem(target)
    if too_long is not None:
        raise AttachmentError(target, too_long)
    media_type = image_media_type(target)
    if media_type is None:
        raise AttachmentError(
            target, "the file name has no image extension (png, jpg, jpeg, gif or webp)"
        )
    fd = _open_inside(target, policy)
    try:
        size = os.fstat(fd).st_size
        head = read_upto(fd, min(_SNIFF_BYTES, size))
        _check_magic(target, head, media_type, "the extension says")
        # Read again from the start rather than join head and rest: one
        # buffer, no copy of a megabyte to save twelve bytes of reading.
        os.lseek(fd, 0, os.SEEK_SET)
        data = read_upto(fd, size + 1)
    except OSError as exc:
        raise AttachmentError(target, f"the file could not be read ({os_reason(exc)})") from None
    finally:
        os.close(fd)
    if len(data) != size or not data.startswith(head):
        raise AttachmentError(target, "the file changed while it was read")
    return Image.from_bytes(media_type, data, os.path.basename(target))


def load_document(target: str, policy: AttachmentPolicy | None = None) -> Document:
    """Load one declared PDF or plain-text document into a `Document`, behind the image boundary.

    The same targets and checks as `load_image`: a `data:` URI of a document
    type, an `http(s)` URL fetched only from an allowed host (the one fetch
    path, with its cap, timeout and content-type check), or a local path
    that must resolve inside the policy's roots, be a regular file under the
    size cap, opened without following a link swapped in after the check.
    The bytes must be what the name or type says (`%PDF-` for a PDF, UTF-8
    for text). Raises `AttachmentError` naming the target and the reason.
    """
    policy = policy if policy is not None else AttachmentPolicy()
    kind = _target_kind(target)
    if kind == "data":
        media_type, _, data, source = _data_uri(target, policy, DOCUMENT_MEDIA_TYPES)
    elif kind == "url":
        data, media_type, source = _fetch(target, policy, DOCUMENT_MEDIA_TYPES, document_media_type)
    else:
        media_type, data = _document_path(target, policy)
        source = os.path.basename(target)
    _check_document(target, media_type, data)
    return Document.from_bytes(media_type, data, source=source)


def _document_path(target: str, policy: AttachmentPolicy) -> tuple[str, bytes]:
    too_long = length_problem(target)
    if too_long is not None:
        raise AttachmentError(target, too_long)
    media_type = document_media_type(target)
    if media_type is None:
        raise AttachmentError(target, "the file name has no document extension (pdf or txt)")
    fd = _open_inside(target, policy)
    try:
        size = os.fstat(fd).st_size
        data = read_upto(fd, size + 1)
    except OSError as exc:
        raise AttachmentError(target, f"the file could not be read ({os_reason(exc)})") from None
    finally:
        os.close(fd)
    if len(data) != size:
        raise AttachmentError(target, "the file changed while it was read")
    return media_type, data


def _check_document(target: str, media_type: str, data: bytes) -> None:
    if media_type == "application/pdf" and not data.startswith(b"%PDF-"):
        raise AttachmentError(target, "its bytes are not a PDF (no %PDF- header)")
    if media_type == "text/plain":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise AttachmentError(target, "its bytes are not UTF-8 text") from None


def _open_inside(target: str, policy: AttachmentPolicy) -> int:
    """Open a local target for reading, refused unless it resolves inside the policy's roots."""
    try:
        # Non-strict: a missing path outside the roots is refused for being
        # outside, so a declared target cannot probe what exists elsewhere.
        real = os.path.realpath(target)
    except (OSError, ValueError) as exc:
        raise AttachmentError(target, f"the path cannot be resolved ({exc})") from None
    if not policy.contains(real):
        raise AttachmentError(target, "the path resolves outside the allowed roots")
    return _open_regular(target, real, policy.max_image_bytes)


def _open_regular(target: str, real: str, cap: int) -> int:
    """Open `real` for reading as a non-empty regular file under `cap`, refusing before any read."""
    try:
        if CAN_WALK:
            fd, before = _walk_open(target, real, cap)
        else:  # pragma: no cover - platforms without openat (Windows)
            before = os.lstat(real)
            _check_stat(target, before, cap)
            fd = os.open(real, READ_FLAGS)
    except AttachmentError:
        raise
    except OSError as exc:
        raise AttachmentError(target, f"the file could not be opened ({os_reason(exc)})") from None
    try:
        after = os.fstat(fd)
        _check_stat(target, after, cap)
        if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
            raise AttachmentError(target, "the file was replaced while it was opened")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _walk_open(target: str, real: str, cap: int) -> tuple[int, os.stat_result]:
    # `real` has no symlink, "." or ".." left in it, so the walk opens
    # exactly the path the roots check approved (`walk_to_parent`).
    try:
        dir_fd, name = walk_to_parent(real)
    except ValueError:
        raise AttachmentError(
            target, "the path does not resolve to a plain absolute path"
        ) from None
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        _check_stat(target, before, cap)
        return os.open(name, READ_FLAGS, dir_fd=dir_fd), before
    finally:
        os.close(dir_fd)


def _check_stat(target: str, st: os.stat_result, cap: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = file_kind(st.st_mode)
        raise AttachmentError(target, f"the path is {kind}, not a regular file")
    if st.st_size > cap:
        raise AttachmentError(target, f"{_too_big(cap)} ({st.st_size} bytes)")
    if st.st_size == 0:
        # Also what /proc and /sys pseudo-files report: refused unread.
        raise AttachmentError(target, "the file is empty")


# -- remote URLs ---------------------------------------------------------------


def _load_remote(target: str, policy: AttachmentPolicy) -> Image:
    data, media_type, name = _fetch(target, policy, IMAGE_MEDIA_TYPES, image_media_type)
    _check_magic(target, data[:_SNIFF_BYTES], media_type, "the server says")
    return Image.from_bytes(media_type, data, name)


def _fetch(
    target: str,
    policy: AttachmentPolicy,
    accept: frozenset[str],
    typed_by_name: Callable[[str], str | None],
) -> tuple[bytes, str, str | None]:
    """The one remote fetch: `(bytes, media type, name)` of an allowed host's answer.

    Images and documents both come this way, so the allowlist, the cap, the
    deadline and the content-type check are answered once. The media type
    is the server's when it is one of `accept`, else (none given, or
    `application/octet-stream`) the URL path's by `typed_by_name`.
    """
    # Imported here: the HTTP client costs every other caller its import
    # time, and only an allowed remote fetch needs it.
    import httpx2

    try:
        # The host is read by the same parser that will connect, so a URL
        # the two would read differently (`http://a@b/`) cannot slip through.
        url = httpx2.URL(target)
    except (httpx2.InvalidURL, ValueError, TypeError):
        raise AttachmentError(target, "not a valid URL") from None
    host = url.host.lower()
    if url.scheme not in ("http", "https") or not host:
        raise AttachmentError(target, "not a valid http(s) URL")
    if host not in policy.allow_hosts:
        allowed = ", ".join(sorted(policy.allow_hosts)) or "none"
        raise AttachmentError(target, f"remote host {host!r} is not allowed (allowed: {allowed})")
    cap = policy.max_image_bytes
    deadline = time.monotonic() + policy.fetch_timeout
    watchdog = _Watchdog(policy.fetch_timeout)
    late = AttachmentError(target, f"the fetch took longer than {policy.fetch_timeout:g} s")
    try:
        with (
            watchdog,
            httpx2.Client(
                timeout=policy.fetch_timeout, follow_redirects=False, trust_env=False
            ) as client,
            client.stream(
                "GET",
                url,
                headers={
                    "Accept": ", ".join(sorted(accept)),
                    "Accept-Encoding": "identity",
                },
                extensions={"trace": watchdog.trace},
            ) as response,
        ):
            if response.is_redirect:
                raise AttachmentError(
                    target, f"the server redirected (HTTP {response.status_code}); not followed"
                )
            if response.status_code != 200:
                raise AttachmentError(target, f"the server answered HTTP {response.status_code}")
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise AttachmentError(target, f"compressed responses ({encoding}) are not loaded")
            length = response.headers.get("content-length", "").strip()
            if length.isascii() and length.isdigit() and int(length) > cap:
                raise AttachmentError(target, f"{_too_big(cap)} ({length} bytes)")
            header = response.headers.get("content-type")
            media_type = _remote_media_type(target, url, header, accept, typed_by_name)
            chunks: list[bytes] = []
            total = 0
            for chunk in response.iter_raw():
                total += len(chunk)
                if total > cap:
                    raise AttachmentError(target, _too_big(cap))
                if time.monotonic() > deadline:
                    raise late
                chunks.append(chunk)
    except httpx2.HTTPError as exc:
        if watchdog.expired:
            raise late from None
        raise AttachmentError(target, f"the fetch failed ({type(exc).__name__}: {exc})") from None
    if watchdog.expired:
        # A body cut by the shutdown can end like a whole one (no length given).
        raise late
    data = b"".join(chunks)
    if not data:
        raise AttachmentError(target, "the server sent no bytes")
    name = urllib.parse.unquote(url.path.rsplit("/", 1)[-1])
    return data, media_type, name or None


class _Watchdog:
    """Shuts the fetch's sockets down when the total deadline passes.

    The HTTP client's timeouts are per network operation, so a server that
    sends one header byte a second never trips them; the sockets come from
    the client's `trace` extension as each connection opens.
    """

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with self._lock:
                self._sockets.append(sock)
                if self.expired:
                    _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    # shutdown, not close: it wakes a recv blocked in another thread, and
    # the client still owns (and closes) the descriptor.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _remote_media_type(
    target: str,
    url: httpx2.URL,
    header: str | None,
    accept: frozenset[str],
    typed_by_name: Callable[[str], str | None],
) -> str:
    declared = (header or "").split(";", 1)[0].strip().lower()
    if declared in accept:
        return declared
    if declared in ("", "application/octet-stream"):
        by_name = typed_by_name(url.path)
        if by_name is not None:
            return by_name
    what = "image" if accept is IMAGE_MEDIA_TYPES else "document"
    raise AttachmentError(
        target, f"the server's content type {declared or '(none)'!r} is not an allowed {what} type"
    )


# -- lifting -------------------------------------------------------------------


def lift(
    role: str, content: str, policy: AttachmentPolicy | None = None
) -> tuple[str, list[Image]]:
    """Load a carrier's declared images: `(content, images)`.

    The message is opened through `classify`; each declared `IMAGE`
    attachment is loaded in order, each target once (`load_declared_images`,
    the lifting the flat histories share). A target that fails is removed
    from the declaration and named, with its reason, in a note appended to
    the body (`rebuild_carrier`); non-image attachments are kept and never
    loaded. At most `policy.max_images` images are loaded from one message,
    the last declared (the newest, as `apply_image_limit` keeps them);
    earlier ones are noted as over the limit. Ordinary messages, legacy
    carriers and carriers whose images all load come back unchanged.
    """
    policy = policy if policy is not None else AttachmentPolicy()
    parts = classify(role, content)
    if parts is None or not parts.declared:
        return content, []
    loaded = load_declared_images(
        parts.attachments, lambda target: load_image(target, policy), policy.max_images
    )
    if not loaded.notes:
        return content, loaded.images
    body = parts.text
    sep = "" if not body or body.endswith("\n") else "\n"
    noted = msgspec.structs.replace(parts, text=body + sep + "\n".join(loaded.notes))
    return rebuild_carrier(role, content, noted, loaded.kept), loaded.images
