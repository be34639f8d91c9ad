"""A loopback HTTP server speaking Bedrock's Converse wire, for the real `boto3` client.

It answers `POST /model/{modelId}/converse` with JSON and `/converse-stream`
with the AWS event-stream encoding (`application/vnd.amazon.eventstream`):
either a recorded stream's bytes as they were, or messages built here by
`event_message`. botocore has an event-stream decoder but no encoder, so
this one writes the format botocore reads (prelude, string headers,
payload, both CRC-32s), and every stream built here is checked by
botocore's own decoder (`decoded_events`), CRCs included, before it is
served. Requests are kept (path, headers, JSON body) for the tests to read.
"""

from __future__ import annotations

import binascii
import http.server
import json
import ssl
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.eventstream import EventStreamBuffer

EVENTSTREAM = "application/vnd.amazon.eventstream"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLETEST",
    "AWS_SECRET_ACCESS_KEY": "test-secret-key-not-real",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}
"""The environment a test client runs in: fake keys, no config files, no instance metadata."""


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    # Type 7 is a string header: a one-byte name length, the name, the type, a two-byte length.
    return (
        bytes([len(raw_name)]) + raw_name + b"\x07" + len(raw_value).to_bytes(2, "big") + raw_value
    )


def message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude and its CRC, headers, payload, the message CRC."""
    raw_headers = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(raw_headers).to_bytes(4, "big")
    head = prelude + binascii.crc32(prelude).to_bytes(4, "big") + raw_headers + payload
    return head + binascii.crc32(head).to_bytes(4, "big")


def event_message(event_type: str, payload: Mapping[str, Any]) -> bytes:
    """A ConverseStream event (`messageStart`, `contentBlockDelta`, ...) with its JSON payload."""
    headers = {
        ":event-type": event_type,
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, json.dumps(payload).encode())


def exception_message(kind: str, text: str) -> bytes:
    """A modeled exception mid-stream (`throttlingException`, `validationException`, ...)."""
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return message(headers, json.dumps({"message": text}).encode())


def eventstream(events: Iterable[Mapping[str, Any]]) -> bytes:
    """Events in boto3's form (`{"messageStop": {...}}`) as the bytes of a stream."""
    out = b"".join(event_message(*next(iter(e.items()))) for e in events)
    decoded_events(out)  # botocore's decoder checks every length and CRC written here
    return out


def decoded_events(raw: bytes) -> list[dict[str, Any]]:
    """A stream's messages read by botocore's own decoder, as `{event-type: payload}`."""
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    out: list[dict[str, Any]] = []
    for item in buffer:
        kind = item.headers.get(":event-type") or item.headers[":exception-type"]
        out.append({kind: json.loads(item.payload)})
    return out


@dataclass
class Reply:
    """One scripted answer: a JSON body, or a stream's bytes (cut after `cut` bytes when set)."""

    status: int = 200
    body: Any = None
    stream: bytes | None = None
    cut: int | None = None


@dataclass
class ConverseServer:
    """The running server: its base URL, the replies left and the requests it got."""

    url: str
    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        state = self.server.state
        state.requests.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": json.loads(raw or b"{}"),
            }
        )
        with self.server.lock:
            reply = state.script.pop(0) if state.script else Reply(500, {"message": "exhausted"})
        if reply.stream is None:
            data = json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            if isinstance(reply.body, Mapping) and isinstance(reply.body.get("__type"), str):
                self.send_header("x-amzn-errortype", reply.body["__type"])
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        data = reply.stream if reply.cut is None else reply.stream[: reply.cut]
        self.send_response(reply.status)
        self.send_header("content-type", EVENTSTREAM)
        if reply.cut is None:
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        # Cut short: a length promising more than is sent, then the connection closed.
        self.send_header("content-length", str(len(reply.stream)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: ConverseServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.lock = threading.Lock()


@contextmanager
def converse_server(
    script: Iterable[Reply], certificate: tuple[Path, Path] | None = None
) -> Iterator[ConverseServer]:
    """A Converse server on a free loopback port for the `with` block, answering `script`.

    With a `certificate` (its PEM file and key) it speaks HTTPS, as botocore
    insists for a Bedrock API key (a bearer token).
    """
    state = ConverseServer("", list(script))
    server = _Server(state)
    scheme = "http"
    if certificate is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*certificate)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    state.url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
