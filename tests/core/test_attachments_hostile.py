"""Issue 18, attachments: over-long paths and a server that drips, both bounded at the mechanism."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from carryall.attachments import AttachmentPolicy, load_image
from carryall.errors import AttachmentError

DRIP_SECONDS = 20.0


def test_an_over_long_path_is_refused_for_its_length(tmp_path: Path) -> None:
    policy = AttachmentPolicy([tmp_path])
    with pytest.raises(AttachmentError) as long_path:
        load_image(str(tmp_path) + "/a" * 40_000 + ".png", policy)
    assert long_path.value.reason == "the path is longer than the 4095-byte limit"
    with pytest.raises(AttachmentError) as long_name:
        load_image(str(tmp_path / ("x" * 300 + ".png")), policy)
    assert long_name.value.reason == "a path component is longer than the 255-byte limit"


@pytest.fixture
def dripping_server() -> Iterator[int]:
    """127.0.0.1: answers `/headers.png` one header byte every 50 ms, `/body.png` one body byte.

    Each connection drips for up to `DRIP_SECONDS`, or until the client hangs up.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn:
            request = conn.recv(4096)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n"
            if b"/body.png" in request:
                head += b"Content-Length: 100000\r\n\r\n\x89PNG\r\n\x1a\n"
            end = time.monotonic() + DRIP_SECONDS
            try:
                conn.sendall(head)
                while not stop.is_set() and time.monotonic() < end:
                    conn.sendall(b"X")
                    time.sleep(0.05)
            except OSError:
                pass  # the client gave up

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("path", ["/headers.png", "/body.png"])
def test_a_server_dripping_bytes_cannot_hold_a_fetch_past_its_deadline(
    dripping_server: int, path: str
) -> None:
    port = dripping_server
    policy = AttachmentPolicy([], allow_hosts=["127.0.0.1"], fetch_timeout=1)
    started = time.monotonic()
    with pytest.raises(AttachmentError) as refused:
        load_image(f"http://127.0.0.1:{port}{path}", policy)
    took = time.monotonic() - started
    assert refused.value.reason == "the fetch took longer than 1 s"
    # The deadline is the behaviour under test: one second, with room for a
    # loaded machine, and far short of the server's twenty.
    assert took < 5, f"the fetch ran {took:.1f} s past a 1 s deadline"
