"""The OpenAI backend on llama-server in prompt mode: the schema goes only with tools."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from carryall.blocks import Message
from carryall.providers import Capabilities, Request, ToolSpec
from carryall.transport.openai import OpenAIBackend

TOOL = ToolSpec(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)


class _Scripted(http.server.BaseHTTPRequestHandler):
    """A scripted test server: keeps each POST body, streams one canned chat completion."""

    protocol_version = "HTTP/1.1"
    bodies: list[dict[str, Any]]
    answer: str

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.bodies.append(json.loads(self.rfile.read(length)))
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
            for part in (self.answer[:5], self.answer[5:])
        ]
        chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        events = "".join(f"data: {json.dumps({'id': 'c1', 'model': 'm', **c})}\n\n" for c in chunks)
        data = (events + "data: [DONE]\n\n").encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []
    handler = type("Handler", (_Scripted,), {"bodies": bodies, "answer": '{"a": 1} is JSON.'})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", bodies
    httpd.shutdown()
    httpd.server_close()


def test_a_plain_request_goes_without_a_schema_and_its_text_streams(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    url, bodies = server
    backend = OpenAIBackend(
        name="local",
        dialect="llama-server",
        model="m",
        base_url=url,
        capabilities=Capabilities(vision=False, native_tools=False),
        max_retries=0,
    )
    shown: list[str] = []
    plain = Request(model="m", messages=(Message.user("Say something."),))
    answer = backend.complete(plain, on_text=shown.append)
    assert "response_format" not in bodies[0]
    assert answer.message.text() == '{"a": 1} is JSON.' and len(shown) == 2
    backend.complete(
        Request(model="m", messages=(Message.user("Read a.txt"),), tools=(TOOL,)),
        on_text=shown.append,
    )
    assert bodies[1]["response_format"]["type"] == "json_schema"
    backend.close()
