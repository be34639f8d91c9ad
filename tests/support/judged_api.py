"""A scripted API server that judges each request before it answers: for tests that need a
server to refuse what the real API refuses (a scripted stand-in, called what it is).

`JudgedServer(answer)` listens on 127.0.0.1 and hands every POST's path and
JSON body to `answer`, which returns the status and JSON body to send back.
Each request is kept (`requests`) for the test to read.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable
from typing import Any

Answer = Callable[[str, dict[str, Any]], tuple[int, Any]]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append({"path": self.path, "body": body})
        try:
            status, answer = self.server.answer(self.path, body)
        except Exception as exc:  # a broken judge is the test's failure, shown as a 500
            status, answer = 500, {"error": {"message": f"judge failed: {exc!r}"}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answer: Answer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer = answer
        self.requests: list[dict[str, Any]] = []


class JudgedServer:
    """A local HTTP server answering each POST with `answer(path, body)`; use it as a context."""

    def __init__(self, answer: Answer) -> None:
        self._server = _Server(answer)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests

    def __enter__(self) -> JudgedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
