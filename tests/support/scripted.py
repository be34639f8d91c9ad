"""Scripted HTTP servers that answer as the providers' APIs do, replaying recorded streams.

What a test of a transport, a backend or the command line talks to when it
needs a server that misbehaves on cue.
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from carryall.backends import Backend, open_backend
from carryall.blocks import Message
from carryall.config import Config
from carryall.providers import Request

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sse"


@dataclass
class Reply:
    """One scripted answer.

    `sse` is a fixture file name (or raw SSE text containing a newline);
    `events` sends only that many of its events, then `cut` decides how the
    stream ends: "reset" (the connection is torn down), "end" (the body
    ends cleanly, too early), "stall" (nothing more for `stall` seconds) or
    "kill" (the whole server goes away, then the connection is torn down).
    """

    status: int = 200
    sse: str | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    events: int | None = None
    cut: str = "reset"
    stall: float = 0.0


def sse_events(sse: str) -> list[str]:
    """The events of a recorded stream, each with its terminating blank line."""
    text = sse if "\n" in sse else (FIXTURES / sse).read_text(encoding="utf-8")
    return [chunk + "\n\n" for chunk in text.split("\n\n") if chunk.strip()]


def retry_soon(status: int, body: Any) -> Reply:
    """An error status that asks to be retried at once (5 ms, so tests stay fast)."""
    return Reply(status=status, body=body, headers={"retry-after-ms": "5", "retry-after": "0"})


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/props" and self.server.props is not None:
            self._send_json(200, self.server.props)
        elif self.path.endswith("/models") and self.server.models is not None:
            self._send_json(200, self.server.models)
        else:
            self._send_json(404, {"error": {"code": 404, "message": "File Not Found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        self.server.requests.append(
            {
                "path": self.path,
                "headers": {name.lower(): value for name, value in self.headers.items()},
                "raw": raw,
                "body": json.loads(raw or b"{}"),
            }
        )
        with self.server.lock:
            reply = self.server.script.pop(0) if self.server.script else None
        if reply is None:
            self._send_json(500, {"error": {"type": "api_error", "message": "script exhausted"}})
        elif reply.sse is None:
            self._send_json(reply.status, reply.body, reply.headers)
        else:
            self._send_stream(reply)

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_stream(self, reply: Reply) -> None:
        events = sse_events(reply.sse or "")
        cut = reply.events is not None
        self.send_response(reply.status)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for event in events[: reply.events]:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if cut and reply.cut == "stall":
            time.sleep(reply.stall)
        if cut and reply.cut == "kill":
            self.server.die()
        if cut and reply.cut in ("reset", "kill", "stall"):
            self._reset()
            return
        self.wfile.write(b"0\r\n\r\n")

    def _reset(self) -> None:
        """Tear the connection down with a TCP reset, as a crashed peer would."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.wfile = _Discard()  # type: ignore[assignment]
        self.connection.close()


class _Discard:
    """Stands in for the closed socket file, so the handler's own flush finds nothing to do."""

    closed = False

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, script: Sequence[Reply], props: Any, models: Any) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script)
        self.props = props
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        # A short poll: shutdown() waits up to one poll interval, once per test.
        self._thread = threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True)
        self._dead = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a torn-down connection is the point of most scripts

    def start(self) -> None:
        self._thread.start()

    def die(self) -> None:
        """Stop accepting connections for good: later requests are refused."""
        if not self._dead:
            self._dead = True
            stopper = threading.Thread(target=self.shutdown)
            stopper.start()
            stopper.join()
            self.socket.close()

    def stop(self) -> None:
        if not self._dead:
            self.shutdown()
        self.server_close()


class ScriptedServer:
    """A local HTTP server answering POSTs from a script; `url` and `requests` for the test.

    GET `/props` answers `props` and GET `.../models` answers `models`, when given.
    """

    def __init__(self, script: Sequence[Reply], props: Any = None, models: Any = None) -> None:
        self._server = _Server(script, props, models)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._server.requests

    def __enter__(self) -> ScriptedServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()


@dataclass(frozen=True)
class Flavor:
    name: str
    ok: str  # a recorded stream with the whole answer
    text: str  # the text that answer holds
    overload_status: int
    overload_body: dict[str, Any]
    overload_kind: str
    rate_limit_body: dict[str, Any]
    bad_request_body: dict[str, Any]
    bad_request_message: str
    midstream_error: str  # a recorded stream that breaks off with a retryable error
    midstream_kind: str
    ok_json: dict[str, Any]  # a whole non-streamed answer

    def open(self, url: str, **options: Any) -> Backend:
        base = url if self.name == "anthropic" else f"{url}/v1"
        options.setdefault("max_retries", 2)
        options.setdefault("retry_delay", 0.01)
        return open_backend(self.name, base_url=base, api_key="test", config=Config(), **options)


ANTHROPIC = Flavor(
    name="anthropic",
    ok="anthropic_text.sse",
    text="Hello, wörld ✓",
    overload_status=529,
    overload_body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    overload_kind="overloaded_error",
    rate_limit_body={
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your per-minute rate limit",
        },
    },
    bad_request_body={
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    },
    bad_request_message="max_tokens: Field required",
    midstream_error="anthropic_overloaded_midstream.sse",
    midstream_kind="overloaded_error",
    ok_json={
        "id": "msg_01W",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "Hello, wörld ✓"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 15},
    },
)


OPENAI = Flavor(
    name="openai",
    ok="openai_text.sse",
    text="Hello, wörld ✓",
    overload_status=503,
    overload_body={
        "error": {
            "message": "The engine is currently overloaded, please try again later",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    },
    overload_kind="server_error",
    rate_limit_body={
        "error": {
            "message": "Rate limit reached for gpt-4.1-mini on requests per min (RPM)",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    },
    bad_request_body={
        "error": {
            "message": "Invalid value for 'tool_choice': 'maybe' is not one of the allowed values",
            "type": "invalid_request_error",
            "param": "tool_choice",
            "code": None,
        }
    },
    bad_request_message="Invalid value for 'tool_choice'",
    midstream_error="openai_error_midstream.sse",
    midstream_kind="server_error",
    ok_json={
        "id": "chatcmpl-W",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello, wörld ✓", "refusal": None},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 25, "completion_tokens": 15, "total_tokens": 40},
    },
)


FLAVORS = [pytest.param(ANTHROPIC, id="anthropic"), pytest.param(OPENAI, id="openai")]


def hello(model: str = "") -> Request:
    return Request(model=model, messages=(Message.user("Say hello"),), max_tokens=64)


def served(script: Sequence[Reply], props: dict[str, Any] | None = None) -> ScriptedServer:
    return ScriptedServer(script, props)
