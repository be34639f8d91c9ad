"""The embedded local backend in tests: its environment and a proxy that records what reaches it."""

from __future__ import annotations

import base64
import contextlib
import http.client
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from carryall import local
from tests.support.environment import foreign

LOCAL_STATUS = local.status()


PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


MAX_TOKENS = 256
"""Room for a few calls' JSON; a tiny model often repeats a call several times."""


MAX_STEPS = 2
"""Tool rounds per turn: a second chance after a wrong path, then a wrap-up answer."""


ATTEMPTS = 3
"""Fresh tries for the model to call the tool at all.

Whether a 135M model calls a tool is its choice, about nine times in ten
with these prompts; what is under test is what the loop does once it has.
"""


def local_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a `carryall` child on the local backend: its own home, no API keys."""
    env = {
        **os.environ,
        "CARRYALL_HOME": str(tmp_path / "home"),
        "CARRYALL_CACHE_DIR": str(LOCAL_STATUS.cache_root),
        "NO_COLOR": "1",
    }
    # A developer's own store or key must not steer the child.
    return {
        k: v for k, v in env.items() if not foreign(k, keep=("CARRYALL_HOME", "CARRYALL_CACHE_DIR"))
    }


class _Recorder(BaseHTTPRequestHandler):
    """Relays every request to the real server and keeps the bodies it saw."""

    upstream: str = ""
    bodies: list[bytes] = []  # noqa: RUF012 - set per server by _recording_proxy

    def do_GET(self) -> None:
        self._relay(b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.bodies.append(body)
        self._relay(body)

    def _relay(self, body: bytes) -> None:
        target = urlsplit(self.upstream)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=300)
        # Without `Connection: close` llama-server keeps the streamed answer's
        # connection open, and a read to the end would wait for the timeout.
        headers = {
            "Content-Type": self.headers.get("Content-Type", "application/json"),
            "Connection": "close",
        }
        conn.request(self.command, self.path, body=body or None, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
        conn.close()
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def recording_proxy() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback proxy in front of the shared local server: what the loop really sent."""
    server = local.get_local_server()
    bodies: list[bytes] = []
    handler = type("Handler", (_Recorder,), {"upstream": server.base_url, "bodies": bodies})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}", bodies
    finally:
        proxy.shutdown()
        proxy.server_close()
