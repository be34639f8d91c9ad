"""A scripted server that answers GET requests with set JSON by path: the providers' model lists.

Not a recording: each test writes the list its server answers, in the shape
the provider's API reference and SDK types give, and checks what carryall
made of it and what it asked for.
"""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any
from urllib.parse import urlsplit


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self.server.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        status, body = self.server.routes.get(path, (404, {"error": {"message": "not found"}}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.seen: list[tuple[str, dict[str, str]]] = []


class ModelListServer:
    """Answers `GET path` (query left aside) with `routes[path]`, a status and a JSON body.

    `seen` holds each request's path with its query and its headers (names lowercased).
    """

    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        self._server = _Server(routes)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def seen(self) -> list[tuple[str, dict[str, str]]]:
        return self._server.seen

    def __enter__(self) -> ModelListServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
